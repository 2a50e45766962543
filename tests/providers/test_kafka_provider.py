"""The kafka `topic` and `acl` kinds against the real local broker (KRaft, SASL/SCRAM, StandardAuthorizer)."""

from __future__ import annotations

import json
import os
import signal
import time
from contextlib import contextmanager

import confluent_kafka
import pytest
from pydantic import SecretStr
from confluent_kafka import KafkaError, KafkaException, TopicCollection
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

import providers.kafka
from devstack import ledger, scan
from providers.credentials import hashed_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, Unsupported
from providers.identity import PREFIXED, SANITIZED, Identity
from providers.kafka import (MARKER_TOPIC, Acl, MarkerView, Topic, dynamic_configs, kafka_name, read_markers,
                             set_password, write_marker)
from tests.providers.conftest import props, stopped_answering
from tools.engines import load
from tests.kafka_clients import TIMEOUT, consume_one, produce, settings





@pytest.fixture
def kadmin(admin) -> AdminClient:
    return AdminClient(settings(admin["kafka"].user, admin["kafka"].password))


@pytest.fixture
def topic(configure):
    return configure(Topic())


@pytest.fixture
def acl(configure):
    return configure(Acl())


def instance(provider):
    return provider._instances["kafka"]


def everything(principal: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)


@pytest.fixture(autouse=True)
def cleanup(kadmin, configure, owner):
    """Drop the topics, ACLs, credentials and markers of this test's owner (and of `<owner>_b`)."""
    yield
    ours = lambda name: name == owner or name.startswith((f"{owner}.", f"{owner}_"))  # noqa: E731
    topics = [t for t in kadmin.list_topics(timeout=TIMEOUT).topics if ours(t)]
    for future in (kadmin.delete_topics(topics).values() if topics else []):
        future.result(timeout=TIMEOUT)
    principals = {b.principal for b in kadmin.describe_acls(everything()).result(timeout=TIMEOUT)
                  if ours(b.principal.removeprefix("User:"))}
    if principals:
        for future in kadmin.delete_acls([everything(p) for p in sorted(principals)]).values():
            future.result(timeout=TIMEOUT)
    users = [d.user for d in kadmin.describe_user_scram_credentials().result(timeout=TIMEOUT).values() if ours(d.user)]
    if users:
        deletions = [UserScramCredentialDeletion(u, ScramMechanism.SCRAM_SHA_512) for u in users]
        for future in kadmin.alter_user_scram_credentials(deletions).values():
            future.result(timeout=TIMEOUT)
    provider = configure(Topic())
    for key in read_markers(instance(provider), kadmin):
        if ours(key.split(":", 1)[1]):
            write_marker(instance(provider), key, None)


def checked(provider, inputs: dict, olds: dict | None = None) -> dict:
    result = provider.check(olds or {}, inputs)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def failures(provider, inputs: dict, olds: dict | None = None) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check(olds or {}, inputs).failures}


def describe(kadmin, name: str):
    try:
        return kadmin.describe_topics(TopicCollection([name]))[name].result(timeout=TIMEOUT)
    except KafkaException as err:
        if err.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise


