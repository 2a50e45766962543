"""Every validation rule, on a corpus of bad devstack.yaml files.

Each case marks the offending line with `# <-`; the test asserts the exact
field path, that line, and the rule-specific part of the message. All
problems of a workspace are reported at once and nothing is returned to
expand when any exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.validation import WorkspaceInvalid, validate
from tools.engines.ports import PORTS

WORKSPACE = {
    "name": "test",
    "shared": {"pg": {"engine": "postgres", "host": "127.0.0.1", "port": PORTS["postgres"],
                      "adminUser": "admin", "adminSecret": "pgAdmin"}},
}
HEADER = "apiVersion: devstack/v1\nkind: Project\nname: shop\n"


def problems(tmp_path: Path, *files: str, workspace: dict | None = None):
    names = []
    for i, text in enumerate(files):
        path = tmp_path / f"p{i}" / "devstack.yaml"
        path.parent.mkdir()
        path.write_text(text)
        names.append(f"p{i}/devstack.yaml")
    try:
        validate({**(workspace or WORKSPACE), "projects": names}, tmp_path, None, "stacks/Pulumi.test.yaml")
    except WorkspaceInvalid as invalid:
        return invalid.problems
    return []


def valid_project(tmp_path: Path, text: str, workspace: dict | None = None):
    """The one project of a workspace whose only file is `text`, as validation returns it."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "devstack.yaml").write_text(text)
    (project,) = validate({**(workspace or WORKSPACE), "projects": ["p/devstack.yaml"]}, tmp_path, None, "x").projects
    return project


def marked_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if "# <-" in line)


def db(extra: str = "", name: str | None = None) -> str:
    line = f"    name: {name}  # <-\n" if name is not None else ""
    return HEADER + "resources:\n  - uses: pg\n    kind: database\n" + line + extra


CASES = [
    # header
    ("apiVersion: devstack/v2  # <-\nkind: Project\nname: shop\n", "apiVersion", "must be 'devstack/v1'"),
    ("apiVersion: devstack/v1\nkind: Service  # <-\nname: shop\n", "kind", "must be 'Project'"),
    ("apiVersion: devstack/v1  # <-\nkind: Project\n", "name", "is required"),
    (HEADER + "resources: {uses: pg}  # <-\n", "resources", "must be a list"),
    (HEADER.replace("name: shop", 'name: "../etc"  # <-'), "name", "is not a project name: names use letters"),
    (HEADER.replace("name: shop", f"name: {'p' * 300}  # <-"), "name", "at most 128 characters"),
    (HEADER.replace("name: shop", "name: café  # <-"), "name", "is not a project name: names use letters"),
    (HEADER.replace("name: shop", 'name: ""  # <-'), "name", "is not a project name: names use letters"),
    # resource shape
    (HEADER + "resources:\n  - uses: pg\n    kind: database\n    size: 3  # <-\n", "resources[0].size", "unknown field 'size'"),
    (HEADER + "resources:\n  - kind: database  # <-\n", "resources[0].uses", "is required"),
    (HEADER + "resources:\n  - uses: pg  # <-\n", "resources[0].kind", "is required"),
    (HEADER + "resources:\n  - uses: mysql  # <-\n    kind: database\n", "resources[0].uses", "names no shared instance"),
    (HEADER + "resources:\n  - uses: pg\n    kind: table  # <-\n", "resources[0].kind", "is not a kind of engine postgres"),
    (db("    credentials: secret  # <-\n"), "resources[0].credentials", "must be 'predictable' or 'generated'"),
    (db("    credentials: Generated  # <-\n"), "resources[0].credentials", "must be 'predictable' or 'generated'"),
    (db("    purge: please  # <-\n"), "resources[0].purge", "valid boolean"),
    # names an engine cannot take
    (db(name='"a\\"b"'), "resources[0].name", "is not a resource name: names use letters, digits"),
    (db(name='"x; DROP DATABASE y"'), "resources[0].name", "is not a resource name: names use letters, digits"),
    (db(name="café"), "resources[0].name", "is not a resource name: names use letters, digits"),
    (db(name="a" * 129), "resources[0].name", "at most 128 characters"),
    (db(name='""'), "resources[0].name", "at least 1 character"),
    (db(name="no"), "resources[0].name", "(got False; put it in quotes: YAML reads yes, no, on and off as booleans"),
    (db(name="007"), "resources[0].name", "(got 7; put it in quotes"),
    (db(name="../x"), "resources[0].name", "is not a resource name: names use letters, digits"),
    (db(name="'orders\\n'"), "resources[0].name", "is not a resource name: names use letters, digits"),
    # a real newline at the end (double quotes): Python's `$` had let it through every name rule
    (db(name='"orders\\n"'), "resources[0].name", "is not a resource name: names use letters, digits"),
    (HEADER.replace("name: shop", 'name: "shop\\n"  # <-'), "name", "is not a project name: names use letters"),
    (HEADER.replace("name: shop", "name: public") + "resources:\n  - uses: pg  # <-\n    kind: database\n",
     "resources[0].name", "PostgreSQL reserves the role name 'public'"),
    (HEADER.replace("name: shop", "name: pg-tools") + "resources:\n  - uses: pg  # <-\n    kind: database\n",
     "resources[0].name", "PostgreSQL reserves the role name 'pg_tools'"),
    # every server has these: the up would meet them, unmarked, and refuse
    (db(name="template1"), "resources[0].name", "every PostgreSQL server has a database 'template1' of its own"),
    (db(name="postgres"), "resources[0].name", "every PostgreSQL server has a database 'postgres' of its own"),
    (db("    params:\n      connectionLimit: 3000000000  # <-\n"), "resources[0].params.connectionLimit",
     "less than or equal to 2147483647"),
    # a login named like the instance's admin: refused mid-up (it exists, unmarked), never to be the admin
    (HEADER.replace("name: shop", "name: admin") + "resources:\n  - uses: pg  # <-\n    kind: database\n",
     "resources[0].name", "collides with stacks/Pulumi.test.yaml devstack:workspace.shared.pg.adminUser: "
                          "both are postgres role 'admin'"),
    # roles and users are one PostgreSQL namespace
    (db() + "  - {uses: pg, kind: role, name: reader}\n  - {uses: pg, kind: user, name: reader}  # <-\n",
     "resources[2].name", "both are postgres role 'reader'"),
    # params
    (db("    params:\n      size: 3  # <-\n"), "resources[0].params.size", "does not accept param 'size'"),
    (db("    params:\n      connectionLimit: lots  # <-\n"), "resources[0].params.connectionLimit", "valid integer"),
    (db("    params:\n      connectionLimit: -5  # <-\n"), "resources[0].params.connectionLimit", "greater than or equal to -1"),
    (db("    params:\n      encoding: [UTF8]  # <-\n"), "resources[0].params.encoding", "valid string"),
    (db("    params: 3  # <-\n"), "resources[0].params", "must be a mapping (got 3)"),
    # collisions inside one project
    (db() + "  - uses: pg\n    kind: database\n    name: shop  # <-\n", "resources[1].name", "collides with p0/devstack.yaml resources[0]"),
    (HEADER + "resources:\n  - {uses: pg, kind: database, name: my-db}\n  - {uses: pg, kind: database, name: my_db}  # <-\n",
     "resources[1].name", "'my_db' on instance 'pg'"),
    # one login role per project and instance: its databases share one rotation ...
    (db() + "  - uses: pg\n    kind: database\n    name: orders\n    params:\n      rotation: 1  # <-\n",
     "resources[1].params.rotation", "whose password follows `rotation`: one differing would change it back and forth"),
    # ... and cannot each generate a password
    (db() + "  - uses: pg\n    kind: database\n    name: orders\n    credentials: generated  # <-\n",
     "resources[1].credentials", "all log in as the project's one role"),
    # services
    (HEADER + "services: [api]  # <-\n", "services", "must be a mapping"),
    (HEADER + "resources:\n  - uses: workspace.shared.mysql  # <-\n    kind: database\n", "resources[0].uses",
     "names no shared instance"),
    (HEADER + "services:\n  api:\n    uses: [workspace.shared.mysql]  # <-\n", "services.api.uses[0]",
     "names no shared instance"),
    # devstack owns a service's other fields, but an import item is this program's
    (db() + "services:\n  api:\n    env:\n      import:\n        - from: pg/database\n          vars: {URL: dsn}\n"
            "          form: x  # <-\n", "services.api.env.import[0].form", "unknown field 'form'"),
    (db() + "  - {uses: pg, kind: database, name: orders}\nservices:\n  api:\n    env:\n      import:\n"
            "        - from: workspace.shared.pg  # <-\n          vars: [PGPASSWORD]\n",
     "services.api.env.import[0].from", "could be any of 2 resources of this project (workspace.shared.pg/database/"
                                        "shop, workspace.shared.pg/database/orders); name one"),
    (db() + "services:\n  api:\n    env:\n      import:\n        - from: workspace.shared.pg\n          vars:\n"
            "            - PGPASSWORD\n            - PGPASS  # <-\n",
     "services.api.env.import[0].vars[1]", "PGPASS is not a variable devstack knows for a postgres database (known: "
                                           "DATABASE_URL, PGDATABASE, PGHOST, PGPASSWORD, PGPORT, PGSSLMODE, PGSSLROOTCERT, PGUSER;"),
    (db() + "services:\n  api:\n    env:\n      import:\n        - from: workspace.shared.pg\n"
            "          vars: [PGUSER, PGUSER]  # <-\n", "services.api.env.import[0].vars", "lists PGUSER twice"),
    (db() + "services:\n  api:\n    env:\n      D: ${ref:workspace.shared.pg.dsn}  # <-\n",
     "services.api.env.D", "reads a secret attribute of workspace.shared.pg/database/shop"),
    (db() + "  - {uses: pg, kind: database, name: orders}\nservices:\n  api:\n    env:\n"
            "      D: ${ref:workspace.shared.pg.database}  # <-\n",
     "services.api.env.D", "could be any of 2 resources of this project"),
    (HEADER + "services:\n  api:\n    uses: [mysql]  # <-\n", "services.api.uses[0]", "names no shared instance"),
    (db() + "services:\n  api:\n    env:\n      import:\n        - from: pg/database/nope  # <-\n          vars: {URL: dsn}\n",
     "services.api.env.import[0].from", "names no resource of this project"),
    (db() + "services:\n  api:\n    env:\n      import:\n        - from: pg/database\n          vars:\n            URL: conn  # <-\n",
     "services.api.env.import[0].vars.URL", "has no attribute 'conn'"),
    (db() + "services:\n  api:\n    env:\n      import:\n        - from: pg/database\n          vars:  # <-\n            1BAD: dsn\n",
     "services.api.env.import[0].vars", "env var names must match"),
    (db() + "services:\n  api:\n    env:\n      import:\n        - vars: {URL: dsn}  # <-\n",
     "services.api.env.import[0].from", "is required"),
    (HEADER + "services:\n  api:\n    env:\n      PGPASS: ${ref:workspace.shared.pg.password}  # <-\n",
     "services.api.env.PGPASS", "reads a secret attribute"),
    (HEADER + "services:\n  api:\n    env:\n      KEY: x-${ref:workspace.shared.pg.secretKey}  # <-\n",
     "services.api.env.KEY", "reads a secret attribute"),
    (HEADER + "services:\n  api:\n    env:\n      A: ${ref:workspace.shared.pg.adminPassword}  # <-\n",
     "services.api.env.A", "reads a secret attribute"),
    (HEADER + "services:\n  api:\n    env:\n      T: ${ref:workspace.shared.pg.token}  # <-\n",
     "services.api.env.T", "reads a secret attribute"),
    (HEADER + "services:\n  api:\n    env:\n      H: ${ref:workspace.shared.nope.host}  # <-\n",
     "services.api.env.H", "names no shared instance"),
    (HEADER + "services:\n  api:\n    env:\n      H: ${ref:workspace.shared.pg.colour}  # <-\n",
     "services.api.env.H", "has no attribute 'colour'"),
    (HEADER + "services:\n  api:\n    env:\n      H: ${ref:pg.host}  # <-\n",
     "services.api.env.H", "must read workspace.shared.<instance>.<attribute>"),
    (HEADER + "services:\n  api:\n    env:\n      V: ${ref:workspace.shared.pg.version}  # <-\n",
     "services.api.env.V", "instance 'pg' sets no version (set shared.pg.version in the stack config"),
    (HEADER + "services:\n  api:\n    env:\n      F: x-${ref:workspace.shared.pg.host  # <-\n",
     "services.api.env.F", "a ${ref:...} is not closed with '}'"),
    (HEADER + "services:\n  api:\n    env:\n      R: ${REF:workspace.shared.pg.host}  # <-\n",
     "services.api.env.R", "'${REF:' is not a reference, and would reach the service as text"),
    (HEADER + "services:\n  api:\n    env:\n      S: x-${ ref:workspace.shared.pg.host }  # <-\n",
     "services.api.env.S", "'${ ref:' is not a reference"),
    (HEADER + "services:\n  api:\n    env:\n      H: {nested: 1}  # <-\n",
     "services.api.env.H", "must be strings or numbers"),
    (HEADER + "services:\n  api:\n    env:\n      bad-name: x  # <-\n",
     "services.api.env.bad-name", "env var names must match"),
]


