"""Kafka end to end: the real CLI, a two-project workspace, a real broker with its authorizer on.

Each project declares a topic and an `acl` (a SCRAM principal with prefixed
ACLs, and a literal grant on each of its topics named outside that prefix:
A's explicitly named one). The run goes through up, the principals at work
(own topic yes, the other's no), preview (no changes), a second up (nothing
changes), a refresh after an out-of-band change, removal of A's declarations (retained:
topic, data and principal stay) and a purged removal of B's topic.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)
from pulumi import automation as auto

from tests.e2e.conftest import changes, e2e_stack, explicit_name, local_workspace, write_project
from tests.kafka_clients import TIMEOUT, consume_one, produce, settings
from tools.engines.ports import PORTS

KAFKA_PORT = PORTS["kafka"]






def admin_client(admin) -> AdminClient:
    return AdminClient(settings(admin["kafka"].user, admin["kafka"].password))


def topic_exists(admin, name: str) -> bool:
    client = admin_client(admin)  # held in a variable: a collected client cancels its futures
    try:
        client.describe_topics(TopicCollection([name]))[name].result(timeout=TIMEOUT)
        return True
    except KafkaException as err:
        if err.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
        raise




@pytest.fixture
def projects(admin):
    """Two fresh project names; afterwards their topics (the explicitly named ones of `explicit_name`
    included), ACLs, credentials and markers are removed."""
    suffix = secrets.token_hex(3)
    names = [f"e2e-a-{suffix}", f"e2e-b-{suffix}"]
    yield names
    from providers.instances import SharedInstance
    from providers.kafka.owners import read_markers, write_marker

    def ours(name: str) -> bool:
        return name.split(".")[0] in names or name.endswith(f"-{suffix}")

    client = admin_client(admin)
    topics = [t for t in client.list_topics(timeout=TIMEOUT).topics if ours(t)]
    for future in (client.delete_topics(topics).values() if topics else []):
        future.result(timeout=TIMEOUT)
    filters = [AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{n}", None,
                                AclOperation.ANY, AclPermissionType.ANY) for n in names]
    for future in client.delete_acls(filters).values():
        future.result(timeout=TIMEOUT)
    for name in names:
        try:
            deletion = UserScramCredentialDeletion(name, ScramMechanism.SCRAM_SHA_512)
            client.alter_user_scram_credentials([deletion])[name].result(timeout=TIMEOUT)
        except KafkaException:
            pass  # never created, or already gone
    instance = SharedInstance(name="kafka", engine="kafka", port=KAFKA_PORT, adminUser=admin["kafka"].user,
                              adminSecret="kafkaAdmin", admin_password=admin["kafka"].password)
    for key in read_markers(instance, client):
        if ours(key.split(":", 1)[1]):
            write_marker(instance, key, None)


def test_two_projects_up_isolation_preview_refresh_retain_purge(project_dir, offline_env, pulumi_command, admin, projects):
    a, b = projects
    orders = explicit_name(a, "orders")  # the topic itself, outside A's prefix: A's acl reaches it by name
    files = [
        write_project(project_dir, a, [
            {"uses": "kafka", "kind": "acl"},
            {"uses": "kafka", "kind": "topic", "name": orders, "params": {"partitions": 2}},
        ]),
        write_project(project_dir, b, [
            {"uses": "kafka", "kind": "acl", "credentials": "generated"},
            {"uses": "kafka", "kind": "topic"},
        ]),
    ]
    stack = auto.Stack.create("e2e", local_workspace(project_dir, offline_env, pulumi_command))
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({
        "name": "e2e",
        "shared": {"kafka": {"engine": "kafka", "host": "127.0.0.1", "port": KAFKA_PORT,
                             "adminUser": admin["kafka"].user, "adminSecret": "kafkaAdmin"}},
        "projects": files,
    })))
    stack.set_config("devstack:kafkaAdmin", auto.ConfigValue(admin["kafka"].password, secret=True))

    up = stack.up(on_output=print)
    assert changes(up) == {"create": 8}  # stack, workspace, 2 projects, 2 ACL principals, 2 topics
    out_a, out_b = (up.outputs[n].value["resources"] for n in projects)
    acl_a, acl_b = out_a[f"kafka/acl/{a}"], out_b[f"kafka/acl/{b}"]
    assert (acl_a["user"], acl_a["principal"], acl_a["prefix"]) == (a, f"User:{a}", f"{a}.")
    assert acl_a["bootstrap"] == f"127.0.0.1:{KAFKA_PORT}" and acl_a["saslMechanism"] == "SCRAM-SHA-512"
    assert (out_a[f"kafka/topic/{orders}"]["topic"], out_a[f"kafka/topic/{orders}"]["partitions"]) == (orders, 2)
    assert out_b[f"kafka/topic/{b}"]["topic"] == b
    # Passwords are stored encrypted: the state file holds ciphertext, never the value (a predictable one
    # is the project's name, known to all by design).
    backend = Path(offline_env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    state_text = (backend / ".pulumi" / "stacks" / "devstack" / "e2e.json").read_text()
    assert acl_a["password"] == a and acl_b["password"] not in state_text
    acls = [r for r in json.loads(state_text)["checkpoint"]["latest"]["resources"] if r["type"].endswith("kafka:acl")]
    assert len(acls) == 2 and all("ciphertext" in r["outputs"]["password"] for r in acls)

    # Each principal works on its own topic (A's by a literal grant on its name), in its own group ...
    literal = AclBindingFilter(ResourceType.TOPIC, orders, ResourcePatternType.LITERAL, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    acl_admin = admin_client(admin)
    granted = acl_admin.describe_acls(literal, request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert {binding.principal for binding in granted} == {f"User:{a}"}
    assert produce(a, acl_a["password"], orders, b"a-1") is None
    assert consume_one(a, acl_a["password"], orders, f"{a}.workers") == b"a-1"
    assert produce(b, acl_b["password"], b, b"b-1") is None
    # ... and is refused on the other's topic and group.
    denied = produce(a, acl_a["password"], b, b"intrusion")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied = consume_one(b, acl_b["password"], orders, f"{b}.workers")
    assert isinstance(denied, KafkaError) and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied = consume_one(b, acl_b["password"], b, f"{a}.workers")
    assert isinstance(denied, KafkaError) and denied.code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    # Unchanged workspace: preview shows nothing to do and a second up changes nothing.
    assert changes(stack.preview()) == {}
    assert changes(stack.up()) == {}

    # Out-of-band change to A's topic config: refresh notices it, the next up repairs it.
    change = ConfigResource(ResourceType.TOPIC, orders, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    client = admin_client(admin)
    list(client.incremental_alter_configs([change]).values())[0].result(timeout=TIMEOUT)
    assert changes(stack.refresh()) == {"update": 1}
    assert changes(stack.up()) == {"update": 1}
    resource = ConfigResource(ResourceType.TOPIC, orders)
    (future,) = client.describe_configs([resource]).values()
    assert future.result(timeout=TIMEOUT)["retention.ms"].value != "60000"

    # Removing A's declarations retains its topic, its data and its principal.
    write_project(project_dir, a, [])
    assert changes(stack.up()) == {"delete": 2}
    assert consume_one(a, acl_a["password"], orders, f"{a}.again") == b"a-1"

    # Purge asked for explicitly, then removal: B's topic is dropped, A's stays.
    write_project(project_dir, b, [{"uses": "kafka", "kind": "acl", "credentials": "generated"},
                                   {"uses": "kafka", "kind": "topic", "purge": True}])
    assert changes(stack.up()) == {"update": 1}
    write_project(project_dir, b, [{"uses": "kafka", "kind": "acl", "credentials": "generated"}])
    assert changes(stack.up()) == {"delete": 1}
    assert not topic_exists(admin, b)
    assert topic_exists(admin, orders)


def test_a_refused_nested_param_is_named_in_the_preview_error(project_dir, offline_env, pulumi_command, admin,
                                                              projects):
    """A check failure on `params.partitions` reads as such; the engine looks property values up at the
    top level only and had printed `value {<nil>}`."""
    a, _ = projects
    shared = {"kafka": {"engine": "kafka", "host": "127.0.0.1", "port": KAFKA_PORT,
                        "adminUser": admin["kafka"].user, "adminSecret": "kafkaAdmin"}}

    def declare(partitions: int) -> str:
        return write_project(project_dir, a, [{"uses": "kafka", "kind": "topic", "params": {"partitions": partitions}}])

    stack = e2e_stack(project_dir, offline_env, pulumi_command, shared, [declare(2)],
                      {"kafkaAdmin": admin["kafka"].password})
    stack.up()
    declare(1)
    with pytest.raises(auto.errors.CommandError) as refused:
        stack.preview()
    message = str(refused.value)
    assert "has a problem: params.partitions: the topic has 2 partitions and 1 were asked for" in message
    assert "<nil>" not in message