def topic_configs(kadmin, name: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    (future,) = kadmin.describe_configs([resource]).values()
    return {k: e.value for k, e in future.result(timeout=TIMEOUT).items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def marker_of(provider, kadmin, key: str) -> dict | None:
    text = read_markers(instance(provider), kadmin).get(key)
    return json.loads(text) if text else None




def test_the_registry_reader_asks_the_broker_nothing_between_reads(topic, kadmin, owner, monkeypatch):
    """An assigned consumer fetches on its own while nothing is new, one request per fetch.wait.max.ms (some
    90 a second here), which cost the broker about 0.14 CPU-seconds per second for as long as a provider
    ran. The registry's reader is assigned only while it reads; the next read sees a marker written since."""
    fetches: list[int] = []  # the reader's Fetch requests so far, from librdkafka's statistics

    class CountingConsumer(confluent_kafka.Consumer):
        def __init__(self, config: dict) -> None:
            super().__init__({**config, "statistics.interval.ms": 100, "stats_cb": lambda stats: fetches.append(
                sum(b.get("req", {}).get("Fetch", 0) for b in json.loads(stats)["brokers"].values()))})

    monkeypatch.setattr(providers.kafka, "Consumer", CountingConsumer)
    view, key = MarkerView(instance(topic)), f"topic:{owner}"
    write_marker(instance(topic), key, "first")
    assert view.current(kadmin)[key] == "first"

    def fetched_by_now() -> int:
        time.sleep(0.3)  # a statistics interval or more, served by poll
        view._consumer.poll(0.1)
        return fetches[-1]

    before = fetched_by_now()
    time.sleep(1.0)
    assert fetched_by_now() - before <= 1
    write_marker(instance(topic), key, "second")
    assert view.current(kadmin)[key] == "second"


def code(outcome) -> int | None:
    return outcome.code() if isinstance(outcome, KafkaError) else None


# --- naming --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "owner", "expected"),
    [("shop", "shop", "shop"), ("orders", "shop", "shop.orders"), ("orders.v2", "shop-x", "shop-x.orders.v2")],
    ids=["default", "named", "dotted-name"],
)
def test_kafka_name(name, owner, expected):
    assert kafka_name(name, owner, naming=PREFIXED) == expected


@pytest.mark.parametrize(
    ("name", "owner", "rule"),
    [("orders", "a.b", "no '.'"), ("ord/ers", "shop", "letters, digits"), ("..", "shop", "letters, digits"),
     ("x" * 250, "shop", "at most 249")],
    ids=["dotted-owner", "slash", "dotdot", "too-long"],
)
def test_kafka_name_rules(name, owner, rule):
    with pytest.raises(InvalidSpec, match=rule):
        kafka_name(name, owner, naming=PREFIXED)


# --- topic ----------------------------------------------------------------------------


def topic_inputs(topic, owner: str, name: str = "orders", olds: dict | None = None, **params) -> dict:
    return checked(topic, props("kafka", "kafka", "topic", name, owner, params), olds)


def test_topic_create_then_create_again_adopts_without_change(topic, owner, kadmin):
    inputs = topic_inputs(topic, owner, partitions=2, config={"retention.ms": 3600000})
    first = topic.create(inputs)
    second = topic.create(inputs)
    assert first.id == second.id == f"kafka/kafka/topic/orders@{owner}"
    assert {k: second.outs[k] for k in Topic.attributes} == {
        "host": "127.0.0.1", "port": 29092, "topic": f"{owner}.orders", "partitions": 2}
    assert len(describe(kadmin, f"{owner}.orders").partitions) == 2
    assert topic_configs(kadmin, f"{owner}.orders") == {"retention.ms": "3600000"}
    marker = marker_of(topic, kadmin, f"topic:{owner}.orders")
    assert marker == {"managed-by": "devstack", "owner": owner, "stack": "test"}
    assert topic.read("id", second.outs).outs["params"] == inputs["params"]


def test_topic_update_in_place_then_drift(topic, owner, kadmin):
    outs = topic.create(topic_inputs(topic, owner, config={"cleanup.policy": "compact"})).outs
    news = topic_inputs(topic, owner, olds=outs, partitions=3, config={"retention.ms": "7200000"})
    diff = topic.diff("id", outs, news)
    assert diff.replaces == [] and diff.changes
    outs = topic.update("id", outs, news).outs
    assert len(describe(kadmin, f"{owner}.orders").partitions) == 3 and outs["partitions"] == 3
    # Set in place, and the config no longer declared is removed (back to the broker default).
    assert topic_configs(kadmin, f"{owner}.orders") == {"retention.ms": "7200000"}
    # Out-of-band config change: read shows it and the next diff is an update.
    change = ConfigResource(ResourceType.TOPIC, f"{owner}.orders", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    list(kadmin.incremental_alter_configs([change]).values())[0].result(timeout=TIMEOUT)
    # The controller has it; the broker that answers describe requests applies it a moment later.
    deadline = time.monotonic() + TIMEOUT
    while (refreshed := topic.read("id", outs).outs)["params"]["config"] != {"retention.ms": "60000"}:
        assert time.monotonic() < deadline, refreshed["params"]["config"]
        time.sleep(0.2)
    assert topic.diff("id", refreshed, news).changes and topic.diff("id", refreshed, news).replaces == []
    topic.update("id", refreshed, news)
    assert topic_configs(kadmin, f"{owner}.orders") == {"retention.ms": "7200000"}
    # Dropped out of band: blank id.
    kadmin.delete_topics([f"{owner}.orders"])[f"{owner}.orders"].result(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while topic.read("id", outs).id != "":
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_configs_of_a_topic_that_is_gone_are_none_not_an_error(kadmin, owner):
    """Read describes a topic, then its configs: a topic deleted in between (the broker's
    metadata can still list one being deleted) must read as gone, not as a broker refusal."""
    assert dynamic_configs(kadmin, f"{owner}.never-created", "topic x") is None


def test_partition_decrease_is_refused_with_the_reason(topic, owner, kadmin):
    outs = topic.create(topic_inputs(topic, owner, partitions=3)).outs
    found = failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"partitions": 2}), olds=outs)
    assert "params.partitions" in found
    assert "has 3 partitions" in found["params.partitions"] and "cannot remove partitions" in found["params.partitions"]
    # As Pulumi passes the old inputs: numbers as floats.
    as_pulumi = {**outs, "params": {**outs["params"], "partitions": 3.0}}
    assert "params.partitions" in failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"partitions": 2}),
                                           olds=as_pulumi)
    # Grown out of band, then refreshed: going back to the declared count is refused too, never replaced.
    kadmin.create_partitions([NewPartitions(f"{owner}.orders", 5)])[f"{owner}.orders"].result(timeout=TIMEOUT)
    refreshed = topic.read("id", outs).outs
    assert refreshed["params"]["partitions"] == 5
    news = topic_inputs(topic, owner, partitions=3)
    assert topic.diff("id", refreshed, news).replaces == []
    with pytest.raises(Unsupported, match=r"params\.partitions: the topic has 5 partitions .* cannot remove partitions"):
        topic.update("id", refreshed, news)
    assert len(describe(kadmin, f"{owner}.orders").partitions) == 5


def test_a_refused_config_leaves_the_partitions_as_they_were(topic, owner, kadmin):
    """Growing partitions cannot be undone: an update whose config the broker refuses must not grow them."""
    outs = topic.create(topic_inputs(topic, owner, partitions=3)).outs
    news = topic_inputs(topic, owner, olds=outs, partitions=5)
    news["params"] = {**news["params"], "config": {"cleanup.policy": "bogus"}}  # past check, which refuses it
    with pytest.raises(InvalidSpec, match=r"params\.config: the broker refused"):
        topic.update("id", outs, news)
    assert len(describe(kadmin, f"{owner}.orders").partitions) == 3
    grown = topic.update("id", outs, topic_inputs(topic, owner, olds=outs, partitions=5,
                                                  config={"cleanup.policy": "compact"})).outs
    assert grown["partitions"] == 5 and len(describe(kadmin, f"{owner}.orders").partitions) == 5
    assert dynamic_configs(kadmin, f"{owner}.orders", "topic")["cleanup.policy"] == "compact"


