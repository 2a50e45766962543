"""The TLS pass: each kind's lifecycle against a second set of local engines that serve TLS only.

`python -m tools.engines start --tls` starts them (each on first use) in their own engines dir, on the
usual ports plus `OFFSET`, with a CA made there; providers reach them with `tls: {caFile: <that CA>}`.
They are stopped when the session ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from providers.base import KindProvider
from tests.conftest import configured
from tests.engines_cli import engines_cli

ROOT = Path(__file__).resolve().parents[3]
#: Added to every engine port; the plaintext engines keep theirs.
OFFSET = 100
#: Under the checkout, not /tmp: the postgres OS user must traverse it.
ENGINES_DIR = ROOT / ".devstack" / "tls-engines"
CA = ENGINES_DIR / "tls" / "ca.pem"
_ENV = {"DEVSTACK_ENGINES_DIR": str(ENGINES_DIR), "DEVSTACK_ENGINES_PORT_OFFSET": str(OFFSET)}


class TlsEngines:
    """The TLS engines of this session, each started on first use."""

    def __init__(self, admin: dict[str, Any]) -> None:
        self._creds = {engine: (c.user, c.password) for engine, c in admin.items()}
        self.started: list[str] = []

    def start(self, engine: str) -> None:
        if engine in self.started:
            return
        result = engines_cli(_ENV, "start", "--tls", engine, creds=self._creds)
        assert result.returncode == 0, f"the TLS {engine} did not start: {result.stderr or result.stdout}"
        self.started.append(engine)

    def stop(self) -> None:
        if self.started:
            engines_cli(_ENV, "stop", *self.started)


@pytest.fixture(scope="session")
def stranger_ca(tmp_path_factory) -> Path:
    """A CA that signed nothing the TLS engines serve: a client trusting it alone must refuse them."""
    from tools.engines.tls import ensure_tls_files

    return ensure_tls_files(tmp_path_factory.mktemp("stranger")).ca


@pytest.fixture(scope="session")
def tls_engines(admin) -> Iterator[TlsEngines]:
    engines = TlsEngines(admin)
    yield engines
    engines.stop()


def moved_to_tls(entry: dict[str, Any], **tls: Any) -> dict[str, Any]:
    """A workspace `shared` entry pointed at its TLS engine: the port plus OFFSET, `tls:` with the CA."""
    return {**entry, "port": int(entry["port"]) + OFFSET, "tls": {"caFile": str(CA), **tls}}


@pytest.fixture
def over_tls(tls_engines, admin, local_workspace) -> Callable[..., KindProvider]:
    """`over_tls(provider, name, **tls)`: `provider` configured with the local workspace, its instance `name`
    moved to the TLS engine of its kind (started on first use); `tls` adds to or overrides the `tls:` block
    (`verify=False`, `serverName="elsewhere"`)."""
    passwords = {engine: credential.password for engine, credential in admin.items()}

    def configure(provider: KindProvider, name: str, **tls: Any) -> KindProvider:
        entry = local_workspace["shared"][name]
        tls_engines.start(entry["engine"])
        shared = {**local_workspace["shared"], name: moved_to_tls(entry, **tls)}
        return configured(provider, {**local_workspace, "shared": shared}, passwords)

    return configure
