"""Instance addresses: IPv6 hosts and a cluster's several bootstrap addresses (Kafka, NATS).

The rules (spelling, refusals, identity, what services receive) are pure; the
engine tests reach each local engine over IPv6 through a forwarder listening
on [::1] (the engines listen on 127.0.0.1), and a cluster through two
bootstrap addresses of which the first is closed.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Callable, Iterator

import psycopg
import pytest
import redis

from components import templates
from components.validation import WorkspaceInvalid, validate
from providers.base import KindProvider
from providers.description import server_address
from providers.instances import SharedInstance, canonical_host, join_address, split_address
from providers.kafka.topic import Topic
from providers.lifecycle import is_stale
from providers.localstack.queue import Queue
from providers.minio.bucket import MinioBucket
from providers.nats.account import Account
from providers.redis.acl_user import AclUser
from tests.conftest import configured
from tests.faults.proxy import Proxy
from tests.providers.conftest import props

INSTANCE = {"adminUser": "admin", "adminSecret": "key"}


# --- spelling -------------------------------------------------------------------

@pytest.mark.parametrize("written, kept", [
    ("::1", "::1"),
    ("[::1]", "::1"),
    ("0:0:0:0:0:0:0:1", "::1"),
    ("2001:DB8::10", "2001:db8::10"),
    ("[::1:5432]", "::1:5432"),  # bracketed: the whole address, never a port
    ("127.0.0.1", "127.0.0.1"),
    ("kafka-1.internal", "kafka-1.internal"),
], ids=["bare", "bracketed", "long", "upper-case", "bracketed-with-digits", "ipv4", "name"])
def test_a_host_is_kept_in_one_spelling(written, kept):
    assert canonical_host(written) == kept


@pytest.mark.parametrize("written, says", [
    ("::1:5432", "ambiguous: an IPv6 address or '::1' with port 5432? Give the address alone "
                 '(host: "::1", port: 5432)'),
    ("", "is not a host"),
    (" ::1", "is not a host"),
    ("[kafka-1]", "is not a host"),
    ("fe80::1%eth0", "has a zone (%eth0)"),
    ("http://db", "is not a host"),
], ids=["host-with-port", "empty", "space", "bracketed-name", "zone", "url"])
def test_what_is_no_host_is_refused_with_what_to_write(written, says):
    with pytest.raises(ValueError) as refused:
        canonical_host(written)
    assert says in str(refused.value) and ("give" in str(refused.value) or "Give" in str(refused.value))


@pytest.mark.parametrize("text, address", [
    ("127.0.0.1:29092", ("127.0.0.1", 29092)),
    ("[::1]:29092", ("::1", 29092)),
    ("kafka-1:9092", ("kafka-1", 9092)),
], ids=["ipv4", "ipv6", "name"])
def test_host_port_splits_and_joins_back(text, address):
    assert split_address(text) == address
    assert join_address(*address) == text


@pytest.mark.parametrize("text", ["::1:29092", "kafka-1", "kafka-1:0", "kafka-1:http", "[::1]"],
                         ids=["unbracketed-ipv6", "no-port", "port-0", "named-port", "no-port-ipv6"])
def test_what_is_no_host_port_is_refused(text):
    with pytest.raises(ValueError, match=r"give host:port, an IPv6 address in brackets"):
        split_address(text)


def test_one_server_is_one_identity_whatever_its_spelling():
    """Ownership and gc match objects by the server they live on: loopback is one server by any name."""
    spellings = ["127.0.0.1", "localhost", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"]
    assert {server_address(host) for host in spellings} == {"127.0.0.1"}
    objects = {Topic.engine_object(host, 29092, "orders", "shop") for host in spellings}
    assert len(objects) == 1 and next(iter(objects))[:3] == ("kafka", "127.0.0.1", 29092)
    assert server_address("[2001:db8::10]") == server_address("2001:DB8::10") == "2001:db8::10"
    assert server_address("127.0.0.2") == "127.0.0.2"  # another loopback address may be another server


# --- the instance model and its validation ------------------------------------------

def instance(**fields: Any) -> SharedInstance:
    return SharedInstance.model_validate({"name": "k", "engine": "kafka", **INSTANCE, **fields})


def test_an_ipv6_instance_is_bracketed_wherever_host_and_port_are_joined():
    ipv6 = instance(host="[::1]", port=29092)
    assert (ipv6.host, ipv6.address, ipv6.bootstrap, ipv6.urls("nats")) == (
        "::1", "[::1]:29092", "[::1]:29092", ["nats://[::1]:29092"])
    assert ipv6.several is None  # one address: no `servers` output


def test_a_cluster_lists_its_servers_and_its_first_is_the_instance_address():
    cluster = instance(servers=["127.0.0.1:29092", "[0::1]:29093"])
    assert (cluster.host, cluster.port, cluster.address) == ("127.0.0.1", 29092, "127.0.0.1:29092")
    assert cluster.addresses == (("127.0.0.1", 29092), ("::1", 29093))
    assert cluster.bootstrap == cluster.several == "127.0.0.1:29092,[::1]:29093"
    assert cluster.urls("nats") == ["nats://127.0.0.1:29092", "nats://[::1]:29093"]
    # host and port beside servers must be its first, as a dump of the instance writes them
    assert SharedInstance.model_validate(cluster.model_dump(by_alias=True)) == cluster


WORKSPACE = {"name": "test", "shared": {"bus": {"engine": "kafka", "host": "127.0.0.1", "port": 29092, **INSTANCE}}}


def problems(tmp_path: Path, bus: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) of each problem of a workspace whose instance `bus` is `bus`, one project using it."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "devstack.yaml").write_text(
        "apiVersion: devstack/v1\nkind: Project\nname: shop\nresources:\n  - uses: bus\n    kind: topic\n")
    workspace = {**WORKSPACE, "shared": {"bus": {**INSTANCE, **bus}}, "projects": ["p/devstack.yaml"]}
    try:
        validate(workspace, tmp_path, None, "stacks/Pulumi.test.yaml")
    except WorkspaceInvalid as invalid:
        return [(p.path, p.message) for p in invalid.problems]
    return []


FIELD = "config.devstack:workspace.shared.bus"


@pytest.mark.parametrize("bus, field, says", [
    ({"engine": "kafka", "host": "::1:29092", "port": 29092}, "host", 'host: "::1", port: 29092'),
    ({"engine": "kafka", "servers": []}, "servers", "give a list of the cluster's bootstrap addresses"),
    ({"engine": "kafka", "servers": "a:1,b:2"}, "servers", "give a list of the cluster's bootstrap addresses"),
    ({"engine": "kafka", "servers": ["::1:29092"]}, "servers", 'an IPv6 address in brackets ("[::1]:9092")'),
    ({"engine": "kafka", "servers": ["a:1", "a:1"]}, "servers", "list each server once"),
    ({"engine": "kafka", "servers": ["a:1"], "host": "b", "port": 1}, "servers",
     "the first server must be host:port (b:1): give servers alone"),
    ({"engine": "postgres", "servers": ["a:1", "b:1"]}, "servers", "postgres takes one address: give host and port"),
], ids=["ambiguous-host", "empty-list", "not-a-list", "unbracketed", "twice", "host-beside", "not-a-cluster"])
def test_a_bad_address_names_the_file_field_and_fix(tmp_path, bus, field, says):
    found = problems(tmp_path, bus)
    assert [path for path, _ in found] == [f"{FIELD}.{field}"], found
    assert says in found[0][1]


@pytest.mark.parametrize("bus", [
    {"engine": "kafka", "host": "[::1]", "port": 29092},
    {"engine": "kafka", "servers": ["127.0.0.1:29092", "[::1]:29092"]},
    {"engine": "kafka", "servers": ["[0::1]:29092", "127.0.0.1:29092"], "host": "::1", "port": 29092},
], ids=["bracketed-host", "servers", "servers-with-their-first-as-host"])
def test_good_addresses_pass_validation(tmp_path, bus):
    assert problems(tmp_path, bus) == []


# --- what services receive ---------------------------------------------------

@pytest.mark.parametrize("engine, kind, export, attributes, rendered", [
    ("postgres", "database", "dsn", {"user": "u", "password": "p@", "database": "d"}, "postgresql://u:p%40@[::1]:5/d"),
    ("redis", "acl_user", "url", {"user": "u", "password": "p"}, "redis://u:p@[::1]:5"),
    ("redis", "redis_index", "url", {"db": 3}, "redis://[::1]:5/3"),
    ("minio", "bucket", "endpoint", {}, "http://[::1]:5"),
    ("localstack", "queue", "endpoint", {}, "http://[::1]:5"),
    ("nats", "stream", "url", {"servers": None}, "nats://[::1]:5"),
    ("nats", "stream", "url", {"servers": "127.0.0.1:4,[::1]:5"}, "nats://127.0.0.1:4,nats://[::1]:5"),
    ("kafka", "topic", "bootstrap", {"servers": None}, "[::1]:5"),
    ("kafka", "acl", "bootstrap", {"servers": "127.0.0.1:4,[::1]:5"}, "127.0.0.1:4,[::1]:5"),
], ids=["postgres-dsn", "redis-url", "redis-index-url", "minio-endpoint", "localstack-endpoint", "nats-url",
        "nats-urls", "kafka-bootstrap", "kafka-bootstraps"])
def test_exports_bracket_ipv6_and_carry_every_server(engine, kind, export, attributes, rendered):
    template = templates.engine_template(engine).kinds[kind].exports[export]
    assert template.render({"host": "::1", "port": 5.0, "tls": False, **attributes}) == rendered  # Pulumi's numbers are floats


def test_an_instance_reference_carries_every_server():
    cluster = instance(servers=["127.0.0.1:29092", "[::1]:29092"])
    assert templates.instance_attributes("kafka", cluster)["bootstrap"] == "127.0.0.1:29092,[::1]:29092"
    nats = SharedInstance.model_validate({"name": "n", "engine": "nats", **INSTANCE, "host": "::1", "port": 4222})
    assert templates.instance_attributes("nats", nats)["url"] == "nats://[::1]:4222"


# --- the engines, over IPv6 ------------------------------------------------------

def closed_port() -> int:
    """A loopback port nothing listens on (a cluster member that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def over_ipv6(admin, local_workspace) -> Iterator[Callable[..., tuple[KindProvider, Proxy]]]:
    """`over_ipv6(provider, name, spelling)`: `provider` configured with the local workspace, but its instance
    `name` at `spelling` (`::1` or `[::1]`) on a forwarder listening on [::1]; `dead_first=True`: at
    `servers: [<a closed port>, [::1]:<forwarder>]` instead."""
    passwords = {engine: credential.password for engine, credential in admin.items()}
    proxies: list[Proxy] = []

    def configure(provider: KindProvider, name: str, spelling: str = "[::1]", dead_first: bool = False):
        entry = local_workspace["shared"][name]
        proxies.append(Proxy(int(entry["port"]), str(entry["host"]), listen="::1").start())
        port = proxies[-1].port
        address = ({"servers": [f"127.0.0.1:{closed_port()}", f"[::1]:{port}"]} if dead_first
                   else {"host": spelling, "port": port})
        moved = {**{k: v for k, v in entry.items() if k not in ("host", "port")}, **address}
        return configured(provider, {**local_workspace, "shared": {**local_workspace["shared"], name: moved}},
                          passwords), proxies[-1]

    yield configure
    for proxy in proxies:
        proxy.stop()


def made_read_deleted(provider: KindProvider, engine: str, name: str, kind: str, owner: str) -> dict:
    """Create, read and delete (purged) one resource; its outputs as create returned them."""
    inputs = provider.check({}, props(engine, name, kind, owner, owner, purge=True)).inputs
    created = provider.create(inputs)
    try:
        assert not is_stale(provider.read(created.id, created.outs).outs)
    finally:
        provider.delete(created.id, created.outs)
    assert is_stale(provider.read(created.id, created.outs).outs)
    return created.outs


def rendered(engine: str, kind: str, export: str, outs: dict) -> str:
    template = templates.engine_template(engine).kinds[kind].exports[export]
    return template.render({name: outs.get(name) for name in template.uses})


def test_postgres_over_ipv6_and_its_dsn_logs_in(over_ipv6, owner):
    from providers.postgres.database import Database

    provider, proxy = over_ipv6(Database(), "pg", "::1")
    inputs = provider.check({}, props("postgres", "pg", "database", owner, owner, purge=True)).inputs
    created = provider.create(inputs)
    try:
        assert (created.outs["host"], created.outs["port"]) == ("::1", proxy.port)
        dsn = rendered("postgres", "database", "dsn", created.outs)
        assert f"@[::1]:{proxy.port}/" in dsn
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (created.outs["user"],)
        assert not is_stale(provider.read(created.id, created.outs).outs)
    finally:
        provider.delete(created.id, created.outs)
    assert is_stale(provider.read(created.id, created.outs).outs)


def test_redis_over_ipv6_and_its_url_logs_in(over_ipv6, owner, admin):
    provider, proxy = over_ipv6(AclUser(), "cache", "[::1]")
    inputs = provider.check({}, props("redis", "cache", "acl_user", owner, owner, purge=True)).inputs
    created = provider.create(inputs)
    try:
        url = rendered("redis", "acl_user", "url", created.outs)
        assert url.endswith(f"@[::1]:{proxy.port}")
        with redis.Redis.from_url(url, socket_timeout=5) as client:
            assert client.ping()  # logged in as the tenant: a wrong login fails the AUTH before it
    finally:
        provider.delete(created.id, created.outs)
    assert is_stale(provider.read(created.id, created.outs).outs)


@pytest.mark.parametrize("make, name, engine, kind", [
    (MinioBucket, "objects", "minio", "bucket"),
    (Queue, "aws", "localstack", "queue"),
], ids=["minio-bucket", "localstack-queue"])
def test_aws_api_engines_over_ipv6(over_ipv6, owner, make, name, engine, kind):
    provider, proxy = over_ipv6(make(), name, "[::1]")
    outs = made_read_deleted(provider, engine, name, kind, owner)
    assert (outs["host"], outs["port"]) == ("::1", proxy.port)
    assert rendered(engine, kind, "endpoint", outs) == f"http://[::1]:{proxy.port}"


@pytest.mark.parametrize("make, name, spelling, kind, export, scheme", [
    (Account, "events", "::1", "account", "url", "nats://"),
    (Topic, "kafka", "[::1]", "topic", "bootstrap", ""),
], ids=["nats", "kafka"])
@pytest.mark.parametrize("dead_first", [False, True], ids=["ipv6", "first-server-down"])
def test_clusters_over_ipv6_and_with_their_first_server_down(over_ipv6, owner, make, name, spelling, kind, export,
                                                             scheme, dead_first):
    """The clients try every server: a cluster whose first bootstrap address is closed still answers, and
    services get every address (`nats://a,nats://b`; Kafka's `a,b`)."""
    provider, proxy = over_ipv6(make(), name, spelling, dead_first=dead_first)
    engine = make.engine
    outs = made_read_deleted(provider, engine, name, kind, owner)
    exported = rendered(engine, kind, export, outs)
    if dead_first:
        first = f"127.0.0.1:{outs['port']}"
        assert outs["servers"] == f"{first},[::1]:{proxy.port}"
        assert exported == f"{scheme}{first},{scheme}[::1]:{proxy.port}"
    else:
        assert (outs["host"], outs["port"], outs["servers"]) == ("::1", proxy.port, None)
        assert exported == f"{scheme}[::1]:{proxy.port}"