@pytest.mark.parametrize("text, path, message", CASES, ids=[f"{i:02d}-{c[1]}" for i, c in enumerate(CASES)])
def test_bad_input_names_file_field_line_and_rule(tmp_path, text, path, message):
    found = problems(tmp_path, text)
    assert len(found) >= 1, "expected a problem"
    match = [p for p in found if p.path == path]
    assert match, f"no problem at {path}: {[str(p) for p in found]}"
    assert message in match[0].message
    assert match[0].file == "p0/devstack.yaml"
    assert match[0].line == marked_line(text)


ALL_ENGINES = {"name": "test", "shared": {
    name: {"engine": engine, "host": "127.0.0.1", "port": 1, "adminUser": "admin", "adminSecret": f"{name}Admin"}
    for name, engine in [("pg", "postgres"), ("cache", "redis"), ("objects", "minio"), ("aws", "localstack"),
                         ("events", "nats"), ("kafka", "kafka")]}}

# Rules across fields that the providers' check holds: validation runs it too, so they stop the
# whole workspace before anything is created (a missing field is located at its parent's line).
PROVIDER_RULES = [
    (HEADER + "resources:\n  - uses: events\n    kind: stream\n    params:\n      subjects: [other.>]  # <-\n",
     "resources[0].params.subjects", "outside the project's subjects 'shop.>'"),
    (HEADER + "resources:\n  - uses: events\n    kind: stream\n  - uses: events\n    kind: consumer\n    name: idx\n"
              "    params:\n      stream: shop\n      filterSubject: other.x  # <-\n",
     "resources[1].params.filterSubject", "outside the project's subjects 'shop.>'"),
    (HEADER + "resources:\n  - uses: aws\n    kind: table\n    params:  # <-\n      hashKey: {name: id}\n"
              "      billingMode: PROVISIONED\n",
     "resources[0].params.readCapacity", "is required with billingMode: PROVISIONED"),
    (HEADER + "resources:\n  - uses: objects\n    kind: bucket\n    params:  # <-\n      objectLock: true\n",
     "resources[0].params.versioning", "object lock needs versioning: true"),
    (HEADER + "resources:\n  - uses: aws\n    kind: queue\n    params:\n      fifo: true  # <-\n",
     "resources[0].params.fifo", "must end in '.fifo'"),
    # Each of these passed validation, then the engine refused it mid-up.
    (HEADER + "resources:\n  - {uses: kafka, kind: topic, name: a.b}\n  - {uses: kafka, kind: topic, name: a_b}  # <-\n",
     "resources[1].name", "differ only in '.' against '_'"),
    (HEADER + "resources:\n  - uses: kafka\n    kind: topic\n    params:\n      config: {retention.ms: null}  # <-\n",
     "resources[0].params.config", "'retention.ms': a value is one string, number or boolean"),
    (HEADER.replace("name: shop", "name: devstack-broker") + "resources:\n  - uses: kafka  # <-\n    kind: acl\n",
     "resources[0].name", "'devstack-*' are reserved: the local broker's own"),
    (HEADER + "resources:\n  - uses: events\n    kind: stream\n    params:\n      subjects: [shop.a, shop.*]  # <-\n",
     "resources[0].params.subjects", "'shop.a' and 'shop.*' overlap"),
    (HEADER + "resources:\n  - {uses: events, kind: stream}\n  - uses: events\n    kind: consumer\n    name: c\n"
              "    params:  # <-\n      stream: shop\n      deliverPolicy: last_per_subject\n",
     "resources[1].params.filterSubject", "is required with deliverPolicy: last_per_subject"),
    (HEADER + "resources:\n  - {uses: events, kind: stream, params: {retention: workqueue}}\n  - uses: events\n"
              "    kind: consumer\n    name: c\n    params:\n      stream: shop\n      ackPolicy: all  # <-\n",
     "resources[1].params.ackPolicy", "must be explicit on stream 'shop', whose retention is workqueue"),
    (HEADER + "resources:\n  - {uses: events, kind: stream, params: {retention: workqueue}}\n"
              "  - {uses: events, kind: consumer, name: a, params: {stream: shop, filterSubject: shop.a.>}}\n"
              "  - uses: events\n    kind: consumer\n    name: b\n    params:\n      stream: shop\n"
              "      filterSubject: shop.*.x  # <-\n",
     "resources[2].params.filterSubject", "'shop.*.x' overlaps the filter of consumer 'a' ('shop.a.>') on stream 'shop'"),
    (HEADER + "resources:\n  - {uses: events, kind: stream}\n  - uses: events\n    kind: consumer\n    name: c\n"
              f"    params:\n      stream: shop\n      description: {'é' * 2049}  # <-\n",
     "resources[1].params.description", "is at most 4096 bytes"),
]


