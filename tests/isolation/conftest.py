"""The tenant isolation matrix: one stack, two projects, every engine's real clients.

One `pulumi up` (the real CLI, a temporary file backend) makes projects
`iso-a-<token>` and `iso-b-<token>`, each declaring the resources of every
engine in ENGINES plus one service per engine whose env.import takes that
engine's credentials. Each service's environment is read back with
`devstack env --show-secrets --json`, as a user would. The module of an
engine (test_<engine>.py) then tries every operation on A's own resources
(it must work) and on B's (it must fail with the engine's permission
error); `matrix.check` records each outcome, and the table is printed at
the end of the run. `devstack workspace destroy --purge-data` removes it all.

Adding an engine: one EngineCase in ENGINES (its instance in the local
workspace, the resources each project declares, the service's env.import)
and one module test_<engine>.py.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from tests.devstack.conftest import Sandbox, make_env
from tests.e2e.conftest import write_project
from tools.pulumi_env import ROOT

STACK = "iso"


@dataclass(frozen=True)
class EngineCase:
    """What each project declares on one engine, and what its service named after the engine imports."""

    instance: str  # the instance's name in the local workspace (stacks/Pulumi.local.yaml)
    resources: Callable[[str], list[dict]]  # project -> its declarations there (purge: the teardown drops the data)
    imports: list[dict]  # the env.import of the project's service `<engine>`


def _purged(*resources: dict) -> Callable[[str], list[dict]]:
    return lambda project: [{**r, "purge": True} for r in resources]


PG_VARS = {"PGHOST": "host", "PGPORT": "port", "PGUSER": "user", "PGPASSWORD": "password", "PGDATABASE": "database"}

#: Engine -> its case; each has a module tests/isolation/test_<engine>.py.
ENGINES: dict[str, EngineCase] = {
    "postgres": EngineCase(
        # An explicit name is the engine identifier, one namespace for all projects: the project's in it.
        "pg", lambda project: [{"uses": "pg", "kind": "database", "purge": True},
                               {"uses": "pg", "kind": "role", "name": f"{project}-readers", "purge": True},
                               {"uses": "pg", "kind": "user", "name": f"{project}-app", "purge": True}],
        [{"from": "pg/database", "vars": PG_VARS}]),
    "redis": EngineCase(
        "cache", _purged({"uses": "cache", "kind": "redis_index"}, {"uses": "cache", "kind": "acl_user"}),
        [{"from": "cache/redis_index", "vars": ["REDIS_DB"]},
         {"from": "cache/acl_user", "vars": ["REDIS_HOST", "REDIS_PORT", "REDIS_USERNAME", "REDIS_PASSWORD",
                                             "REDIS_KEY_PREFIX"]}]),
    "minio": EngineCase(
        "objects", _purged({"uses": "objects", "kind": "bucket"}, {"uses": "objects", "kind": "access_key"}),
        [{"from": "objects/bucket", "vars": ["S3_BUCKET"]},
         {"from": "objects/access_key", "vars": ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]}]),
    "kafka": EngineCase(
        "kafka", lambda project: [
            {"uses": "kafka", "kind": "topic", "purge": True},
            # create and delete: so "delete" is an operation A holds on its own topics, and is refused on B's.
            {"uses": "kafka", "kind": "acl", "purge": True,
             "params": {"operations": ["read", "write", "describe", "create", "delete"]}}],
        [{"from": "kafka/topic", "vars": ["KAFKA_TOPIC"]},
         {"from": "kafka/acl", "vars": ["KAFKA_BOOTSTRAP_SERVERS", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                                        "KAFKA_SASL_PASSWORD"]}]),
    "localstack": EngineCase(
        "aws", lambda project: [
            {"uses": "aws", "kind": "bucket", "purge": True},
            {"uses": "aws", "kind": "queue", "purge": True},
            {"uses": "aws", "kind": "topic", "purge": True},
            {"uses": "aws", "kind": "stream", "purge": True},
            {"uses": "aws", "kind": "table", "params": {"hashKey": "id"}, "purge": True},
            {"uses": "aws", "kind": "access_key", "credentials": "generated", "purge": True}],
        [{"from": "aws/bucket", "vars": ["S3_BUCKET"]},
         {"from": "aws/queue", "vars": ["SQS_QUEUE_URL"]},
         {"from": "aws/topic", "vars": ["SNS_TOPIC_ARN"]},
         {"from": "aws/stream", "vars": ["KINESIS_STREAM_NAME"]},
         {"from": "aws/table", "vars": ["DYNAMODB_TABLE_NAME"]},
         {"from": "aws/access_key", "vars": ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                             "AWS_REGION"]}]),
    "nats": EngineCase(
        # The account is implied; each kind's default declaration, named after the project.
        "events", lambda project: [
            {"uses": "events", "kind": "stream", "purge": True},
            {"uses": "events", "kind": "consumer", "params": {"stream": project}, "purge": True},
            {"uses": "events", "kind": "kv", "purge": True},
            {"uses": "events", "kind": "user", "credentials": "generated", "purge": True}],
        [{"from": "events/stream", "vars": ["NATS_STREAM"]},
         {"from": "events/consumer", "vars": ["NATS_CONSUMER"]},
         {"from": "events/kv", "vars": ["NATS_KV_BUCKET"]},
         {"from": "events/user", "vars": ["NATS_URL", "NATS_USER_JWT", "NATS_USER_SEED"]}]),
}


@dataclass(frozen=True)
class Tenants:
    """The two projects of the matrix: names, each one's stack outputs, and each service's environment."""

    a: str
    b: str
    outputs: dict[str, dict[str, Any]]  # project -> "<instance>/<kind>/<name>" -> attributes
    envs: dict[tuple[str, str], dict[str, str]]  # (project, engine) -> what `devstack env` gives

    def env(self, project: str, engine: str) -> dict[str, str]:
        return self.envs[(project, engine)]

    def resource(self, project: str, key: str) -> dict[str, Any]:
        """Attributes of `project`'s resource `<instance>/<kind>/<name>`."""
        return self.outputs[project][key]