def test_configs_spelled_otherwise_than_the_broker_stores_them_are_not_drift(topic, owner, kadmin):
    inputs = topic_inputs(topic, owner, config={"cleanup.policy": "delete, compact", "retention.ms": "0200000"})
    outs = topic.create(inputs).outs
    refreshed = topic.read("id", outs).outs
    assert refreshed["params"]["config"] == outs["params"]["config"]
    assert topic.diff("id", refreshed, inputs).changes is False


def test_replication_factor_replaces(topic, owner, kadmin):
    outs = topic.create(topic_inputs(topic, owner)).outs
    news = topic.check({}, props("kafka", "kafka", "topic", "orders", owner, {"replicationFactor": 2})).inputs  # fails check
    diff = topic.diff("id", {**outs, "purge": True}, {**news, "purge": True})
    assert diff.replaces == ["params.replication_factor"] and diff.delete_before_replace
    with pytest.raises(Unsupported, match="exists with params.replicationFactor 1"):
        topic.create(news)  # adopting cannot change it in place
    # The replacement on this one-broker cluster: the broker refuses, and says why.
    topic.delete("id", {**outs, "purge": True})
    with pytest.raises(InvalidSpec, match=r"params\.replicationFactor: .*only 1 broker"):
        topic.create(news)
    assert describe(kadmin, f"{owner}.orders") is None


def test_a_replication_factor_the_cluster_cannot_hold_fails_check_before_the_replace_drops_anything(topic, owner, kadmin):
    """A replacement deletes first: a new replication factor beyond the brokers must stop at check."""
    inputs = checked(topic, props("kafka", "kafka", "topic", "orders", owner, purge=True))
    topic.create(inputs)
    found = failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"replicationFactor": 2}, purge=True),
                     olds=inputs)
    assert "has 1" in found["params.replicationFactor"] and "at most 1" in found["params.replicationFactor"]
    assert describe(kadmin, f"{owner}.orders") is not None
    unchanged = failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"partitions": 2}), olds=inputs)
    assert unchanged == {}


def test_a_new_topic_with_a_replication_factor_the_cluster_cannot_hold_fails_check(topic, owner, kadmin):
    """Said at the preview, not half-way through the up after the workspace's other creates."""
    found = failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"replicationFactor": 2}))
    assert "has 1" in found["params.replicationFactor"]
    assert "the topic was not made (set replicationFactor to at most 1)" in found["params.replicationFactor"]
    assert describe(kadmin, f"{owner}.orders") is None


def test_grants_on_a_topic_to_principals_outside_the_project_are_drift_and_taken_back(topic, acl, owner, kadmin):
    """Another principal (anyone's `User:*`, another project's) granted on the project's topics reads or writes
    them: refresh reports `isolated: false`, the next up revokes the grants within the project's names, and
    refuses, naming it, one that reaches beyond them (not devstack's to take back). The project's own stay."""
    inputs = topic_inputs(topic, owner)
    outs = topic.create(inputs).outs
    own = acl.create(checked(acl, props("kafka", "kafka", "acl", owner, owner))).outs
    grant = lambda name, pattern, principal: AclBinding(ResourceType.TOPIC, name, pattern, principal, "*",  # noqa: E731
                                                        AclOperation.READ, AclPermissionType.ALLOW)
    inside = [grant(f"{owner}.", ResourcePatternType.PREFIXED, "User:*"),
              grant(f"{owner}.orders", ResourcePatternType.LITERAL, f"User:{owner}_b")]
    beyond = grant(owner[:3], ResourcePatternType.PREFIXED, f"User:{owner}_b")
    try:
        for future in kadmin.create_acls(inside).values():
            future.result(timeout=TIMEOUT)
        read = topic.read("id", outs).outs
        assert read["isolated"] is False and topic.diff("id", read, inputs).changes
        repaired = topic.update("id", read, inputs).outs
        assert topic.read("id", repaired).outs["isolated"] is True
        assert [b for b in kadmin.describe_acls(everything()).result(timeout=TIMEOUT) if b in inside] == []
        assert acl.read("id", own).outs["aclInSync"] is True

        for future in kadmin.create_acls([beyond]).values():
            future.result(timeout=TIMEOUT)
        read = topic.read("id", repaired).outs
        assert read["isolated"] is False
        with pytest.raises(Unsupported, match=f"User:{owner}_b is granted READ on topics prefixed '{owner[:3]}'"):
            topic.update("id", read, inputs)
        assert beyond in kadmin.describe_acls(everything()).result(timeout=TIMEOUT)
    finally:
        for future in kadmin.delete_acls([AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                                           b.host, b.operation, b.permission_type)
                                          for b in (*inside, beyond)]).values():
            future.result(timeout=TIMEOUT)


