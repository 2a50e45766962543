"""Kafka over TLS: topics and acls against the broker whose client listener is SASL_SSL only, the acl's
exports logging in over a verified connection, and a wrong CA or server name said at once."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from components.templates import engine_template
from providers.errors import EngineUnavailable, Unsupported
from providers.lifecycle import is_stale
from providers.kafka.acl import Acl
from providers.kafka.topic import Topic
from tests.providers.conftest import props
from tests.providers.tls.conftest import CA, OFFSET
from tests.waiting import eventually
from tools.engines.base import TlsFiles
from tools.engines.kafka import api_versions_ok, server_properties
from tools.engines.ports import PORTS
from tools.engines.tls import ensure_tls_files

ADDRESS = f"127.0.0.1:{PORTS['kafka'] + OFFSET}"
#: A client certificate the TLS engines' CA signed (the broker checks one a client presents).
CLIENT_CERT = {"certFile": str(CA.parent / "client.pem"), "keyFile": str(CA.parent / "client-key.pem")}


def checked(provider, kind: str, name: str, owner: str, params: dict | None = None) -> dict:
    result = provider.check({}, props("kafka", "kafka", kind, name, owner, params, purge=True))
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def exports(provider, kind: str, outs: dict) -> dict[str, str]:
    """The kind's exports as a service receives them: rendered with the instance's TLS values."""
    known = {**provider._instances["kafka"].template_values(), **outs}
    return {name: export.render(known) for name, export in engine_template("kafka").kinds[kind].exports.items()}


def produced(settings: dict[str, Any], topic: str) -> KafkaError | None:
    """Produce one message with `settings`; the delivery error, or None once delivered."""
    reports: list = []
    producer = Producer({**settings, "log_level": 0, "message.timeout.ms": 15000})
    producer.produce(topic, b"m", on_delivery=lambda err, _msg: reports.append(err))
    return eventually(lambda: producer.poll(0.5) is None or reports, 20, f"a delivery report for {topic}")[0]


@pytest.fixture
def made(over_tls):
    """Each (provider, outs) appended is deleted (purged) at the end, the last first (gone already is fine)."""
    created: list[tuple[Any, dict]] = []
    yield created
    for provider, outs in reversed(created):
        provider.delete("id", outs)


def test_topics_and_acls_live_die_and_stay_apart_over_tls(over_tls, owner, made):
    topic, acl = over_tls(Topic(), "kafka"), over_tls(Acl(), "kafka", **CLIENT_CERT)
    other = f"{owner}_b"
    made.append((topic, topic.create(checked(topic, "topic", "orders", other)).outs))
    outs = {kind: provider.create(checked(provider, kind, name, owner)).outs
            for kind, provider, name in (("topic", topic, "orders"), ("acl", acl, owner))}
    made += [(topic, outs["topic"]), (acl, outs["acl"])]
    for kind, provider in (("topic", topic), ("acl", acl)):
        assert not is_stale(provider.read("id", outs[kind]).outs)

    # Update in place: more partitions; one more operation.
    for kind, provider, name, params in (("topic", topic, "orders", {"partitions": 2}),
                                         ("acl", acl, owner, {"operations": ["read", "write", "describe", "create"]})):
        news = checked(provider, kind, name, owner, params)
        assert provider.diff("id", outs[kind], news).changes
        outs[kind] = provider.update("id", outs[kind], news).outs
        assert outs[kind]["params"] == news["params"]
        # The broker applies a grown partition count to its metadata a moment after it answers.
        eventually(lambda: provider.read("id", outs[kind]).outs["params"] == news["params"], 10,
                   f"the {kind}'s read to show the update")
    assert outs["topic"]["partitions"] == 2

    # The service's view: the exports log in over SASL_SSL, checking the broker against the CA.
    given = {**exports(acl, "acl", outs["acl"]), "user": outs["acl"]["user"], "password": outs["acl"]["password"]}
    assert (given["bootstrap"], given["securityProtocol"], given["caFile"]) == (ADDRESS, "SASL_SSL", str(CA))
    service = {"bootstrap.servers": given["bootstrap"], "security.protocol": given["securityProtocol"],
               "ssl.ca.location": given["caFile"], "sasl.mechanism": given["saslMechanism"],
               "sasl.username": given["user"], "sasl.password": given["password"]}
    assert produced(service, f"{owner}.orders") is None
    refused = produced(service, f"{other}.orders")  # another project's topic
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    for kind, provider in (("acl", acl), ("topic", topic)):
        provider.delete("id", outs[kind])
        assert is_stale(provider.read("id", outs[kind]).outs)


def test_the_exports_do_not_connect_without_the_ca(over_tls):
    """The broker's certificate is checked: the system's CAs do not vouch for it."""
    over_tls(Topic(), "kafka")  # starts the TLS broker
    problems: list[KafkaError] = []
    client = AdminClient({"bootstrap.servers": ADDRESS, "security.protocol": "SASL_SSL", "log_level": 0,
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "x", "sasl.password": "y",
                          "error_cb": problems.append})
    eventually(lambda: client.poll(0.2) is None or [p for p in problems if p.code() == KafkaError._SSL], 10,
               "the handshake to fail")



def test_a_ca_that_did_not_sign_the_broker_is_said_at_once(over_tls, owner, stranger_ca):
    topic = over_tls(Topic(), "kafka", caFile=str(stranger_ca))
    began = time.monotonic()
    with pytest.raises(EngineUnavailable) as info:
        topic.read("id", checked(topic, "topic", "orders", owner))
    assert time.monotonic() - began < 10
    assert re.match(rf"cannot connect to kafka instance 'kafka' at {ADDRESS}: .*SSL handshake failed.*certificate "
                    r"verify failed.*check shared\.kafka\.tls", str(info.value)), str(info.value)


def test_a_server_name_kafka_clients_cannot_check_is_refused(over_tls, owner):
    topic = over_tls(Topic(), "kafka", serverName="elsewhere.example")
    with pytest.raises(Unsupported, match=rf"cannot connect to kafka instance 'kafka' at {ADDRESS}: tls.serverName "
                                          r"'elsewhere.example' differs from the host.*remove shared\.kafka\.tls"):
        topic.read("id", checked(topic, "topic", "orders", owner))


@pytest.mark.parametrize("tls", [{"caFile": "stranger", "verify": False}, {"serverName": "127.0.0.1"}, CLIENT_CERT],
                         ids=["verify-off", "server-name-of-the-host", "client-certificate"])
def test_unverified_named_or_certified_tls_connects(over_tls, owner, stranger_ca, tls):
    tls = {key: str(stranger_ca) if value == "stranger" else value for key, value in tls.items()}
    topic = over_tls(Topic(), "kafka", **tls)
    assert is_stale(topic.read("id", checked(topic, "topic", "orders", owner)).outs)


def test_plaintext_exports_are_unchanged_and_tls_ones_say_sasl_ssl():
    template = engine_template("kafka")
    plain = {"host": "127.0.0.1", "port": 29092.0, "servers": None, "tls": False, "caFile": ""}
    assert {kind: {name: export.render(plain) for name, export in template.kinds[kind].exports.items()}
            for kind in ("topic", "acl")} == {
        "topic": {"bootstrap": "127.0.0.1:29092", "securityProtocol": "SASL_PLAINTEXT"},
        "acl": {"bootstrap": "127.0.0.1:29092", "saslMechanism": "SCRAM-SHA-512", "securityProtocol": "SASL_PLAINTEXT",
                "caFile": ""}}
    secure = {**plain, "tls": True, "caFile": "/ca.pem"}
    assert template.kinds["acl"].exports["securityProtocol"].render(secure) == "SASL_SSL"
    assert template.kinds["acl"].exports["caFile"].render(secure) == "/ca.pem"
    assert (template.kinds["acl"].vars["KAFKA_SECURITY_PROTOCOL"], template.kinds["acl"].vars["KAFKA_SSL_CA_LOCATION"]) \
        == ("securityProtocol", "caFile")


def test_the_health_check_speaks_tls_and_checks_the_broker(over_tls, stranger_ca):
    over_tls(Topic(), "kafka")  # starts the TLS broker
    port = PORTS["kafka"] + OFFSET
    assert api_versions_ok(port, tls=TlsFiles(CA.parent))
    assert not api_versions_ok(port, tls=TlsFiles(stranger_ca.parent))
    assert not api_versions_ok(port)


def test_the_broker_config_serves_tls_on_the_client_listener_only_and_holds_no_key(tmp_path):
    files = ensure_tls_files(tmp_path / "tls")
    text = server_properties(tmp_path, "admin", files)
    props = dict(line.split("=", 1) for line in text.splitlines()[1:])
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT"
    assert props["listener.name.client.ssl.keystore.key"] == "${dir:%s:server-key.pem}" % files.dir
    assert "PRIVATE KEY" not in text and "CERTIFICATE" not in text
    plain = server_properties(tmp_path, "admin")
    assert "ssl." not in plain and "SASL_SSL" not in plain
