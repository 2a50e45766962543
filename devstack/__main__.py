"""`python -m devstack ...`: the same command as the `devstack` script."""

import sys

from devstack.cli import main

sys.exit(main())
