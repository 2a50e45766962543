"""`devstack doctor` against the real local engines, never stopping one.

An engine is made "stopped" by pointing its instance at a closed loopback
port in a temporary workspace config; only that engine may degrade.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from devstack import doctor
from devstack.errors import EngineError
from providers import registry
from tests.devstack.conftest import INSTANCES, project_text, shared_config
from tests.waiting import eventually
from tools.engines.base import closed_port


def config_for(admin, shared: dict, projects: list[str], passwords: dict[str, str] | None = None) -> dict:
    """A stack config as `pulumi config --show-secrets` gives it: workspace plus admin secrets."""
    config = {"devstack:workspace": json.dumps({"name": "doc", "shared": shared, "projects": projects})}
    for engine, instance in INSTANCES.items():
        config[f"devstack:{instance}Admin"] = (passwords or {}).get(engine, admin[engine].password)
    return config


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "doc").mkdir()
    (tmp_path / "doc" / "devstack.yaml").write_text(project_text("doc"))  # declares an aws queue
    return tmp_path


def test_healthy_workspace_through_the_command(scratch, validator):
    code, out, err = scratch.verb("doctor", "--json", yes=False)
    assert code == 0, out + err
    report = json.loads(out)
    validator("doctor.schema.json", report)
    assert report["ok"] is True and report["declarations"] == {"ok": True, "problems": []}
    assert [(p["name"], p["ok"]) for p in report["toolchain"]] == [
        ("pulumi CLI", True), ("language host", True), ("dynamic-provider plugin", True)]
    assert report["toolchain"][0]["found"] == doctor.pinned_version()
    by_name = {i["name"]: i for i in report["instances"]}
    assert set(by_name) == set(INSTANCES.values())
    for engine, name in INSTANCES.items():
        health = by_name[name]
        assert (health["ok"], health["reachable"], health["admin"]) == (True, True, True), health
        assert health["version"] and health["kinds"] == list(registry.kinds(engine))
        assert health["degradedVerbs"] == []
    assert by_name["aws"]["declaredKinds"] == ["queue"]
    assert scratch.verb("doctor", "--quiet", yes=False) == (0, "", "")  # the exit code alone says it
    # The scratch project written in spec 27's form: its declared kinds count for the instance all the same.
    scratch.file.write_text(scratch.file.read_text().replace("uses: aws", "uses: workspace.shared.aws"))
    code, out, _ = scratch.verb("doctor", "--json", yes=False)
    assert {i["name"]: i for i in json.loads(out)["instances"]}["aws"]["declaredKinds"] == ["queue"]


@pytest.mark.parametrize("engine", list(INSTANCES))
def test_one_stopped_engine_degrades_only_that_engine(admin, root, engine, monkeypatch, validator):
    port = closed_port()
    real_port = doctor._local_port
    # As if this machine's engine lived on that port: the fix is then to start it.
    monkeypatch.setattr(doctor, "_local_port", lambda e: port if e == engine else real_port(e))
    config = config_for(admin, shared_config(admin, {engine: port}), ["doc/devstack.yaml"])
    report = doctor.diagnose(config, root, "doc")
    assert report.ok is False
    by_engine = {h.engine: h for h in report.instances}
    down = by_engine.pop(engine)
    assert (down.reachable, down.admin, down.kinds, down.ok) == (False, None, [], False)
    assert down.problem.startswith(f"not reachable at 127.0.0.1:{port}")
    assert down.fix == f"python -m tools.engines start {engine}"
    assert f"resource create {engine} <kind> --instance {INSTANCES[engine]}" in down.degraded_verbs()
    assert all(h.ok for h in by_engine.values()), [(h.name, h.problem) for h in by_engine.values() if not h.ok]
    assert all(p.ok for p in report.toolchain) and report.problems == []
    validator("doctor.schema.json", report.to_json())


@pytest.mark.parametrize("engine", ["postgres", "redis", "minio", "nats", "kafka"])
def test_an_engine_that_accepts_connections_but_stopped_answering_is_reported_in_bounded_time(admin, root, engine,
                                                                                               monkeypatch):
    """Stopped with its connections open (SIGSTOP): the report had waited on PostgreSQL for ever, and for
    Kafka ended on a raw KafkaError repr."""
    from tests.faults.proxy import Proxy
    from tools.engines import load

    monkeypatch.setattr(doctor, "PROBE_LIMIT", 2.0)  # 10 s in earnest
    proxy = Proxy(load(engine).port).start()
    try:
        proxy.stall()
        config = config_for(admin, shared_config(admin, {engine: proxy.port}), ["doc/devstack.yaml"])
        down = next(h for h in doctor.diagnose(config, root, "doc").instances if h.engine == engine)
    finally:
        proxy.stop()
    assert (down.reachable, down.ok) == (True, False)
    assert down.problem == (f"it accepts connections at 127.0.0.1:{proxy.port} but did not answer the admin check "
                            f"(no answer within 2s)")
    assert down.fix == f"check {engine} at 127.0.0.1:{proxy.port}: stopped, or overloaded"


def test_a_stalled_redis_is_reported_as_not_answering_when_its_own_timeout_comes_first(admin, root):
    """The probe's own socket timeout (3s) ends before the doctor's bound: it had read as "the admin
    check failed: TimeoutError: Timeout reading from socket"."""
    from tests.faults.proxy import Proxy
    from tools.engines import load

    proxy = Proxy(load("redis").port).start()
    try:
        proxy.stall()
        config = config_for(admin, shared_config(admin, {"redis": proxy.port}), ["doc/devstack.yaml"])
        down = next(h for h in doctor.diagnose(config, root, "doc").instances if h.engine == "redis")
    finally:
        proxy.stop()
    assert down.problem == (f"it accepts connections at 127.0.0.1:{proxy.port} but did not answer the admin check "
                            f"(no answer within {doctor.TIMEOUT:.0f}s)")


