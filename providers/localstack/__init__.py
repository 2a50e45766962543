"""LocalStack: per-project AWS-API resources (S3, SQS, SNS, Kinesis, DynamoDB, IAM).

On this machine the engine is moto in server mode (tools/engines/localstack.py); the providers speak
only the AWS APIs through boto3, so LocalStack itself serves them as well. Buckets are the shared S3
implementation of providers.s3. Every other kind carries the ownership marker as the service's own
tags, its name mapped to the service's charset and length rules (providers.localstack.names). An
`access_key` is an IAM user whose policy names exactly the project's resources on the instance; how
far the emulator enforces it differs per service (providers.localstack.policy.UNISOLATED, docs/engines.md).
An instance also serves as a workspace's secret store (`STORES`: `aws-sm`, `aws-ssm`), where generated
credentials are pushed (providers.localstack.stored_secret); its entries are no declarable kind.
"""

from providers.engine import Engine
# The kinds are re-exported: states written earlier pickle each as providers.localstack.<Class>.
from providers.localstack.access_key import AccessKey  # noqa: F401
from providers.localstack.bucket import LocalstackBucket  # noqa: F401
from providers.localstack.probe import probe
from providers.localstack.queue import Queue  # noqa: F401
from providers.localstack.scan import scan
from providers.localstack import stored_secret
from providers.localstack.stream import Stream  # noqa: F401
from providers.localstack.table import Table  # noqa: F401
from providers.localstack.topic import Topic  # noqa: F401

ENGINE = Engine(kinds={"bucket": LocalstackBucket, "queue": Queue, "topic": Topic, "stream": Stream, "table": Table,
                       "access_key": AccessKey}, scan=scan, probe=probe)
#: The secret stores an instance serves (`secretStore.kind` of a workspace) -> their entry's provider class.
STORES = stored_secret.STORES
