"""Fixtures for provider tests against the real local engines.

Providers are configured exactly as Pulumi configures them: with the local
stack's workspace and the admin secrets `python -m tools.engines start`
generated, passed through `configure`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from providers.base import KindProvider
from providers.identity import PREFIXED
from providers.instances import WORKSPACE_KEY
from tests.conftest import configured

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def through_proxy(configure) -> Callable[[KindProvider, str], Any]:
    """`through_proxy(provider, name)`: the instance `name` as the configured provider sees it, but reached
    through a loopback proxy the test can stop to take the server away; stopped at the end. `listen="::1"`:
    the proxy listens on IPv6 loopback, and the instance's host is `::1`."""
    from tests.faults.proxy import Proxy

    proxies = []

    def proxied(provider: KindProvider, name: str, listen: str = "127.0.0.1"):
        instance = configure(provider)._instances[name]
        proxies.append(Proxy(instance.port, instance.host, listen=listen).start())
        return instance.model_copy(update={"host": listen, "port": proxies[-1].port}), proxies[-1]

    yield proxied
    for proxy in proxies:
        proxy.stop()


def stopped_answering(engine: str, name: str, port: int) -> str:
    """The message (a regex) of an instance that went away in the middle of a call."""
    return (rf"cannot keep talking to {engine} instance '{name}' at 127\.0\.0\.1:{port}: it stopped answering in "
            rf"the middle of the call .*start it with `python -m tools\.engines start {engine}`, or fix "
            rf"shared\.{name}\.host and \.port .*then run the command again")


@pytest.fixture(scope="session")
def admin():
    from tools.engines.credentials import admin_credentials

    return admin_credentials()


@pytest.fixture(scope="session")
def local_workspace() -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    return config[WORKSPACE_KEY]


@pytest.fixture(scope="session")
def configure(admin, local_workspace) -> Callable[[KindProvider], KindProvider]:
    """Configure a provider instance with the local workspace and admin secrets."""
    passwords = {engine: credential.password for engine, credential in admin.items()}

    def configure_provider(provider: KindProvider, adopt: dict[str, str] | None = None) -> KindProvider:
        """`adopt`: the workspace's `adopt` (project -> the workspace it moves from), if any."""
        return configured(provider, {**local_workspace, "adopt": adopt} if adopt else local_workspace, passwords)

    return configure_provider


@pytest.fixture
def owner() -> str:
    """A fresh project name per test, so tests never collide with each other or with examples."""
    return f"t{secrets.token_hex(4)}"


def props(engine: str, instance: str, kind: str, name: str, owner: str, params: dict | None = None, **policy) -> dict:
    """Resource inputs as the component layer builds them (after check). Named by the owner-prefixed rules
    unless `naming` says otherwise: the names these tests assert, and those of every resource that records
    no naming; tests of the sanitized naming pass naming=SANITIZED."""
    return {
        "engine": engine, "instance": instance, "kind": kind, "name": name, "owner": owner,
        "params": params or {}, "credentials": policy.get("credentials", "predictable"),
        "purge": policy.get("purge", False), "stack": policy.get("stack", "test"),
        "naming": policy.get("naming", PREFIXED),
    }


def engine_under_test(request, tmp_path_factory, engine: Any, credential: Any, started_here: dict) -> Iterator[Any]:
    """For an engine's lifecycle tests: the running shared engine, else a scratch one of their own.

    A running engine (scripts/test starts them) is tested with the stack
    config's admin credential, copied into `credential`, and left running.
    Otherwise the engine starts in a temporary engines dir with `credential`
    and stops afterwards; `started_here["engine"]` tells tests whether they
    may stop it.
    """
    saved = os.environ.get("DEVSTACK_ENGINES_DIR")
    shared = saved is None and engine.running_pid() is not None
    if shared:
        real = request.getfixturevalue("admin")[engine.name]
        credential.user, credential.password = real.user, real.password
    elif saved is None:
        os.environ["DEVSTACK_ENGINES_DIR"] = str(tmp_path_factory.mktemp("engines"))
    ours = engine.running_pid() is None
    started_here["engine"] = ours
    try:
        assert engine.name in engine.start(credential)
        yield engine
    finally:
        if ours:
            engine.stop()
        if saved is None and not shared:
            os.environ.pop("DEVSTACK_ENGINES_DIR", None)
