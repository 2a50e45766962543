"""Kafka `topic`: a topic of the project's, its partitions and configs; grants on it to others taken back."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (AclBinding, AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions, NewTopic, ResourcePatternType, ResourceType)
from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, Field, field_validator


from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import CURRENT_NAMING, Identity
from providers.instances import SharedInstance
from providers.kafka import client  # client.REQUEST_TIMEOUT: one setting, read at each call
from providers.kafka.acl import foreign_grants, revoke, within_project
from providers.kafka.client import MARKER_TOPIC, admin_client, error_code, refusal, result, wait_until
from providers.kafka.kind import KafkaKind
from providers.kafka.names import kafka_name, owner_prefix, project_topic, within_prefix
from providers.kafka.owners import project_principals, reaching_acls, read_markers
from providers.markers import Observed

#: Topic deletion is asynchronous: how long a create waits for a deleted name to free up.
DELETE_WAIT = 30.0


class TopicSpec(BaseModel):
    """Params of a `topic`. Replication factor is fixed; partitions only grow; configs update in place."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    partitions: int = Field(default=1, ge=1, le=100_000)  # the most confluent-kafka's NewTopic accepts
    replication_factor: int = Field(default=1, ge=1, alias="replicationFactor")
    #: Topic configs (retention.ms, cleanup.policy, ...), as Kafka names them.
    config: dict[str, str] = Field(default_factory=dict)

    @field_validator("config", mode="before")
    @classmethod
    def _config_as_text(cls, value: Any) -> Any:
        # Kafka configs are text; YAML hands us numbers and booleans.
        if not isinstance(value, dict):
            return value
        unset = [str(k) for k, v in value.items() if v is None or isinstance(v, (list, dict))]
        if unset:
            raise ValueError(f"config {', '.join(map(repr, unset))}: a value is one string, number or boolean "
                             "(a list is one comma-separated string; leave a key out to keep Kafka's default)")
        return {str(k): _config_text(v) for k, v in value.items()}


def _config_text(value: Any) -> str:
    """A config value as the broker stores it: lists without spaces, whole numbers without leading
    zeros. Declared otherwise, every refresh would find the broker's spelling and call it drift."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if re.fullmatch(r"\s*[+-]?\d+\s*", text):
        return str(int(text))
    if "," in text:
        return ",".join(part.strip() for part in text.split(","))
    return text


def _topic_answer(future: Any, what: str) -> Any | None:
    """Wait for one describe request about a topic; None when the broker says it does not exist."""
    try:
        return future.result(timeout=client.REQUEST_TIMEOUT)
    except KafkaException as err:
        if error_code(err) == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise refusal(err, "describe", what) from err


def describe_topic(admin: AdminClient, name: str, what: str) -> Any | None:
    """The topic's description, or None when it does not exist."""
    future = admin.describe_topics(TopicCollection([name]), request_timeout=client.REQUEST_TIMEOUT)[name]
    return _topic_answer(future, what)


def dynamic_configs(admin: AdminClient, name: str, what: str) -> dict[str, str] | None:
    """The topic's own configs (those set on it, not inherited from the broker); None when it is gone."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    (future,) = admin.describe_configs([resource], request_timeout=client.REQUEST_TIMEOUT).values()
    entries = _topic_answer(future, what)
    if entries is None:
        return None
    return {k: e.value for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def live_topic(admin: AdminClient, name: str, what: str) -> dict[str, Any] | None:
    """The live topic in the form of TopicSpec's dump, or None when it does not exist.

    Two requests: a topic deleted between them (the metadata can still list a topic
    the broker is deleting) is gone, not an error.
    """
    description = describe_topic(admin, name, what)
    configs = dynamic_configs(admin, name, what) if description is not None else None
    return None if configs is None else topic_params(description, configs)


def topic_params(description: Any, configs: dict[str, str]) -> dict[str, Any]:
    """The live topic in the form of TopicSpec's dump."""
    partitions = description.partitions
    return {
        "partitions": len(partitions),
        "replication_factor": len(partitions[0].replicas) if partitions else 0,
        "config": configs,
    }