ENGINE_LIMITS = [
    (HEADER + "resources:\n  - uses: events\n    kind: stream\n    params:\n      maxBytes: 1000000000000000000000  # <-\n",
     "resources[0].params.maxBytes", "is too large: Pulumi carries numbers as 64-bit floats"),
    (HEADER + "resources:\n  - uses: aws\n    kind: table\n    params:\n      hashKey: {name: id}\n"
              "      billingMode: PROVISIONED\n      readCapacity: 100000000000000000000  # <-\n      writeCapacity: 1\n",
     "resources[0].params.readCapacity", "is too large"),
    (HEADER + "resources:\n  - uses: events\n    kind: stream\n    params:\n      maxAge: 1000000000000  # <-\n",
     "resources[0].params.maxAge", "less than or equal to 9223372036"),
    (HEADER + "resources:\n  - uses: kafka\n    kind: topic\n    params:\n      partitions: 100000000  # <-\n",
     "resources[0].params.partitions", "less than or equal to 100000"),
]


LOOSE_TYPES = [
    (HEADER + "resources:\n  - uses: pg\n    kind: database\n    params:\n      connectionLimit: true  # <-\n",
     "resources[0].params.connectionLimit", "valid integer"),
    (HEADER + "resources:\n  - uses: cache\n    kind: acl_user\n    params:\n      readOnly: \"yes\"  # <-\n",
     "resources[0].params.readOnly", "valid boolean (got 'yes'; write true or false, unquoted)"),
    (HEADER + "resources:\n  - uses: aws\n    kind: queue\n    params:\n      delaySeconds: \"7\"  # <-\n",
     "resources[0].params.delaySeconds", "valid integer"),
    (HEADER + "resources:\n  - uses: kafka\n    kind: topic\n    params:\n      partitions: 2.5  # <-\n",
     "resources[0].params.partitions", "valid integer"),
    (HEADER + "resources:\n  - uses: objects\n    kind: bucket\n    params:\n      versioning: \"no\"  # <-\n",
     "resources[0].params.versioning", "valid boolean"),
]


@pytest.mark.parametrize("text, path, message", LOOSE_TYPES, ids=[c[1] for c in LOOSE_TYPES])
def test_params_take_their_own_types_as_purge_does(tmp_path, text, path, message):
    """A quoted "yes" or a boolean where a number goes is a mistake to point at, not to convert."""
    (problem,) = problems(tmp_path, text, workspace=ALL_ENGINES)
    assert (problem.path, problem.line) == (path, marked_line(text)) and message in problem.message, str(problem)


@pytest.mark.parametrize("value", ["1e3", "0o10", '"20"'])
def test_a_number_yaml_reads_as_text_gets_a_hint_about_how_yaml_reads_it(tmp_path, value):
    """'write a whole number, unquoted' alone is no help to someone who wrote 1e3 unquoted."""
    text = HEADER + f"resources:\n  - uses: aws\n    kind: queue\n    params:\n      delaySeconds: {value}  # <-\n"
    (problem,) = problems(tmp_path, text, workspace=ALL_ENGINES)
    assert problem.path == "resources[0].params.delaySeconds" and "plain decimal digits" in problem.message, str(problem)


LONG = "x" * 100_000
LONG_KEY = "k" * 1000  # YAML's own limit of a plain key is 1024 characters


@pytest.mark.parametrize("body, path", [
    (f"resources:\n  - uses: pg\n    kind: database\n    name: {LONG}\n", "resources[0].name"),
    (f"resources:\n  - uses: kafka\n    kind: topic\n    name: {LONG}\n", "resources[0].name"),
    (f"resources:\n  - uses: pg\n    kind: {LONG}\n", "resources[0].kind"),
    (f"resources:\n  - uses: pg\n    kind: database\n    params:\n      {LONG_KEY}: 1\n",
     f"resources[0].params.{LONG_KEY}"),
    (f"resources:\n  - uses: pg\n    kind: database\n    {LONG_KEY}: 1\n", f"resources[0].{LONG_KEY}"),
    (f"services:\n  api:\n    env:\n      X: ${{ref:{LONG}}}\n", "services.api.env.X"),
])
def test_a_huge_value_is_named_not_echoed_whole(tmp_path, body, path):
    """A paste gone wrong (a name of megabytes) once filled the terminal with itself."""
    (problem,) = problems(tmp_path, HEADER + body, workspace=ALL_ENGINES)
    assert problem.path == path and len(problem.message) < 400, problem.message[:400]


@pytest.mark.parametrize("text, path, message", ENGINE_LIMITS, ids=[c[1] for c in ENGINE_LIMITS])
def test_numbers_an_engine_or_pulumi_cannot_carry_are_validation_problems(tmp_path, text, path, message):
    """Before, each passed validation and failed mid-up with a traceback or an engine's own error."""
    (problem,) = problems(tmp_path, text, workspace=ALL_ENGINES)
    assert (problem.path, problem.line) == (path, marked_line(text)) and message in problem.message, str(problem)


@pytest.mark.parametrize("text, path, message", PROVIDER_RULES, ids=[c[1] for c in PROVIDER_RULES])
def test_provider_rules_are_validation_problems(tmp_path, text, path, message):
    found = problems(tmp_path, text, workspace=ALL_ENGINES)
    match = [p for p in found if p.path == path]
    assert match, f"no problem at {path}: {[str(p) for p in found]}"
    assert message in match[0].message and match[0].line == marked_line(text)


def test_provider_rules_pass_a_valid_declaration_of_every_kind(tmp_path):
    text = HEADER + """resources:
  - {uses: events, kind: stream}
  - {uses: events, kind: consumer, name: idx, params: {stream: shop, filterSubject: shop.x}}
  - {uses: aws, kind: table, params: {hashKey: {name: id}, billingMode: PROVISIONED, readCapacity: 1, writeCapacity: 1}}
  - {uses: aws, kind: queue, name: jobs.fifo, params: {fifo: true}}
  - {uses: objects, kind: bucket, params: {objectLock: true, versioning: true}}
  - {uses: kafka, kind: topic, params: {partitions: 2}}
"""
    assert problems(tmp_path, text, workspace=ALL_ENGINES) == []
    (tmp_path / "big").mkdir()  # Kafka's own default, as kafka-configs prints it: config values travel as text
    big = HEADER + "resources:\n  - {uses: kafka, kind: topic, params: {config: {max.compaction.lag.ms: 9223372036854775807}}}\n"
    assert problems(tmp_path / "big", big, workspace=ALL_ENGINES) == []


def test_databases_sharing_the_login_role_may_only_share_a_predictable_password(tmp_path):
    second = "  - uses: pg\n    kind: database\n    name: orders\n"
    for case in "abcd":
        (tmp_path / case).mkdir()
    assert problems(tmp_path / "a", db() + second) == []  # both predictable: the same derived password
    assert problems(tmp_path / "b", db("    credentials: generated\n")) == []  # alone: nothing to replace
    both = problems(tmp_path / "c", db("    credentials: generated\n") + second + "    credentials: generated\n")
    assert [p.path for p in both] == ["resources[0].credentials", "resources[1].credentials"]
    other_instance = {**WORKSPACE, "shared": {**WORKSPACE["shared"], "pg2": {**WORKSPACE["shared"]["pg"], "port": 25433}}}
    apart = db("    credentials: generated\n") + second.replace("uses: pg", "uses: pg2") + "    credentials: generated\n"
    assert problems(tmp_path / "d", apart, workspace=other_instance) == []  # one role per instance
    (tmp_path / "e").mkdir()
    rotated = "    params: {rotation: 1}\n"
    assert problems(tmp_path / "e", db(rotated) + second + rotated) == []  # one rotation for the role: fine


