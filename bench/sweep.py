"""Drop everything whose name starts with a benchmark run's prefix, in every engine, through admin clients.

The benchmark's stacks purge on destroy; this sweep removes what the direct
baseline made and whatever an interrupted run left. `sweep(..., dry_run=True)`
only counts, which is how a run proves it left nothing behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any, Callable

import boto3
import nats
import psycopg
import redis as redis_py
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
    UserScramCredentialDeletion,
)
from psycopg import sql

from providers.nats import auth as nats_auth
from providers.markers import marker_owner


def postgres(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    pattern = prefix.replace("-", "_") + "%"
    with psycopg.connect(host=address[0], port=address[1], user=cred.user, password=cred.password,
                         dbname="postgres", autocommit=True, connect_timeout=5) as conn:
        dbs = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (pattern,))]
        roles = [r[0] for r in conn.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE %s", (pattern,))]
        if not dry_run:
            for name in dbs:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            for name in roles:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
    return len(dbs) + len(roles)


def redis(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    from providers.redis.client import ACL_OWNERS_KEY, ALLOCATIONS_KEY

    def connect(db: int = 0) -> redis_py.Redis:
        return redis_py.Redis(host=address[0], port=address[1], username=cred.user, password=cred.password,
                              db=db, decode_responses=True)

    with connect() as client:
        users = [u for u in client.acl_users() if u.startswith(prefix)]
        markers = [k for k in client.hkeys(ACL_OWNERS_KEY) if k.startswith(prefix)]
        indexes = {k: v for k, v in client.hgetall(ALLOCATIONS_KEY).items() if k.startswith(prefix)}
        if dry_run:
            return len(users) + len(markers) + len(indexes)
        for text in indexes.values():  # empty the index before freeing it, as a purge does
            with connect(int(json.loads(text)["db"])) as other:
                other.flushdb()
        if indexes:
            client.hdel(ALLOCATIONS_KEY, *indexes)
        if users:
            client.acl_deluser(*users)
        if markers:
            client.hdel(ACL_OWNERS_KEY, *markers)
        client.acl_save()
    return len(users) + len(markers) + len(indexes)


def _aws(address: tuple[str, int], cred: Any, service: str) -> Any:
    return boto3.session.Session().client(service, endpoint_url=f"http://{address[0]}:{address[1]}",
                                          region_name="us-east-1", aws_access_key_id=cred.user,
                                          aws_secret_access_key=cred.password)


def minio(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    s3 = _aws(address, cred, "s3")
    buckets = [b["Name"] for b in s3.list_buckets().get("Buckets", []) if b["Name"].startswith(prefix)]
    if not dry_run:
        for bucket in buckets:
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
                for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                    s3.delete_object(Bucket=bucket, Key=entry["Key"], VersionId=entry["VersionId"])
            s3.delete_bucket(Bucket=bucket)
    return len(buckets) + _minio_keys(address, cred, prefix, dry_run)


def _minio_keys(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    """Access keys (users) and their `devstack-<key>` policies."""
    from minio.credentials import StaticProvider
    from minio.minioadmin import MinioAdmin

    api = MinioAdmin(endpoint=f"{address[0]}:{address[1]}", credentials=StaticProvider(cred.user, cred.password),
                     secure=False)
    users = [u for u in json.loads(api.user_list() or "{}") if u.startswith(prefix)]
    policies = [p for p in json.loads(api.policy_list() or "{}") if p.startswith(f"devstack-{prefix}")]
    if not dry_run:
        for user in users:
            api.user_remove(user)
        for policy in policies:
            api.policy_remove(policy)
    return len(users) + len(policies)


def localstack(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    sqs = _aws(address, cred, "sqs")
    urls = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=1000).get("QueueUrls", [])
    if not dry_run:
        for url in urls:
            sqs.delete_queue(QueueUrl=url)
    return len(urls)


def nats_streams(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    """The streams in the accounts of projects named `prefix...`; unless dry_run, the accounts go too."""
    from providers.nats.claims import account_claims, account_description, all_accounts
    from providers.nats.session import admin_credential

    async def main() -> int:
        url = f"nats://{address[0]}:{address[1]}"
        system = await nats.connect(servers=[url], **admin_credential(cred.password), allow_reconnect=False)
        try:
            owners = [marker_owner(account_description(claims)) or ""
                      for key in await all_accounts(system) if (claims := await account_claims(system, key))]
            owners = [owner for owner in owners if owner.startswith(prefix)]
            count = 0
            for owner in owners:
                nc = await nats.connect(servers=[url], **admin_credential(cred.password, owner), allow_reconnect=False)
                try:
                    js = nc.jetstream(timeout=10)
                    streams = await js.streams_info()
                    count += len(streams)
                    if not dry_run:
                        for info in streams:
                            await js.delete_stream(info.config.name)
                finally:
                    await nc.close()
            if not dry_run and owners:
                operator = nats_auth.Operator.from_secret(cred.password)
                keys = [nats_auth.public(operator.account_key(owner)) for owner in owners]
                await system.request("$SYS.REQ.CLAIMS.DELETE", operator.deletion_jwt(keys).encode(), timeout=10)
            return count
        finally:
            await system.close()

    return asyncio.run(main())


def kafka(address: tuple[str, int], cred: Any, prefix: str, dry_run: bool) -> int:
    settings = {"bootstrap.servers": f"{address[0]}:{address[1]}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": cred.user, "sasl.password": cred.password,
                "log_level": 0}
    admin = AdminClient(settings)
    topics = [t for t in admin.list_topics(timeout=30).topics if t.startswith(prefix)]
    users = [u for u in admin.describe_user_scram_credentials().result(timeout=30) if u.startswith(prefix)]
    acls = [b for b in admin.describe_acls(_ANY_ACL).result(timeout=30) if b.principal.startswith(f"User:{prefix}")]
    if not dry_run:
        if topics:
            for future in admin.delete_topics(topics, request_timeout=30).values():
                future.result(timeout=30)
        for user in users:
            deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
            admin.alter_user_scram_credentials([deletion])[user].result(timeout=30)
        if acls:
            filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                        b.operation, b.permission_type) for b in acls]
            for future in admin.delete_acls(filters).values():
                future.result(timeout=30)
        _forget_markers(settings, [f"topic:{t}" for t in topics] + [f"acl:{u}" for u in users])
        _wait_gone(admin, topics)
    return len(topics) + len(users) + len(acls)


_ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def _forget_markers(settings: dict[str, Any], keys: list[str]) -> None:
    """Tombstones in the ownership registry, so nothing there names the swept resources."""
    if not keys:
        return
    producer = Producer(settings)
    for key in keys:
        producer.produce("__devstack_owners", key=key.encode(), value=None)
    producer.flush(30)


def _wait_gone(admin: AdminClient, topics: list[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and set(topics) & set(admin.list_topics(timeout=30).topics):
        time.sleep(0.5)


SWEEPERS: dict[str, Callable[[tuple[str, int], Any, str, bool], int]] = {
    "postgres": postgres, "redis": redis, "minio": minio, "localstack": localstack, "nats": nats_streams,
    "kafka": kafka,
}


def sweep(prefix: str, shared: dict[str, dict[str, Any]], admin: dict, dry_run: bool = False) -> dict[str, int]:
    """engine -> how many resources with `prefix` it held (and, unless dry_run, no longer holds)."""
    if len(prefix) < 6:  # never sweep with a short prefix: it could match someone else's resources
        raise ValueError(f"refusing to sweep with prefix {prefix!r}")
    found = {}
    for inst in shared.values():
        engine = inst["engine"]
        found[engine] = SWEEPERS[engine]((inst["host"], int(inst["port"])), admin[engine], prefix, dry_run)
    return found


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.sweep PREFIX...`: drop what benchmark runs with these prefixes left behind."""
    from bench.workload import local_shared
    from tools.engines.credentials import admin_credentials

    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=main.__doc__)
    parser.add_argument("prefixes", nargs="+", help="run prefixes (bn<hex>), as the benchmark's JSON lists them")
    parser.add_argument("--dry-run", action="store_true", help="only count")
    args = parser.parse_args(argv)
    admin = admin_credentials()
    for prefix in args.prefixes:
        print(prefix, sweep(prefix, local_shared(), admin, dry_run=args.dry_run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
