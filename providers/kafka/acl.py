"""Kafka `acl`: a project's SASL/SCRAM principal and its prefixed grants; the grant helpers `topic` uses too."""

from __future__ import annotations

import re
from typing import Any, Iterable, Literal, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from pydantic import BaseModel, ConfigDict, Field, field_validator


from providers.description import REACH
from providers.credentials import Rotation, login_password
from providers.errors import Conflict, InvalidSpec, NotFound
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.kafka import client  # client.REQUEST_TIMEOUT: one setting, read at each call
from providers.kafka.client import admin_client, credential_works, error_code, refusal, result, wait_until
from providers.kafka.kind import KafkaKind
from providers.kafka.names import kafka_name, owner_prefix, project_topic, within_prefix
from providers.kafka.owners import foreign_topics_in_reach, marked_topic_owner, read_markers
from providers.markers import Observed

#: The local engine's own principals (`devstack-admin`, `devstack-broker`) are the broker's super users:
#: a project of such a name would get a SCRAM login as one (its `acl`; topics of such a name are harmless).
_RESERVED_OWNER = re.compile(r"devstack([-_].*)?")
SCRAM_ITERATIONS = 8192

TopicOperation = Literal["read", "write", "describe", "create", "delete", "alter", "describe_configs", "alter_configs", "all"]
GroupOperation = Literal["read", "describe", "delete"]


class AclSpec(BaseModel):
    """Params of an `acl`: what the project's principal may do on its topics and consumer groups."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    operations: list[TopicOperation] = Field(
        default_factory=lambda: ["read", "write", "describe"], min_length=1, validate_default=True)
    group_operations: list[GroupOperation] = Field(
        default_factory=lambda: ["read", "describe"], alias="groupOperations", validate_default=True)
    #: Change it to change the principal's password in place (a new random one, or a new derivation).
    rotation: Rotation = None

    @field_validator("operations", "group_operations")
    @classmethod
    def _as_set(cls, value: list[str]) -> list[str]:
        # Order and repeats mean nothing to Kafka: keep one canonical form so diff and read agree.
        return sorted(set(value))


def acl_patterns(owner: str, topics: Iterable[str] = ()) -> list[tuple[ResourceType, str, ResourcePatternType]]:
    """The resources a project's principal is granted on: its prefix, its bare default name, and `topics`,
    those of its topics named otherwise."""
    return [
        (restype, name, pattern)
        for restype in (ResourceType.TOPIC, ResourceType.GROUP)
        for name, pattern in ((owner_prefix(owner), ResourcePatternType.PREFIXED),
                              (project_topic(owner), ResourcePatternType.LITERAL))
    ] + [(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL) for topic in sorted(topics)]


def exact_topics(bindings: Iterable[AclBinding], owner: str) -> list[str]:
    """The topics granted by name beyond the project's prefix."""
    return sorted({b.name for b in bindings if b.restype == ResourceType.TOPIC
                   and b.resource_pattern_type == ResourcePatternType.LITERAL and not within_prefix(b.name, owner)})


def wanted_bindings(owner: str, principal: str, spec: AclSpec, topics: Iterable[str] = ()) -> set[AclBinding]:
    bindings = set()
    for restype, name, pattern in acl_patterns(owner, topics):
        operations = spec.operations if restype == ResourceType.TOPIC else spec.group_operations
        bindings |= {AclBinding(restype, name, pattern, f"User:{principal}", "*", AclOperation[op.upper()],
                                AclPermissionType.ALLOW) for op in operations}
    return bindings


def live_bindings(admin: AdminClient, principal: str, what: str) -> set[AclBinding]:
    """Every binding of the principal, wherever it points: the principal is this declaration's alone,
    so a grant beyond the wanted ones (another project's topics, the cluster) is drift to revoke."""
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{principal}", None,
                           AclOperation.ANY, AclPermissionType.ANY)
    return set(result(admin.describe_acls(flt, request_timeout=client.REQUEST_TIMEOUT), "describe ACLs of", what))


def revoke(admin: AdminClient, bindings: Iterable[AclBinding], what: str) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in sorted(bindings)]
    if filters:
        for future in admin.delete_acls(filters, request_timeout=client.REQUEST_TIMEOUT).values():
            result(future, "revoke", what)