def test_a_topic_and_acl_another_run_drops_first_are_gone_not_refused(topic, acl, owner, kadmin, monkeypatch):
    """Two workspaces purging one project's topic and acl at once: the second drop finds them gone."""
    outs = topic.create({**topic_inputs(topic, owner), "purge": True}).outs
    own = acl.create({**checked(acl, props("kafka", "kafka", "acl", owner, owner)), "purge": True}).outs
    real = Topic.require_ours

    def dropped_meanwhile(self, instance, admin, ident, what):
        real(self, instance, admin, ident, what)
        if ident.kind == "topic":
            for future in kadmin.delete_topics([f"{owner}.orders"]).values():
                future.result(timeout=TIMEOUT)
        else:
            deletion = UserScramCredentialDeletion(owner, ScramMechanism.SCRAM_SHA_512)
            kadmin.alter_user_scram_credentials([deletion])[owner].result(timeout=TIMEOUT)

    monkeypatch.setattr(Topic, "require_ours", dropped_meanwhile)
    monkeypatch.setattr(Acl, "require_ours", dropped_meanwhile)
    topic.delete("id", outs)
    acl.delete("id", own)
    assert not any(key.endswith(f"{owner}.orders") or key == f"acl:{owner}"
                   for key in read_markers(instance(topic), kadmin))


def test_topic_retained_delete_keeps_data_purge_drops_and_recreate_waits(topic, owner, kadmin, admin):
    outs = topic.create(topic_inputs(topic, owner)).outs
    assert produce(admin["kafka"].user, admin["kafka"].password, f"{owner}.orders", b"kept") is None
    topic.delete("id", outs)  # purge not asked for
    assert consume_one(admin["kafka"].user, admin["kafka"].password, f"{owner}.orders", f"{owner}.check") == b"kept"
    topic.delete("id", {**outs, "purge": True})
    assert describe(kadmin, f"{owner}.orders") is None
    assert marker_of(topic, kadmin, f"topic:{owner}.orders") is None
    topic.delete("id", {**outs, "purge": True})  # already gone is fine
    # Re-create right after the asynchronous delete: waits for the name instead of failing.
    started = time.monotonic()
    topic.create(topic_inputs(topic, owner))
    assert time.monotonic() - started < 30
    assert describe(kadmin, f"{owner}.orders") is not None


def test_topic_purge_cut_before_its_tombstone_tombstones_when_run_again(topic, owner, kadmin):
    """Otherwise the registry keeps a marker for a topic nobody has, which nothing ever removes."""
    outs = topic.create(topic_inputs(topic, owner)).outs
    kadmin.delete_topics([f"{owner}.orders"])[f"{owner}.orders"].result(timeout=TIMEOUT)  # the drop, cut there
    deadline = time.monotonic() + 30
    while describe(kadmin, f"{owner}.orders") is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker_of(topic, kadmin, f"topic:{owner}.orders") is not None
    topic.delete("id", {**outs, "purge": True})
    assert marker_of(topic, kadmin, f"topic:{owner}.orders") is None


def test_foreign_topic_is_a_conflict_and_untouched(topic, owner, kadmin):
    kadmin.create_topics([NewTopic(f"{owner}.orders", 1, 1)])[f"{owner}.orders"].result(timeout=TIMEOUT)
    with pytest.raises(Conflict, match="devstack does not manage"):
        topic.create(topic_inputs(topic, owner, partitions=4, config={"retention.ms": "1000"}))
    assert len(describe(kadmin, f"{owner}.orders").partitions) == 1
    assert topic_configs(kadmin, f"{owner}.orders") == {}
    assert marker_of(topic, kadmin, f"topic:{owner}.orders") is None


def test_topic_marked_for_another_project_is_a_conflict(topic, owner, kadmin):
    topic.create(topic_inputs(topic, owner))
    marker = json.dumps({"managed-by": "devstack", "owner": "intruder", "stack": "other"}, sort_keys=True)
    write_marker(instance(topic), f"topic:{owner}.orders", marker)
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        topic.create(topic_inputs(topic, owner, partitions=2))
    assert len(describe(kadmin, f"{owner}.orders").partitions) == 1


def test_topic_colliding_with_another_projects_name_is_a_conflict(topic, owner, kadmin):
    # Kafka treats '.' and '_' alike: `<owner>.b` and project `<owner>_b`'s default topic collide.
    topic.create(topic_inputs(topic, owner, name="b"))
    other = f"{owner}_b"
    with pytest.raises(Conflict, match="collides"):
        topic.create(topic_inputs(topic, other, name=other))
    assert describe(kadmin, other) is None


@pytest.mark.parametrize(
    ("name", "params", "field", "reason"),
    [
        ("orders", {"partitions": 0}, "params.partitions", "greater than or equal to 1"),
        ("orders", {"replicationFactor": 0}, "params.replicationFactor", "greater than or equal to 1"),
        ("orders", {"retention": "1d"}, "params.retention", "Extra inputs are not permitted"),
        ("orders", {"config": ["retention.ms"]}, "params.config", "valid dictionary"),
        ("ord ers", {}, "name", "letters, digits"),
    ],
    ids=["partitions", "replication", "unknown-param", "config-list", "name-space"],
)
def test_topic_bad_params_fail_check_naming_the_field(topic, owner, name, params, field, reason):
    found = failures(topic, props("kafka", "kafka", "topic", name, owner, params))
    assert field in found and reason in found[field], found


