"""Kafka: per-project topics and a SASL/SCRAM principal with prefixed ACLs.

Names: a project's default declaration maps to the project's name without
'.' (`project_topic`), any other to its own name (Kafka's charset
[a-zA-Z0-9._-], at most 249 characters; see providers.naming). With no '.' in
it, the prefix `<project>.` belongs to exactly one project, and a topic another
project names inside it is refused: that is what makes prefixed ACLs a tenant
boundary. An acl grants the project's topics named outside its prefix by name.
A resource whose outputs record no naming keeps `<owner>.<name>`.

Ownership: Kafka topics have no comment or tag, topic configs accept no
custom keys and SCRAM users carry no metadata. A name prefix alone cannot
tell a topic we created from one someone made by hand under the same name,
so the marker lives in a registry: the compacted topic `__devstack_owners`,
one record per managed resource keyed `topic:<name>` or `acl:<principal>`,
whose value is the ownership marker (a tombstone when purged). Only the
admin can read it (the broker's authorizer grants tenants nothing there).
It is written before a resource is created, so a crash in between leaves a
harmless marker for a resource that does not exist, never an unmarked one.

Clients live per process, not per call: every new client pays a SASL/SCRAM
handshake and metadata round trips, and reading the registry from its start
on every call made each call cost more than the one before. So the provider
process keeps, per broker and credential, one AdminClient, one Producer and
one registry view that reads only records it has not seen. The pickled
provider holds none of them.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, ClassVar, ContextManager, Iterable, Iterator, Literal, Mapping

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers import naming as naming_rules
from providers.base import REACH, KindProvider, Observed
from providers.markers import marker_field, marker_owner, ownership_marker
from providers.clients import one_per_key
from providers.credentials import Rotation, login_password
from providers.errors import Conflict, DevstackError, EngineUnavailable, InvalidSpec, NotFound, Unsupported
from providers.identity import CURRENT_NAMING, PREFIXED, Identity
from providers.instances import SharedInstance

ENGINE = "kafka"
MAX_TOPIC = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
# No '.' in a project name: '.' separates the owner from the rest of a name.
_OWNER_CHARS = re.compile(r"[a-zA-Z0-9_-]+")
#: The local engine's own principals (`devstack-admin`, `devstack-broker`) are the broker's super users:
#: a project of such a name would get a SCRAM login as one (its `acl`; topics of such a name are harmless).
_RESERVED_OWNER = re.compile(r"devstack([-_].*)?")
MARKER_TOPIC = "__devstack_owners"
SASL_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 8192
REQUEST_TIMEOUT = 30.0
#: How long a broker may take to answer the first request of a call.
CONNECT_TIMEOUT = 10.0
#: Topic deletion is asynchronous: how long a create waits for a deleted name to free up.
DELETE_WAIT = 30.0

#: librdkafka's codes for a login the broker refused.
_REJECTED = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
#: Retriable transport-level errors: the broker is not there (or not answering).
_UNAVAILABLE = {
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
}


# --- names ------------------------------------------------------------------------------


def kafka_name(name: str, owner: str, *, naming: int) -> str:
    """SANITIZED: the project's own name (`project_topic`) for the default declaration, else the name,
    sanitized. PREFIXED: `<owner>` for the default declaration, else `<owner>.<name>`; InvalidSpec names
    the broken rule."""
    if naming != PREFIXED:
        return project_topic(owner) if name == owner else naming_rules.kafka(name)
    if not _OWNER_CHARS.fullmatch(owner):
        raise InvalidSpec("map", f"owner {owner!r}", "Kafka project names use letters, digits, '-' and '_' "
                          "(no '.': it separates the project from the rest of a topic name)")
    mapped = owner if name == owner else f"{owner}.{name}"
    if not _TOPIC_CHARS.fullmatch(name) or name in (".", ".."):
        raise InvalidSpec("map", f"name {name!r}", "Kafka names use letters, digits, '.', '_' and '-' only")
    if len(mapped) > MAX_TOPIC:
        raise InvalidSpec("map", repr(mapped), f"Kafka names (topics, principals, groups) are at most {MAX_TOPIC} characters")
    return mapped


def project_topic(owner: str) -> str:
    """The project's own name in Kafka (its default topic and principal): no '.', which would put one
    project's names inside another's prefix (`acme.shop` in `acme.`)."""
    return naming_rules.kafka_project(owner)


def owner_prefix(owner: str) -> str:
    """The prefix of every topic and consumer group a project owns (besides the bare `<owner>`)."""
    return f"{project_topic(owner)}."


def within_prefix(name: str, owner: str) -> bool:
    """Whether the project's prefixed grants (`<owner>` and `<owner>.*`) reach topic or group `name`."""
    return name == project_topic(owner) or name.startswith(owner_prefix(owner))