def foreign_grants(admin: AdminClient, topic: str, owner: str, what: str,
                   principals: Iterable[str] = ()) -> list[AclBinding]:
    """The grants on `topic` to principals not the project's own (`User:<owner>`, `User:<owner>.<name>`, and
    `principals`, its acls named otherwise): another project's, or anyone's (`User:*`), wherever they point
    (the topic, a prefix, `*`)."""
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                           AclPermissionType.ALLOW)
    found = result(admin.describe_acls(flt, request_timeout=client.REQUEST_TIMEOUT), "describe ACLs of", what)
    ours, own = (f"User:{project_topic(owner)}", f"User:{owner_prefix(owner)}"), set(principals)
    return sorted(b for b in found if b.principal != ours[0] and not b.principal.startswith(ours[1])
                  and b.principal not in own)


def within_project(binding: AclBinding, owner: str) -> bool:
    """Whether a grant reaches only the project's own names, so revoking it touches no other project's."""
    if binding.resource_pattern_type == ResourcePatternType.LITERAL:
        return within_prefix(binding.name, owner)
    return binding.name.startswith(owner_prefix(owner))


def acl_params(owner: str, bindings: set[AclBinding]) -> dict[str, Any]:
    """Operations granted on every one of the kind's patterns, in the form of AclSpec's dump."""

    def granted(restype: ResourceType) -> list[str]:
        per_pattern = [
            {b.operation.name.lower() for b in bindings
             if (b.restype, b.name, b.resource_pattern_type) == (r, n, p) and b.permission_type == AclPermissionType.ALLOW}
            for r, n, p in acl_patterns(owner) if r == restype
        ]
        return sorted(set.intersection(*per_pattern))

    return {"operations": granted(ResourceType.TOPIC), "group_operations": granted(ResourceType.GROUP)}


def has_credential(admin: AdminClient, principal: str, what: str) -> bool:
    future = admin.describe_user_scram_credentials([principal], request_timeout=client.REQUEST_TIMEOUT)[principal]
    try:
        return bool(future.result(timeout=client.REQUEST_TIMEOUT).scram_credential_infos)
    except KafkaException as err:
        if error_code(err) == KafkaError.RESOURCE_NOT_FOUND:
            return False
        raise refusal(err, "describe the credential of", what) from err


def set_password(admin: AdminClient, principal: str, password: str, what: str) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upsert = UserScramCredentialUpsertion(principal, info, password.encode())
    future = admin.alter_user_scram_credentials([upsert], request_timeout=client.REQUEST_TIMEOUT)[principal]
    result(future, "set the credential of", what)


