"""Component expansion under Pulumi mocks: a workspace of three projects across all six engines.

Asserts child names and types, parents, dependencies (safe teardown order),
retain flags, that admin credentials never become inputs, and the outputs:
attributes, composed exports, service env, and which of them are secret.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pulumi
import pytest
import yaml

from components.models import instance_name
from components.validation import validate
from providers import registry
from tools.engines.ports import PORTS

SHARED = {
    "pg": {"engine": "postgres", "port": PORTS["postgres"]},
    "cache": {"engine": "redis", "port": PORTS["redis"]},
    "objects": {"engine": "minio", "port": PORTS["minio"]},
    "aws": {"engine": "localstack", "port": PORTS["localstack"]},
    "events": {"engine": "nats", "port": PORTS["nats"]},
    "kafka": {"engine": "kafka", "port": PORTS["kafka"]},
}
PROJECTS = {
    "shop": {
        "resources": [
            {"uses": "pg", "kind": "database"},
            {"uses": "pg", "kind": "role", "name": "readers"},
            {"uses": "pg", "kind": "user", "name": "reporting", "params": {"role": "readers", "database": "shop"}},
            {"uses": "cache", "kind": "redis_index"},
            {"uses": "cache", "kind": "acl_user", "credentials": "generated"},
            {"uses": "kafka", "kind": "acl"},
            {"uses": "kafka", "kind": "topic", "name": "orders", "purge": True},
        ],
        "services": {"api": {"uses": ["pg", "kafka"], "env": {
            "import": [{"from": "pg/database", "vars": {"DATABASE_URL": "dsn", "PGUSER": "user"}},
                       # the one resource on the instance that has REDIS_DB: the redis_index
                       {"from": "workspace.shared.cache", "vars": ["REDIS_DB"]}],
            "KAFKA": "${ref:workspace.shared.kafka.bootstrap}",
            "PGDATABASE": "${ref:workspace.shared.pg/database/shop.database}",
            "WHERE": "${ref:workspace.shared.kafka/topic/orders.topic}@${ref:workspace.shared.kafka.bootstrap}",
        }}},
    },
    "media": {
        "resources": [
            {"uses": "objects", "kind": "lifecycle", "name": "expire", "params": {"bucket": "uploads", "expireDays": 7}},
            # the spec's form: the same child name as `uses: objects`
            {"uses": "workspace.shared.objects", "kind": "bucket", "name": "uploads", "purge": True},
            {"uses": "objects", "kind": "access_key"},
            {"uses": "aws", "kind": "queue", "name": "jobs"},
            {"uses": "aws", "kind": "topic", "name": "done"},
        ],
    },
    "feeds": {
        "resources": [
            {"uses": "events", "kind": "consumer", "name": "worker", "params": {"stream": "feeds"}},
            {"uses": "events", "kind": "stream", "purge": True},
            {"uses": "events", "kind": "kv", "name": "cursor"},
            {"uses": "aws", "kind": "stream", "name": "clicks"},
            {"uses": "aws", "kind": "table", "name": "items", "params": {"hashKey": "id"}},
            {"uses": "aws", "kind": "bucket", "name": "archive"},
        ],
    },
}


class RecordingMocks(pulumi.runtime.Mocks):
    """Returns every attribute a resource declares, as a provider would after create."""

    def __init__(self) -> None:
        self.inputs: dict[str, dict] = {}
        self.types: dict[str, str] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.inputs[args.name], self.types[args.name] = dict(args.inputs), args.typ
        outputs = dict(args.inputs)
        if args.typ.startswith("pulumi-python:dynamic/"):
            engine, kind = args.typ.removeprefix("pulumi-python:dynamic/").split(":")
            for attribute in registry.provider_class(engine, kind).attributes:
                outputs[attribute] = 1234 if attribute == "port" else f"{attribute}-of-{args.name}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


@pytest.fixture
def validated(tmp_path: Path):
    files = []
    for name, body in PROJECTS.items():
        path = tmp_path / name / "devstack.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump({"apiVersion": "devstack/v1", "kind": "Project", "name": name, **body}))
        files.append(f"{name}/devstack.yaml")
    shared = {n: {**s, "host": "127.0.0.1", "adminUser": "admin", "adminSecret": f"{n}Admin"} for n, s in SHARED.items()}
    return validate({"name": "test", "shared": shared, "projects": files}, tmp_path, None, "stacks/Pulumi.test.yaml")


@pytest.fixture
def mocks():
    # Tests that ran before (asyncio.run in engine clients) may have left no current loop.
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = RecordingMocks()
    pulumi.runtime.set_mocks(mocks, project="devstack", stack="test", preview=False)
    return mocks


def expand(validated):
    """Build the workspace, recording each resource's options through a transformation."""
    from components.workspace import Workspace

    options: dict[str, pulumi.ResourceOptions] = {}
    resources: dict[str, pulumi.Resource] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        options[args.name], resources[args.name] = args.opts, args.resource
        return None

    workspace = Workspace(validated, "test", opts=pulumi.ResourceOptions(transformations=[record]))
    assert list(workspace.declare_projects()) == [project.name for project in validated.projects]
    return workspace, options, resources


