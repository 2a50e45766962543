"""A second local PostgreSQL, 16, from the `pgserver` wheel's binaries (the test extra installs it; Debian's
is 15): the limited-admin tests run on both, so the 16+ paths (GRANT ... WITH INHERIT, SET) run too.

`python -m tools.engines start postgres` starts it, as the shared engine is started, in its own engines dir
on the usual port plus `OFFSET`; it keeps its data dir between sessions, so only the first start runs initdb.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.engines_cli import engines_cli
from tools.engines.ports import PORTS

ROOT = Path(__file__).resolve().parents[3]
#: Added to the engine port: the TLS engines take +100.
OFFSET = 200
#: Under the checkout, not /tmp: the postgres OS user must traverse it.
ENGINES_DIR = ROOT / ".devstack" / "pg16-engines"
ADDRESS = {"host": "127.0.0.1", "port": PORTS["postgres"] + OFFSET}


def bin_dir() -> Path:
    """pgserver's bin dir, found without importing pgserver (we use its binaries, never its Python API)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise RuntimeError("cannot start PostgreSQL 16: the pgserver wheel is not installed (run scripts/setup)")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _env() -> dict[str, str]:
    """The 16 engine's dir, port offset and binaries."""
    return {"DEVSTACK_ENGINES_DIR": str(ENGINES_DIR), "DEVSTACK_ENGINES_PORT_OFFSET": str(OFFSET),
            "DEVSTACK_POSTGRES_BIN": str(bin_dir())}


def start(user: str, password: str) -> None:
    """Start it (a no-op when it runs) with this admin; raises with the engine script's output when it did not."""
    ENGINES_DIR.parent.mkdir(exist_ok=True)
    result = engines_cli(_env(), "start", "postgres", creds={"postgres": (user, password)}, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"cannot start PostgreSQL 16: {result.stderr or result.stdout}")


def stop() -> None:
    engines_cli(_env(), "stop", "postgres", timeout=120)
