"""The Redis kinds over TLS: the provider verifies the server, and the exported rediss:// URL does too."""

from __future__ import annotations

import json

import pytest
import redis

from components.templates import engine_template
from providers.errors import EngineUnavailable
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.redis.acl_user import AclUser
from providers.redis.client import ALLOCATIONS_KEY, admin_client
from providers.redis.redis_index import RedisIndex
from tests.providers.conftest import props
from tests.providers.redis.helpers import free_owner
from tests.providers.tls.conftest import CA, OFFSET
from tools.engines.ports import PORTS

PORT = PORTS["redis"] + OFFSET


def url(kind: str, instance: SharedInstance, outs: dict) -> str:
    return engine_template("redis").kinds[kind].exports["url"].render({**instance.template_values(), **outs})


@pytest.fixture
def tls_admin(over_tls, admin, owner):
    """The admin's client of the TLS server (verified); frees what the test's owner left there."""
    over_tls(RedisIndex(), "cache")  # starts the server
    with redis.Redis(host="127.0.0.1", port=PORT, username=admin["redis"].user, password=admin["redis"].password,
                     ssl=True, ssl_ca_certs=str(CA), decode_responses=True) as client:
        yield client
        free_owner(client, owner)



def test_every_kind_over_tls_and_its_url_verifies_the_server(over_tls, tls_admin, owner):
    index, acl_user = over_tls(RedisIndex(), "cache"), over_tls(AclUser(), "cache")
    instance = index._instances["cache"]
    inputs = index.check({}, props("redis", "cache", "redis_index", owner, owner)).inputs
    db = index.create(inputs).outs
    assert index.read("id", db).outs["db"] == db["db"]
    moved = index.update("id", db, {**inputs, "stack": "other-stack"}).outs
    assert moved["db"] == db["db"]
    db = moved
    assert json.loads(tls_admin.hget(ALLOCATIONS_KEY, owner))["stack"] == "other-stack"
    assert url("redis_index", instance, db).startswith(f"rediss://127.0.0.1:{PORT}/{db['db']}?ssl_ca_certs=")

    user_inputs = acl_user.check({}, props("redis", "cache", "acl_user", owner, owner)).inputs
    user = acl_user.create(user_inputs).outs
    with redis.Redis.from_url(url("acl_user", instance, user), db=db["db"], decode_responses=True) as client:
        client.set(f"{owner}:k", "v")  # the export, as a service uses it: TLS, the CA verified
        user = acl_user.update("id", user, {**user_inputs, "params": {**user_inputs["params"], "read_only": True}}).outs
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.set(f"{owner}:k", "w")
        assert acl_user.read("id", user).outs["aclInSync"] is True

    other = f"{owner}b"
    stranger = acl_user.create(props("redis", "cache", "acl_user", other, other)).outs
    with redis.Redis.from_url(url("acl_user", instance, stranger), db=db["db"]) as intruder:
        with pytest.raises(redis.exceptions.NoPermissionError):  # isolation holds over TLS too
            intruder.get(f"{owner}:k")
    with pytest.raises(redis.exceptions.ConnectionError):  # the server takes TLS only
        redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=5, retry=None).ping()

    for provider, outs in ((acl_user, stranger), (acl_user, user), (index, db)):
        provider.delete("id", {**outs, "purge": True})
        assert is_stale(provider.read("id", outs).outs)


@pytest.mark.parametrize("tls, cause", [
    ({"caFile": "other"}, "certificate verify failed"),
    ({"serverName": "elsewhere"}, "Hostname mismatch"),
], ids=["wrong-ca", "wrong-server-name"])
def test_an_unverified_server_is_refused_naming_the_instance(over_tls, stranger_ca, tls, cause):
    tls = {key: str(stranger_ca) if value == "other" else value for key, value in tls.items()}
    instance = over_tls(RedisIndex(), "cache", **tls)._instances["cache"]
    with pytest.raises(EngineUnavailable) as refused:
        with admin_client(instance):
            pass
    message = str(refused.value)
    assert f"redis instance 'cache' at 127.0.0.1:{PORT}" in message and cause in message
    assert "check shared.cache.tls" in message


@pytest.mark.parametrize("tls", [
    {"verify": False}, {"serverName": "localhost"},
    {"certFile": str(CA.with_name("client.pem")), "keyFile": str(CA.with_name("client-key.pem"))},
], ids=["unverified", "server-name", "client-cert"])
def test_verify_off_the_certificate_s_name_or_a_client_cert_connects(over_tls, stranger_ca, tls):
    # Unverified even with a CA that did not sign the server's certificate; the name checked against the
    # certificate while connecting to 127.0.0.1; a client certificate the server checks against its CA.
    instance = over_tls(RedisIndex(), "cache", **({"caFile": str(stranger_ca)} if tls.get("verify") is False else {}),
                        **tls)._instances["cache"]
    with admin_client(instance) as client:
        assert client.ping() is True


def test_plaintext_urls_are_unchanged_and_tls_adds_only_what_applies(tmp_path):
    outs = {"user": "shop", "password": "p@ss", "host": "127.0.0.1", "port": 26379, "db": 3}
    plain = SharedInstance(name="cache", engine="redis", port=26379, adminUser="a", adminSecret="s")
    assert url("redis_index", plain, outs) == "redis://127.0.0.1:26379/3"
    assert url("acl_user", plain, outs) == "redis://shop:p%40ss@127.0.0.1:26379"
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA bundle")
    with_ca = SharedInstance.model_validate({**plain.model_dump(by_alias=True), "tls": {"caFile": str(ca)}})
    parsed = redis.connection.parse_url(url("acl_user", with_ca, outs))
    assert parsed["connection_class"] is redis.SSLConnection and parsed["ssl_ca_certs"] == str(ca)
    assert (parsed["username"], parsed["password"]) == ("shop", "p@ss")
    system = SharedInstance.model_validate({**plain.model_dump(by_alias=True), "tls": True})
    assert url("redis_index", system, outs) == "rediss://127.0.0.1:26379/3"
    unverified = SharedInstance.model_validate({**plain.model_dump(by_alias=True), "tls": {"verify": False}})
    parsed = redis.connection.parse_url(url("redis_index", unverified, outs))
    assert (parsed["ssl_cert_reqs"], parsed["ssl_check_hostname"]) == ("none", False)
