"""Shared fixtures: the repo root on sys.path and the local stack's admin credentials."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.pulumi_env import let_plugins_see_sigint  # noqa: E402 - needs the root on sys.path

let_plugins_see_sigint()  # a suite run in the background would otherwise stall 5s per pulumi command
