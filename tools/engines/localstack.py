"""The "localstack" engine: moto in server mode on 127.0.0.1:24566.

localstack-core cannot run here (it needs Python 3.13 and downloads Java and
jars for DynamoDB at first use), so the AWS-API engine is moto's server,
which serves S3 (with lifecycle), SQS, SNS, Kinesis and DynamoDB to boto3.

moto has NO authentication: it accepts any access key pair and signature.
The engine's "admin" credential is just the AWS access key pair the
providers send; nothing here stores or checks it. moto also keeps all state
in memory: a restart empties it (`pulumi refresh` then sees the drift).
"""
from __future__ import annotations

import sys
from pathlib import Path

from tools.engines.base import HOST, Credential, Engine, http_status


class LocalStack(Engine):
    """moto_server, run as `<this python> -m moto.server` so no shim sits in between."""

    name = "localstack"
    port = 24566

    @property
    def data_dir(self) -> Path:
        return self.dir  # nothing is persisted; the dir holds only the log and pid file

    def command(self) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self.port)]

    def signature(self) -> list[str]:
        return ["moto.server", f"-H {HOST} -p {self.port}"]

    def prepare(self, credential: Credential | None) -> None:
        pass  # no auth to configure, see the module docstring

    def healthy(self) -> bool:
        # Any HTTP answer means the server is up; moto has no health endpoint.
        return http_status(f"http://{self.address}/") is not None


ENGINE = LocalStack()