class Topic(KafkaKind):
    """A topic; its ownership marker lives in the registry topic."""

    kind = "topic"
    marker_kind = "topic"
    Spec = TopicSpec
    create_only = frozenset({"replication_factor"})
    refusable_in_place = frozenset({"config"})  # a name or value the broker does not take
    attributes = ("host", "port", "servers", "topic", "partitions")
    name_attribute = "topic"

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        mine, theirs = kafka_name(name, owner, naming=CURRENT_NAMING), kafka_name(other, owner, naming=CURRENT_NAMING)
        if mine != theirs and mine.replace(".", "_") == theirs.replace(".", "_"):
            return ("name", f"topics {mine!r} and {theirs!r} differ only in '.' against '_', which Kafka refuses "
                            "side by side (their metric names would collide): rename one")
        return None

    @classmethod
    def reached_by(cls, name: str, owner: str,
                   holders: Mapping[str, Iterable[str]]) -> tuple[str, str, str] | None:
        topic = kafka_name(name, owner, naming=CURRENT_NAMING)
        reaching = sorted(o for o in holders.get("acl", ()) if o != owner and within_prefix(topic, o))
        if not reaching:
            return None
        return "acl", reaching[0], f"'{project_topic(reaching[0])}' or '{owner_prefix(reaching[0])}*'"

    @classmethod
    def check_params(cls, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        old = old_params.get("partitions")
        # Pulumi hands numbers back as floats (3.0): compare values, report whole numbers.
        if isinstance(old, (int, float)) and params["partitions"] < old:
            return [CheckFailure("params.partitions", partitions_shrink(int(old), params["partitions"]))]
        return []

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        assert isinstance(spec, TopicSpec)
        brokers = len(admin_client(instance).list_topics(topic=MARKER_TOPIC, timeout=client.REQUEST_TIMEOUT).brokers)
        if spec.replication_factor > brokers:
            return [("replication_factor", f"{spec.replication_factor} replicas need as many brokers and the cluster "
                                           f"at {instance.address} has {brokers}",
                     f"set replicationFactor to at most {brokers}")]
        if spec.config:
            # The broker validates a topic of these params under a name nobody has; nothing is made.
            probe = NewTopic(f"devstack-probe-{uuid.uuid4().hex}", spec.partitions, spec.replication_factor,
                             config=dict(spec.config))
            future = admin_client(instance).create_topics([probe], validate_only=True,
                                                          request_timeout=client.REQUEST_TIMEOUT)[probe.topic]
            try:
                future.result(timeout=client.REQUEST_TIMEOUT)
            except KafkaException as err:
                # A policy of the broker's (create.topic.policy) judges the configs too.
                code = error_code(err) or 0
                field = "config" if code == KafkaError.POLICY_VIOLATION else _REFUSED_PARAMS.get(code)
                if field is None:
                    raise refusal(err, "check", f"topic {ident}") from err
                return [(field, f"the broker refuses it: {err.args[0].str() if err.args else err}",
                         "give topic configs as Kafka names them, with values of their type (kafka-configs "
                         "--describe --all lists them)" if field == "config" else "change it")]
        return []

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"topic {ident}"
        admin = admin_client(instance)
        params = live_topic(admin, name, what)
        if params is None:
            return None
        markers = read_markers(instance, admin)
        return self.observed(instance, admin, ident, markers, params=params,
                             attributes={"topic": name, "partitions": params["partitions"],
                                         "isolated": not self._foreign(markers, admin, name, ident.owner, what)})

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return ["isolated"] if olds.get("isolated") is False else []

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(spec, TopicSpec)
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"topic {ident}"
        admin = admin_client(instance)
        reaching = reaching_acls(read_markers(instance, admin), name, ident.owner)
        if reaching:
            raise Conflict("create", what, f"topic {name!r} would be within reach of the acls of project {reaching[0]!r} "
                           f"({owner_prefix(reaching[0])}*)", "give the topic a name outside that project's; nothing was changed")
        # Marker first: a crash before the topic exists leaves a harmless marker, never an unmarked topic.
        self.mark(instance, admin, ident, props.get("stack", ""))
        live = live_topic(admin, name, what)
        if live is None:
            try:
                create_topic(admin, name, spec, what)
            except (InvalidSpec, Conflict, Unsupported):
                # Refused: unless someone else's create won the name meanwhile, no topic came of it,
                # and its marker would be a stray in the registry.
                if describe_topic(admin, name, what) is None:
                    self.unmark(instance, admin, ident, props.get("stack", ""))
                raise
        else:  # adopted: `create` has checked that the replication factor is as declared
            self._converge(admin, name, spec, live, what)
            self._contain(instance, admin, ident, name, what, "create")
        return self._attributes(instance, name, spec)

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"topic {ident}"
        spec = TopicSpec.model_validate(new.get("params") or {})
        admin = admin_client(instance)
        live = live_topic(admin, name, what)
        if live is None:
            raise NotFound("update", what, "it no longer exists", "run `pulumi refresh`, then `pulumi up` to re-create it")
        self._converge(admin, name, spec, live, what)
        self._contain(instance, admin, ident, name, what, "update")
        self.mark(instance, admin, ident, new.get("stack", ""))
        return self._attributes(instance, name, spec)

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"topic {ident}"
        admin = admin_client(instance)
        if describe_topic(admin, name, what) is None:
            raise self.gone(instance, admin, ident, what, "it does not exist")
        self.require_ours(instance, admin, ident, what)
        try:
            result(admin.delete_topics([name], request_timeout=client.REQUEST_TIMEOUT)[name], "drop", what)
        except NotFound as err:  # another run's drop (another stack of the project) came first
            raise self.gone(instance, admin, ident, what, "it was dropped meanwhile") from err
        # Deletion is asynchronous: return once the name is gone, so read and re-create agree.
        wait_until(lambda: describe_topic(admin, name, what) is None, DELETE_WAIT)
        self.unmark(instance, admin, ident, props.get("stack", ""))

    def _converge(self, admin: AdminClient, name: str, spec: TopicSpec, live: dict[str, Any], what: str) -> None:
        """Grow partitions and set/remove topic configs; each step runs only when it changes something."""
        if spec.partitions < live["partitions"]:
            raise Unsupported("update", what, "params.partitions: " + partitions_shrink(live["partitions"], spec.partitions))
        grow = [NewPartitions(name, spec.partitions)] if spec.partitions > live["partitions"] else []
        changes = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in sorted(spec.config.items()) if live["config"].get(k) != v]
        changes += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in sorted(live["config"]) if k not in spec.config]
        configs = [ConfigResource(ResourceType.TOPIC, name, incremental_configs=changes)] if changes else []
        # Partitions cannot be taken back: with both to do, the broker validates both first, so
        # a config it refuses leaves the topic as it was instead of grown behind the ledger's back.
        for validate_only in (True, False) if grow and configs else (False,):
            if grow:
                future = admin.create_partitions(grow, validate_only=validate_only,
                                                 request_timeout=client.REQUEST_TIMEOUT)[name]
                result(future, "update", what, "partitions")
            if configs:
                (future,) = admin.incremental_alter_configs(configs, validate_only=validate_only,
                                                            request_timeout=client.REQUEST_TIMEOUT).values()
                result(future, "update", what, "config")
        if grow:
            # The broker acknowledges before its metadata shows the new count: a refresh right after
            # would read the old one as drift.
            wait_until(lambda: (live_topic(admin, name, what) or {}).get("partitions") == spec.partitions,
                       client.REQUEST_TIMEOUT)

    @staticmethod
    def _foreign(markers: Mapping[str, str], admin: AdminClient, name: str, owner: str, what: str) -> list[AclBinding]:
        return foreign_grants(admin, name, owner, what, project_principals(markers, owner))

    def _contain(self, instance: SharedInstance, admin: AdminClient, ident: Identity, name: str, what: str,
                 verb: str) -> None:
        """Take back the grants of the topic to principals outside the project. One that reaches other
        projects' names too (a prefix beyond the project's, `*`) is not devstack's to take back: refused."""
        foreign = self._foreign(read_markers(instance, admin), admin, name, ident.owner, what)
        beyond = [b for b in foreign if not (within_project(b, ident.owner) or
                                             (b.resource_pattern_type == ResourcePatternType.LITERAL and b.name == name))]
        if beyond:
            b = beyond[0]
            raise Unsupported(verb, what, f"{b.principal} is granted {b.operation.name} on topics "
                              f"{b.resource_pattern_type.name.lower()} {b.name!r} (set outside Pulumi), which reaches "
                              f"this topic and other projects' names",
                              "devstack takes back only grants within the project's names: remove that one on the "
                              "broker (kafka-acls --remove), then run `pulumi up` again")
        revoke(admin, foreign, what)
        if foreign:  # applied by the authorizer a moment after the controller commits it
            wait_until(lambda: not self._foreign(read_markers(instance, admin), admin, name, ident.owner, what),
                       client.REQUEST_TIMEOUT)

    @staticmethod
    def _attributes(instance: SharedInstance, name: str, spec: TopicSpec) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "servers": instance.several, "topic": name, "partitions": spec.partitions,
                "isolated": True}