def test_unknown_topic_config_is_refused_naming_the_field_and_nothing_created(topic, owner, kadmin):
    inputs = topic_inputs(topic, owner)
    inputs["params"] = {**inputs["params"], "config": {"retention.days": "1"}}  # past check, which refuses it
    with pytest.raises(InvalidSpec, match=r"params\.config: .*Unknown topic config name: retention\.days"):
        topic.create(inputs)
    assert describe(kadmin, f"{owner}.orders") is None
    assert marker_of(topic, kadmin, f"topic:{owner}.orders") is None  # no stray marker for a topic never made


@pytest.mark.parametrize("config, says", [
    ({"retention.days": "1"}, "Unknown topic config name: retention.days"),
    ({"retention.ms": "abc"}, "retention.ms"),
    ({"cleanup.policy": "bogus"}, "cleanup.policy"),
])
def test_a_topic_config_the_broker_refuses_fails_check_before_the_up(topic, owner, kadmin, config, says):
    """Said at the preview, new or changed, not half-way through the up after the workspace's other creates."""
    found = failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"config": config}))
    assert says in found["params.config"] and "the topic was not made" in found["params.config"], found
    assert describe(kadmin, f"{owner}.orders") is None
    outs = topic.create(topic_inputs(topic, owner)).outs
    found = failures(topic, props("kafka", "kafka", "topic", "orders", owner, {"config": config}), olds=outs)
    assert says in found["params.config"] and "the topic was not changed" in found["params.config"], found
    assert not set(config) & set(dynamic_configs(kadmin, f"{owner}.orders", "topic"))
    assert [t for t in kadmin.list_topics(timeout=TIMEOUT).topics if t.startswith("devstack-probe-")] == []


# --- acl -------------------------------------------------------------------------------------


def acl_inputs(acl, owner: str, olds: dict | None = None, credentials: str = "predictable", **params) -> dict:
    return checked(acl, props("kafka", "kafka", "acl", owner, owner, params, credentials=credentials), olds)


def can_log_in(user: str, password: str) -> bool:
    """True once the broker accepts the credential, False as soon as it rejects it."""
    errors: list[KafkaError] = []
    client = AdminClient({**settings(user, password), "error_cb": errors.append})
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            client.list_topics(timeout=0.5)
            return True
        except KafkaException:
            client.poll(0.1)  # serves error_cb
        if any(e.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED) for e in errors):
            return False
    raise AssertionError(f"the broker neither accepted nor rejected {user!r} within {TIMEOUT}s")


def tenant_admin(user: str, password: str) -> AdminClient:
    return AdminClient(settings(user, password))


def test_acl_create_then_create_again_adopts_and_the_principal_works(acl, topic, owner, kadmin):
    inputs = acl_inputs(acl, owner)
    first = acl.create(inputs)
    second = acl.create(inputs)
    outs = second.outs
    assert first.id == second.id == f"kafka/kafka/acl/{owner}@{owner}"
    assert first.outs["password"] == outs["password"]
    assert {k: outs[k] for k in ("host", "port", "user", "principal", "prefix")} == {
        "host": "127.0.0.1", "port": 29092, "user": owner, "principal": f"User:{owner}", "prefix": f"{owner}."}
    assert Acl.secret_outputs == ("password",)
    granted = kadmin.describe_acls(everything(f"User:{owner}")).result(timeout=TIMEOUT)
    assert {(b.restype, b.name, b.resource_pattern_type) for b in granted} == {
        (ResourceType.TOPIC, f"{owner}.", ResourcePatternType.PREFIXED), (ResourceType.TOPIC, owner, ResourcePatternType.LITERAL),
        (ResourceType.GROUP, f"{owner}.", ResourcePatternType.PREFIXED), (ResourceType.GROUP, owner, ResourcePatternType.LITERAL)}
    assert acl.read("id", outs).outs["params"] == inputs["params"]
    # Its own topics (named and default), its own consumer group.
    topic.create(topic_inputs(topic, owner))
    topic.create(topic_inputs(topic, owner, name=owner))
    for name in (f"{owner}.orders", owner):
        assert produce(owner, outs["password"], name, b"mine") is None
        assert consume_one(owner, outs["password"], name, f"{owner}.workers") == b"mine"


