"""The postgres kinds over TLS: the provider verifies the server, and the exported DSN does too."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from components.templates import engine_template
from providers.errors import EngineUnavailable
from providers.instances import SharedInstance
from providers.lifecycle import is_stale
from providers.postgres.client import admin_connection
from providers.postgres.database import Database
from providers.postgres.role import Role
from providers.postgres.user import User
from tests.providers.conftest import props
from tests.providers.tls.conftest import CA, OFFSET
from tools.engines.ports import PORTS

PORT = PORTS["postgres"] + OFFSET
ENCRYPTED = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def dsn(kind: str, instance: SharedInstance, outs: dict) -> str:
    return engine_template("postgres").kinds[kind].exports["dsn"].render({**instance.template_values(), **outs})


@pytest.fixture
def tls_admin(over_tls, admin, owner):
    """The admin's session on the TLS server (verified); drops what the test's owner left there."""
    over_tls(Database(), "pg")  # starts the server
    with psycopg.connect(host="127.0.0.1", port=PORT, user=admin["postgres"].user, password=admin["postgres"].password,
                         dbname="postgres", sslmode="verify-full", sslrootcert=str(CA), autocommit=True) as conn:
        yield conn
        for (name,) in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (owner,)).fetchall():
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        for (name,) in conn.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)", (owner,)).fetchall():
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))



def test_every_kind_over_tls_and_its_dsn_verifies_the_server(over_tls, tls_admin, owner):
    database, role, user = (over_tls(kind, "pg") for kind in (Database(), Role(), User()))
    instance = database._instances["pg"]
    inputs = database.check({}, props("postgres", "pg", "database", owner, owner)).inputs
    db = database.create(inputs).outs
    assert database.read("id", db).outs["database"] == owner
    db = database.update("id", db, {**inputs, "params": {**db["params"], "connection_limit": 7}}).outs
    assert database.read("id", db).outs["params"]["connection_limit"] == 7
    assert conninfo_to_dict(dsn("database", instance, db))["sslmode"] == "verify-full"
    with psycopg.connect(dsn("database", instance, db), connect_timeout=5) as conn:  # the export, as a service uses it
        assert conn.execute(ENCRYPTED).fetchone() == (True,)
    with pytest.raises(psycopg.OperationalError, match="no encryption"):  # the server takes TLS only
        psycopg.connect(dsn("database", instance, db), sslmode="disable", connect_timeout=5)

    role_inputs = role.check({}, props("postgres", "pg", "role", "readers", owner)).inputs
    readers = role.create(role_inputs).outs
    readers = role.update("id", readers, {**role_inputs, "params": {"inherit": False}}).outs
    assert role.read("id", readers).outs["params"]["inherit"] is False

    app = user.create(user.check({}, props("postgres", "pg", "user", "app", owner)).inputs).outs
    assert user.read("id", app).outs["user"] == f"{owner}_app"
    with psycopg.connect(dsn("user", instance, app), connect_timeout=5) as conn:
        assert conn.execute(ENCRYPTED).fetchone() == (True,)
    other = database.create(props("postgres", "pg", "database", f"{owner}x", f"{owner}x")).outs
    with pytest.raises(psycopg.OperationalError, match="permission denied"):  # isolation holds over TLS too
        psycopg.connect(dsn("user", instance, {**app, "database": other["database"]}), connect_timeout=5)

    for provider, outs in ((user, app), (role, readers), (database, other), (database, db)):
        provider.delete("id", {**outs, "purge": True})
        assert is_stale(provider.read("id", outs).outs)


@pytest.mark.parametrize("tls, cause", [
    ({"caFile": "other"}, "certificate verify failed"),
    ({"serverName": "elsewhere"}, 'does not match host name "elsewhere"'),
], ids=["wrong-ca", "wrong-server-name"])
def test_an_unverified_server_is_refused_naming_the_instance(over_tls, stranger_ca, tls, cause):
    tls = {key: str(stranger_ca) if value == "other" else value for key, value in tls.items()}
    instance = over_tls(Database(), "pg", **tls)._instances["pg"]
    with pytest.raises(EngineUnavailable) as refused:
        with admin_connection(instance):
            pass
    message = str(refused.value)
    assert f"postgres instance 'pg' at 127.0.0.1:{PORT}" in message and cause in message
    assert "check shared.pg.tls" in message


@pytest.mark.parametrize("tls", [
    {"verify": False}, {"serverName": "localhost"},
    {"certFile": str(CA.with_name("client.pem")), "keyFile": str(CA.with_name("client-key.pem"))},
], ids=["unverified", "server-name", "client-cert"])
def test_verify_off_the_certificate_s_name_or_a_client_cert_connects(over_tls, stranger_ca, tls):
    # Unverified even with a CA that did not sign the server's certificate; the name checked against the
    # certificate while connecting to 127.0.0.1; a client certificate the server checks against its CA.
    instance = over_tls(Database(), "pg", **({"caFile": str(stranger_ca)} if tls.get("verify") is False else {}),
                        **tls)._instances["pg"]
    with admin_connection(instance) as conn:
        ssl, client = conn.execute("SELECT ssl, client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    assert ssl is True and ("CN=devstack-client" in (client or "")) == ("certFile" in tls)


def test_plaintext_dsn_is_unchanged_and_tls_adds_only_what_applies(tmp_path):
    outs = {"user": "shop", "password": "p@ss", "host": "127.0.0.1", "port": 25432, "database": "shop"}
    plain = SharedInstance(name="pg", engine="postgres", port=25432, adminUser="a", adminSecret="s")
    assert dsn("database", plain, outs) == "postgresql://shop:p%40ss@127.0.0.1:25432/shop"
    sslmode = engine_template("postgres").kinds["user"].exports["sslmode"]
    assert sslmode.render({**plain.template_values(), **outs}) == "prefer"  # libpq's own default
    ca = tmp_path / "ca.pem"
    ca.write_text("a CA bundle")
    with_ca = SharedInstance.model_validate({**plain.model_dump(by_alias=True), "tls": {"caFile": str(ca),
                                                                                       "serverName": "db.internal"}})
    assert conninfo_to_dict(dsn("user", with_ca, outs)) == {
        "user": "shop", "password": "p@ss", "host": "db.internal", "port": "25432", "dbname": "shop",
        "sslmode": "verify-full", "sslrootcert": str(ca), "hostaddr": "127.0.0.1"}
    system = SharedInstance.model_validate({**plain.model_dump(by_alias=True), "tls": True})
    assert dsn("database", system, outs).endswith("/shop?sslmode=verify-full&sslrootcert=system")
    unverified = SharedInstance.model_validate({**plain.model_dump(by_alias=True), "tls": {"verify": False}})
    assert dsn("database", unverified, outs).endswith("/shop?sslmode=require")