def _admin_passwords() -> dict[str, str]:
    from tools.engines.credentials import admin_credentials

    return {engine: credential.password for engine, credential in admin_credentials().items()}


@pytest.fixture(scope="session")
def tenants(tmp_path_factory) -> Tenants:
    """One up of both projects on every engine in ENGINES; destroyed with --purge-data afterwards."""
    token = secrets.token_hex(3)
    a, b = f"iso-a-{token}", f"iso-b-{token}"
    base = tmp_path_factory.mktemp("isolation")
    box = Sandbox(env=make_env(base / "pulumi"), work=base / "work")
    box.work.mkdir()
    (box.work / "__main__.py").write_text((ROOT / "__main__.py").read_text())
    shared_all = yaml.safe_load((ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]["devstack:workspace"]["shared"]
    shared = {case.instance: shared_all[case.instance] for case in ENGINES.values()}
    services = {engine: {"uses": [case.instance], "env": {"import": case.imports}} for engine, case in ENGINES.items()}
    files = [write_project(box.work, p, [r for case in ENGINES.values() for r in case.resources(p)], services)
             for p in (a, b)]
    stack = box.open(STACK, create=True)
    stack.set_config("devstack:workspace", auto.ConfigValue(json.dumps({"name": STACK, "shared": shared,
                                                                         "projects": files})))
    passwords = _admin_passwords()
    for instance in shared.values():
        stack.set_config(f"devstack:{instance['adminSecret']}", auto.ConfigValue(passwords[instance["engine"]],
                                                                                  secret=True))
    try:
        up = stack.up()
        outputs = {p: up.outputs[p].value["resources"] for p in (a, b)}
        with ThreadPoolExecutor(max_workers=4) as pool:
            found = dict(zip([(p, e) for p in (a, b) for e in ENGINES],
                             pool.map(lambda pe: _service_env(box, *pe), [(p, e) for p in (a, b) for e in ENGINES])))
        yield Tenants(a, b, outputs, found)
    finally:
        done = box.cli("workspace", "destroy", "--purge-data", "--yes", "-w", STACK)
        assert done.returncode == 0, f"devstack workspace destroy --purge-data failed: {done.stderr}"


def _service_env(box: Sandbox, project: str, service: str) -> dict[str, str]:
    """The service's environment exactly as `devstack env PROJECT SERVICE --show-secrets` gives it."""
    return box.cli_json("env", project, service, "-w", STACK, "--show-secrets")["env"]


# --- the matrix ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One attempt: `run(tenants, project)` acts with A's service credentials on that project's resources."""

    name: str
    run: Callable[[Tenants, str], None]
    own: bool = True  # A may do it on its own resources (else only the refusal on B's is asserted)


def cases(ops: list[Op]) -> list:
    """The (op, target) params of an engine's test: each op on B's resources, and on A's where it may."""
    return [pytest.param(op, target, id=f"{op.name}-{target}") for op in ops
            for target in (("own", "other") if op.own else ("other",))]


@dataclass
class Matrix:
    """Outcomes by engine, operation and target (own: A on A's resources; other: A on B's)."""

    rows: list[tuple[str, str, str, str]] = field(default_factory=list)

    def check(self, engine: str, operation: str, target: str, attempt: Callable[[], Any],
              denied: Callable[[BaseException], str | None]) -> None:
        """Run `attempt`: on `own` it must work; on `other` it must raise an error `denied` names (it returns
        the engine's name for it, None for any other error). The outcome is recorded either way."""
        try:
            attempt()
        except Exception as err:  # noqa: BLE001 - recorded, then judged
            name = denied(err)
            if target == "other" and name:
                self.rows.append((engine, operation, target, f"denied ({name})"))
                return
            self.rows.append((engine, operation, target, f"FAIL: {type(err).__name__}"))
            raise AssertionError(f"{engine} {operation} on {target}'s resources: expected "
                                 f"{'success' if target == 'own' else 'the permission error'}, got "
                                 f"{type(err).__name__}: {err}") from err
        if target == "own":
            self.rows.append((engine, operation, target, "ok"))
            return
        self.rows.append((engine, operation, target, "FAIL: allowed"))
        raise AssertionError(f"{engine} {operation} on the other project's resources was allowed")

    def run(self, engine: str, tenants: Tenants, op: Op, target: str,
            denied: Callable[[BaseException], str | None]) -> None:
        """`check` of `op` by A on A's resources (`own`) or on B's (`other`)."""
        project = tenants.a if target == "own" else tenants.b
        self.check(engine, op.name, target, lambda: op.run(tenants, project), denied)

    def gap(self, engine: str, operation: str, attempt: Callable[[], Any], why: str) -> None:
        """An attempt on B's resources the engine is known to let through (`why` names the gap): it must
        still succeed, so the day the engine starts refusing it, this says so and the gap can go."""
        try:
            attempt()
        except Exception as err:  # noqa: BLE001 - recorded, then judged
            self.rows.append((engine, operation, "other", f"FAIL: {type(err).__name__}"))
            raise AssertionError(f"{engine} {operation} on the other project's resources, a known gap ({why}), "
                                 f"was refused: {type(err).__name__}: {err}; take it out of the gaps") from err
        self.rows.append((engine, operation, "other", f"GAP: allowed ({why})"))

    def table(self) -> list[str]:
        """engine | operation | own | other, one line per engine and operation."""
        cells: dict[tuple[str, str], dict[str, str]] = {}
        for engine, operation, target, outcome in self.rows:
            cells.setdefault((engine, operation), {})[target] = outcome
        widths = (10, 34, 6)
        lines = [f"{'engine':<{widths[0]}} {'operation':<{widths[1]}} {'own':<{widths[2]}} other (A on B's)"]
        for (engine, operation), by in cells.items():
            lines.append(f"{engine:<{widths[0]}} {operation:<{widths[1]}} {by.get('own', '-'):<{widths[2]}} "
                         f"{by.get('other', '-')}")
        return lines


_MATRIX = Matrix()


@pytest.fixture(scope="session")
def matrix() -> Matrix:
    return _MATRIX


def pytest_terminal_summary(terminalreporter) -> None:
    if _MATRIX.rows:
        terminalreporter.section("tenant isolation matrix (project A's service credentials)")
        for line in _MATRIX.table():
            terminalreporter.write_line(line)
