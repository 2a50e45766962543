"""A project name outside every engine's own rules, end to end: each engine gets it mapped.

`Up.<t>_X` has upper case, a '.' and a '_': PostgreSQL folds it to `up_<t>_x`,
buckets to `up.<t>-x`, NATS to `up_<t>_x`, Kafka keeps the case but not the
'.' (`Up_<t>_X`, so no other project's prefix holds it), SQS replaces the '.'.
The predictable password is the project name itself, and every login works
with it; the project's key reaches its default bucket by pattern and an
explicitly named one by name. Everything is purge: true: the destroy at the
end leaves the engines clean.
"""

from __future__ import annotations

import secrets

import psycopg
import redis

from providers import naming
from tests.e2e.conftest import e2e_stack, write_project
from tests.e2e.test_kafka import topic_exists
from tests.e2e.test_minio import s3_as
from tests.e2e.test_nats import account_outputs
from tests.e2e.test_postgres_database import database_exists
from tests.e2e.test_upgrade import PG, REDIS, bucket_exists, secrets_of, shared
from tests.kafka_clients import produce


def test_a_project_name_outside_every_engines_rules_is_mapped_for_each(project_dir, offline_env, pulumi_command,
                                                                      admin):
    token = secrets.token_hex(3)
    project, files = f"Up.{token}_X", f"files{token}"
    entries = [{"uses": "pg", "kind": "database"}, {"uses": "objects", "kind": "bucket"},
               {"uses": "objects", "kind": "bucket", "name": files}, {"uses": "objects", "kind": "access_key"},
               {"uses": "kafka", "kind": "topic"}, {"uses": "kafka", "kind": "acl"}, {"uses": "events", "kind": "stream"},
               {"uses": "cache", "kind": "acl_user"}, {"uses": "aws", "kind": "queue"}]
    paths = [write_project(project_dir, project, [{**entry, "purge": True} for entry in entries])]
    stack = e2e_stack(project_dir, offline_env, pulumi_command, shared(admin), paths, secrets_of(admin))
    try:
        out = stack.up(on_output=print).outputs[project].value["resources"]
        expected = {
            f"pg/database/{project}": ("database", f"up_{token}_x"), f"objects/bucket/{project}": ("bucket", f"up.{token}-x"),
            f"objects/bucket/{files}": ("bucket", files), f"objects/access_key/{project}": ("accessKey", f"up.{token}_x"),
            f"kafka/topic/{project}": ("topic", f"Up_{token}_X"), f"kafka/acl/{project}": ("user", f"Up_{token}_X"),
            f"events/stream/{project}": ("stream", f"up_{token}_x"), f"cache/acl_user/{project}": ("user", project),
            f"aws/queue/{project}": ("queue", f"Up-{token}_X"),
        }
        assert {key: out[key][attribute] for key, (attribute, _) in expected.items()} == {
            key: name for key, (_, name) in expected.items()}
        assert out[f"events/stream/{project}"]["subjects"] == f"up_{token}_x.>"
        assert out[f"kafka/acl/{project}"]["prefix"] == f"Up_{token}_X."
        assert naming.NAME.fullmatch(project)

        # Predictable logins: the password is the project name, on every engine.
        with psycopg.connect(host=PG[0], port=PG[1], user=f"up_{token}_x", password=project,
                             dbname=f"up_{token}_x") as conn:
            assert conn.execute("SELECT current_user").fetchone() == (f"up_{token}_x",)
        cache = redis.Redis(host=REDIS[0], port=REDIS[1], username=project, password=project)
        assert cache.set(f"{project}:k", "v") and cache.get(f"{project}:k") == b"v"
        assert produce(f"Up_{token}_X", project, f"Up_{token}_X") is None
        key = out[f"objects/access_key/{project}"]
        client = s3_as(key["accessKey"], key["secretKey"])
        for bucket in (f"up.{token}-x", files):  # its pattern's, and the one it reaches by name
            client.put_object(Bucket=bucket, Key="k", Body=b"v")
    finally:
        stack.destroy(on_output=print)
    assert not database_exists(admin, f"up_{token}_x")
    assert not bucket_exists(admin, f"up.{token}-x") and not bucket_exists(admin, files)
    # The stream lived in the project's nats account, which the purge dropped with it.
    assert not topic_exists(admin, f"Up_{token}_X") and account_outputs(admin, project) is None
