"""What the Kafka kinds share: their names, and their markers in the ownership registry."""

from __future__ import annotations

from typing import Any, ClassVar, ContextManager, Mapping

from confluent_kafka.admin import AdminClient

from providers.base import KindProvider
from providers.errors import Conflict, NotFound
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.kafka.client import ENGINE_NAME, broker_failures_named
from providers.kafka.names import kafka_name
from providers.kafka.owners import ensure_registry, read_markers, write_marker
from providers.markers import Observed, marker_field, marker_owner, ownership_marker


class KafkaKind(KindProvider):
    """Shared by the Kafka kinds: name rules and owner-dependent checks run in check()."""

    engine = ENGINE_NAME
    #: The registry key prefix of this kind's markers.
    marker_kind: ClassVar[str]

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return kafka_name(name, owner, naming=naming)

    def failures_named(self, instance: SharedInstance) -> ContextManager[None]:
        return broker_failures_named(instance)

    def marker_key(self, ident: Identity) -> str:
        return f"{self.marker_kind}:{self.engine_name(ident.name, ident.owner, naming=ident.naming)}"

    def marker(self, instance: SharedInstance, admin: AdminClient, ident: Identity) -> str | None:
        return read_markers(instance, admin).get(self.marker_key(ident))

    def marked_owner(self, instance: SharedInstance, admin: AdminClient, ident: Identity) -> str | None:
        return marker_owner(self.marker(instance, admin, ident))

    def observed(self, instance: SharedInstance, admin: AdminClient, ident: Identity,
                 markers: Mapping[str, str] | None = None, **found: Any) -> Observed:
        """What observe found, with the owner and workspace the registry's marker records (in `markers`, when
        the caller has read the registry already)."""
        marker = markers.get(self.marker_key(ident)) if markers is not None else self.marker(instance, admin, ident)
        return Observed(owner=marker_owner(marker), workspace=marker_field(marker, "stack"), **found)

    def require_ours(self, instance: SharedInstance, admin: AdminClient, ident: Identity, what: str) -> None:
        """Refuse to drop what the registry gives to someone else (a purge never drops another's)."""
        holder = self.marked_owner(instance, admin, ident)
        if holder != ident.owner:
            raise Conflict("drop", what, f"the ownership registry gives it to {f'project {holder!r}' if holder else 'nobody'}",
                           "nothing was dropped; remove it from the state with `pulumi state delete` if it is no longer ours")

    def gone(self, instance: SharedInstance, admin: AdminClient, ident: Identity, what: str, cause: str) -> NotFound:
        """NotFound for a drop of what no longer exists, after tombstoning our marker: a drop cut short
        before its tombstone, run again, leaves no marker for a resource nobody has."""
        if self.marked_owner(instance, admin, ident) == ident.owner:
            write_marker(instance, self.marker_key(ident), None)
        return NotFound("drop", what, cause)

    def unmark(self, instance: SharedInstance, admin: AdminClient, ident: Identity, stack: str) -> None:
        """Tombstone our marker after a drop, unless another workspace of the project marked the name
        again while it ran (and made the resource anew): that one would be left without its marker."""
        if read_markers(instance, admin).get(self.marker_key(ident)) == ownership_marker(ident, stack):
            write_marker(instance, self.marker_key(ident), None)

    def mark(self, instance: SharedInstance, admin: AdminClient, ident: Identity, stack: str) -> None:
        """Write our marker unless the registry already holds exactly it."""
        marker = ownership_marker(ident, stack)
        if read_markers(instance, admin).get(self.marker_key(ident)) != marker:
            ensure_registry(admin)
            write_marker(instance, self.marker_key(ident), marker)
