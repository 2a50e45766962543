"""What the NATS kinds share: their engine names, and the replicas a single server cannot hold."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from providers import naming as naming_rules
from providers.base import KindProvider
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance
from providers.nats.names import ENGINE_NAME, nats_name
from providers.nats.session import Session, run


async def _clustered(session: Session) -> bool:
    # The server's INFO names its cluster only when it has one (nats-py keeps INFO only here).
    return "cluster" in session.nc._server_info


class NatsKind(KindProvider):
    """Shared by the NATS kinds: names are checked at check() time, plus a per-kind tenant check."""

    engine = ENGINE_NAME

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        if naming == PREFIXED:
            return nats_name(name, owner)
        return naming_rules.nats(name)

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        replicas = getattr(spec, "replicas", 1)
        if replicas > 1 and not run(instance, _clustered):
            return [("replicas", f"{replicas} replicas need a clustered server and the one at {instance.address} is a "
                                 "single server", "set replicas: 1")]
        return []

    @staticmethod
    def _base_attributes(instance: SharedInstance) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "servers": instance.several}
