"""How a provider is pickled into every resource's state by the Pulumi SDK (`serialize_provider`)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import dill
from pulumi.dynamic.dynamic import serialize_provider

from providers import registry
from tests.conftest import configured
from tools.engines.ports import PORTS

ROOT = Path(__file__).resolve().parents[2]
ADMIN_PASSWORD = "admin-secret-9f2c"
WORKSPACE = {"shared": {"pg": {"engine": "postgres", "port": PORTS["postgres"], "adminUser": "postgres",
                               "adminSecret": "pgAdminPassword"}}}


def all_kinds():
    return [cls for engine in registry.engines() for cls in registry.kinds(engine).values()]


def test_a_configured_provider_pickles_without_its_admin_credentials():
    for cls in all_kinds():
        provider = configured(cls(), WORKSPACE, {"postgres": ADMIN_PASSWORD})
        assert provider._instances["pg"].password() == ADMIN_PASSWORD
        pickled = base64.b64decode(serialize_provider(provider))
        assert ADMIN_PASSWORD.encode() not in pickled
        restored = dill.loads(pickled)
        assert type(restored) is cls and restored._instances == {}


def test_a_provider_pickled_by_an_earlier_version_still_loads():
    # As stored in a state written before providers pickled as their class alone: class plus empty state.
    earlier = "gASVJQAAAAAAAACMD3Byb3ZpZGVycy5yZWRpc5SMB0FjbFVzZXKUk5QpgZR9lGIu"
    restored = dill.loads(base64.b64decode(earlier))
    assert type(restored) is registry.provider_class("redis", "acl_user") and restored._instances == {}


def test_a_program_with_thousands_of_resources_can_pickle_every_provider():
    # The SDK's pickler grows by one wrapper per pickle; a provider that pickled a state dict
    # walked all of them, and overflowed the stack after about 900 resources. Its own process:
    # the growth is global and would stay behind in this one.
    script = (
        "from pulumi.dynamic.dynamic import serialize_provider\n"
        "from providers import registry\n"
        "kinds = [c for e in registry.engines() for c in registry.kinds(e).values()]\n"
        "print(len({serialize_provider(kinds[i % len(kinds)]()) for i in range(3000)}))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert int(run.stdout) == len(all_kinds())
