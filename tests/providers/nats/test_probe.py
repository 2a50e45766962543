"""providers.nats.probe: `devstack doctor` on a NATS server."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from providers.errors import Unsupported
from providers.nats.stream import Stream
from tests.providers.conftest import props
from tests.providers.nats.helpers import PRIVATE_SECRET, PRIVATE_USER, checked


pytestmark = pytest.mark.usefixtures("accounts")


def test_a_server_without_jetstream_is_named_by_the_provider_and_the_doctor(owner, private_server):
    """It had failed the up with a raw ServiceUnavailableError ('None') per resource, and passed the doctor."""
    from devstack import doctor
    from providers.instances import SharedInstance

    port, configured_kind = private_server()  # no -js
    provider = configured_kind(Stream())
    with pytest.raises(Unsupported, match="no JetStream answered.*start nats-server with -js"):
        provider.create(checked(provider, props("nats", "events", "stream", owner, owner)))
    instance = SharedInstance(name="events", engine="nats", host="127.0.0.1", port=port, adminUser=PRIVATE_USER,
                              adminSecret="natsAdmin", admin_password=SecretStr(PRIVATE_SECRET))
    health = doctor.check_instance(instance, ["stream"], local_port=None)
    assert (health.ok, health.admin) == (False, False) and "no JetStream answered" in health.problem
    assert "-js" in health.fix
