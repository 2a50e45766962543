"""Baseline (a): the same engine operations, done directly with the client libraries.

What a careful hand-written script would do for the benchmark's mix: one
client per engine, reused for every resource; each resource is checked for
existence, created and marked the way the provider does it (same statements,
same marker, same PostgreSQL advisory lock). Engines run in parallel, one
thread each; resources of one engine run one after another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import boto3
import nats
import psycopg
import redis as redis_py
from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError, ServiceUnavailableError
from psycopg import sql

from bench.workload import Workload

MARKER = {"managed-by": "devstack", "stack": "bench-direct"}


def marker(owner: str) -> str:
    return json.dumps({**MARKER, "owner": owner}, sort_keys=True)


def run(workload: Workload, shared: dict[str, dict[str, Any]], admin: dict) -> float:
    """Create every resource of `workload`; returns the wall time in seconds."""
    by_engine: dict[str, list[str]] = {}
    for project, _instance, engine, _kind in workload.resources():
        by_engine.setdefault(engine, []).append(project)
    address = {inst["engine"]: (inst["host"], int(inst["port"])) for inst in shared.values()}
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(by_engine)) as pool:
        futures = [pool.submit(CREATORS[engine], address[engine], admin[engine], owners)
                   for engine, owners in by_engine.items()]
        for future in futures:
            future.result()
    return time.monotonic() - start


def postgres(address: tuple[str, int], cred: Any, owners: list[str]) -> None:
    lock = 0x6465767374616B  # the provider's DDL lock: concurrent stacks serialize the same way
    with psycopg.connect(host=address[0], port=address[1], user=cred.user, password=cred.password,
                         dbname="postgres", autocommit=True, connect_timeout=5) as conn:
        for owner in owners:
            name = owner.replace("-", "_")
            db, role = sql.Identifier(name), sql.Identifier(name)
            conn.execute("SELECT pg_advisory_lock(%s)", (lock,))
            try:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                    continue
                verifier = conn.pgconn.encrypt_password(owner.encode(), name.encode(), b"scram-sha-256").decode()
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(verifier)))
                conn.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(role, sql.Literal(marker(owner))))
                conn.execute(sql.SQL("CREATE DATABASE {} OWNER {} ENCODING 'UTF8' LOCALE 'C.UTF-8' TEMPLATE template0")
                             .format(db, role))
                conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
                conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(db, sql.Literal(marker(owner))))
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))


def redis(address: tuple[str, int], cred: Any, owners: list[str]) -> None:
    from providers.redis.acl_user import AclUserSpec, acl_rules
    from providers.redis.client import ACL_OWNERS_KEY

    with redis_py.Redis(host=address[0], port=address[1], username=cred.user, password=cred.password,
                        decode_responses=True) as client:
        for owner in owners:
            if client.acl_getuser(owner) is not None:
                continue
            client.hset(ACL_OWNERS_KEY, owner, marker(owner))
            client.acl_setuser(owner, enabled=True, reset=True,
                               hashed_passwords=["+" + hashlib.sha256(owner.encode()).hexdigest()],
                               **acl_rules(owner, AclUserSpec()))
            client.execute_command("ACL", "GETUSER", owner)
            client.acl_save()


def _aws(address: tuple[str, int], cred: Any, service: str) -> Any:
    return boto3.session.Session().client(service, endpoint_url=f"http://{address[0]}:{address[1]}",
                                          region_name="us-east-1", aws_access_key_id=cred.user,
                                          aws_secret_access_key=cred.password)


def minio(address: tuple[str, int], cred: Any, owners: list[str]) -> None:
    from minio.credentials import StaticProvider
    from minio.minioadmin import MinioAdmin

    s3 = _aws(address, cred, "s3")
    api = MinioAdmin(endpoint=f"{address[0]}:{address[1]}", credentials=StaticProvider(cred.user, cred.password),
                     secure=False)
    for owner in owners:
        try:
            s3.head_bucket(Bucket=owner)
            continue
        except s3.exceptions.ClientError:
            pass
        s3.create_bucket(Bucket=owner)
        tags = [{"Key": "managed-by", "Value": "devstack"}, {"Key": "devstack-owner", "Value": owner},
                {"Key": "devstack-stack", "Value": "bench-direct"}]
        s3.put_bucket_tagging(Bucket=owner, Tagging={"TagSet": tags})
        s3.get_bucket_versioning(Bucket=owner)
        _bucket_key(api, owner)


def _bucket_key(api: Any, bucket: str) -> None:
    """The bucket's own key as the provider makes it: a user, a policy on that bucket alone, attached."""
    key, arns = f"{bucket}~key", [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]
    policy = {"Version": "2012-10-17", "ID": json.dumps({**json.loads(marker(bucket)), "kind": "bucket"}, sort_keys=True),
              "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": arns}]}
    api.policy_add(f"devstack-{key}", policy=policy)
    api.user_add(key, bucket * 2)
    api.policy_set(f"devstack-{key}", user=key)