def test_collision_across_projects_names_both_files(tmp_path):
    other = db(name="shared").replace("name: shop", "name: blog", 1)
    found = problems(tmp_path, db(name="shared"), other)
    assert [(p.file, p.path) for p in found] == [("p1/devstack.yaml", "resources[0].name")]
    assert "collides with p0/devstack.yaml resources[0]" in found[0].message


#: `pg` and `pg2` both reach the local PostgreSQL; `pg3` is another server.
ONE_SERVER_TWO_NAMES = {"name": "test", "shared": {
    "pg": {"engine": "postgres", "host": "127.0.0.1", "port": PORTS["postgres"], "adminUser": "admin", "adminSecret": "pgAdmin"},
    "pg2": {"engine": "postgres", "host": "localhost", "port": PORTS["postgres"], "adminUser": "admin", "adminSecret": "pgAdmin"},
    "pg3": {"engine": "postgres", "host": "localhost", "port": 25433, "adminUser": "admin", "adminSecret": "pgAdmin"},
}}


def test_one_server_under_two_instance_names_is_one_namespace(tmp_path):
    """`pg` and `pg2` both reach the local PostgreSQL: declaring the database under both is a collision,
    or each would set its own password on it and a purge of either drop the other's."""
    workspace = ONE_SERVER_TWO_NAMES
    text = HEADER + "resources:\n  - uses: pg\n    kind: database\n  - uses: pg2\n    kind: database\n    name: shop  # <-\n"
    (problem,) = problems(tmp_path, text, workspace=workspace)
    assert problem.path == "resources[1].name" and problem.line == marked_line(text)
    assert f"instances 'pg' and 'pg2' both reach 127.0.0.1:{PORTS['postgres']}" in problem.message
    (tmp_path / "ok").mkdir()  # another server: fine
    assert problems(tmp_path / "ok", text.replace("uses: pg2", "uses: pg3"), workspace=workspace) == []


def test_a_projects_databases_on_two_names_of_one_server_are_refused(tmp_path):
    """They log in as the project's one role, whose generated password follows the declaration (and an earlier
    release's derived one the instance name): each up set it for one name and broke the other's login, and up
    and refresh never settled."""
    workspace = ONE_SERVER_TWO_NAMES
    text = HEADER + "resources:\n  - uses: pg\n    kind: database\n  - uses: pg2  # <-\n    kind: database\n    name: moved\n"
    (problem,) = problems(tmp_path, text, workspace=workspace)
    assert (problem.path, problem.line) == ("resources[1].uses", marked_line(text))
    assert "logs in as its one postgres" in problem.message and "instances 'pg' and 'pg2' both reach" in problem.message
    assert "move them all in one edit" in problem.message
    for other in ("uses: pg3", "uses: pg"):  # another server, or one name for both: fine
        assert problems(_fresh(tmp_path), text.replace("uses: pg2", other), workspace=workspace) == []
    both_moved = text.replace("  - uses: pg\n", "  - uses: pg2\n")
    assert problems(_fresh(tmp_path), both_moved, workspace=workspace) == []


def test_a_bucket_within_another_projects_key_reach_is_refused_before_anything_is_made(tmp_path):
    """A MinIO key of `shop` reaches every `shop-*` bucket: another project's bucket named so would be open
    to it. Either order of the two files; the bucket is the entry reported, its file naming the key's."""
    workspace = {"name": "test", "shared": {
        "objects": {"engine": "minio", "host": "127.0.0.1", "port": PORTS["minio"], "adminUser": "admin", "adminSecret": "m"},
        "objects2": {"engine": "minio", "host": "127.0.0.1", "port": PORTS["minio"] + 1, "adminUser": "admin",
                     "adminSecret": "m"},
    }}
    key = HEADER + "resources:\n  - uses: objects\n    kind: access_key\n"
    bucket = HEADER.replace("name: shop", "name: other") + "resources:\n  - uses: objects\n    kind: bucket\n    name: shop-x-data  # <-\n"
    for files, bucket_file, key_file in (((key, bucket), "p1", "p0"), ((bucket, key), "p0", "p1")):
        (problem,) = problems(_fresh(tmp_path), *files, workspace=workspace)
        assert (problem.file, problem.path, problem.line) == (f"{bucket_file}/devstack.yaml", "resources[0].name",
                                                             marked_line(bucket))
        assert (f"minio bucket 'shop-x-data' would be within reach of the access_key of project 'shop' "
                f"({key_file}/devstack.yaml)") in problem.message
        assert "'shop-*'" in problem.message and "`devstack resource rm` it first, which keeps its data" in problem.message
    assert problems(_fresh(tmp_path), key, bucket.replace("name: shop-x-data", "name: shopx-data"), workspace=workspace) == []
    assert problems(_fresh(tmp_path), key, bucket.replace("uses: objects", "uses: objects2"), workspace=workspace) == []


def _fresh(tmp_path: Path) -> Path:
    """A new empty directory under tmp_path for one more workspace."""
    path = tmp_path / f"w{len(list(tmp_path.iterdir()))}"
    path.mkdir()
    return path


def test_a_project_file_listed_twice(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "devstack.yaml").write_text(db())
    with pytest.raises(WorkspaceInvalid) as raised:
        validate({**WORKSPACE, "projects": ["shop/devstack.yaml"] * 2}, tmp_path, None, "stacks/Pulumi.test.yaml")
    (problem,) = raised.value.problems
    assert problem.path == "config.devstack:workspace.projects[1]"
    assert "lists shop/devstack.yaml a second time (it is projects[0] already" in problem.message


def test_duplicate_project_names(tmp_path):
    found = problems(tmp_path, HEADER, HEADER)
    assert [(p.file, p.path) for p in found] == [("p1/devstack.yaml", "name")]
    assert "already declared by p0/devstack.yaml" in found[0].message


def test_no_follow_on_problems_from_a_broken_entry_or_a_bad_project_name(tmp_path):
    imports = "services:\n  api:\n    env:\n      import:\n        - from: pg/database\n          vars: {URL: dsn}\n"
    broken = HEADER + "resources:\n  - uses: pg\n    kind: database\n    credentials: sometimes\n" + imports
    assert [p.path for p in problems(tmp_path, broken)] == ["resources[0].credentials"]
    (tmp_path / "name").mkdir()
    numbered = db().replace("name: shop", "name: 123")
    assert [p.path for p in problems(tmp_path / "name", numbered)] == ["name"]


def test_an_encoding_that_does_not_fit_the_locale_is_a_problem_before_any_replacement(tmp_path):
    """The server would refuse CREATE DATABASE, after a purge replacement had dropped the old one."""
    text = db("    params: {encoding: LATIN1}  # <-\n")
    (problem,) = problems(tmp_path, text)
    assert problem.path == "resources[0].params" and problem.line == marked_line(text)
    assert problem.message.startswith("encoding 'LATIN1' does not fit locale 'C.UTF-8', whose codeset is UTF8")
    assert "set locale: C" in problem.message
    for i, fits in enumerate(("{encoding: LATIN1, locale: C}", "{encoding: utf-8, locale: en_US.UTF-8}",
                              "{encoding: SQL_ASCII}")):
        (tmp_path / f"ok{i}").mkdir()
        assert problems(tmp_path / f"ok{i}", db(f"    params: {fits}\n")) == [], fits


def test_a_user_without_a_database_param_needs_the_projects_database(tmp_path):
    user = "  - uses: pg  # <-\n    kind: user\n    name: rep\n"
    only_orders = HEADER + "resources:\n  - uses: pg\n    kind: database\n    name: orders\n" + user
    (problem,) = problems(tmp_path, only_orders)
    assert problem.path == "resources[1].params.database" and problem.line == marked_line(only_orders)
    assert "unset, so the project's database, names no database 'shop'" in problem.message
    assert "or set params.database" in problem.message
    (tmp_path / "ok").mkdir()
    assert problems(tmp_path / "ok", db() + user) == []


