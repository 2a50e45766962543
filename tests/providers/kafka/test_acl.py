"""The kafka `acl` kind against the real local broker (KRaft, SASL/SCRAM, StandardAuthorizer)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from providers.credentials import hashed_password
from providers.errors import Conflict
from providers.identity import SANITIZED, Identity
from providers.kafka.acl import Acl, set_password
from providers.kafka.client import MARKER_TOPIC
from providers.kafka.owners import write_marker
from providers.lifecycle import is_stale, without_clocks
from tests.kafka_clients import TIMEOUT, consume_one, produce
from tests.providers.conftest import props
from tests.providers.kafka.helpers import (acl_inputs, can_log_in, checked, code, everything, failures, instance,
                                           marker_of, tenant_admin, topic_inputs)
from tests.waiting import eventually
from tools.engines.ports import PORTS


def test_acl_create_then_create_again_adopts_and_the_principal_works(acl, topic, owner, kadmin):
    inputs = acl_inputs(acl, owner)
    first = acl.create(inputs)
    second = acl.create(inputs)
    outs = second.outs
    assert first.id == second.id == f"kafka/kafka/acl/{owner}@{owner}"
    assert first.outs["password"] == outs["password"]
    assert {k: outs[k] for k in ("host", "port", "user", "principal", "prefix")} == {
        "host": "127.0.0.1", "port": PORTS["kafka"], "user": owner, "principal": f"User:{owner}", "prefix": f"{owner}."}
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
    refreshed = eventually(lambda: "read" not in (r := acl.read("id", outs).outs)["params"]["operations"] and r,
                           TIMEOUT, "the read to miss the grant removed out of band")
    assert refreshed["params"]["operations"] == ["create", "describe"]
    acl.update("id", refreshed, news)
    assert acl.read("id", outs).outs["params"]["operations"] == ["create", "describe", "read"]
    # Its credential deleted out of band: the principal is gone, blank id.
    deletion = UserScramCredentialDeletion(owner, ScramMechanism.SCRAM_SHA_512)
    kadmin.alter_user_scram_credentials([deletion])[owner].result(timeout=TIMEOUT)
    # The broker answering describes learns of it a moment later.
    eventually(lambda: is_stale(acl.read("id", outs).outs), TIMEOUT, "the principal to read as gone")


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
    refreshed = eventually(lambda: not (r := acl.read("id", outs).outs)["aclInSync"] and r, TIMEOUT,
                           "the read to report the grants added outside")
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
    assert without_clocks(acl.read("id", earlier).outs) == without_clocks(earlier)  # no drift
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
