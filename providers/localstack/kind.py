"""AwsKind: the verbs the LocalStack kinds share (all but the access key): converge = apply the spec to the
live resource, marker tags included."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


from providers.errors import NotFound
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.localstack.client import ENGINE_NAME, GONE, missing
from providers.s3.client import boto_errors
from providers.s3.guarded import GuardedKind
from providers.s3.tags import tags_owner
from providers.markers import Observed


class AwsSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AwsKind(GuardedKind):
    """A LocalStack kind: converge = apply the spec to the live resource, marker tags included."""

    engine = ENGINE_NAME

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        self.enforce("create", ident, spec)
        observed = self.observe(instance, ident)
        if observed is None:
            made = self.make(instance, ident, spec, props.get("stack"))
            if made is not None:
                return made
        elif observed.owner != ident.owner:  # made meanwhile by another stack: `create`'s observe came first
            raise self._conflict("create", ident, observed)
        return self.converge(instance, ident, spec, props.get("stack"))

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, observed, props)
        except boto_errors.ClientError as err:
            if missing(err, *GONE):  # another run's drop came first
                raise NotFound("drop", f"{self.kind} {ident}", "it was dropped meanwhile") from err
            raise

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = self.Spec.model_validate(new.get("params") or {})
        self.enforce("update", ident, spec)
        return self.converge(instance, ident, spec, new.get("stack"))

    def make(self, instance: SharedInstance, ident: Identity, spec: Any, stack: str | None) -> dict[str, Any] | None:
        """Create the resource, marker tags included where the API takes them at creation.

        Return its attributes when the creation call applied the whole spec, or None
        to have `converge` finish it.
        """
        raise NotImplementedError

    def converge(self, instance: SharedInstance, ident: Identity, spec: Any, stack: str | None) -> dict[str, Any]:
        """Bring the live resource in line with `spec`; return its attributes."""
        raise NotImplementedError

    def made_meanwhile(self, instance: SharedInstance, ident: Identity, err: Exception) -> None:
        """After a create refused because the name exists now: ours (the SDK retried a call whose
        first reply was lost, or another run of this project made it) goes on to converge; anything
        else is a Conflict."""
        observed = self.observe(instance, ident) or Observed(owner=None)
        if observed.owner != ident.owner:
            raise self._conflict("create", ident, observed) from err

    def claimed(self, ident: Identity, tags: dict[str, str]) -> None:
        """After a create call that succeeds on an existing name: it must carry our marker."""
        if tags_owner(tags) != ident.owner:
            raise self._conflict("create", ident, Observed(owner=tags_owner(tags)))