def test_nats_streams_on_a_shared_subject_are_a_problem_before_anything_is_made(tmp_path):
    """The default stream takes every `<owner>.>` subject, so a second stream needs its own subjects
    there as well; NATS would refuse the second in the middle of an up."""
    workspace = {"name": "test", "shared": {"events": {"engine": "nats", "host": "127.0.0.1", "port": PORTS["nats"],
                                                       "adminUser": "admin", "adminSecret": "natsAdmin"}}}
    default = "  - uses: events\n    kind: stream\n"
    audit = "  - uses: events  # <-\n    kind: stream\n    name: audit\n"
    text = HEADER + "resources:\n" + default + audit
    (problem,) = problems(tmp_path, text, workspace=workspace)
    assert problem.path == "resources[1].params.subjects" and problem.line == marked_line(text)
    assert "'shop.audit.>' overlaps 'shop.>' of stream 'shop'" in problem.message
    assert "unless its params.subjects say otherwise" in problem.message
    # Apart (the default stream on its own subjects), or wildcards that cannot meet: valid.
    apart = HEADER + "resources:\n" + default + "    params: {subjects: [shop.orders.>]}\n" + audit
    tokens = (HEADER + "resources:\n" + default + "    params: {subjects: [shop.a.*]}\n" + audit
              + "    params: {subjects: [shop.a.b.c, shop.b.>]}\n")
    for i, valid in enumerate((apart, tokens)):
        (tmp_path / f"ok{i}").mkdir()
        assert problems(tmp_path / f"ok{i}", valid, workspace=workspace) == [], valid


def test_a_consumer_filtering_outside_its_streams_subjects_is_a_problem(tmp_path):
    """The provider checks the filter only when the consumer changes: a stream narrowed later would
    leave its consumer filtering on subjects the stream no longer takes, receiving nothing."""
    workspace = {"name": "test", "shared": {"events": {"engine": "nats", "host": "127.0.0.1", "port": PORTS["nats"],
                                                       "adminUser": "admin", "adminSecret": "natsAdmin"}}}
    stream = "  - uses: events\n    kind: stream\n    name: s1\n    params: {subjects: [shop.s1.a]}\n"
    consumer = ("  - uses: events\n    kind: consumer\n    name: c1\n"
                "    params: {stream: s1, filterSubject: shop.s1.b}  # <-\n")
    text = HEADER + "resources:\n" + stream + consumer
    (problem,) = problems(tmp_path, text, workspace=workspace)
    assert problem.path == "resources[1].params.filterSubject" and problem.line == marked_line(text)
    assert "'shop.s1.b' is outside the subjects of stream 's1' (shop.s1.a)" in problem.message
    inside = HEADER + "resources:\n" + stream.replace("shop.s1.a", "shop.s1.>") + consumer
    (tmp_path / "ok").mkdir()
    assert problems(tmp_path / "ok", inside, workspace=workspace) == []


def test_an_env_var_set_twice_is_a_problem_not_a_silent_overwrite(tmp_path):
    env = ("services:\n  api:\n    env:\n      PGUSER: literal\n      import:\n        - from: pg/database\n"
           "          vars: {URL: dsn}\n        - from: pg/database\n          vars:\n"
           "            URL: user  # <-\n            PGUSER: user\n")
    found = problems(tmp_path, db() + env)
    assert sorted(p.path for p in found) == ["services.api.env.import[1].vars.PGUSER", "services.api.env.import[1].vars.URL"]
    url = next(p for p in found if p.path.endswith("URL"))
    assert url.line == marked_line(db() + env) and "also at services.api.env.import[0].vars.URL" in url.message


def test_a_project_role_named_like_another_projects_login_role_collides(tmp_path):
    """Project `shop`'s role `shop-x` is `shop_x`, the login role of project `shop-x`'s databases."""
    shop = HEADER + "resources:\n  - {uses: pg, kind: role, name: shop-x}\n"
    shop_x = db().replace("name: shop", "name: shop-x", 1) + "  - {uses: pg, kind: database, name: more}\n"
    found = problems(tmp_path, shop, shop_x)
    assert [(p.file, p.path) for p in found] == [("p1/devstack.yaml", "resources[0].name"),
                                                 ("p1/devstack.yaml", "resources[1].name")]
    assert all("both are postgres role 'shop_x' on instance 'pg' (every database of project 'shop-x' makes it)"
               in p.message for p in found)
    # The project's own databases share their login role: no collision among them.
    (tmp_path / "alone").mkdir()
    assert problems(tmp_path / "alone", shop_x) == []


def test_a_devstack_project_may_have_kafka_topics_but_no_principal(tmp_path):
    topic = HEADER.replace("name: shop", "name: devstack-tools") + "resources:\n  - {uses: kafka, kind: topic}\n"
    assert problems(tmp_path, topic, workspace=ALL_ENGINES) == []


def test_max_deliver_zero_is_normalized_to_what_the_server_stores():
    """The server keeps 0 (unlimited) as -1; normalized the same way, a refresh finds no drift."""
    from providers.nats.consumer import ConsumerSpec

    assert ConsumerSpec.model_validate({"stream": "s", "maxDeliver": 0}).max_deliver == -1


def test_aliases_of_aliases_are_read_once(tmp_path):
    """Nine levels of ten aliases each make one value of 10^9 items in under 600 bytes: indexing its lines and
    showing it in a message walked every item (minutes and gigabytes by level 7). Now each is read once."""
    lines = ["apiVersion: devstack/v1", "kind: Project", "name: p0", 'x0: &a0 ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]']
    lines += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "p0" / "devstack.yaml"
    path.parent.mkdir()
    path.write_text("\n".join(lines + ["resources: *a8", ""]))
    with pytest.raises(WorkspaceInvalid) as raised:
        validate({**WORKSPACE, "projects": ["p0/devstack.yaml"]}, tmp_path, None, "stacks/Pulumi.test.yaml")
    found = {p.path: p for p in raised.value.problems}
    assert "resources[0]" in found
    assert "must be a mapping (got [[[[" in found["resources[0]"].message and len(found["resources[0]"].message) < 120


def test_an_alias_inside_its_own_anchor_is_a_yaml_problem(tmp_path):
    text = HEADER + "resources: &r  # <-\n  - {uses: pg, kind: database, params: {extensions: *r}}\n"
    (problem,) = problems(tmp_path, text)
    assert "refers to a node that contains it" in problem.message and problem.line == marked_line(text)


def test_a_key_given_twice_in_a_mapping_is_a_problem_beside_the_files_others(tmp_path):
    """It had been the file's only problem, as a YAML error, hiding every other one until it was fixed."""
    text = db() + "    params: {encoding: EBCDIC}\nservices:\n  api:\n    env:\n      PGHOST: a\n      PGHOST: b  # <-\n"
    found = {p.path: p for p in problems(tmp_path, text)}
    assert set(found) == {"services.api.env.PGHOST", "resources[0].params.encoding"}, found
    twice = found["services.api.env.PGHOST"]
    assert "'PGHOST' is given twice in one mapping (first on line 11" in twice.message
    assert twice.line == marked_line(text)


@pytest.mark.parametrize("written, number, base", [("0755", 493, 8), ("-010", -8, 8), ("1:30", 90, 60)])
def test_a_number_yaml_reads_in_another_base_is_a_problem(tmp_path, written, number, base):
    """YAML 1.1 reads them so: an env value `UMASK: 0755` reached the service as 493, silently."""
    text = db() + f"services:\n  api:\n    env:\n      UMASK: {written}  # <-\n"
    (problem,) = problems(tmp_path, text)
    assert (problem.path, problem.line) == ("services.api.env.UMASK", marked_line(text))
    assert f"YAML reads {written} as the number {number} (base {base}): quote it ('{written}')" in problem.message
    quoted = db() + f"services:\n  api:\n    env:\n      UMASK: '{written}'\n      PLAIN: 10\n      ZERO: 0\n"
    (tmp_path / "quoted").mkdir()
    assert problems(tmp_path / "quoted", quoted) == []


def test_a_merge_key_override_is_not_a_key_given_twice(tmp_path):
    """`<<: *anchor` then a key of its own is YAML's way to reuse an entry; the duplicate-key check
    used to see the merged copy and refuse it."""
    text = HEADER + "resources:\n  - &pg {uses: pg, kind: database, name: one}\n  - {<<: *pg, name: two}\n"
    assert problems(tmp_path, text) == []
    (tmp_path / "two").mkdir()  # one entry merging two others
    two = HEADER + ("resources:\n  - &pg {uses: pg, kind: database, name: one}\n  - &kept {uses: pg, kind: role, name: r, purge: false}\n"
                    "  - {<<: *pg, <<: *kept, name: two}\n")
    assert problems(tmp_path / "two", two) == []
    (tmp_path / "typo").mkdir()
    broken = text.replace("name: two}", "name: two, purge: maybe}  # <-")
    (problem,) = problems(tmp_path / "typo", broken)  # lines still point at the entry that merges
    assert (problem.path, problem.line) == ("resources[1].purge", marked_line(broken))