def test_tenants_cannot_touch_each_others_topics_or_groups(acl, topic, owner, admin):
    """Principal A against B's topic and B's group, on the broker's authorizer."""
    a, b = owner, f"{owner}_b"
    pa = acl.create(acl_inputs(acl, a)).outs["password"]
    acl.create(checked(acl, props("kafka", "kafka", "acl", b, b)))
    topic.create(topic_inputs(topic, a))
    topic.create(topic_inputs(topic, b))
    assert produce(admin["kafka"].user, admin["kafka"].password, f"{b}.orders", b"b-data") is None

    assert code(produce(a, pa, f"{b}.orders")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code(consume_one(a, pa, f"{b}.orders", f"{a}.workers")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # A's own topic with B's group name: the group is B's.
    assert produce(a, pa, f"{a}.orders") is None
    assert code(consume_one(a, pa, f"{a}.orders", f"{b}.workers")) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # The ownership registry is admin-only.
    assert code(consume_one(a, pa, MARKER_TOPIC, f"{a}.peek")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Without `create` in its operations, A cannot even make topics under its own prefix.
    client = tenant_admin(a, pa)  # kept in a variable: a collected client cancels its futures
    with pytest.raises(KafkaException) as info:
        client.create_topics([NewTopic(f"{a}.new", 1, 1)])[f"{a}.new"].result(timeout=TIMEOUT)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acl_update_in_place_then_drift(acl, topic, owner, kadmin):
    outs = acl.create(acl_inputs(acl, owner)).outs
    topic.create(topic_inputs(topic, owner))
    news = acl_inputs(acl, owner, operations=["read", "describe", "create"])
    diff = acl.diff("id", outs, news)
    assert diff.replaces == [] and diff.changes
    outs = acl.update("id", outs, news).outs
    # `write` revoked, `create` granted, on the project's prefix only.
    assert code(produce(owner, outs["password"], f"{owner}.orders")) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    client = tenant_admin(owner, outs["password"])
    client.create_topics([NewTopic(f"{owner}.made-by-tenant", 1, 1)])[f"{owner}.made-by-tenant"].result(timeout=TIMEOUT)
    # An ACL removed out of band shows up on read, and the next update puts it back.
    gone = AclBindingFilter(ResourceType.TOPIC, f"{owner}.", ResourcePatternType.PREFIXED, f"User:{owner}", "*",
                            AclOperation.READ, AclPermissionType.ALLOW)
    kadmin.delete_acls([gone])[gone].result(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while "read" in (refreshed := acl.read("id", outs).outs)["params"]["operations"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert refreshed["params"]["operations"] == ["create", "describe"]
    acl.update("id", refreshed, news)
    assert acl.read("id", outs).outs["params"]["operations"] == ["create", "describe", "read"]
    # Its credential deleted out of band: the principal is gone, blank id.
    deletion = UserScramCredentialDeletion(owner, ScramMechanism.SCRAM_SHA_512)
    kadmin.alter_user_scram_credentials([deletion])[owner].result(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT  # the broker answering describes learns of it a moment later
    while acl.read("id", outs).id != "":
        assert time.monotonic() < deadline, "the principal still reads as there"
        time.sleep(0.2)


def test_acl_grants_added_outside_are_drift_and_revoked(acl, owner, kadmin):
    """Grants beyond the project's (another project's prefix, every topic, an extra operation on its own)
    would break isolation: read reports them, the next update revokes them all."""
    inputs = acl_inputs(acl, owner)
    outs = acl.create(inputs).outs
    assert acl.read("id", outs).outs["aclInSync"] is True
    extra = [AclBinding(ResourceType.TOPIC, "other-project.", ResourcePatternType.PREFIXED, f"User:{owner}", "*",
                        AclOperation.READ, AclPermissionType.ALLOW),
             AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, f"User:{owner}", "*",
                        AclOperation.ALL, AclPermissionType.ALLOW),
             AclBinding(ResourceType.TOPIC, f"{owner}.", ResourcePatternType.PREFIXED, f"User:{owner}", "*",
                        AclOperation.DELETE, AclPermissionType.ALLOW)]
    for future in kadmin.create_acls(extra).values():
        future.result(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while (refreshed := acl.read("id", outs).outs)["aclInSync"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert refreshed["params"]["operations"] == ["describe", "read", "write"]  # the declared ones are all there
    diff = acl.diff("id", refreshed, inputs)
    assert diff.changes and diff.replaces == []
    acl.update("id", refreshed, inputs)
    live = kadmin.describe_acls(everything(f"User:{owner}")).result(timeout=TIMEOUT)
    assert not [b for b in live if b.name in ("other-project.", "*") or b.operation == AclOperation.DELETE]
    assert acl.read("id", outs).outs["aclInSync"] is True


def test_acl_password_reset_outside_is_drift_and_set_again(acl, owner, kadmin):
    inputs = acl_inputs(acl, owner, credentials="generated")
    outs = acl.create(inputs).outs
    assert acl.read("id", outs).outs["passwordInSync"] is True
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    reset = UserScramCredentialUpsertion(owner, info, b"reset-by-hand")
    kadmin.alter_user_scram_credentials([reset])[owner].result(timeout=TIMEOUT)
    refreshed = acl.read("id", outs).outs
    assert refreshed["passwordInSync"] is False
    assert acl.diff("id", refreshed, inputs).changes
    updated = acl.update("id", refreshed, inputs).outs  # the next up sets the stored one again
    assert updated["password"] == outs["password"] and can_log_in(owner, outs["password"])
    assert acl.read("id", updated).outs["passwordInSync"] is True


def test_acl_generated_credentials_are_kept_and_rotate_only_on_policy_change(acl, owner):
    predictable = acl.create(acl_inputs(acl, owner)).outs
    generated_inputs = acl_inputs(acl, owner, credentials="generated")
    assert acl.diff("id", predictable, generated_inputs).replaces == []
    generated = acl.update("id", predictable, generated_inputs).outs
    assert generated["password"] != predictable["password"]
    assert can_log_in(owner, generated["password"]) and not can_log_in(owner, predictable["password"])
    again = acl.update("id", generated, generated_inputs).outs  # a re-up never rotates it
    assert again["password"] == generated["password"]


def test_acl_logs_in_with_the_project_name_and_keeps_an_earlier_hashed_password(acl, owner, kadmin):
    """Predictable is the project's name. A principal an earlier release made holds `dev-<sha256>`, which
    its services hold too: a re-up, a refresh and an update keep it; a `rotation` moves it to the name."""
    inputs = acl_inputs(acl, owner)
    outs = acl.create(inputs).outs
    assert outs["password"] == owner and can_log_in(owner, owner)
    hashed = hashed_password(Identity.from_props(inputs), owner)
    set_password(kadmin, owner, hashed, "test")  # what an earlier release's create set, its state beside it
    earlier = {**outs, "password": hashed}
    assert acl.diff("id", earlier, inputs).changes is False
    assert acl.read("id", earlier).outs == earlier  # no drift
    changed = acl_inputs(acl, owner, operations=["read", "describe"])
    kept = acl.update("id", earlier, changed).outs
    assert kept["password"] == hashed and can_log_in(owner, hashed)
    opted = acl.update("id", kept, acl_inputs(acl, owner, operations=["read", "describe"], rotation=0)).outs
    assert opted["password"] == owner and can_log_in(owner, owner) and not can_log_in(owner, hashed)


def test_acl_retained_delete_keeps_the_principal_and_purge_removes_it(acl, owner, kadmin):
    outs = acl.create(acl_inputs(acl, owner)).outs
    acl.delete("id", outs)
    assert can_log_in(owner, outs["password"])
    acl.delete("id", {**outs, "purge": True})
    assert kadmin.describe_acls(everything(f"User:{owner}")).result(timeout=TIMEOUT) == []
    assert not can_log_in(owner, outs["password"])
    assert marker_of(acl, kadmin, f"acl:{owner}") is None
    acl.delete("id", {**outs, "purge": True})  # already gone is fine


def test_foreign_principal_is_a_conflict_and_untouched(acl, owner, kadmin):
    upsert = UserScramCredentialUpsertion(owner, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"theirs-123")
    kadmin.alter_user_scram_credentials([upsert])[owner].result(timeout=TIMEOUT)
    with pytest.raises(Conflict, match="devstack does not manage"):
        acl.create(acl_inputs(acl, owner))
    assert can_log_in(owner, "theirs-123")
    assert kadmin.describe_acls(everything(f"User:{owner}")).result(timeout=TIMEOUT) == []


def test_principal_marked_for_another_project_is_a_conflict(acl, owner, kadmin):
    outs = acl.create(acl_inputs(acl, owner)).outs
    marker = json.dumps({"managed-by": "devstack", "owner": "intruder", "stack": "other"}, sort_keys=True)
    write_marker(instance(acl), f"acl:{owner}", marker)
    with pytest.raises(Conflict, match="belongs to project 'intruder'"):
        acl.create(acl_inputs(acl, owner, operations=["all"]))
    assert can_log_in(owner, outs["password"])


@pytest.mark.parametrize(
    ("params", "field", "reason"),
    [
        ({"operations": []}, "params.operations", "at least 1 item"),
        ({"operations": ["fly"]}, "params.operations.0", "'read', 'write'"),
        ({"groupOperations": ["write"]}, "params.groupOperations.0", "'read', 'describe' or 'delete'"),
        ({"prefix": "other."}, "params.prefix", "Extra inputs are not permitted"),
    ],
    ids=["no-operations", "unknown-operation", "group-write", "prefix-is-not-a-param"],
)
def test_acl_bad_params_fail_check_naming_the_field(acl, owner, params, field, reason):
    found = failures(acl, props("kafka", "kafka", "acl", owner, owner, params))
    assert field in found and reason in found[field], found


def test_acl_operations_are_a_set(acl, owner):
    inputs = acl_inputs(acl, owner, operations=["write", "read", "read"])
    assert inputs["params"]["operations"] == ["read", "write"]


# --- engine down -------------------------------------------------------------------------------


def test_engine_down_names_engine_address_and_fix(configure, owner):
    provider = configure(Topic())
    provider._instances["kafka"] = provider._instances["kafka"].model_copy(update={"port": 1})
    with pytest.raises(EngineUnavailable, match=r"kafka instance 'kafka' at 127\.0\.0\.1:1.*tools\.engines start kafka"):
        provider.create(topic_inputs(provider, owner))


@contextmanager
def broker_stalled():
    """The local broker stopped (SIGSTOP) with its connections open, as a machine that hangs. Kept short:
    under the broker's 9 s session, so it comes back with its registration whole."""
    pid = load("kafka").running_pid()
    assert pid, "the kafka engine is not running from this checkout (`python -m tools.engines start kafka`)"
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_broker_that_stops_answering_after_the_connect_is_named_with_its_fix(topic, acl, owner, monkeypatch):
    """Every wait on it had failed as a bare TimeoutError or a raw KafkaException traceback, after 30 s."""
    outs = topic.create(topic_inputs(topic, owner)).outs
    acl_outs = acl.create(acl_inputs(acl, owner)).outs
    monkeypatch.setattr(providers.kafka, "REQUEST_TIMEOUT", 1.0)
    monkeypatch.setattr(ledger, "configured_provider", lambda config, engine, kind: topic)
    stalled = stopped_answering("kafka", "kafka", 29092)
    wider = props("kafka", "kafka", "topic", "wide", owner, {"replicationFactor": 2})
    with broker_stalled():
        with pytest.raises(EngineUnavailable, match=stalled) as described:
            topic.read("id", outs)  # the topic's describe
        assert described.value.cause.endswith("(no answer within 1s)")
        with pytest.raises(EngineUnavailable, match=stalled):
            acl.read("id", acl_outs)  # the registry's metadata
        with pytest.raises(EngineUnavailable, match=stalled):
            topic.check({}, wider)  # the cluster's brokers, for a replication factor
        with pytest.raises(ledger.EngineError, match=stalled.removeprefix("cannot ")):
            ledger.drop_data({}, Identity.from_props(outs), {**outs, "purge": True})  # `devstack rm --purge-data`
        with pytest.raises(EngineUnavailable, match=stalled):
            scan.scan(instance(topic), {"topic"})  # `devstack resource gc`
    assert topic.read("id", outs).id == "id"  # nothing was lost meanwhile


def test_wrong_admin_password_says_the_credential_is_rejected(configure, owner):
    provider = configure(Topic())
    provider._instances["kafka"] = provider._instances["kafka"].model_copy(update={"admin_password": SecretStr("wrong")})
    with pytest.raises(EngineUnavailable, match="SASL authentication error.*admin credential in the stack config"):
        provider.create(topic_inputs(provider, owner))


def test_purge_never_drops_a_topic_the_registry_gives_to_another_project(topic, owner, kadmin):
    outs = topic.create(topic_inputs(topic, owner)).outs
    marker = json.dumps({"managed-by": "devstack", "owner": "intruder", "stack": "other"}, sort_keys=True)
    write_marker(instance(topic), f"topic:{owner}.orders", marker)
    with pytest.raises(Conflict, match="registry gives it to project 'intruder'.*nothing was dropped"):
        topic.delete("id", {**outs, "purge": True})
    assert describe(kadmin, f"{owner}.orders") is not None


def test_a_purge_keeps_the_marker_another_workspace_wrote_while_it_waited(topic, owner, kadmin, monkeypatch):
    """Workspace 1 deletes the topic and waits for it to go; workspace 2 (same project) makes it anew
    meanwhile. The tombstone used to erase workspace 2's marker: every later up refused the topic."""
    import providers.kafka

    inputs = topic_inputs(topic, owner)
    outs = topic.create(inputs).outs
    wait = providers.kafka.wait_until
    again: dict = {}

    def made_again_meanwhile(*args, **kwargs):
        wait(*args, **kwargs)
        monkeypatch.setattr(providers.kafka, "wait_until", wait)
        again.update(topic.create({**inputs, "stack": "ws2"}).outs)

    monkeypatch.setattr(providers.kafka, "wait_until", made_again_meanwhile)
    topic.delete("id", {**outs, "purge": True})
    assert describe(kadmin, f"{owner}.orders") is not None
    assert topic.read("id", again).id == "id"  # still marked as the project's: the ledger keeps it (blank: forgotten)
    topic.delete("id", {**again, "purge": True})


# --- sanitized naming: explicit names are the engine's, grants reach them by name ------------------


def test_an_explicit_topic_name_is_the_topic_and_the_acl_grants_it_by_name(acl, topic, owner, kadmin):
    name = f"{owner}_events"  # outside the project's prefix `<owner>.`
    made = topic.create(checked(topic, props("kafka", "kafka", "topic", name, owner, naming=SANITIZED))).outs
    assert (made["topic"], made["naming"]) == (name, SANITIZED)
    inputs = checked(acl, {**props("kafka", "kafka", "acl", owner, owner, naming=SANITIZED),
                           "reach": [name, f"{owner}.orders"]})
    outs = acl.create(inputs).outs

    def granted():
        return {(b.restype, b.name, b.resource_pattern_type)
                for b in kadmin.describe_acls(everything(f"User:{owner}")).result(timeout=TIMEOUT)}

    assert (ResourceType.TOPIC, name, ResourcePatternType.LITERAL) in granted()
    assert (ResourceType.TOPIC, f"{owner}.orders", ResourcePatternType.LITERAL) not in granted()  # the prefix has it
    assert produce(owner, outs["password"], name, b"mine") is None
    read = acl.read("id", outs).outs
    assert read["aclInSync"] is True and acl.diff("id", read, inputs).changes is False
    narrowed = {**inputs, "reach": []}
    assert acl.diff("id", read, narrowed).changes is True
    acl.update("id", read, narrowed)
    assert (ResourceType.TOPIC, name, ResourcePatternType.LITERAL) not in granted()


def test_an_acl_never_grants_another_projects_topic_by_name(acl, topic, owner, kadmin):
    theirs = topic.create(checked(topic, props("kafka", "kafka", "topic", f"{owner}_theirs", f"{owner}_b",
                                               naming=SANITIZED))).outs["topic"]
    with pytest.raises(Conflict, match=f"topic '{theirs}' does not belong to project '{owner}'"):
        acl.create(checked(acl, {**props("kafka", "kafka", "acl", owner, owner, naming=SANITIZED), "reach": [theirs]}))
    assert not kadmin.describe_acls(everything(f"User:{owner}")).result(timeout=TIMEOUT)
    assert marker_of(acl, kadmin, f"acl:{owner}") is None  # refused before anything was made


def test_a_topic_within_another_projects_acl_prefix_is_refused_both_ways(acl, topic, owner, kadmin):
    other = f"{owner}_b"
    acl.create(checked(acl, props("kafka", "kafka", "acl", other, other)))
    inside = f"{other}.mine"
    with pytest.raises(Conflict, match=f"within reach of the acls of project '{other}'"):
        topic.create(checked(topic, props("kafka", "kafka", "topic", inside, owner, naming=SANITIZED)))
    assert describe(kadmin, inside) is None
    # The other way round: a topic already there keeps an acl whose prefix would reach it from being made.
    third = f"{owner}_c"
    topic.create(checked(topic, props("kafka", "kafka", "topic", f"{third}.early", owner, naming=SANITIZED)))
    with pytest.raises(Conflict, match=f"topic '{third}.early' of another project is within its reach"):
        acl.create(checked(acl, props("kafka", "kafka", "acl", third, third)))
