"""Every engine down at once during preview, up and refresh, then back.

The workspace reaches each shared engine through a loopback proxy of this
test (tests/faults/proxy.py); stopping the proxies makes every address refuse
connections, as stopped engines would. The shared engines keep running.
"""

from __future__ import annotations

import pytest
from pulumi import automation as auto

from bench.sweep import sweep
from tests.faults.conftest import changes, checkpoint, configure, every_engine, new_stack, tenants, write_project
from tests.faults.proxy import Proxy, proxy_every_instance

# Bounded: a hung pulumi run fails this test instead of holding up the suite.
pytestmark = pytest.mark.timeout(240)


def assert_names_every_engine(text: str, shared: dict, proxies: dict[str, Proxy]) -> None:
    """Each engine's error names the engine, its instance and address, and the command that starts it."""
    for name, instance in shared.items():
        engine = instance["engine"]
        assert f"{engine} instance '{name}' at {proxies[name].address}" in text, f"no error names {engine}"
        assert f"python -m tools.engines start {engine}" in text, f"no hint starts {engine}"


def assert_ledger_unchanged(env: dict, before: dict) -> None:
    """The same tenant resources with the same outputs, and no operation left pending."""
    after = checkpoint(env, "faults")
    assert tenants(after) == tenants(before)
    assert not after.get("pending_operations")


def test_engines_down_then_back(project_dir, offline_env, pulumi_command, admin, shared, prefix):
    proxies, via_proxies = proxy_every_instance(shared)
    files = [write_project(project_dir, f"{prefix}-a", every_engine())]
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, files, via_proxies, admin)
    try:
        assert changes(stack.up()) == {"create": 10}  # stack, workspace, project, six tenants, its nats account
        before = checkpoint(offline_env, "faults")
        for proxy in proxies.values():
            proxy.stop()

        # A preview without changes needs no engine: check and diff are pure.
        assert changes(stack.preview()) == {}
        # Refresh reads every resource: it fails, naming each engine, and records nothing.
        with pytest.raises(auto.errors.CommandError) as failed:
            stack.refresh()
        assert_names_every_engine(str(failed.value), shared, proxies)
        assert_ledger_unchanged(offline_env, before)
        with pytest.raises(auto.errors.CommandError) as failed:
            stack.preview(refresh=True)
        assert_names_every_engine(str(failed.value), shared, proxies)

        # An up that creates fails the same way; neither the ledger nor the engines gain anything.
        # (continue_on_error: by default the up stops at the first failures and names only those.)
        files.append(write_project(project_dir, f"{prefix}-b", every_engine()))
        configure(stack, files, via_proxies, admin)
        with pytest.raises(auto.errors.CommandError) as failed:
            stack.up(continue_on_error=True)
        assert_names_every_engine(str(failed.value), shared, proxies)
        assert_ledger_unchanged(offline_env, before)
        assert sum(sweep(f"{prefix}-b", shared, admin, dry_run=True).values()) == 0

        # Engines back: refresh finds everything as it was, and up creates what failed.
        for proxy in proxies.values():
            proxy.start()
        assert changes(stack.refresh()) == {}
        # The six tenants of the second project and its nats account (its component exists).
        assert changes(stack.up()) == {"create": 7}
    finally:
        for proxy in proxies.values():
            proxy.stop()
            proxy.start()
        stack.destroy()
        for proxy in proxies.values():
            proxy.stop()
