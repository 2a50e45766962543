"""GuardedKind: what every MinIO and LocalStack kind adds to providers.base's verbs."""

from __future__ import annotations

from typing import Any, ContextManager

from pulumi.dynamic import CheckFailure, CheckResult
from pydantic import BaseModel

from providers.base import KindProvider, Observed
from providers.errors import InvalidSpec
from providers.identity import CURRENT_NAMING, Identity, naming_of
from providers.instances import SharedInstance
from providers.s3.client import endpoint_of, reachable


class GuardedKind(KindProvider):
    """Verbs every S3/AWS-API/MinIO kind shares on top of the base.

    `check` also reports the engine-name rules and the cross-field rules of
    `spec_rules`; every verb reports an unreachable engine as
    EngineUnavailable; `drop` observes first, as every kind's `update` does,
    and acts only on a resource that exists and carries this project's marker
    (a resource that changed hands since the last refresh is never touched).
    Kinds implement `remove` instead of `drop`.
    """

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        """(field, message) for each rule across fields (or name and params) the spec breaks, for a resource
        named by `naming`."""
        return []

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        """Drop a resource `drop` has verified to exist and to be ours."""
        raise NotImplementedError

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        result = super().check(olds, news)  # identity, engine name and params
        name, owner = str(news.get("name") or ""), str(news.get("owner") or "")
        if not result.failures:
            spec = self.Spec.model_validate(result.inputs.get("params") or {})
            rules = self.spec_rules(name, owner, spec, naming=naming_of(news, CURRENT_NAMING))
            result.failures.extend(CheckFailure(field, message) for field, message in rules)
        return result

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        self.remove(instance, ident, self._owned(instance, ident, "drop"))

    # --- helpers ---------------------------------------------------------

    def enforce(self, verb: str, ident: Identity, spec: BaseModel) -> None:
        """Raise InvalidSpec for the first broken cross-field rule (for callers that skipped check)."""
        broken = self.spec_rules(ident.name, ident.owner, spec, naming=ident.naming)
        if broken:
            field, message = broken[0]
            raise InvalidSpec(verb, f"{self.kind} {ident}", f"{field}: {message}")

    def failures_named(self, instance: SharedInstance) -> ContextManager[None]:
        return reachable(instance, self.engine)


def cut_short_hint(state: str, instance: SharedInstance, aws_command: str) -> str:
    """The hint of a create's Conflict with an object that may be a create cut short: made, not yet tagged."""
    return (f"it is {state}, as a create cut short leaves it, or as another stack's create leaves it for a "
            f"moment: if it is still so in a minute, remove it with the instance's admin credentials (`aws "
            f"--endpoint-url {endpoint_of(instance)} {aws_command}`) and run `pulumi up` again; otherwise choose "
            "another `name` for this resource; nothing was changed")
