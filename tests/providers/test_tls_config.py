"""The `tls:` block of a shared instance: what it accepts, what it refuses, and the client context it makes."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from providers.instances import SharedInstance, instances_from_config
from tools.engines.tls import SERVER_NAME, ensure_tls_files

BASE = {"name": "cache", "engine": "redis", "host": "127.0.0.1", "port": 26379, "adminUser": "a", "adminSecret": "k"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ensure_tls_files(tmp_path_factory.mktemp("pki"))


def instance(**fields) -> SharedInstance:
    return SharedInstance.model_validate({**BASE, **fields})


@pytest.mark.parametrize("written", [None, False, {"enabled": False, "caFile": "/nowhere.pem"}],
                         ids=["absent", "false", "disabled-block"])
def test_no_tls_is_plaintext(written):
    shared = instance(**({} if written is None else {"tls": written}))
    assert shared.tls is None
    assert shared.scheme("redis", "rediss") == "redis"
    assert shared.template_values() == {"tls": False, "caFile": "", "serverName": "", "tlsVerify": False}


def test_tls_true_verifies_against_the_system_store_by_the_host_name():
    shared = instance(tls=True)
    assert shared.scheme("redis", "rediss") == "rediss"
    assert shared.tls.ca_path() is None and shared.tls.verify
    context = shared.tls.ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert shared.template_values() == {"tls": True, "caFile": "", "serverName": "127.0.0.1", "tlsVerify": True}


def test_a_relative_ca_file_is_kept_absolute(pki, monkeypatch):
    monkeypatch.chdir(pki.dir)
    shared = instance(tls={"caFile": "ca.pem", "serverName": SERVER_NAME})
    assert shared.tls.ca_path() == str(pki.ca)
    assert shared.template_values()["caFile"] == str(pki.ca)
    assert shared.template_values()["serverName"] == SERVER_NAME


@pytest.mark.parametrize("tls, field, says", [
    ({"caFile": "/nowhere/ca.pem"}, "tls.caFile", "is no readable file"),
    ({"caFile": "CA", "caSecret": "ca"}, "tls", "caFile or caSecret, not both"),
    ({"certFile": "CERT"}, "tls", "needs both certFile and keyFile"),
    ({"keySecret": "key"}, "tls", "needs both certFile and keyFile"),
    ({"caSecret": "devstack:ca"}, "tls.caSecret", "has a namespace"),
    ({"serverName": " db "}, "tls.serverName", "blank or with spaces"),
    ({"verify": "sometimes"}, "tls.verify", "valid boolean"),
    ({"ca": "x"}, "tls.ca", "Extra inputs"),
], ids=["missing-file", "two-cas", "cert-without-key", "key-without-cert", "namespaced", "spaced", "verify",
        "unknown-field"])
def test_a_bad_tls_block_names_its_field(pki, tls, field, says):
    tls = {key: str(pki.ca) if value == "CA" else str(pki.client_cert) if value == "CERT" else value
           for key, value in tls.items()}
    with pytest.raises(ValidationError) as raised:
        instance(tls=tls)
    [error] = raised.value.errors()
    assert ".".join(str(part) for part in error["loc"]) == field
    assert says in error["msg"]
    assert "a-password" not in str(raised.value)


class _Config:
    def __init__(self, values):
        self.values = values

    def get(self, key):
        return self.values.get(key)


def test_ca_and_client_key_from_stack_config_secrets_are_written_privately(pki):
    config = _Config({"devstack:workspace": {"name": "w", "shared": {"cache": {
        **{k: v for k, v in BASE.items() if k != "name"},
        "tls": {"caSecret": "cacheCa", "certFile": str(pki.client_cert), "keySecret": "cacheKey"}}}},
        "devstack:k": "a-password", "devstack:cacheCa": pki.ca.read_text(), "devstack:cacheKey": pki.client_key.read_text()})
    tls = instances_from_config(config)["cache"].tls
    assert isinstance(tls.key_pem, SecretStr)
    ca, (cert, key) = Path(tls.ca_path()), tls.client_cert()
    assert ca.read_text() == pki.ca.read_text() and cert == str(pki.client_cert)
    assert Path(key).read_text() == pki.client_key.read_text()
    assert Path(key).stat().st_mode & 0o077 == 0 and ca.parent == Path(key).parent
    assert "BEGIN" not in repr(tls) and "BEGIN" not in str(instances_from_config(config)["cache"].model_dump())


def test_a_secret_the_config_lacks_is_named():
    tls = instance(tls={"caSecret": "cacheCa"}).tls
    with pytest.raises(LookupError, match="devstack:cacheCa, which the stack config does not set"):
        tls.ssl_context()


def _served_once(pki, **wrap) -> tuple[int, threading.Thread]:
    """A loopback TLS server with the made server certificate that answers one connection with b"ok"."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(pki.cert, pki.key)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        with listener:
            conn, _ = listener.accept()
            try:
                with server.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


@pytest.mark.parametrize("tls, server_name, answers", [
    ({"caFile": "CA"}, "127.0.0.1", True),
    ({"caFile": "CA", "serverName": SERVER_NAME}, SERVER_NAME, True),
    ({"caFile": "CA", "serverName": "db.elsewhere"}, "db.elsewhere", False),
    ({}, "127.0.0.1", False),
    ({"verify": False}, "127.0.0.1", True),
], ids=["by-address", "by-name", "wrong-name", "system-store", "unverified"])
def test_the_context_verifies_the_made_certificates(pki, tls, server_name, answers):
    shared = instance(tls={key: str(pki.ca) if value == "CA" else value for key, value in tls.items()})
    port, thread = _served_once(pki)
    context = shared.tls.ssl_context()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        if answers:
            with context.wrap_socket(raw, server_hostname=shared.tls.server_name_for(shared.host)) as conn:
                assert conn.recv(2) == b"ok"
        else:
            with pytest.raises(ssl.SSLCertVerificationError):
                context.wrap_socket(raw, server_hostname=shared.tls.server_name_for(shared.host))
    thread.join(5)
    assert server_name == shared.tls.server_name_for(shared.host)