@pulumi.runtime.test
def test_names_types_parents_and_retain_flags(mocks, validated):
    workspace, options, resources = expand(validated)
    children = {name for name in options if name.count("/") == 3}
    expected = {f"{p}/{instance_name(r['uses'])}/{r['kind']}/{r.get('name', p)}"
                for p, body in PROJECTS.items() for r in body["resources"]}
    # A project with anything on a NATS instance gets its account there, undeclared; its purge follows theirs.
    assert children == expected | {"feeds/events/account/feeds"}
    assert options["feeds/events/account/feeds"].retain_on_delete is True  # the feeds kv is retained
    for name in children - {"feeds/events/account/feeds"}:
        project, instance, kind, _ = name.split("/")
        engine = SHARED[instance]["engine"]
        assert type(resources[name]).__mro__[1] is pulumi.dynamic.Resource
        assert resources[name]._resource_type_name == f"dynamic/{engine}:{kind}"
        assert options[name].parent is resources[project]
        purge = next(r.get("purge", False) for r in PROJECTS[project]["resources"]
                     if f"{project}/{instance_name(r['uses'])}/{r['kind']}/{r.get('name', project)}" == name)
        assert options[name].retain_on_delete is (not purge), name
    for project in PROJECTS:
        assert options[project].parent is workspace

    def check_inputs(_):
        for name in children:
            assert mocks.types[name].startswith("pulumi-python:dynamic/")
            assert mocks.inputs[name]["owner"] == name.split("/")[0]
            assert not any("admin" in key.lower() for key in mocks.inputs[name]), name

    return pulumi.Output.all(*(r.urn for r in resources.values())).apply(check_inputs)


@pulumi.runtime.test
def test_projects_are_declared_one_at_a_time(mocks, validated):
    # The program hands the event loop to the SDK between projects, so that registrations
    # start early: that only helps if a project is declared when it is asked for, not before.
    from components.workspace import Workspace

    declared: list[str] = []

    def record(args: pulumi.ResourceTransformationArgs):
        declared.append(args.name)
        return None

    workspace = Workspace(validated, "test", opts=pulumi.ResourceOptions(transformations=[record]))
    projects = workspace.declare_projects()
    first = next(projects)
    assert first in declared
    assert {name.split("/")[0] for name in declared if name != "test"} == {first}
    assert [first, *projects] == [project.name for project in validated.projects]
    assert set(workspace.outputs) == {project.name for project in validated.projects}


@pulumi.runtime.test
def test_dependencies_give_safe_teardown_order(mocks, validated):
    _, options, resources = expand(validated)

    def depends(dependent: str, *on: str) -> None:
        assert {id(resources[n]) for n in on} <= {id(r) for r in options[dependent].depends_on or []}, dependent

    depends("media/objects/lifecycle/expire", "media/objects/bucket/uploads")
    depends("feeds/events/consumer/worker", "feeds/events/stream/feeds", "feeds/events/account/feeds")
    depends("feeds/events/stream/feeds", "feeds/events/account/feeds")
    assert not options["feeds/events/account/feeds"].depends_on
    depends("shop/pg/user/reporting", "shop/pg/role/readers", "shop/pg/database/shop")
    depends("shop/kafka/acl/shop", "shop/kafka/topic/orders")
    # A bucket of the project still being made is untagged: a key checking its reach then would take it for foreign.
    depends("media/objects/access_key/media", "media/objects/bucket/uploads")
    assert not options["media/objects/bucket/uploads"].depends_on