def test_stopped_engine_through_the_command_exits_1(scratch, admin):
    port = closed_port()
    scratch.set_workspace(shared_config(admin, {"kafka": port}))
    code, out, _ = scratch.verb("doctor", yes=False)
    assert code == 1
    assert f"FAIL kafka      kafka      127.0.0.1:{port}" in out
    assert f"fix: start kafka at 127.0.0.1:{port} or fix devstack:workspace.shared.kafka" in out
    assert "degraded: topic add|rm; resource create kafka <kind> --instance kafka" in out
    assert out.count("  ok   ") == 3 + 5  # the toolchain and the five other instances


@pytest.mark.parametrize("engine", ["postgres", "redis", "minio", "nats", "kafka"])
def test_refused_admin_credential(admin, root, engine):
    config = config_for(admin, shared_config(admin), ["doc/devstack.yaml"], passwords={engine: "not-the-password"})
    report = doctor.diagnose(config, root, "local")
    down = next(h for h in report.instances if h.engine == engine)
    assert (down.reachable, down.admin, down.ok) == (True, False, False)
    assert down.problem.startswith("the admin credential was refused")
    # Starting the local engine writes its password into the local stack's config ...
    assert down.fix == f"python -m tools.engines start {engine}"
    assert all(h.ok for h in report.instances if h.engine != engine)
    # ... and no other stack's: there the key is set by hand.
    other = next(h for h in doctor.diagnose(config, root, "doc").instances if h.engine == engine)
    key = f"{INSTANCES[engine]}Admin"
    assert other.fix == f"set devstack:{key} to the admin password of 127.0.0.1:{other.address.split(':')[1]}"


def test_moto_refuses_a_wrong_admin_secret(admin, root):
    """The local localstack engine (moto with IAM enforced) checks the signature: a wrong admin secret is refused."""
    config = config_for(admin, shared_config(admin), ["doc/devstack.yaml"], passwords={"localstack": "wrong"})
    health = next(h for h in doctor.diagnose(config, root, "doc").instances if h.engine == "localstack")
    assert (health.admin, "the admin credential was refused" in health.problem) == (False, True)


def test_moto_names_the_services_it_does_not_isolate(admin, root):
    """From the measurements in docs/engines.md: SNS, Kinesis, DynamoDB and the secret store's services are
    checked by action alone."""
    config = config_for(admin, shared_config(admin), ["doc/devstack.yaml"])
    health = next(h for h in doctor.diagnose(config, root, "doc").instances if h.engine == "localstack")
    assert health.ok and health.version.startswith("moto")
    assert health.notes == ["per-project isolation is not enforced by the emulator for SNS, Kinesis, DynamoDB, "
                            "Secrets Manager, SSM: it checks their actions, not which resource, so a project's "
                            "access_key reaches other projects' resources there (S3 and SQS are enforced; "
                            "docs/engines.md)"]


