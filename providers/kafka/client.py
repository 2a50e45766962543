"""Kafka: the admin principal's clients, one set per process, and the broker's errors named.

Clients live per process, not per call: every new client pays a SASL/SCRAM
handshake and metadata round trips, and reading the registry from its start on
every call would make each call cost more than the one before. So the provider
process keeps, per broker and credential, one AdminClient, one Producer and one
registry view that reads only records it has not seen. The pickled provider
holds none of them.

The kinds read `REQUEST_TIMEOUT` from this module at each call, so it is one
setting for every request of the engine.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from providers.clients import one_per_key
from providers.errors import Conflict, DevstackError, EngineUnavailable, InvalidSpec, NotFound, Unsupported
from providers.instances import SharedInstance

ENGINE_NAME = "kafka"
MARKER_TOPIC = "__devstack_owners"
SASL_MECHANISM = "SCRAM-SHA-512"
REQUEST_TIMEOUT = 30.0
#: How long a broker may take to answer the first request of a call.
CONNECT_TIMEOUT = 10.0

#: librdkafka's codes for a login the broker refused.
_REJECTED = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
#: Retriable transport-level errors: the broker is not there (or not answering).
_UNAVAILABLE = {
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
}


def client_settings(instance: SharedInstance) -> dict[str, Any]:
    """librdkafka settings for the admin principal on the instance's SASL_PLAINTEXT listener, or its
    SASL_SSL one when the instance has `tls`."""
    return {
        "bootstrap.servers": instance.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": SASL_MECHANISM,
        "sasl.username": instance.admin_user,
        "sasl.password": instance.password(),
        "log_level": 0,
        "reconnect.backoff.max.ms": 1000,
        **tls_settings(instance),
    }


def tls_settings(instance: SharedInstance) -> dict[str, Any]:
    """librdkafka's SASL_SSL settings for the instance's `tls` (none without it): its CA (`probe`: the
    system's), hostname verification unless `verify: false`, a client certificate when it has one.
    Unsupported for a `serverName` other than the hosts: librdkafka checks each broker's certificate
    against the host it connects to (the bootstrap one, then the one each broker advertises), and
    takes no other name."""
    tls = instance.tls
    if tls is None:
        return {}
    if tls.verify and tls.server_name and any(host != tls.server_name for host, _ in instance.addresses):
        raise Unsupported("connect to", f"kafka instance {instance.name!r} at {instance.address}",
                          f"tls.serverName {tls.server_name!r} differs from the host: Kafka clients check each broker's "
                          "certificate against the host they connect to and take no other name",
                          f"remove shared.{instance.name}.tls.serverName and give the brokers' addresses by a name "
                          "their certificates carry")
    settings = {"security.protocol": "SASL_SSL", "ssl.ca.location": tls.ca_path() or "probe",
                "ssl.endpoint.identification.algorithm": "https" if tls.verify else "none",
                "enable.ssl.certificate.verification": tls.verify}
    if cert := tls.client_cert():
        settings["ssl.certificate.location"], settings["ssl.key.location"] = cert
    return settings


_AUTH_HINT = "the admin credential in the stack config does not match the broker's (`python -m tools.engines start kafka` says how to recover)"


def unavailable(instance: SharedInstance, cause: str, rejected: bool = False, tls_failed: bool = False) -> EngineUnavailable:
    return EngineUnavailable(
        "connect to", f"kafka instance {instance.name!r} at {instance.address}", cause,
        _AUTH_HINT if rejected else instance.tls_hint() if tls_failed else instance.start_hint(),
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
            # A failed handshake is followed by "all brokers down": the handshake's error says why.
            handshake = [p for p in problems if p.code() == KafkaError._SSL]
            if fatal or handshake or time.monotonic() > deadline:
                last = (handshake or fatal or problems or [err.args[0]])[-1]
                rejected = last.code() in _REJECTED
                raise unavailable(instance, last.str(), rejected, tls_failed=bool(handshake)) from err


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
                # per fetch.wait.max.ms while nothing is new, a load on the broker for as long as the
                # provider runs (paused instead, it is slow to fetch again after resume). assign()
                # reads without joining the group: nothing is committed, nobody rebalances. An
                # explicit offset, not OFFSET_BEGINNING, which costs an offset lookup; compaction
                # keeps the log start at 0, and "earliest" covers it if it ever moves.
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


def wait_until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return  # the broker will finish on its own; the caller's next call re-checks
        time.sleep(0.2)