@pulumi.runtime.test
def test_replacing_a_referenced_declaration_replaces_its_dependents(mocks, validated):
    """What lives in or on another declaration with purge is replaced with it (a purged stream takes its
    consumers); a retained one keeps them, and ordering alone (an acl after the topics) ties nothing."""
    _, options, resources = expand(validated)

    def replaced_with(dependent: str) -> set[int]:
        return {id(r) for r in options[dependent].replace_with or []}

    assert replaced_with("media/objects/lifecycle/expire") == {id(resources["media/objects/bucket/uploads"])}
    assert replaced_with("feeds/events/consumer/worker") == {id(resources["feeds/events/stream/feeds"])}
    assert replaced_with("shop/pg/user/reporting") == set()  # its database and role are retained
    assert replaced_with("shop/kafka/acl/shop") == set()
    assert replaced_with("media/objects/bucket/uploads") == set()
    # Pulumi settles a replace_with replacement without the provider's diff: delete first must be an option.
    tenants = [name for name in options if name.count("/") == 3]
    assert tenants and all(options[name].delete_before_replace for name in tenants)


@pulumi.runtime.test
def test_outputs_attributes_exports_env_and_secrets(mocks, validated):
    workspace, _, _ = expand(validated)
    shop = workspace.outputs["shop"]
    database = shop["resources"]["pg/database/shop"]
    env = shop["services"]["api"]["env"]
    assert env["KAFKA"] == f"127.0.0.1:{PORTS['kafka']}"  # ${ref} resolved from the workspace, plain
    checks = [
        env["REDIS_DB"].apply(lambda v: v == "db-of-shop/cache/redis_index/shop"),
        # a resource's own attribute, inline, alone and among text
        env["PGDATABASE"].apply(lambda v: v == "database-of-shop/pg/database/shop"),
        env["WHERE"].apply(lambda v: v == f"topic-of-shop/kafka/topic/orders@127.0.0.1:{PORTS['kafka']}"),
        database["host"].apply(lambda v: v == "host-of-shop/pg/database/shop"),
        # User, password and database percent-encoded, '/' included (tests/components/test_templates.py parses one back).
        database["dsn"].apply(lambda v: v == "postgresql://user-of-shop%2Fpg%2Fdatabase%2Fshop:password-of-shop%2Fpg"
                                       "%2Fdatabase%2Fshop@host-of-shop/pg/database/shop:1234/database-of-shop%2Fpg"
                                       "%2Fdatabase%2Fshop"),
    ]
    secrets = {
        "dsn": database["dsn"], "password": database["password"], "env DATABASE_URL": env["DATABASE_URL"],
        "acl_user password": shop["resources"]["cache/acl_user/shop"]["password"],
        "access key secret": workspace.outputs["media"]["resources"]["objects/access_key/media"]["secretKey"],
    }
    plain = {"host": database["host"], "env PGUSER": env["PGUSER"], "env PGDATABASE": env["PGDATABASE"],
             "bucket endpoint": workspace.outputs["media"]["resources"]["objects/bucket/uploads"]["endpoint"]}

    def verify(values):
        flags = values[len(checks):]
        assert all(values[:len(checks)])
        assert flags == [True] * len(secrets) + [False] * len(plain), dict(zip([*secrets, *plain], flags))

    return pulumi.Output.all(
        *checks, *(pulumi.Output.is_secret(o) if hasattr(pulumi.Output, "is_secret") else o.is_secret()
                   for o in [*secrets.values(), *plain.values()])
    ).apply(verify)


@pulumi.runtime.test
def test_registered_params_are_what_check_stores(mocks, validated):
    # Pulumi shows a refresh's input diff against what the program registers: any
    # param check would still fill in or reshape there shows as a phantom `~params`.
    _, options, resources = expand(validated)
    children = [name for name in options if name.count("/") == 3]

    def compare(_):
        for name in children:
            engine, kind = mocks.types[name].removeprefix("pulumi-python:dynamic/").split(":")
            registered = mocks.inputs[name]
            checked = registry.provider_class(engine, kind)().check({}, registered)
            assert not checked.failures, (name, checked.failures)
            assert _without_nulls(registered["params"]) == _without_nulls(checked.inputs["params"]), name
            assert _without_nulls(registered) == _without_nulls(checked.inputs), name  # accessRules too
        # Defaults are filled in, e.g. the default stream's owner-derived subjects.
        assert mocks.inputs["feeds/events/stream/feeds"]["params"]["subjects"] == ["feeds.>"]
        # A kind whose access rules a release changed registers their revision (the first up updates).
        assert "accessRules" in mocks.inputs["media/objects/access_key/media"]

    return pulumi.Output.all(*(r.urn for r in resources.values())).apply(compare)


def _without_nulls(value):
    """Pulumi's property diff treats a null as an absent key (and mocks drop them)."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value