def test_missing_or_stale_toolchain(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    parts = doctor.toolchain(empty)
    assert [(p.ok, p.fix) for p in parts] == [(False, "scripts/setup")] * 3
    stale = tmp_path / "stale"
    stale.mkdir()
    for name, body in [("pulumi", "#!/bin/sh\necho v3.1.0\n"), ("pulumi-language-python", "#!/bin/sh\n"),
                       ("pulumi-language-python-exec", "#!/bin/sh\n"),
                       ("pulumi-resource-pulumi-python", "#!/bin/sh\nexec python -m pulumi.dynamic\n")]:
        (stale / name).write_text(body)
        os.chmod(stale / name, 0o755)
    (stale / ".language-host-version").write_text("v3.1.0\n")
    cli, host, plugin = doctor.toolchain(stale)
    assert (cli.ok, cli.found, cli.expected) == (False, "v3.1.0", doctor.pinned_version())
    assert (host.ok, host.found, host.fix) == (False, "v3.1.0", "scripts/setup")
    # A shim other than the checkout's (here: Pulumi's 4-worker server) is stale too.
    assert (plugin.ok, plugin.fix) == (False, "scripts/setup")
    assert "differs from tools/pulumi-cli/pulumi-resource-pulumi-python" in plugin.problem


def test_invalid_declarations_fail_the_report(admin, root):
    (root / "doc" / "devstack.yaml").write_text(project_text("doc").replace("kind: queue", "kind: table2"))
    report = doctor.diagnose(config_for(admin, shared_config(admin), ["doc/devstack.yaml"]), root, "doc")
    assert report.ok is False
    assert any("resources[0].kind: 'table2' is not a kind of engine localstack" in p for p in report.problems)
    aws = next(h for h in report.instances if h.name == "aws")
    assert aws.ok is False and "table2" in aws.problem


def test_a_missing_admin_password_is_a_declaration_problem_as_in_preview(admin, root):
    config = config_for(admin, shared_config(admin), ["doc/devstack.yaml"])
    secret = json.loads(config["devstack:workspace"])["shared"]["aws"]["adminSecret"]
    del config[f"devstack:{secret}"]
    report = doctor.diagnose(config, root, "doc")
    assert report.ok is False
    assert any(f"shared.aws.adminSecret: config key devstack:{secret} is not set" in p for p in report.problems)


def test_an_admin_password_in_plaintext_fails_the_preview_and_the_report(scratch):
    from pulumi import automation as auto

    password = scratch.admin["postgres"].password
    scratch.stack.set_config("devstack:pgAdmin", auto.ConfigValue(password))  # no secret=True
    with pytest.raises(auto.errors.CommandError) as failed:
        scratch.stack.preview()
    assert "shared.pg.adminSecret: config key devstack:pgAdmin holds the postgres admin password in plaintext" in str(failed.value)
    code, out, _ = scratch.verb("doctor", yes=False)
    assert code == 1 and "devstack:pgAdmin holds the postgres admin password in plaintext" in out
    # A refresh runs no program, so nothing stops it: its history entry records the value as it was.
    scratch.stack.refresh()
    scratch.stack.set_config("devstack:pgAdmin", auto.ConfigValue(password, secret=True))
    code, out, err = scratch.verb("doctor", yes=False)
    assert code == 1 and "history records devstack:pgAdmin in plaintext" in out
    recorded = [line.split(": the stack's history")[0].split("error: ")[-1] for line in out.splitlines()
                if "history records" in line]
    assert len(recorded) == 1 and password in Path(recorded[0]).read_text()
    Path(recorded[0]).unlink()  # the fix the report gives
    code, out, err = scratch.verb("doctor", yes=False)
    assert code == 0, out + err


@pytest.fixture
def broken_cli(monkeypatch):
    """`pulumi` cannot run: the stack (and its secrets) cannot be opened."""
    import devstack.ledger

    def broken(*_args, **_kwargs):
        raise FileNotFoundError("pulumi")

    monkeypatch.setattr(devstack.ledger, "open_stack", broken)


def test_without_a_working_cli_the_plain_config_is_read(tmp_path, admin, broken_cli):
    """A broken CLI cannot decrypt secrets: instances are still probed, the admin check says it is unchecked."""
    shared = shared_config(admin)
    (tmp_path / "doc").mkdir()
    (tmp_path / "doc" / "devstack.yaml").write_text(project_text("doc").replace("uses: aws", "uses: pg")
                                                    .replace("kind: queue", "kind: database"))
    (tmp_path / "Pulumi.doc.yaml").write_text(json.dumps({"config": {
        "devstack:workspace": {"name": "doc", "shared": shared, "projects": ["doc/devstack.yaml"]},
        "devstack:pgAdmin": {"secure": "v1:ciphertext"}}}))
    config, root, unreadable, _url = doctor._read_config("doc", None, tmp_path)
    assert root == tmp_path and "devstack:pgAdmin" not in config and unreadable == {"devstack:pgAdmin"}
    report = doctor.diagnose(config, root, "doc", unreadable=unreadable)
    assert report.problems == []  # the password is set, only unreadable here: no declaration problem
    pg = next(h for h in report.instances if h.name == "pg")
    assert (pg.reachable, pg.admin, pg.ok) == (True, None, False)
    assert pg.problem == "no admin password in the stack config (devstack:pgAdmin)"


def test_without_a_working_cli_the_config_is_read_from_the_programs_stack_config_dir(tmp_path, broken_cli):
    """Pulumi.yaml's `stackConfigDir` says where the file is, as it does for pulumi itself."""
    (tmp_path / "Pulumi.yaml").write_text("name: doc\nruntime: python\nstackConfigDir: conf\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "Pulumi.doc.yaml").write_text(json.dumps({"config": {
        "devstack:workspace": {"name": "doc"}, "devstack:pgAdmin": {"secure": "v1:ciphertext"}}}))
    config, _root, unreadable, _url = doctor._read_config("doc", None, tmp_path)
    assert (config, unreadable) == ({"devstack:workspace": {"name": "doc"}}, {"devstack:pgAdmin"})


