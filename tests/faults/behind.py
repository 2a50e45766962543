"""Changes made behind Pulumi's back, through each engine's admin client.

For the default declaration of a project `p` of the fault suite's mix, the
engine names are: database `p` with '-' as '_', ACL user `p`, bucket `p`,
queue `p`, stream `p`, topic `p`. `drop` removes the resource, `change`
alters one setting the provider manages, `repaired` tells whether that setting
is back to what the declaration says.
"""

from __future__ import annotations

import asyncio
from contextlib import contextmanager
from typing import Any, Iterator

import boto3
import nats
import psycopg
import redis as redis_py
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from confluent_kafka.admin import ConfigSource
from psycopg import sql

from providers.nats.session import admin_credential

TIMEOUT = 30


class Engines:
    """Admin access to the shared engines of the local workspace."""

    def __init__(self, shared: dict[str, dict[str, Any]], admin: dict) -> None:
        self.at = {inst["engine"]: (inst["host"], int(inst["port"])) for inst in shared.values()}
        self.admin = admin

    # --- clients ------------------------------------------------------------------------

    @contextmanager
    def pg(self) -> Iterator[psycopg.Connection]:
        host, port = self.at["postgres"]
        cred = self.admin["postgres"]
        with psycopg.connect(host=host, port=port, user=cred.user, password=cred.password, dbname="postgres",
                             autocommit=True, connect_timeout=5) as conn:
            yield conn

    def redis(self) -> redis_py.Redis:
        host, port = self.at["redis"]
        cred = self.admin["redis"]
        return redis_py.Redis(host=host, port=port, username=cred.user, password=cred.password, decode_responses=True)

    def aws(self, engine: str, service: str) -> Any:
        host, port = self.at[engine]
        cred = self.admin[engine]
        return boto3.session.Session().client(service, endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                                              aws_access_key_id=cred.user, aws_secret_access_key=cred.password)

    def jetstream(self, project: str, work) -> Any:
        """Run `work` with devstack's admin JetStream context in `project`'s account (each project has its own)."""
        host, port = self.at["nats"]
        cred = self.admin["nats"]

        async def main() -> Any:
            nc = await nats.connect(servers=[f"nats://{host}:{port}"], **admin_credential(cred.password, project),
                                    allow_reconnect=False)
            try:
                return await work(nc.jetstream(timeout=10))
            finally:
                await nc.close()

        return asyncio.run(main())

    def system(self, work) -> Any:
        """Run `work(nc)` with a connection of devstack's admin in the NATS system account (accounts' JWTs)."""
        host, port = self.at["nats"]

        async def main() -> Any:
            nc = await nats.connect(servers=[f"nats://{host}:{port}"],
                                    **admin_credential(self.admin["nats"].password), allow_reconnect=False)
            try:
                return await work(nc)
            finally:
                await nc.close()

        return asyncio.run(main())

    def kafka(self) -> AdminClient:
        host, port = self.at["kafka"]
        cred = self.admin["kafka"]
        return AdminClient({"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": cred.user,
                            "sasl.password": cred.password, "log_level": 0})

    # --- behind Pulumi's back -------------------------------------------------------------

    def drop(self, engine: str, project: str) -> None:
        """Remove the project's resource on `engine` as an operator would."""
        if engine == "postgres":
            with self.pg() as conn:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(project.replace("-", "_"))))
        elif engine == "redis":
            with self.redis() as client:
                client.acl_deluser(project)
        elif engine == "minio":
            self.aws("minio", "s3").delete_bucket(Bucket=project)
        elif engine == "localstack":
            sqs = self.aws("localstack", "sqs")
            sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=project)["QueueUrl"])
        elif engine == "nats":
            self.jetstream(project, lambda js: js.delete_stream(project))
        elif engine == "kafka":
            client = self.kafka()
            client.delete_topics([project])[project].result(timeout=TIMEOUT)

    def change(self, engine: str, project: str) -> None:
        """Alter one managed setting of the project's resource on `engine`."""
        if engine == "postgres":
            with self.pg() as conn:
                db = sql.Identifier(project.replace("-", "_"))
                conn.execute(sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 3").format(db))
        elif engine == "redis":
            with self.redis() as client:
                client.execute_command("ACL", "SETUSER", project, "+flushall")
        elif engine == "minio":
            self.aws("minio", "s3").put_bucket_versioning(Bucket=project,
                                                          VersioningConfiguration={"Status": "Enabled"})
        elif engine == "localstack":
            sqs = self.aws("localstack", "sqs")
            url = sqs.get_queue_url(QueueName=project)["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "7"})
        elif engine == "nats":
            async def limit(js) -> None:
                config = (await js.stream_info(project)).config
                config.max_msgs = 5
                await js.update_stream(config)

            self.jetstream(project, limit)
        elif engine == "kafka":
            entry = ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
            resource = ConfigResource(ResourceType.TOPIC, project, incremental_configs=[entry])
            client = self.kafka()  # held in a variable: a collected client cancels its futures
            (future,) = client.incremental_alter_configs([resource]).values()
            future.result(timeout=TIMEOUT)

    def repaired(self, engine: str, project: str) -> bool:
        """Whether the setting `change` altered is back to the declaration's default."""
        if engine == "postgres":
            with self.pg() as conn:
                row = conn.execute("SELECT datconnlimit FROM pg_database WHERE datname = %s",
                                   (project.replace("-", "_"),)).fetchone()
            return row == (-1,)
        if engine == "redis":
            with self.redis() as client:
                return "no permissions" in client.execute_command("ACL", "DRYRUN", project, "FLUSHALL")
        if engine == "minio":
            return self.aws("minio", "s3").get_bucket_versioning(Bucket=project).get("Status") != "Enabled"
        if engine == "localstack":
            sqs = self.aws("localstack", "sqs")
            url = sqs.get_queue_url(QueueName=project)["QueueUrl"]
            live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]
            return live["VisibilityTimeout"] == "30"
        if engine == "nats":
            return self.jetstream(project, lambda js: js.stream_info(project)).config.max_msgs == -1
        client = self.kafka()
        (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, project)]).values()
        entry = future.result(timeout=TIMEOUT)["retention.ms"]
        return entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