def project_principals(markers: Mapping[str, str], owner: str) -> set[str]:
    """`User:<principal>` of every acl the registry gives to `owner`: its explicitly named ones included."""
    return {f"User:{key.removeprefix('acl:')}" for key, marker in markers.items()
            if key.startswith("acl:") and marker_owner(marker) == owner}


def marked_topic_owner(markers: Mapping[str, str], topic: str) -> str | None:
    return marker_owner(markers.get(f"topic:{topic}"))


def reaching_acls(markers: Mapping[str, str], topic: str, owner: str) -> list[str]:
    """The projects other than `owner` whose acls' prefixed grants would reach `topic`."""
    return sorted({o for key, marker in markers.items() if key.startswith("acl:")
                   and (o := marker_owner(marker)) and o != owner and within_prefix(topic, o)})


def foreign_topics_in_reach(markers: Mapping[str, str], owner: str) -> list[str]:
    """Topics of other projects that `owner`'s prefixed grants would reach."""
    return sorted(key.removeprefix("topic:") for key, marker in markers.items() if key.startswith("topic:")
                  and (o := marker_owner(marker)) and o != owner and within_prefix(key.removeprefix("topic:"), owner))


# --- clients ------------------------------------------------------------------------------


def client_settings(instance: SharedInstance) -> dict[str, Any]:
    """librdkafka settings for the admin principal on the instance's SASL_PLAINTEXT listener."""
    return {
        "bootstrap.servers": instance.address,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": SASL_MECHANISM,
        "sasl.username": instance.admin_user,
        "sasl.password": instance.password(),
        "log_level": 0,
        "reconnect.backoff.max.ms": 1000,
    }


_AUTH_HINT = "the admin credential in the stack config does not match the broker's (`python -m tools.engines start kafka` says how to recover)"


def unavailable(instance: SharedInstance, cause: str, rejected: bool = False) -> EngineUnavailable:
    return EngineUnavailable(
        "connect to", f"kafka instance {instance.name!r} at {instance.address}", cause,
        _AUTH_HINT if rejected else instance.start_hint(),
    )


def admin_client(instance: SharedInstance) -> AdminClient:
    """This process's admin client for the instance; EngineUnavailable when the broker does not answer."""
    return clients(instance).admin


def connect_admin(instance: SharedInstance) -> AdminClient:
    """A new admin client that has answered once; EngineUnavailable when the broker does not.

    Gives up early when librdkafka reports that no broker is reachable or that
    the credential was rejected, instead of retrying until the timeout.
    """
    problems: list[KafkaError] = []
    admin = AdminClient({**client_settings(instance), "error_cb": problems.append})
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        try:
            admin.list_topics(topic=MARKER_TOPIC, timeout=1)
            return admin
        except KafkaException as err:
            admin.poll(0.1)  # serves error_cb, where refused connections and rejected logins show up
            fatal = [p for p in problems if p.code() in _UNAVAILABLE and p.code() != KafkaError._TIMED_OUT]
            if fatal or time.monotonic() > deadline:
                last = (fatal or problems or [err.args[0]])[-1]
                rejected = last.code() in _REJECTED
                raise unavailable(instance, last.str(), rejected) from err


def credential_works(instance: SharedInstance, principal: str, password: str) -> bool:
    """Whether the principal still logs in with `password`: false only when the broker rejects it
    (a broker that does not answer within the timeout tells nothing)."""
    problems: list[KafkaError] = []
    client = AdminClient({**client_settings(instance), "sasl.username": principal, "sasl.password": password,
                          "error_cb": problems.append})
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while time.monotonic() < deadline:
        try:
            client.list_topics(timeout=0.5)
            return True
        except KafkaException:
            client.poll(0.1)  # serves error_cb, where a rejected login shows up
        if any(problem.code() in _REJECTED for problem in problems):
            return False
    return True