def test_every_problem_is_reported_at_once(tmp_path):
    text = (HEADER + "resources:\n  - uses: mysql\n    kind: database\n"
            "  - uses: pg\n    kind: table\n  - uses: pg\n    kind: database\n    credentials: x\n")
    paths = sorted(p.path for p in problems(tmp_path, text))
    assert paths == ["resources[0].uses", "resources[1].kind", "resources[2].credentials"]


def test_yaml_syntax_error_has_its_line(tmp_path):
    text = HEADER + "resources:\n  - uses: pg\n    kind: [database\n"
    found = problems(tmp_path, text)
    assert len(found) == 1 and "not valid YAML" in found[0].message and found[0].line == 7


@pytest.mark.parametrize("text, line, says", [
    (HEADER + "resources: {uses: pg,\n  kind: database\nservices: {}\n", 6,
     "did not find expected ',' or '}', while parsing a flow mapping begun on line 4"),
    (HEADER + "resources:\n\t- uses: pg\n", 5, "(a tab: YAML indents with spaces only)"),
    (HEADER + "---\nname: other\n", 4, "but found another document, expected a single document in the stream"),
], ids=["unclosed-brace", "tab", "two-documents"])
def test_a_yaml_syntax_error_says_where_what_it_broke_began(tmp_path, text, line, says):
    (problem,) = problems(tmp_path, text)
    assert problem.line == line and says in problem.message, str(problem)


def test_a_project_path_that_is_a_directory_says_so(tmp_path):
    (tmp_path / "shop").mkdir()
    with pytest.raises(WorkspaceInvalid) as invalid:
        validate({**WORKSPACE, "projects": ["shop"]}, tmp_path, None, "stacks/Pulumi.test.yaml")
    assert [str(p) for p in invalid.value.problems] == [
        "shop: <document>: the path is a directory (listed in devstack:workspace.projects[0]; name the devstack.yaml in it)"]


def test_a_project_path_that_is_a_fifo_is_named_not_waited_on(tmp_path):
    """Reading a FIFO waits for a writer: validation (and so preview) had hung on one for ever."""
    import os

    os.mkfifo(tmp_path / "shop.yaml")
    with pytest.raises(WorkspaceInvalid) as invalid:
        validate({**WORKSPACE, "projects": ["shop.yaml"]}, tmp_path, None, "stacks/Pulumi.test.yaml")
    (problem,) = invalid.value.problems
    assert problem.file == "shop.yaml" and "not a regular file (a FIFO" in problem.message, str(problem)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n"], ids=["list", "scalar"])
def test_document_must_be_a_mapping(tmp_path, text):
    found = problems(tmp_path, text)
    assert len(found) == 1 and "must be a mapping" in found[0].message


def test_missing_project_file_names_the_config_entry(tmp_path):
    with pytest.raises(WorkspaceInvalid) as raised:
        validate({**WORKSPACE, "projects": ["nowhere/devstack.yaml"]}, tmp_path, None, "stacks/Pulumi.test.yaml")
    assert "devstack:workspace.projects[0]" in raised.value.problems[0].message


def test_unknown_engine_in_workspace(tmp_path):
    workspace = {**WORKSPACE, "shared": {"db": {"engine": "mysql", "port": 3306, "adminUser": "a", "adminSecret": "k"}}}
    found = problems(tmp_path, HEADER, workspace=workspace)
    assert [(p.file, p.path) for p in found] == [("stacks/Pulumi.test.yaml", "config.devstack:workspace.shared.db.engine")]
    assert "unknown engine 'mysql'" in found[0].message


def test_instance_version_may_be_a_number_and_port_must_be_one(tmp_path):
    pg = WORKSPACE["shared"]["pg"]
    assert problems(tmp_path, db(), workspace={**WORKSPACE, "shared": {"pg": {**pg, "version": 15}}}) == []
    (tmp_path / "float").mkdir()  # `version: 2.10` is the number 2.1
    found = problems(tmp_path / "float", db(), workspace={**WORKSPACE, "shared": {"pg": {**pg, "version": 2.10}}})
    assert [p.path for p in found] == ["config.devstack:workspace.shared.pg.version"] and "quote the version" in found[0].message
    (tmp_path / "bad").mkdir()
    found = problems(tmp_path / "bad", db(), workspace={**WORKSPACE, "shared": {"pg": {**pg, "port": 99999}}})
    assert [p.path for p in found] == ["config.devstack:workspace.shared.pg.port"]
    assert "less than or equal to 65535" in found[0].message
    (tmp_path / "v6").mkdir()
    found = problems(tmp_path / "v6", db(), workspace={**WORKSPACE, "shared": {"pg": {**pg, "host": "::1:5432"}}})
    assert [p.path for p in found] == ["config.devstack:workspace.shared.pg.host"] and "ambiguous" in found[0].message


@pytest.mark.parametrize("field, value, says", [
    ("port", True, "not a port number"),  # pydantic alone reads it as port 1
    ("host", "", "not a host"),
    ("host", " 127.0.0.1", "not a host"),
    ("adminUser", "", "blank"),
    ("adminSecret", "", "blank"),
    ("adminSecret", "devstack:pgAdmin", "give the key alone"),
    ("region", "", "blank"),
])
def test_an_instance_field_that_could_never_reach_its_engine_is_a_problem(tmp_path, field, value, says):
    pg = WORKSPACE["shared"]["pg"]
    found = problems(tmp_path, db(), workspace={**WORKSPACE, "shared": {"pg": {**pg, field: value}}})
    assert [p.path for p in found] == [f"config.devstack:workspace.shared.pg.{field}"] and says in found[0].message


def test_an_adopt_entry_must_name_a_project_of_the_workspace(tmp_path):
    (tmp_path / "typo").mkdir(), (tmp_path / "blank").mkdir()
    assert problems(tmp_path, HEADER, workspace={**WORKSPACE, "adopt": {"shop": "old@3f0c1a2b3c4d"}}) == []
    found = problems(tmp_path / "typo", HEADER, workspace={**WORKSPACE, "adopt": {"shopp": "old"}})
    assert [p.path for p in found] == ["config.devstack:workspace.adopt.shopp"]
    assert "no project of this workspace is named 'shopp' (its projects: shop)" in found[0].message
    found = problems(tmp_path / "blank", HEADER, workspace={**WORKSPACE, "adopt": {"shop": " "}})
    assert [p.path for p in found] == ["config.devstack:workspace.adopt"]
    assert "shop: blank" in found[0].message


def test_a_workspace_needs_a_name(tmp_path):
    found = problems(tmp_path, HEADER, workspace={**WORKSPACE, "name": ""})
    assert [p.path for p in found] == ["config.devstack:workspace.name"]


@pytest.mark.parametrize("key", ["~", "1"])
def test_a_service_key_yaml_reads_as_another_value_is_a_problem(tmp_path, key):
    text = HEADER + f"services:  # <-\n  {key}:\n    env: {{A: b}}\n"
    (problem,) = problems(tmp_path, text)
    assert (problem.path, problem.line) == ("services", marked_line(text)) and "is not a service name" in problem.message


def test_a_section_of_the_wrong_shape_is_quoted_short(tmp_path):
    workspace = {**WORKSPACE, "shared": [{"name": f"instance-{i}", "engine": "postgres"} for i in range(20)]}
    (problem,) = problems(tmp_path, HEADER, workspace=workspace)
    assert problem.path == "config.devstack:workspace.shared" and "must be a mapping" in problem.message
    assert len(problem.message) < 120 and problem.message.endswith(" ...)")


