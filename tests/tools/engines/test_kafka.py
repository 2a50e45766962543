"""The local Kafka engine: start/stop/status, admin health, and that ACLs are enforced.

Runs the real broker (tools/engines/kafka.py) on its loopback port. When the
project's engines are already running (scripts/test starts them before
pytest), that broker is tested with its admin credential from the stack
config and left running; otherwise a scratch broker is started in a
temporary engines dir with fixed test credentials and stopped afterwards.
Tenant users, ACLs and topics made here carry a per-run suffix and are
removed again.
"""
from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest

from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.providers.conftest import engine_under_test
from tests import kafka_clients
from tests.waiting import eventually
from tools.engines import base, kafka  # noqa: E402
from tools.engines.ports import PORTS

# These start and stop engines of their own on the real ports: scripts/test runs
# them (`-m lifecycle`) before it starts the shared engines for everything else.
pytestmark = pytest.mark.lifecycle

STARTED_HERE = {"engine": False}
RUN = uuid.uuid4().hex[:8]  # keeps runs against a kept engine apart
ADDRESS = f"127.0.0.1:{PORTS['kafka']}"
# the fixture replaces these with the stack config's admin when it reuses a running broker
ADMIN = SimpleNamespace(user="admin", password="kafka-test-admin-password")
USER_A = SimpleNamespace(user=f"tenant-a-{RUN}", password="tenant-a-password")
USER_B = SimpleNamespace(user=f"tenant-b-{RUN}", password="tenant-b-password")
TOPIC_A = f"a.t1-{RUN}"


@pytest.fixture(scope="module")
def engine(request, tmp_path_factory):
    """The broker under test; ADMIN becomes its admin credential (see module docstring)."""
    yield from engine_under_test(request, tmp_path_factory, kafka.ENGINE, ADMIN, STARTED_HERE)


def cfg(cred, mechanism="SCRAM-SHA-512"):
    return kafka_clients.settings(cred.user, cred.password, mechanism)


def produce(cred, topic, value: bytes):
    return kafka_clients.produce(cred.user, cred.password, topic, value)


def consume_one(cred, topic, group):
    return kafka_clients.consume_one(cred.user, cred.password, topic, group)


@pytest.fixture(scope="module")
def tenants(engine):
    """Users A and B, topic a.t1-RUN, prefixed ACLs: A on `a.`, B on `b.`; removed afterwards."""
    client = AdminClient(cfg(ADMIN))
    upserts = [UserScramCredentialUpsertion(u.user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                            u.password.encode()) for u in (USER_A, USER_B)]
    for future in client.alter_user_scram_credentials(upserts).values():
        future.result(timeout=30)
    for future in client.create_topics([NewTopic(TOPIC_A, 1, 1)]).values():
        future.result(timeout=30)
    # tenant A: prefixed ACLs on its own topics and groups only
    acls = [AclBinding(ResourceType.TOPIC, "a.", ResourcePatternType.PREFIXED, f"User:{USER_A.user}", "*",
                       op, AclPermissionType.ALLOW)
            for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)]
    acls.append(AclBinding(ResourceType.GROUP, "a.", ResourcePatternType.PREFIXED, f"User:{USER_A.user}", "*",
                           AclOperation.READ, AclPermissionType.ALLOW))
    # tenant B: the same on its own prefix, so any denial below is about a.*
    acls += [AclBinding(ResourceType.TOPIC, "b.", ResourcePatternType.PREFIXED, f"User:{USER_B.user}", "*",
                        AclOperation.ALL, AclPermissionType.ALLOW),
             AclBinding(ResourceType.GROUP, "b.", ResourcePatternType.PREFIXED, f"User:{USER_B.user}", "*",
                        AclOperation.ALL, AclPermissionType.ALLOW)]
    for future in client.create_acls(acls).values():
        future.result(timeout=30)
    # the controller has committed them; wait until the broker's authorizer has them too
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    eventually(lambda: not set(acls) - set(client.describe_acls(everything).result(timeout=30)), 30,
               "the created ACLs to become visible on the broker", interval=0.2)
    yield client
    client = AdminClient(cfg(ADMIN))  # the broker may have been restarted meanwhile
    for user in (USER_A, USER_B):
        principal = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user.user}",
                                     None, AclOperation.ANY, AclPermissionType.ANY)
        for future in client.delete_acls([principal]).values():
            future.result(timeout=30)
    for future in client.alter_user_scram_credentials(
            [UserScramCredentialDeletion(u.user, ScramMechanism.SCRAM_SHA_512) for u in (USER_A, USER_B)]).values():
        future.result(timeout=30)
    for future in client.delete_topics([TOPIC_A]).values():
        future.result(timeout=30)




# --- lifecycle -------------------------------------------------------------
def test_start_is_idempotent_and_status_healthy(engine):
    pid = engine.running_pid()
    assert pid is not None
    again = engine.start(ADMIN)
    assert "already running" in again and str(pid) in again
    status = engine.status()
    assert status.running and status.healthy and status.pid == pid
    assert status.address == ADDRESS
    assert kafka.api_versions_ok()


