"""An instance that moves to another address: refresh follows the stack config only with --run-program.

The workspace first reaches every engine through a loopback proxy of this
test; then its config names the engines' real addresses and the proxies go
away, as when the local engines moved off the ephemeral port range. Pulumi
refreshes with the provider configuration of the last update, so a plain
refresh still dials the old addresses; `up --refresh --run-program` (what
scripts/up runs) configures the providers from the current stack config.
"""

from __future__ import annotations

import pytest
from pulumi import automation as auto

from tests.faults.conftest import changes, checkpoint, configure, every_engine, new_stack, tenants, write_project
from tests.faults.proxy import proxy_every_instance

pytestmark = pytest.mark.timeout(240)


def test_refresh_after_an_instance_moved(project_dir, offline_env, pulumi_command, admin, shared, prefix):
    proxies, via_proxies = proxy_every_instance(shared)
    files = [write_project(project_dir, f"{prefix}-m", every_engine())]
    stack = new_stack(project_dir, offline_env, pulumi_command)
    configure(stack, files, via_proxies, admin)
    try:
        assert changes(stack.up()) == {"create": 9 + 1}  # and the implied nats account
        before = tenants(checkpoint(offline_env, "faults"))
        for proxy in proxies.values():
            proxy.stop()
        configure(stack, files, shared, admin)  # the engines' real addresses

        with pytest.raises(auto.errors.CommandError) as stale:
            stack.refresh()
        assert f"at {proxies['pg'].address}" in str(stale.value)  # the address of the last update

        result = stack.up(refresh=True, run_program=True)
        after = tenants(checkpoint(offline_env, "faults"))
        assert set(after) == set(before)
        assert changes(result) == {}  # every resource found at its new address: nothing re-created
        # Connection attributes (and the exports built on them) name the new addresses.
        addresses = {(outputs["host"], int(outputs["port"])) for outputs in after.values()}
        assert addresses == {(instance["host"], int(instance["port"])) for instance in shared.values()}
        exported = result.outputs[f"{prefix}-m"].value["resources"]
        assert {int(attributes["port"]) for attributes in exported.values()} == {int(i["port"]) for i in shared.values()}
        assert changes(stack.refresh()) == {}  # and from now on a plain refresh uses it too
    finally:
        for proxy in proxies.values():
            proxy.stop()
        stack.destroy()