def test_unknown_engine_of_an_instance_in_use_is_reported_once(tmp_path):
    workspace = {**WORKSPACE, "shared": {"pg": {**WORKSPACE["shared"]["pg"], "engine": "postgresql"}}}
    found = problems(tmp_path, db() + "  - uses: pg\n    kind: database\n    name: orders\n", workspace=workspace)
    assert [p.path for p in found] == ["config.devstack:workspace.shared.pg.engine"]
    assert "unknown engine 'postgresql'" in found[0].message


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "p0" / "devstack.yaml"
    path.parent.mkdir()
    path.write_bytes((HEADER + "# caf\xe9\n").encode("latin-1"))
    with pytest.raises(WorkspaceInvalid) as raised:
        validate({**WORKSPACE, "projects": ["p0/devstack.yaml"]}, tmp_path, None, "stacks/Pulumi.test.yaml")
    (problem,) = raised.value.problems
    assert problem.file == "p0/devstack.yaml" and "not UTF-8 text: byte 0xe9" in problem.message


def test_admin_secret_of_an_instance_in_use_must_be_set(tmp_path):
    workspace = {**ALL_ENGINES, "projects": ["p0/devstack.yaml"]}
    path = tmp_path / "p0" / "devstack.yaml"
    path.parent.mkdir()
    path.write_text(db() + "  - uses: cache\n    kind: redis_index\n")
    with pytest.raises(WorkspaceInvalid) as raised:
        validate(workspace, tmp_path, None, "stacks/Pulumi.test.yaml", config_is_set=lambda key: key == "pgAdmin")
    (problem,) = raised.value.problems  # pg's is set; objects, aws ... are unused
    assert problem.path == "config.devstack:workspace.shared.cache.adminSecret"
    assert "devstack:cacheAdmin is not set" in problem.message
    assert "pulumi config set --secret devstack:cacheAdmin --stack test," in problem.message  # not the selected one
    assert validate(workspace, tmp_path, None, "x", config_is_set=lambda key: key in ("pgAdmin", "cacheAdmin")).projects
    # Every problem at once: a project with a problem of its own still needs its instances' secrets.
    path.write_text(db() + "  - uses: cache\n    kind: redis_indx\n")
    with pytest.raises(WorkspaceInvalid) as raised:
        validate(workspace, tmp_path, None, "stacks/Pulumi.test.yaml", config_is_set=lambda key: key == "pgAdmin")
    assert sorted(p.path for p in raised.value.problems) == ["config.devstack:workspace.shared.cache.adminSecret",
                                                              "resources[1].kind"]


def test_an_admin_password_in_plaintext_is_a_problem_used_or_not(tmp_path):
    """`pulumi config set` without --secret (or ConfigValue without secret=True) would keep it unencrypted
    in the stack config and in the provider's state."""
    workspace = {**ALL_ENGINES, "projects": ["p0/devstack.yaml"]}
    path = tmp_path / "p0" / "devstack.yaml"
    path.parent.mkdir()
    path.write_text(db())
    secret = {"pgAdmin", "cacheAdmin"}
    with pytest.raises(WorkspaceInvalid) as raised:
        validate(workspace, tmp_path, None, "stacks/Pulumi.test.yaml", config_is_set=lambda key: key in secret | {"objectsAdmin"},
                 config_is_secret=lambda key: key in secret)
    (problem,) = raised.value.problems  # objects is unused, but its password is in the file all the same
    assert problem.path == "config.devstack:workspace.shared.objects.adminSecret"
    assert "devstack:objectsAdmin holds the minio admin password in plaintext" in problem.message
    assert "pulumi config set --secret devstack:objectsAdmin --stack test," in problem.message
    assert validate(workspace, tmp_path, None, "x", config_is_set=lambda key: key in secret,
                    config_is_secret=lambda key: key in secret).projects


def test_an_admin_password_in_the_workspace_is_refused_without_showing_it(tmp_path):
    """devstack:workspace is plaintext in the stack config and in the provider's state: no password there."""
    shared = {**ALL_ENGINES["shared"], "pg": {**ALL_ENGINES["shared"]["pg"], "admin_password": "hunter2-plain"}}
    with pytest.raises(WorkspaceInvalid) as raised:
        validate({**ALL_ENGINES, "shared": shared}, tmp_path, None, "stacks/Pulumi.test.yaml")
    (problem,) = raised.value.problems
    assert problem.path == "config.devstack:workspace.shared.pg.admin_password"
    assert "pulumi config set --secret" in problem.message and "hunter2" not in str(problem)


def test_valid_project_passes_and_defaults_names(tmp_path):
    text = db() + "services:\n  api:\n    uses: [pg]\n    env:\n      import:\n        - from: pg/database\n          vars: {URL: dsn}\n"
    path = tmp_path / "ok" / "devstack.yaml"
    path.parent.mkdir()
    path.write_text(text)
    validated = validate({**WORKSPACE, "projects": ["ok/devstack.yaml"]}, tmp_path, None, "x")
    assert validated.projects[0].resources[0].name == "shop"
    assert validated.projects[0].services["api"].env.imports[0].vars == {"URL": "dsn"}


SPEC_WORKSPACE = {"name": "test", "shared": {
    "postgres": {"engine": "postgres", "host": "127.0.0.1", "port": 1, "adminUser": "admin", "adminSecret": "pgAdmin"},
    "minio": {"engine": "minio", "host": "127.0.0.1", "port": 2, "adminUser": "admin", "adminSecret": "minioAdmin"}}}


def test_the_specs_forms_name_instances_imports_and_leave_devstacks_fields_alone(tmp_path):
    """Spec 27's devstack.yaml: `workspace.shared.<instance>`, `vars:` as a list of client variables, and
    fields of the rest of devstack (a service's template, ports, top-level keys) passed over."""
    text = ("apiVersion: devstack/v1\nkind: Project\nname: acme\nx-owner: team-a\nprofiles: [dev]\nservices:\n"
            "  api:\n    template: node.vite\n    ports: ['3000:3000']\n    depends_on: [db]\n"
            "    uses: [workspace.shared.postgres, workspace.shared.minio]\n    env:\n      import:\n"
            "        - from: workspace.shared.postgres\n          vars: [PGPASSWORD, DATABASE_URL]\n"
            "        - from: workspace.shared.minio\n          vars: [S3_BUCKET]\n"
            "      PGUSER: ${ref:workspace.shared.postgres.user}\n"
            "resources:\n  - uses: workspace.shared.postgres\n    kind: database\n    name: acme\n"
            "  - {uses: workspace.shared.minio, kind: bucket, name: uploads}\n")
    project = valid_project(tmp_path, text, SPEC_WORKSPACE)
    assert [(r.uses, r.kind, r.name) for r in project.resources] == [("postgres", "database", "acme"),
                                                                     ("minio", "bucket", "uploads")]
    api = project.services["api"]
    assert api.uses == ["postgres", "minio"]
    assert [(i.source, i.vars) for i in api.env.imports] == [
        ("postgres/database/acme", {"PGPASSWORD": "password", "DATABASE_URL": "dsn"}),
        ("minio/bucket/uploads", {"S3_BUCKET": "bucket"})]


def test_an_import_of_an_instance_picks_the_one_resource_that_has_the_variables(tmp_path):
    """Several resources on one instance, one of which has the variables asked for: no need to name it."""
    text = (HEADER + "resources:\n  - {uses: objects, kind: bucket, name: media}\n"
            "  - {uses: objects, kind: lifecycle, name: media, params: {expireDays: 7}}\n"
            "services:\n  api:\n    env:\n      import:\n        - from: workspace.shared.objects\n"
            "          vars: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]\n")
    (imported,) = valid_project(tmp_path, text, ALL_ENGINES).services["api"].env.imports
    assert (imported.source, imported.vars) == ("objects/bucket/media", {"AWS_ACCESS_KEY_ID": "accessKey",
                                                                         "AWS_SECRET_ACCESS_KEY": "secretKey"})
    # A bucket's key and the project's access key both have them: which one is the user's to say.
    (tmp_path / "q").mkdir()
    (problem,) = problems(tmp_path / "q", text.replace("kind: lifecycle, name: media, params: {expireDays: 7}",
                                                       "kind: access_key"), workspace=ALL_ENGINES)
    assert problem.path == "services.api.env.import[0].from"
    assert "workspace.shared.objects/bucket/media, workspace.shared.objects/access_key/shop" in problem.message


def test_exports_render_whole_numbers_as_integers():
    from components.templates import engine_template

    dsn = engine_template("postgres").kinds["database"].exports["dsn"]
    rendered = dsn.render({"user": "shop", "password": "p@ss word", "host": "127.0.0.1", "port": float(PORTS["postgres"]),
                         "database": "shop"})
    assert rendered == f"postgresql://shop:p%40ss%20word@127.0.0.1:{PORTS['postgres']}/shop"


