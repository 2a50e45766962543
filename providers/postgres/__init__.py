"""PostgreSQL: tenant databases, group roles and login users in a shared server.

Each project gets a LOGIN role named after it that owns its databases, with
CONNECT and TEMPORARY revoked from PUBLIC and anyone else; its group roles and
users are `<owner>_<name>` roles kept inside the project (no server-wide power,
no membership reaching another project). Ownership markers are COMMENTs; every
change runs under one server-wide advisory lock (client.py).
"""

from providers.engine import Engine
from providers.postgres.database import Database  # noqa: F401 - states pickle providers.postgres.Database
from providers.postgres.probe import probe
from providers.postgres.role import Role  # noqa: F401 - states pickle providers.postgres.Role
from providers.postgres.scan import scan
from providers.postgres.user import User  # noqa: F401 - states pickle providers.postgres.User

ENGINE = Engine(kinds={"database": Database, "role": Role, "user": User}, scan=scan, probe=probe)