class MarkerView:
    """The registry as of the broker's latest offset, read incrementally by one consumer.

    Each call asks the broker for the partition's high watermark and reads only
    the records between what it has seen and that mark, so it sees every marker
    written before the call (by any process) and costs two small round trips
    (the registry's metadata, its watermark) when nothing changed, and nothing
    between calls. A consumer is not thread-safe: calls are serialized.
    """

    def __init__(self, instance: SharedInstance) -> None:
        self._instance = instance
        self._lock = threading.Lock()
        self._consumer: Consumer | None = None
        self._markers: dict[str, str] = {}
        self._next = 0  # offset of the first record not yet applied

    def current(self, admin: AdminClient) -> dict[str, str]:
        with self._lock:
            topic = admin.list_topics(topic=MARKER_TOPIC, timeout=REQUEST_TIMEOUT).topics.get(MARKER_TOPIC)
            if topic is None or topic.error is not None:
                self._reset()
                return {}
            consumer = self._consumer or self._open()
            partition = TopicPartition(MARKER_TOPIC, 0)
            try:
                _low, high = consumer.get_watermark_offsets(partition, timeout=REQUEST_TIMEOUT, cached=False)
            except KafkaException as err:
                raise unavailable(self._instance, err.args[0].str()) from err
            if high < self._next:  # the registry was re-created: start over
                self._reset()
                consumer = self._open()
            if self._next < high:
                # Assigned only while it reads: an assigned consumer fetches on its own, a request
                # per fetch.wait.max.ms while nothing is new, which cost the broker about 0.14
                # CPU-seconds per second for as long as the provider ran. (Paused instead, it took
                # a second to fetch again after resume.) assign() reads without joining the group:
                # nothing is committed, nobody rebalances. An explicit offset, not OFFSET_BEGINNING:
                # the latter costs a ~0.5s offset lookup; compaction keeps the log start at 0, and
                # "earliest" covers it if it ever moves.
                consumer.assign([TopicPartition(MARKER_TOPIC, 0, self._next)])
                try:
                    self._read_until(consumer, high)
                finally:
                    consumer.unassign()
            return dict(self._markers)

    def _open(self) -> Consumer:
        self._consumer = Consumer({
            **client_settings(self._instance), "group.id": "devstack-provider", "enable.auto.commit": False,
            "enable.partition.eof": True, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10,
        })
        return self._consumer

    def _reset(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        self._consumer, self._markers, self._next = None, {}, 0

    def _read_until(self, consumer: Consumer, high: int) -> None:
        deadline = time.monotonic() + REQUEST_TIMEOUT
        while self._next < high:
            if time.monotonic() > deadline:
                raise unavailable(self._instance, f"reading {MARKER_TOPIC} did not finish within {REQUEST_TIMEOUT:.0f}s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise unavailable(self._instance, msg.error().str())
                # An end-of-partition event may be left over from an earlier call: only one at
                # or past `high` ends this one (compaction can leave the last offsets empty).
                if msg.offset() >= high:
                    self._next = high
                continue
            key = (msg.key() or b"").decode()
            if msg.value() is None:
                self._markers.pop(key, None)
            else:
                self._markers[key] = msg.value().decode()
            self._next = msg.offset() + 1


class Clients:
    """One broker's clients for this process, built on first use and shared by its threads."""

    def __init__(self, instance: SharedInstance) -> None:
        self._instance = instance
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self.markers = MarkerView(instance)

    @property
    def admin(self) -> AdminClient:
        with self._lock:
            if self._admin is None:
                self._admin = connect_admin(self._instance)
            return self._admin

    @property
    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer({**client_settings(self._instance), "acks": "all",
                                           "message.timeout.ms": int(REQUEST_TIMEOUT * 1000)})
            return self._producer


@one_per_key
def clients(instance: SharedInstance) -> Clients:
    """The process-wide clients of one instance (its address and admin credential: both are in its key)."""
    return Clients(instance)


def error_code(err: KafkaException) -> int | None:
    return err.args[0].code() if err.args and isinstance(err.args[0], KafkaError) else None


def result(future: Any, verb: str, what: str, field: str = "") -> Any:
    """Wait for one admin future; broker refusals become typed errors naming the field."""
    try:
        return future.result(timeout=REQUEST_TIMEOUT)
    except KafkaException as err:
        raise refusal(err, verb, what, field) from err


class Unanswered(EngineUnavailable):
    """A request the broker did not answer; inside a verb, `broker_failures_named` names the instance."""


@contextmanager
def broker_failures_named(instance: SharedInstance) -> Iterator[None]:
    """A broker lost after the admin client connected: every wait on it fails, as a timeout of the
    request's future (librdkafka's own request timeout is as long) or a transport error."""
    try:
        yield
    except TimeoutError as err:
        raise instance.stopped_answering(f"no answer within {REQUEST_TIMEOUT:.0f}s") from err
    except Unanswered as err:
        raise instance.stopped_answering(err.cause) from err
    except KafkaException as err:
        if error_code(err) not in _UNAVAILABLE:
            raise
        text = err.args[0].str() if err.args else str(err)
        if error_code(err) in _REJECTED:
            raise unavailable(instance, text, rejected=True) from err
        raise instance.stopped_answering(text) from err


def refusal(err: KafkaException, verb: str, what: str, field: str = "") -> DevstackError:
    code, text = error_code(err), err.args[0].str() if err.args else str(err)
    about = f"params.{field}: " if field else ""
    if code == KafkaError.TOPIC_EXCEPTION and "collides" in text:
        return Conflict(verb, what, text, "Kafka treats '.' and '_' alike in topic names; choose another `name`")
    if code in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.INVALID_PARTITIONS,
                KafkaError.POLICY_VIOLATION, KafkaError.INVALID_REQUEST):
        return InvalidSpec(verb, what, f"{about}the broker refused: {text}", "change the declaration")
    if code in _REJECTED:
        return EngineUnavailable(verb, what, text, _AUTH_HINT)
    if code in _UNAVAILABLE:
        return Unanswered(verb, what, text, "start it with `python -m tools.engines start kafka`")
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.RESOURCE_NOT_FOUND):  # gone since it was looked at
        return NotFound(verb, what, text)
    return Unsupported(verb, what, f"the broker refused: {text}")


