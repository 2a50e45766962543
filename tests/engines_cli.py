"""`python -m tools.engines` in a subprocess, for tests that run engines of their own: a scratch engines
dir, ports offset from the shared engines', other binaries; all chosen by environment variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: `start` reads the admin credentials from stdin (engine -> [user, password]) instead of the stack config.
STARTER = """
import json, sys
from types import SimpleNamespace
from tools.engines.__main__ import main

creds = {k: SimpleNamespace(user=u, password=p) for k, (u, p) in json.load(sys.stdin).items()}
sys.exit(main(sys.argv[1:], credentials=lambda: creds))
"""


def engines_cli(env: Mapping[str, str], *args: str, creds: Mapping[str, tuple[str, str]] | None = None,
                timeout: float = 180) -> subprocess.CompletedProcess:
    """`python -m tools.engines ARGS` with `env` over this process's environment; `start` takes `creds`."""
    if args[0] == "start":
        argv, stdin = [sys.executable, "-c", STARTER, *args], json.dumps(dict(creds or {}))
    else:
        argv, stdin = [sys.executable, "-m", "tools.engines", *args], None
    return subprocess.run(argv, cwd=ROOT, env={**os.environ, **env}, input=stdin, capture_output=True, text=True,
                          timeout=timeout)
