"""The "localstack" engine: moto in server mode on 127.0.0.1:24566.

localstack-core cannot run here (it needs Python 3.13 and downloads Java and
jars for DynamoDB at first use), so the AWS-API engine is moto's server,
which serves S3 (with lifecycle), SQS, SNS, Kinesis and DynamoDB to boto3.

moto checks credentials and IAM policies from its first request
(INITIAL_NO_AUTH_ACTION_COUNT=0). It keeps all state, IAM included, in
memory, so the admin credential of the stack config (access key id = the
workspace's adminUser, secret = its admin secret) is put into moto's IAM at
every start by tools/engines/moto_server.py; a restart empties everything
else (`pulumi refresh` then sees the drift). How far moto's IAM isolates
projects, per service, is in docs/engines.md.

With `--tls` it serves https only, with the engine's certificate; health and
the credential check then trust its CA.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tools.engines.base import HOST, Credential, Engine, http_status, write_private
from tools.engines.ports import PORTS


class LocalStack(Engine):
    """moto's server behind tools.engines.moto_server, which seeds the admin key and enforces IAM."""

    name = "localstack"
    port = PORTS["localstack"]

    @property
    def data_dir(self) -> Path:
        return self.dir  # nothing is persisted; the dir holds only the log and pid file

    @property
    def admin_file(self) -> Path:
        """Where `prepare` leaves the admin credential for the server, which deletes it once read."""
        return self.dir / "admin.json"

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"

    def command(self) -> list[str]:
        tls = ["--cert", str(self.tls.cert), "--key", str(self.tls.key)] if self.tls else []
        return [sys.executable, "-m", "tools.engines.moto_server", "-H", HOST, "-p", str(self.port), *tls,
                str(self.admin_file)]

    def signature(self) -> list[str]:
        # Also matches a server started as `-m moto.server` (without IAM), so that `stop` still ends it.
        return ["moto", f"-H {HOST} -p {self.port}"]

    def environment(self) -> dict[str, str]:
        # 0: no request is let through unauthenticated, not even the first ones.
        return {"INITIAL_NO_AUTH_ACTION_COUNT": "0", "MOTO_PORT": str(self.port)}

    def prepare(self, credential: Credential | None) -> None:
        credential = self.require(credential)
        self.dir.mkdir(parents=True, exist_ok=True)
        write_private(self.admin_file, json.dumps({"user": credential.user, "password": credential.password}))

    def healthy(self) -> bool:
        # Any HTTP answer means the server is up; moto has no health endpoint.
        tls = self.tls
        return http_status(f"{self.endpoint}/", ca=tls and tls.ca) is not None

    def ensure_credential(self, credential: Credential | None) -> bool:
        """Nothing to change at run time (the admin key is seeded at start): check it is accepted and that
        a made-up key is not, or say to restart (a server started without IAM, or with another admin)."""
        import boto3
        from botocore.exceptions import ClientError

        credential = self.require(credential)

        def accepted(key: str, secret: str) -> bool:
            sts = boto3.session.Session().client("sts", endpoint_url=self.endpoint, region_name="us-east-1",
                                                 aws_access_key_id=key, aws_secret_access_key=secret,
                                                 verify=str(self.tls.ca) if self.tls else None)
            try:
                sts.get_caller_identity()
            except ClientError:
                return False
            return True

        if not accepted(credential.user, credential.password):
            raise self.error("check", "it refuses the admin credential of the stack config (started with another "
                                      "one); restart it: python -m tools.engines stop localstack, then start")
        if accepted("devstack-unknown-key", "devstack-unknown-secret"):
            raise self.error("check", "it accepts any credential (started without IAM checks); restart it: "
                                      "python -m tools.engines stop localstack, then start")
        return False


ENGINE = LocalStack()