def partitions_shrink(have: int, want: int) -> str:
    return (f"the topic has {have} partitions and {want} were asked for, but Kafka cannot remove partitions "
            f"(keep partitions >= {have}, or delete the topic with purge and re-create it, e.g. under a new name)")


def create_topic(admin: AdminClient, name: str, spec: TopicSpec, what: str) -> None:
    """Create the topic, waiting (bounded) while a just-deleted topic of that name is still going away.

    Returns once the topic can be described: CreateTopics answers when the
    controller has the topic, and the broker that answers describe requests
    learns of it a moment later. An update or read right after must find it.
    """
    deadline = time.monotonic() + DELETE_WAIT
    while True:
        topic = NewTopic(name, spec.partitions, spec.replication_factor, config=dict(spec.config))
        future = admin.create_topics([topic], request_timeout=client.REQUEST_TIMEOUT)[name]
        try:
            future.result(timeout=client.REQUEST_TIMEOUT)
            wait_until(lambda: live_topic(admin, name, what) is not None, client.REQUEST_TIMEOUT)
            return
        except KafkaException as err:
            pending = error_code(err) == KafkaError.TOPIC_ALREADY_EXISTS and describe_topic(admin, name, what) is None
            if not pending:
                raise refusal(err, "create", what, field_of(err)) from err
            if time.monotonic() > deadline:
                raise Unsupported("create", what, f"the topic was deleted but is still going away after {DELETE_WAIT:.0f}s",
                                  "retry shortly") from err
        time.sleep(0.5)


#: The topic param a broker refusal is about, by its error code (TopicSpec's field names).
_REFUSED_PARAMS = {KafkaError.INVALID_CONFIG: "config", KafkaError.INVALID_REPLICATION_FACTOR: "replication_factor",
                   KafkaError.INVALID_PARTITIONS: "partitions"}


def field_of(err: KafkaException) -> str:
    """The refused param as devstack.yaml spells it ("" when the refusal names none)."""
    param = _REFUSED_PARAMS.get(error_code(err) or 0)
    return (TopicSpec.model_fields[param].alias or param) if param else ""