def test_malformed_workspace_is_a_problem_not_a_crash(root):
    config = {"devstack:workspace": json.dumps({"name": "doc", "shared": {"pg": {"engine": "postgres"}}})}
    report = doctor.diagnose(config, root, "doc")
    assert (report.ok, report.instances) == (False, [])
    assert any("shared.pg.port: is required" in p for p in report.problems), report.problems


def test_a_workspace_that_is_not_a_mapping_is_a_problem_saying_what_to_write(root):
    report = doctor.diagnose({"devstack:workspace": "hello"}, root, "doc")
    assert (report.ok, report.instances) == (False, [])
    assert len(report.problems) == 1, report.problems
    assert "devstack:workspace: not a mapping (got 'hello'): give it name, shared and projects" in report.problems[0]


def test_a_stack_without_a_workspace_says_so(root):
    report = doctor.diagnose({}, root, "doc")
    assert (report.ok, report.instances) == (False, [])
    assert len(report.problems) == 1 and "devstack:workspace is not set" in report.problems[0], report.problems


def test_an_unreadable_stack_config_is_one_error_naming_the_file_not_a_traceback(scratch, monkeypatch, tmp_path):
    """A stack config that is not YAML, or a passphrase that cannot decrypt it: the doctor and the
    verbs say which file to fix and change nothing."""
    config_file = scratch.work / f"Pulumi.{scratch.stack.name}.yaml"
    original, project = config_file.read_text(), scratch.file.read_bytes()
    config_file.write_text(original + "  bad: [\n")
    for argv in (("doctor",), ("queue", "add", "q1")):
        code, out, err = scratch.verb(*argv, yes=argv[0] != "doctor")
        assert code == EngineError.exit_code and "Traceback" not in out + err, err
        assert f"fix Pulumi.{scratch.stack.name}.yaml" in err
    config_file.write_text(original)
    wrong = tmp_path / "wrong-passphrase"
    wrong.write_text("not the passphrase")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(wrong))
    for argv in (("doctor",), ("queue", "add", "q1")):
        code, out, err = scratch.verb(*argv, yes=argv[0] != "doctor")
        assert code == EngineError.exit_code and "Traceback" not in out + err, err
        assert "PULUMI_CONFIG_PASSPHRASE" in err
    assert scratch.file.read_bytes() == project