def localstack(address: tuple[str, int], cred: Any, owners: list[str]) -> None:
    sqs = _aws(address, cred, "sqs")
    for owner in owners:
        try:
            sqs.get_queue_url(QueueName=owner)
            continue
        except sqs.exceptions.ClientError:
            pass
        tags = {"managed-by": "devstack", "devstack-owner": owner, "devstack-stack": "bench-direct"}
        url = sqs.create_queue(QueueName=owner, tags=tags)["QueueUrl"]
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])


def nats_streams(address: tuple[str, int], cred: Any, owners: list[str]) -> None:
    """Each owner's account (pushed through the system account), then its stream, in that account."""
    from providers.nats import auth as nats_auth
    from providers.nats.claims import account_claims, account_jwt
    from providers.nats.session import admin_credential

    operator = nats_auth.Operator.from_secret(cred.password)
    url = f"nats://{address[0]}:{address[1]}"

    async def stream(owner: str) -> None:
        nc = await nats.connect(servers=[url], **admin_credential(cred.password, owner), allow_reconnect=False)
        try:
            js = nc.jetstream(timeout=10)
            for _ in range(250):  # a new account's JetStream answers a moment after its push
                try:
                    await js.stream_info(owner)
                    return
                except NotFoundError:
                    break
                except ServiceUnavailableError:
                    await asyncio.sleep(0.02)
            meta = {f"devstack.{k}": v for k, v in json.loads(marker(owner)).items()}
            await js.add_stream(StreamConfig(name=owner, subjects=[f"{owner}.>"], metadata=meta))
        finally:
            await nc.close()

    async def main() -> None:
        system = await nats.connect(servers=[url], **admin_credential(cred.password), allow_reconnect=False)
        try:
            for owner in owners:
                if await account_claims(system, nats_auth.public(operator.account_key(owner))) is None:
                    await system.request("$SYS.REQ.CLAIMS.UPDATE",
                                         account_jwt(operator, owner, "bench-direct").encode(), timeout=10)
                await stream(owner)
        finally:
            await system.close()

    asyncio.run(main())


def kafka(address: tuple[str, int], cred: Any, owners: list[str]) -> None:
    settings = {"bootstrap.servers": f"{address[0]}:{address[1]}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": cred.user, "sasl.password": cred.password,
                "log_level": 0}
    admin = AdminClient(settings)
    producer = Producer({**settings, "acks": "all"})
    for owner in owners:
        try:
            admin.describe_topics(TopicCollection([owner]))[owner].result(timeout=30)
            continue
        except KafkaException as err:
            if err.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
        producer.produce("__devstack_owners", key=f"topic:{owner}".encode(), value=marker(owner).encode())
        producer.flush(30)
        admin.create_topics([NewTopic(owner, 1, 1)])[owner].result(timeout=30)


CREATORS: dict[str, Callable[[tuple[str, int], Any, list[str]], None]] = {
    "postgres": postgres, "redis": redis, "minio": minio, "localstack": localstack, "nats": nats_streams,
    "kafka": kafka,
}