class Acl(KafkaKind):
    """A SCRAM-SHA-512 principal with prefixed ACLs on the project's topics and consumer groups.

    The principal is `User:<project>` (or `User:<name>` for another declaration); its grants cover
    topics and groups named `<project>.*`, the bare `<project>` and, by name, the project's topics its
    `reach` lists beyond those, and nothing else, on a broker that denies by default.
    `read` reports in `aclInSync` whether the principal has exactly those
    grants; one added outside Pulumi is drift, and the next update revokes it.
    """

    kind = "acl"
    logins = True
    marker_kind = "acl"
    Spec = AclSpec
    attributes = ("host", "port", "servers", "user", "password", "principal", "prefix")
    secret_outputs = ("password",)
    # Grants are made once the project's topics exist and revoked before any is dropped.
    after_kinds = ("topic",)
    # The project's topics named otherwise than `<owner>`/`<owner>.*` are granted by name.
    reach_kind = "topic"

    @classmethod
    def exact_reach(cls, props: Mapping[str, Any]) -> list[str]:
        owner = str(props.get("owner") or "")
        return sorted({str(topic) for topic in props.get(REACH) or [] if not within_prefix(str(topic), owner)})

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        principal = kafka_name(name, owner, naming=naming)
        if _RESERVED_OWNER.fullmatch(owner) or _RESERVED_OWNER.fullmatch(project_topic(owner)):
            raise InvalidSpec("map", f"project {owner!r}", "Kafka principals of projects named 'devstack' and "
                              "'devstack-*' are reserved: the local broker's own (devstack-admin, devstack-broker) "
                              "are its super users")
        if _RESERVED_OWNER.fullmatch(principal):
            raise InvalidSpec("map", f"name {name!r}", "Kafka principals named 'devstack' and 'devstack-*' are reserved: "
                              "the local broker's own (devstack-admin, devstack-broker) are its super users")
        return principal

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        principal, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"acl {ident}"
        admin = admin_client(instance)
        # Without its credential the principal cannot log in: the resource is gone.
        if not has_credential(admin, principal, what):
            return None
        bindings = live_bindings(admin, principal, what)
        params = acl_params(ident.owner, bindings)
        # Exactly what those params grant, and nothing more (no other pattern, no DENY, no host); the topics
        # granted by name, whichever they are, only if they are the project's own.
        topics = exact_topics(bindings, ident.owner)
        markers = read_markers(instance, admin)
        in_sync = (bindings == wanted_bindings(ident.owner, principal, AclSpec.model_construct(**params), topics)
                   and all(marked_topic_owner(markers, topic) == ident.owner for topic in topics))
        return self.observed(instance, admin, ident, markers, params=params,
                             attributes={"user": principal, "principal": f"User:{principal}", "aclInSync": in_sync})

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return ["aclInSync"] if olds.get("aclInSync") is False else []

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool:
        return credential_works(instance, user, password)

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, AclSpec)
        principal = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        password = login_password(ident, principal, props)
        admin = admin_client(instance)
        markers = read_markers(instance, admin)
        foreign = foreign_topics_in_reach(markers, ident.owner)
        if foreign:
            raise Conflict("create", f"acl {ident}", f"topic {foreign[0]!r} of another project is within its reach "
                           f"({owner_prefix(ident.owner)}*)", "rename that topic; nothing was changed")
        topics = self._reached_topics(markers, ident, props)  # refused before anything is made
        self.mark(instance, admin, ident, props.get("stack", ""))
        set_password(admin, principal, password, f"acl {ident}")
        self._converge(admin, ident, principal, spec, topics)
        return self._attributes(instance, ident, principal, password)

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        principal = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        password = login_password(ident, principal, new, old)
        admin = admin_client(instance)
        # (Its credential exists: update runs only on a resource `_owned` has found.)
        if password != old.get("password") or old.get("passwordInSync") is False:
            set_password(admin, principal, password, f"acl {ident}")
        self._converge(admin, ident, principal, AclSpec.model_validate(new.get("params") or {}),
                       self._reached_topics(read_markers(instance, admin), ident, new))
        self.mark(instance, admin, ident, new.get("stack", ""))
        return self._attributes(instance, ident, principal, password)

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        principal, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"acl {ident}"
        admin = admin_client(instance)
        bindings = live_bindings(admin, principal, what)
        exists = has_credential(admin, principal, what)
        if not (exists or bindings):
            raise self.gone(instance, admin, ident, what, "neither its credential nor its ACLs exist")
        self.require_ours(instance, admin, ident, what)
        revoke(admin, bindings, what)
        if exists:
            deletion = UserScramCredentialDeletion(principal, ScramMechanism.SCRAM_SHA_512)
            future = admin.alter_user_scram_credentials([deletion], request_timeout=client.REQUEST_TIMEOUT)[principal]
            try:
                result(future, "drop", what)
            except NotFound as err:  # another run's drop came first
                raise self.gone(instance, admin, ident, what, "it was dropped meanwhile") from err
        self.unmark(instance, admin, ident, props.get("stack", ""))

    def _reached_topics(self, markers: Mapping[str, str], ident: Identity, props: Mapping[str, Any]) -> list[str]:
        """The topics `props` ask the principal to reach by name; Conflict when one is not the project's."""
        topics = self.exact_reach(props)
        foreign = [topic for topic in topics if marked_topic_owner(markers, topic) != ident.owner]
        if foreign:
            raise Conflict("grant", f"acl {ident}", f"topic {foreign[0]!r} does not belong to project {ident.owner!r}",
                           "an acl reaches only its project's topics; nothing was changed")
        return topics

    def _converge(self, admin: AdminClient, ident: Identity, principal: str, spec: AclSpec, topics: list[str]) -> None:
        """Grant what the spec lists on the project's prefix and `topics`, and revoke every other binding of
        the principal."""
        what = f"acl {ident}"
        live = live_bindings(admin, principal, what)
        wanted = wanted_bindings(ident.owner, principal, spec, topics)
        if wanted - live:
            for future in admin.create_acls(sorted(wanted - live), request_timeout=client.REQUEST_TIMEOUT).values():
                result(future, "grant", what)
        revoke(admin, live - wanted, what)
        if wanted != live:
            # The controller has committed the change; the broker's authorizer applies it
            # a moment later. Return when it has, so the principal works (and read agrees).
            wait_until(lambda: live_bindings(admin, principal, what) == wanted, client.REQUEST_TIMEOUT)

    @staticmethod
    def _attributes(instance: SharedInstance, ident: Identity, principal: str, password: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "servers": instance.several, "user": principal, "password": password,
                "principal": f"User:{principal}", "prefix": owner_prefix(ident.owner), "aclInSync": True,
                "passwordInSync": True}
