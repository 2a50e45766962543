"""devstack's pytest plugin (entry point `devstack` of pytest11): throwaway tenant resources on the shared engines.

    pytestmark = pytest.mark.devstack_project(PROJECT)  # a devstack.yaml's text, a Path to one, or a dict

    def test_rows(devstack_env):                        # the project's service's environment, real credentials
        with psycopg.connect(devstack_env["DATABASE_URL"]) as conn: ...

The project is brought up once per test module in an ephemeral workspace of its own (devstack.ephemeral:
a fresh stack on a file backend under .devstack/ephemeral, the engines and admin secrets of the
checkout's `local` workspace) and purged when the module is done. Fixtures:

- `devstack_env` (module): the service's Environment (`env["VAR"]`, `env.environ()`; secrets masked in repr);
- `devstack_workspace` (module): the Ephemeral (`.workspace` is a devstack.api.Workspace, `.project`);
- `devstack_ephemeral` (session): the factory, `with devstack_ephemeral(PROJECT) as eph:` in a fixture of
  any scope;
- `devstack_engines` (session): the engines' config, read once.

What a killed session left is purged by the next session's first ephemeral workspace (`reap_dead`).
Each process (pytest-xdist worker, or a second pytest run) makes workspaces and project names of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from devstack.api import Environment
    from devstack.ephemeral import Engines, Ephemeral

MARKER = "devstack_project"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(project, service=None): the devstack project (a devstack.yaml's "
                            "text, a Path to one, or a dict) that `devstack_workspace` and `devstack_env` bring up")


@pytest.fixture(scope="session")
def devstack_engines() -> Engines:
    """The shared engines and their admin secrets, from $DEVSTACK_WORKSPACE (default: the checkout's `local`)."""
    from devstack.ephemeral import Engines

    return Engines.of_workspace()


@pytest.fixture(scope="session")
def devstack_ephemeral(devstack_engines: Engines) -> Callable[..., Ephemeral]:
    """A factory: `devstack_ephemeral(project, service=None, on_event=None)` is an Ephemeral to use in `with`."""
    from devstack.ephemeral import Ephemeral

    def make(project: Any, *, service: str | None = None, on_event: Any = None) -> Ephemeral:
        return Ephemeral(project, service=service, engines=devstack_engines, on_event=on_event)

    return make


@pytest.fixture(scope="module")
def devstack_workspace(request: pytest.FixtureRequest) -> Iterator[Ephemeral]:
    """The module's project (its `devstack_project` mark) up in an ephemeral workspace; purged afterwards."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:  # said before the engines' config is read
        raise pytest.UsageError(f"{request.node.nodeid}: devstack_workspace needs the module's project: "
                                f"pytestmark = pytest.mark.{MARKER}(PROJECT)")
    with request.getfixturevalue("devstack_ephemeral")(*marker.args, **marker.kwargs) as ephemeral:
        yield ephemeral


@pytest.fixture(scope="module")
def devstack_env(devstack_workspace: Ephemeral) -> Environment:
    """The environment of the module's project's service (real credentials; secrets masked in repr)."""
    if devstack_workspace.env is None:
        raise pytest.UsageError(f"project {devstack_workspace.project!r} declares no resource, so no service")
    return devstack_workspace.env
