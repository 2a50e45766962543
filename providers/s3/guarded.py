"""GuardedKind: what every MinIO and LocalStack kind adds to providers.base's verbs."""

from __future__ import annotations

from typing import Any, ContextManager

from providers.base import KindProvider
from providers.markers import Observed
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.s3.client import endpoint_of, reachable


class GuardedKind(KindProvider):
    """What every MinIO and LocalStack kind shares on top of the base: every verb reports an unreachable
    engine as EngineUnavailable, and a drop acts only on a resource that exists and carries this project's
    marker (one that changed hands since the last refresh is never touched). Kinds implement `remove`."""

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        """Drop a resource `drop` has verified to exist and to be ours."""
        raise NotImplementedError

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        self.remove(instance, ident, self._ours("drop", ident, observed))

    def failures_named(self, instance: SharedInstance) -> ContextManager[None]:
        return reachable(instance, self.engine)


def cut_short_hint(state: str, instance: SharedInstance, aws_command: str) -> str:
    """The hint of a create's Conflict with an object that may be a create cut short: made, not yet tagged."""
    return (f"it is {state}, as a create cut short leaves it, or as another stack's create leaves it for a "
            f"moment: if it is still so in a minute, remove it with the instance's admin credentials (`aws "
            f"--endpoint-url {endpoint_of(instance)} {aws_command}`) and run `pulumi up` again; otherwise choose "
            "another `name` for this resource; nothing was changed")
