"""Functions the NATS provider tests share."""

from __future__ import annotations

from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from providers.nats import auth as nats_auth
from tools.engines.ports import PORTS


NATS_URL = f"nats://127.0.0.1:{PORTS['nats']}"
#: The admin user and secret of a test's private nats-server (the `private_server` fixture).
PRIVATE_USER, PRIVATE_SECRET = "boss", "pw-1"


def stream_config(js, name: str, project: str | None = None) -> StreamConfig | None:
    """The stream's config in project `project`'s account (the test's owner's by default), or None."""
    async def work(j):
        try:
            return (await j.stream_info(name)).config
        except NotFoundError:
            return None

    return js(work, project)


def checked(provider, inputs: dict, olds: dict | None = None) -> dict:
    """Inputs after check(), which must pass (it fills in owner-derived defaults)."""
    result = provider.check(olds or {}, inputs)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def failures(provider, inputs: dict) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check({}, inputs).failures}


def public_key(operator: nats_auth.Operator, owner: str) -> str:
    return nats_auth.public(operator.account_key(owner))
