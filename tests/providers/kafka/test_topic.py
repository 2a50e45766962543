"""The kafka `topic` kind against the real local broker (KRaft, SASL/SCRAM, StandardAuthorizer)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AlterConfigOpType,
                                   ConfigEntry, ConfigResource, NewPartitions, NewTopic, ResourcePatternType,
                                   ResourceType, ScramMechanism, UserScramCredentialDeletion)

from providers.errors import Conflict, InvalidSpec, Unsupported
from providers.identity import SANITIZED
from providers.kafka.acl import Acl
from providers.kafka.owners import read_markers, write_marker
from providers.kafka.topic import Topic, dynamic_configs
from providers.lifecycle import is_stale
from tests.kafka_clients import TIMEOUT, consume_one, produce
from tests.providers.conftest import props
from tests.providers.kafka.helpers import (checked, describe, everything, failures, instance, marker_of, topic_configs,
                                           topic_inputs)
from tests.waiting import eventually
from tools.engines.ports import PORTS


def test_topic_create_then_create_again_adopts_without_change(topic, owner, kadmin):
    inputs = topic_inputs(topic, owner, partitions=2, config={"retention.ms": 3600000})
    first = topic.create(inputs)
    second = topic.create(inputs)
    assert first.id == second.id == f"kafka/kafka/topic/orders@{owner}"
    assert {k: second.outs[k] for k in Topic.attributes} == {
        "host": "127.0.0.1", "port": PORTS["kafka"], "servers": None, "topic": f"{owner}.orders", "partitions": 2}
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
    refreshed = eventually(lambda: (r := topic.read("id", outs).outs)["params"]["config"] == {"retention.ms": "60000"} and r,
                           TIMEOUT, "the read to show the config changed out of band")
    assert topic.diff("id", refreshed, news).changes and topic.diff("id", refreshed, news).replaces == []
    topic.update("id", refreshed, news)
    assert topic_configs(kadmin, f"{owner}.orders") == {"retention.ms": "7200000"}
    # Dropped out of band: blank id.
    kadmin.delete_topics([f"{owner}.orders"])[f"{owner}.orders"].result(timeout=TIMEOUT)
    eventually(lambda: is_stale(topic.read("id", outs).outs), TIMEOUT, "the topic dropped out of band to read as gone")


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
    # The broker acknowledges the change before every metadata read shows it.
    eventually(lambda: dynamic_configs(kadmin, f"{owner}.orders", "topic").get("cleanup.policy") == "compact", 10,
               "the topic's cleanup.policy to read compact")


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
    eventually(lambda: describe(kadmin, f"{owner}.orders") is None, 30, "the deleted topic to be gone")
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
    import providers.kafka.topic

    inputs = topic_inputs(topic, owner)
    outs = topic.create(inputs).outs
    wait = providers.kafka.topic.wait_until
    again: dict = {}

    def made_again_meanwhile(*args, **kwargs):
        wait(*args, **kwargs)
        monkeypatch.setattr(providers.kafka.topic, "wait_until", wait)
        again.update(topic.create({**inputs, "stack": "ws2"}).outs)

    monkeypatch.setattr(providers.kafka.topic, "wait_until", made_again_meanwhile)
    topic.delete("id", {**outs, "purge": True})
    assert describe(kadmin, f"{owner}.orders") is not None
    assert not is_stale(topic.read("id", again).outs)  # still marked as the project's: active in the ledger
    topic.delete("id", {**again, "purge": True})


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