def test_a_redis_anyone_may_log_in_to_is_not_fit_whatever_its_admin_may_do(tmp_path):
    """A Redis without requirepass passed as "admin ok" with any admin secret, while a client without
    credentials read every tenant's keys past their ACL users."""
    import shutil
    import socket
    import subprocess

    from pydantic import SecretStr

    from providers.instances import SharedInstance

    port = closed_port()
    server = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        eventually(lambda: socket.socket().connect_ex(("127.0.0.1", port)) == 0, 10, f"redis-server to listen on {port}")
        instance = SharedInstance(name="cache", engine="redis", port=port, adminUser="default",
                                  adminSecret="redisAdmin", admin_password=SecretStr("anything"))
        health = doctor.check_instance(instance, ["redis_index"], local_port=None)
        assert (health.ok, health.admin) == (False, False), health
        assert "anyone without a password" in health.problem and "ACL SETUSER default off" in health.fix
        # The same server once it asks for a password: fit.
        subprocess.run(["redis-cli", "-p", str(port), "CONFIG", "SET", "requirepass", "anything"], check=True,
                       capture_output=True)
        assert doctor.check_instance(instance, ["redis_index"], local_port=None).ok
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_postgresql_that_trusts_every_login_is_not_fit(admin):
    """With `trust` in pg_hba.conf the admin check passed whatever the password, and so would anyone's
    login as any tenant's role."""
    import secrets

    import psycopg
    from psycopg import sql
    from pydantic import SecretStr

    from providers.instances import SharedInstance
    from tools.engines import load

    engine, role, password = load("postgres"), f"trusted_{secrets.token_hex(4)}", secrets.token_hex(12)
    hba = engine.data_dir / "pg_hba.conf"
    original = hba.read_text()

    def connect():
        return psycopg.connect(host="127.0.0.1", port=engine.port, user=admin["postgres"].user,
                               password=admin["postgres"].password, dbname="postgres", autocommit=True)

    instance = SharedInstance(name="pg", engine="postgres", port=engine.port, adminUser=role, adminSecret="pgAdmin",
                              admin_password=SecretStr(password))
    with connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} SUPERUSER LOGIN PASSWORD {}").format(sql.Identifier(role),
                                                                                 sql.Literal(password)))
    try:
        assert doctor.check_instance(instance, ["database"], local_port=None).ok  # scram: a wrong password fails
        hba.write_text(f"host all {role} 127.0.0.1/32 trust\n{original}")  # the first line that fits decides
        with connect() as conn:
            conn.execute("SELECT pg_reload_conf()")  # signals the server: it rereads the file soon after

        def unfit():
            health = doctor.check_instance(instance, ["database"], local_port=None)
            return None if health.ok else health

        health = eventually(unfit, 10, "the reloaded pg_hba.conf to take effect", interval=0.2)
        assert (health.ok, health.admin) == (False, False), health
        assert "wrong password (`trust` in pg_hba.conf)" in health.problem and "scram-sha-256" in health.fix
    finally:
        hba.write_text(original)
        with connect() as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("database", ["postgres", "template1"])
def test_a_postgresql_whose_own_databases_let_everyone_connect_is_noted_not_failed(admin, root, validator, database):
    """PUBLIC's default CONNECT on `postgres` or `template1` (a server devstack does not run, which it leaves
    alone) lets every project's role log in there: a note, the instance still usable; the local engine
    revokes it."""
    import psycopg
    from psycopg import sql

    from providers.postgres.probe import open_database
    from tools.engines.postgres import ENGINE

    config = config_for(admin, shared_config(admin), ["doc/devstack.yaml"])
    pg = lambda report: next(h for h in report.instances if h.engine == "postgres")  # noqa: E731
    assert pg(doctor.diagnose(config, root, "local")).notes == []  # as the local engine leaves it
    with psycopg.connect(host="127.0.0.1", port=ENGINE.port, user=admin["postgres"].user,
                         password=admin["postgres"].password, dbname="postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(database)))
        try:
            report = doctor.diagnose(config, root, "local")
        finally:
            conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))
    health = pg(report)
    assert (health.ok, health.problem, health.notes) == (True, "", [open_database(database)])
    assert f"REVOKE CONNECT ON DATABASE {database} FROM PUBLIC" in health.notes[0]
    assert all(h.notes == [] for h in report.instances if h.engine not in ("postgres", "localstack"))
    assert f"       note: PUBLIC has CONNECT on the server's database `{database}`" in doctor.render(report)
    validator("doctor.schema.json", report.to_json())
    assert [i["notes"] for i in report.to_json()["instances"] if i["engine"] == "postgres"] == [health.notes]


@pytest.mark.parametrize("host, tls, transport, note", [
    ("127.0.0.1", None, "plaintext", None),
    ("127.0.0.2", None, "plaintext", "reached in plaintext: admin and project credentials cross the network"),
    ("127.0.0.2", True, "tls", None),
    ("127.0.0.1", {"verify": False}, "tls unverified", "TLS without verification: anything answering at"),
], ids=["loopback", "elsewhere", "tls", "unverified"])
def test_the_doctor_says_how_it_reaches_an_instance(host, tls, transport, note):
    from providers.instances import SharedInstance

    instance = SharedInstance(name="pg", engine="postgres", host=host, port=closed_port(), adminUser="a",
                              adminSecret="k", tls=tls)
    health = doctor.check_instance(instance, ["database"], local_port=None)
    assert (health.transport, health.reachable) == (transport, False)
    assert [n for n in health.notes if note and n.startswith(note)] == ([health.notes[0]] if note else [])
    assert health.to_json()["transport"] == transport
    assert f"over {transport}" in doctor.render(doctor.Report("w", [], [health], [])) or transport == "plaintext"