def listening_hosts(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of LISTEN sockets on port."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            host, _, port_hex = local.rpartition(":")
            if state == "0A" and int(port_hex, 16) == port:
                hosts.add(host)
    return hosts


def test_listeners_only_on_loopback(engine):
    # 127.0.0.1, ::1 and ::ffff:127.0.0.1 (a JVM binds IPv4 through a dual-stack socket)
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    for port in (kafka.CLIENT_PORT, kafka.CONTROLLER_PORT, kafka.INTERNAL_PORT):
        hosts = listening_hosts(port)
        assert hosts and hosts <= loopback, (port, hosts)


def test_no_secret_in_files_or_command_line(engine):
    pid = engine.running_pid()
    cmdline = base.process_cmdline(pid)
    assert ADMIN.password not in cmdline
    internal = dict(line.split("=", 1) for line in
                    open(f"/proc/{pid}/environ", "rb").read().decode().split("\0") if "=" in line)
    secret = internal[kafka.SECRET_ENV]
    assert len(secret) >= 32 and secret not in cmdline
    for path in engine.dir.iterdir():
        if path.is_file():
            text = path.read_text(errors="replace")
            assert ADMIN.password not in text, path
            assert secret not in text, path
    assert "${env:%s}" % kafka.SECRET_ENV in engine.config_file.read_text()


def test_admin_health_both_scram_mechanisms(engine):
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        metadata = AdminClient(cfg(ADMIN, mechanism)).list_topics(timeout=15)
        assert list(metadata.brokers) == [1]


def test_wrong_admin_password_is_rejected(engine):
    wrong = SimpleNamespace(user=ADMIN.user, password="not-the-password")
    with pytest.raises(base.EngineError) as info:
        engine.ensure_credential(wrong)
    message = str(info.value)
    assert "kafka" in message and ADDRESS in message and str(engine.log_file) in message
    assert "rejects the admin credential" in message


def test_controller_and_internal_ports_give_no_anonymous_access(engine):
    for port in (kafka.CONTROLLER_PORT, kafka.INTERNAL_PORT):
        for extra in ({}, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                           "sasl.username": kafka.BROKER_PRINCIPAL, "sasl.password": "guess"}):
            client = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0, **extra})
            with pytest.raises(KafkaException):
                client.list_topics(timeout=5)


# --- ACLs ------------------------------------------------------------------
def test_owner_can_produce_and_consume(tenants):
    assert produce(USER_A, TOPIC_A, b"from-a") is None
    assert consume_one(USER_A, TOPIC_A, f"a.g-{RUN}") == b"from-a"


def test_other_tenant_is_denied(tenants):
    err = produce(USER_B, TOPIC_A, b"from-b")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    got = consume_one(USER_B, TOPIC_A, f"b.g-{RUN}")
    assert isinstance(got, KafkaError) and got.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # B cannot create topics in A's namespace, nor grant itself access
    b_admin = AdminClient(cfg(USER_B))
    with pytest.raises(KafkaException) as info:
        b_admin.create_topics([NewTopic(f"a.sneaky-{RUN}", 1, 1)])[f"a.sneaky-{RUN}"].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grab = AclBinding(ResourceType.TOPIC, "a.", ResourcePatternType.PREFIXED, f"User:{USER_B.user}", "*",
                      AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as info:
        b_admin.create_acls([grab])[grab].result(timeout=30)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_unknown_user_is_rejected(engine):
    stranger = SimpleNamespace(user="nobody", password="nothing")
    with pytest.raises(KafkaException):
        AdminClient(cfg(stranger)).list_topics(timeout=5)


def test_admin_can_do_everything(tenants):
    assert produce(ADMIN, TOPIC_A, b"from-admin") is None
    assert consume_one(ADMIN, TOPIC_A, f"admin-{RUN}") == b"from-a"
    found = tenants.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(timeout=30)
    assert any(b.principal == f"User:{USER_A.user}" and b.name == "a." for b in found)
    topic = f"b.admin-made-{RUN}"
    tenants.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    tenants.delete_topics([topic])[topic].result(timeout=30)


def test_stop_ends_exactly_our_process(engine, tenants):
    if not STARTED_HERE["engine"]:
        pytest.skip("not run: the engine under test is the project's running one, which a test must "
                    "not stop; this runs when no engine is up (a scratch engine is then started)")
    pid = engine.running_pid()
    # a pid file naming a live process that is not ours is never signalled
    real = engine.pid_file.read_text()
    engine.pid_file.write_text(f"{os.getpid()} {base.process_start_time(os.getpid())}\n")
    assert engine.running_pid() is None
    engine.pid_file.write_text(real)
    assert engine.running_pid() == pid
    message = engine.stop()
    assert f"stopped (pid {pid})" in message
    assert base.process_start_time(pid) is None
    assert not engine.pid_file.exists()
    assert engine.status().running is False
    # data survives a restart: the topic and A's ACLs are still there
    engine.start(ADMIN)
    assert consume_one(USER_A, TOPIC_A, f"a.g2-{RUN}") == b"from-a"



def test_start_reapplies_an_admin_credential_the_broker_no_longer_accepts(engine, tenants):
    """The broker's admin credential drifted (Kafka 4.4 can drop the bootstrap one on
    restart; here it is replaced out of band): start re-applies the stack's credential
    through the broker's own principal instead of failing."""
    if not STARTED_HERE["engine"]:
        pytest.skip("not run: the engine under test is the project's running one, which a test must "
                    "not stop; this runs when no engine is up (a scratch engine is then started)")
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):  # one per request
        drifted = UserScramCredentialUpsertion(ADMIN.user, ScramCredentialInfo(mechanism, 8192), b"drifted-password")
        tenants.alter_user_scram_credentials([drifted])[ADMIN.user].result(timeout=30)
    engine.stop()
    engine.start(ADMIN)
    assert AdminClient(cfg(ADMIN)).list_topics(timeout=10).topics  # the stack's admin logs in again