# --- ownership registry ------------------------------------------------------------------------


def ensure_registry(admin: AdminClient) -> None:
    """Create the compacted marker topic once; concurrent creators are fine."""
    topic = NewTopic(MARKER_TOPIC, 1, 1, config={"cleanup.policy": "compact"})
    try:
        admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT)[MARKER_TOPIC].result(timeout=REQUEST_TIMEOUT)
    except KafkaException as err:
        if error_code(err) != KafkaError.TOPIC_ALREADY_EXISTS:
            raise refusal(err, "create", f"the ownership registry {MARKER_TOPIC}") from err


def read_markers(instance: SharedInstance, admin: AdminClient) -> dict[str, str]:
    """Every live marker in the registry: key -> marker text (latest record per key wins)."""
    return clients(instance).markers.current(admin)


def write_marker(instance: SharedInstance, key: str, marker: str | None) -> None:
    """Record (or, with None, tombstone) one marker; returns once the broker has it."""
    failed: list[KafkaError] = []
    delivered = threading.Event()

    def report(err: KafkaError | None, _msg: Any) -> None:
        if err:
            failed.append(err)
        delivered.set()

    producer = clients(instance).producer
    producer.produce(MARKER_TOPIC, key=key.encode(), value=marker.encode() if marker else None, on_delivery=report)
    # flush() serves delivery reports for every thread's records; wait for this one's.
    deadline = time.monotonic() + REQUEST_TIMEOUT
    while not delivered.is_set() and time.monotonic() < deadline:
        producer.flush(0.5)
    if failed or not delivered.is_set():
        cause = failed[0].str() if failed else "delivery did not finish"
        raise unavailable(instance, f"cannot record ownership in {MARKER_TOPIC}: {cause}")


class KafkaKind(KindProvider):
    """Shared by the Kafka kinds: name rules and owner-dependent checks run in check()."""

    engine = ENGINE
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


# --- topic ----------------------------------------------------------------------------------


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
        return future.result(timeout=REQUEST_TIMEOUT)
    except KafkaException as err:
        if error_code(err) == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise refusal(err, "describe", what) from err


def describe_topic(admin: AdminClient, name: str, what: str) -> Any | None:
    """The topic's description, or None when it does not exist."""
    return _topic_answer(admin.describe_topics(TopicCollection([name]), request_timeout=REQUEST_TIMEOUT)[name], what)