def test_messages_name_the_stack_config_file_where_pulumi_keeps_it(tmp_path):
    """Under Pulumi.yaml's stackConfigDir (the checkout: stacks/), else beside Pulumi.yaml (an
    automation-API work dir writes one without it)."""
    from components.yamlfile import stack_config_file
    from tools.pulumi_env import ROOT

    assert stack_config_file(ROOT, "local") == "stacks/Pulumi.local.yaml"
    assert (ROOT / stack_config_file(ROOT, "local")).is_file()
    (tmp_path / "Pulumi.yaml").write_text("name: devstack\nruntime: python\n")
    assert stack_config_file(tmp_path, "e2e") == "Pulumi.e2e.yaml"
    (tmp_path / "Pulumi.yaml").write_text("name: devstack\nruntime: python\nstackConfigDir: config/\n")
    assert stack_config_file(tmp_path, "e2e") == "config/Pulumi.e2e.yaml"


def test_encryption_salt_is_read_where_pulumi_keeps_the_stack_config(tmp_path):
    from components.yamlfile import encryption_salt

    assert encryption_salt(tmp_path, "local") is None  # no config file yet: markers name the stack alone
    (tmp_path / "Pulumi.yaml").write_text("name: devstack\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.local.yaml").write_text("encryptionsalt: v1:abc\nconfig: {}\n")
    (tmp_path / "Pulumi.local.yaml").write_text("encryptionsalt: v1:elsewhere\n")  # not where Pulumi looks
    assert encryption_salt(tmp_path, "local") == "v1:abc"


def test_generated_credentials_on_a_kind_without_any_are_a_problem(tmp_path):
    text = HEADER + "resources:\n  - uses: pg\n    kind: role\n    name: readers\n    credentials: generated  # <-\n"
    (problem,) = problems(tmp_path, text)
    assert (problem.path, problem.line) == ("resources[0].credentials", marked_line(text))
    assert "has no credentials of its own" in problem.message
    (tmp_path / "ok").mkdir()
    assert problems(tmp_path / "ok", text.replace("kind: role\n    name: readers", "kind: database")) == []


# --- names: mapped per engine, collisions after mapping refused naming both ----------------------

MAPPING_WORKSPACE = {**WORKSPACE, "shared": {**WORKSPACE["shared"], "s3": {
    "engine": "minio", "host": "127.0.0.1", "port": PORTS["minio"], "adminUser": "admin", "adminSecret": "minioAdmin"}}}


@pytest.mark.parametrize("first, second, mapped", [
    ("{uses: s3, kind: bucket, name: Uploads}", "{uses: s3, kind: bucket, name: uploads}", "bucket 'uploads'"),
    ("{uses: pg, kind: database, name: Orders}", "{uses: pg, kind: database, name: orders}", "database 'orders'"),
    ("{uses: pg, kind: database, name: a.b}", "{uses: pg, kind: database, name: a-b}", "database 'a_b'"),
    ("{uses: pg, kind: role, name: Reader}", "{uses: pg, kind: role, name: reader}", "role 'reader'"),
    ("{uses: s3, kind: bucket, name: shop}", "{uses: s3, kind: bucket}", "bucket 'shop'"),
])
def test_two_names_mapping_to_one_engine_object_are_refused_naming_both(tmp_path, first, second, mapped):
    text = HEADER + f"resources:\n  - {first}\n  - {second}  # <-\n"
    (found,) = problems(tmp_path, text, workspace=MAPPING_WORKSPACE)
    assert found.path == "resources[1].name" and found.line == marked_line(text)
    assert "collides with p0/devstack.yaml resources[0]" in found.message and mapped in found.message


@pytest.mark.parametrize("name", ["Orders", "1orders", "a.b_c-D", "x" * 128])
def test_a_name_outside_an_engines_rules_is_mapped_not_refused(tmp_path, name):
    text = HEADER + f"resources:\n  - {{uses: pg, kind: database, name: {name}}}\n  - {{uses: s3, kind: bucket, name: {name}}}\n"
    assert problems(tmp_path, text, workspace=MAPPING_WORKSPACE) == []


@pytest.mark.parametrize("name", ["Shop", "shop.eu", "my_shop", "9shop", "s" * 128])
def test_any_name_devstack_accepts_is_a_project_name_mapped_per_engine(tmp_path, name):
    text = HEADER.replace("name: shop", f"name: {name}") + (
        "resources:\n  - {uses: pg, kind: database}\n  - {uses: s3, kind: bucket}\n  - {uses: s3, kind: access_key}\n")
    assert problems(tmp_path, text, workspace=MAPPING_WORKSPACE) == []


def test_two_projects_whose_names_map_to_one_are_refused_naming_both(tmp_path):
    first, second = HEADER.replace("name: shop", "name: Shop"), HEADER.replace("name: shop", "name: shop  # <-")
    (found,) = problems(tmp_path, first, second)
    assert (found.file, found.path, found.line) == ("p1/devstack.yaml", "name", marked_line(second))
    assert "maps to the same PostgreSQL, bucket, NATS names as project 'Shop' (p0/devstack.yaml)" in found.message


def test_two_projects_naming_one_engine_object_explicitly_are_refused(tmp_path):
    mine = HEADER + "resources:\n  - {uses: objects, kind: bucket, name: uploads}\n"
    theirs = HEADER.replace("name: shop", "name: blog") + "resources:\n  - {uses: objects, kind: bucket, name: uploads}  # <-\n"
    (found,) = problems(tmp_path, mine, theirs, workspace=ALL_ENGINES)
    assert (found.file, found.path, found.line) == ("p1/devstack.yaml", "resources[0].name", marked_line(theirs))
    assert "collides with p0/devstack.yaml resources[0]: both are minio bucket 'uploads'" in found.message


def test_a_topic_within_another_projects_acl_prefix_is_refused_before_anything_is_made(tmp_path):
    acl = HEADER + "resources:\n  - {uses: kafka, kind: acl}\n"
    topic = HEADER.replace("name: shop", "name: blog") + "resources:\n  - {uses: kafka, kind: topic, name: shop.orders}  # <-\n"
    (found,) = problems(tmp_path, acl, topic, workspace=ALL_ENGINES)
    assert (found.file, found.path) == ("p1/devstack.yaml", "resources[0].name")
    assert "kafka topic 'shop.orders' would be within reach of the acl of project 'shop'" in found.message
    outside = topic.replace("name: shop.orders", "name: shop-orders")
    (tmp_path / "again").mkdir()
    assert problems(tmp_path / "again", acl, outside, workspace=ALL_ENGINES) == []


def test_tls_secrets_of_an_instance_in_use_must_be_set_and_a_key_secret(tmp_path):
    """`tls.caSecret` and `tls.keySecret` name stack-config keys like adminSecret: unset is a problem, and a
    client key kept in plaintext is one too (a CA is public: plaintext is fine)."""
    pg = {**ALL_ENGINES["shared"]["pg"], "tls": {"caSecret": "pgCa", "certFile": __file__, "keySecret": "pgKey"}}
    workspace = {**ALL_ENGINES, "shared": {**ALL_ENGINES["shared"], "pg": pg}, "projects": ["p0/devstack.yaml"]}
    (tmp_path / "p0").mkdir()
    (tmp_path / "p0" / "devstack.yaml").write_text(db())
    with pytest.raises(WorkspaceInvalid) as raised:
        validate(workspace, tmp_path, None, "stacks/Pulumi.test.yaml", config_is_set=lambda key: key == "pgAdmin")
    assert {p.path: p.message for p in raised.value.problems} == {
        f"config.devstack:workspace.shared.pg.tls.{field}":
            f"config key devstack:{key} is not set (store {what} there: pulumi config set --secret devstack:{key} "
            "--stack test < file.pem)"
        for field, key, what in (("caSecret", "pgCa", "the CA bundle (PEM)"),
                                 ("keySecret", "pgKey", "the client certificate's key (PEM)"))}
    every = {"pgAdmin", "pgCa", "pgKey"}
    with pytest.raises(WorkspaceInvalid) as raised:
        validate(workspace, tmp_path, None, "x", config_is_set=lambda key: key in every,
                 config_is_secret=lambda key: key == "pgAdmin")
    (problem,) = raised.value.problems
    assert problem.path.endswith("pg.tls.keySecret") and "holds a private key in plaintext" in problem.message
    assert validate(workspace, tmp_path, None, "x", config_is_set=lambda key: key in every,
                    config_is_secret=lambda key: key in {"pgAdmin", "pgKey"}).projects