def dynamic_configs(admin: AdminClient, name: str, what: str) -> dict[str, str] | None:
    """The topic's own configs (those set on it, not inherited from the broker); None when it is gone."""
    resource = ConfigResource(ResourceType.TOPIC, name)
    (future,) = admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT).values()
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
    attributes = ("host", "port", "topic", "partitions")
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

    def check_params(self, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        old = old_params.get("partitions")
        # Pulumi hands numbers back as floats (3.0): compare values, report whole numbers.
        if isinstance(old, (int, float)) and params["partitions"] < old:
            return [CheckFailure("params.partitions", partitions_shrink(int(old), params["partitions"]))]
        return []

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        assert isinstance(spec, TopicSpec)
        brokers = len(admin_client(instance).list_topics(topic=MARKER_TOPIC, timeout=REQUEST_TIMEOUT).brokers)
        if spec.replication_factor > brokers:
            return [("replication_factor", f"{spec.replication_factor} replicas need as many brokers and the cluster "
                                           f"at {instance.address} has {brokers}",
                     f"set replicationFactor to at most {brokers}")]
        if spec.config:
            # The broker validates a topic of these params under a name nobody has; nothing is made.
            probe = NewTopic(f"devstack-probe-{uuid.uuid4().hex}", spec.partitions, spec.replication_factor,
                             config=dict(spec.config))
            future = admin_client(instance).create_topics([probe], validate_only=True,
                                                          request_timeout=REQUEST_TIMEOUT)[probe.topic]
            try:
                future.result(timeout=REQUEST_TIMEOUT)
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

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        name, what = self.engine_name(ident.name, ident.owner, naming=ident.naming), f"topic {ident}"
        admin = admin_client(instance)
        if describe_topic(admin, name, what) is None:
            raise self.gone(instance, admin, ident, what, "it does not exist")
        self.require_ours(instance, admin, ident, what)
        try:
            result(admin.delete_topics([name], request_timeout=REQUEST_TIMEOUT)[name], "drop", what)
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
                future = admin.create_partitions(grow, validate_only=validate_only, request_timeout=REQUEST_TIMEOUT)[name]
                result(future, "update", what, "partitions")
            if configs:
                (future,) = admin.incremental_alter_configs(configs, validate_only=validate_only,
                                                            request_timeout=REQUEST_TIMEOUT).values()
                result(future, "update", what, "config")

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
                       REQUEST_TIMEOUT)

    @staticmethod
    def _attributes(instance: SharedInstance, name: str, spec: TopicSpec) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "topic": name, "partitions": spec.partitions,
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
        future = admin.create_topics([topic], request_timeout=REQUEST_TIMEOUT)[name]
        try:
            future.result(timeout=REQUEST_TIMEOUT)
            wait_until(lambda: live_topic(admin, name, what) is not None, REQUEST_TIMEOUT)
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


def wait_until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return  # the broker will finish on its own; the caller's next call re-checks
        time.sleep(0.2)


# --- acl ----------------------------------------------------------------------------------------

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
    return set(result(admin.describe_acls(flt, request_timeout=REQUEST_TIMEOUT), "describe ACLs of", what))


def revoke(admin: AdminClient, bindings: Iterable[AclBinding], what: str) -> None:
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in sorted(bindings)]
    if filters:
        for future in admin.delete_acls(filters, request_timeout=REQUEST_TIMEOUT).values():
            result(future, "revoke", what)


def foreign_grants(admin: AdminClient, topic: str, owner: str, what: str,
                   principals: Iterable[str] = ()) -> list[AclBinding]:
    """The grants on `topic` to principals not the project's own (`User:<owner>`, `User:<owner>.<name>`, and
    `principals`, its acls named otherwise): another project's, or anyone's (`User:*`), wherever they point
    (the topic, a prefix, `*`)."""
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                           AclPermissionType.ALLOW)
    found = result(admin.describe_acls(flt, request_timeout=REQUEST_TIMEOUT), "describe ACLs of", what)
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
    future = admin.describe_user_scram_credentials([principal], request_timeout=REQUEST_TIMEOUT)[principal]
    try:
        return bool(future.result(timeout=REQUEST_TIMEOUT).scram_credential_infos)
    except KafkaException as err:
        if error_code(err) == KafkaError.RESOURCE_NOT_FOUND:
            return False
        raise refusal(err, "describe the credential of", what) from err


def set_password(admin: AdminClient, principal: str, password: str, what: str) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upsert = UserScramCredentialUpsertion(principal, info, password.encode())
    result(admin.alter_user_scram_credentials([upsert], request_timeout=REQUEST_TIMEOUT)[principal], "set the credential of", what)


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
    attributes = ("host", "port", "user", "password", "principal", "prefix")
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

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
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
            try:
                result(admin.alter_user_scram_credentials([deletion], request_timeout=REQUEST_TIMEOUT)[principal],
                       "drop", what)
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
            for future in admin.create_acls(sorted(wanted - live), request_timeout=REQUEST_TIMEOUT).values():
                result(future, "grant", what)
        revoke(admin, live - wanted, what)
        if wanted != live:
            # The controller has committed the change; the broker's authorizer applies it
            # a moment later. Return when it has, so the principal works (and read agrees).
            wait_until(lambda: live_bindings(admin, principal, what) == wanted, REQUEST_TIMEOUT)

    @staticmethod
    def _attributes(instance: SharedInstance, ident: Identity, principal: str, password: str) -> dict[str, Any]:
        return {"host": instance.host, "port": instance.port, "user": principal, "password": password,
                "principal": f"User:{principal}", "prefix": owner_prefix(ident.owner), "aclInSync": True,
                "passwordInSync": True}


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {"topic": Topic, "acl": Acl}

