"""S3 and the AWS-API plumbing that MinIO and LocalStack share; not an engine of its own.

Both object-storage engines speak S3 through boto3 with path-style addressing, so the `bucket` kind
(and MinIO's `lifecycle`) are written once here and providers.minio and providers.localstack only
name the engine. Beside them: the boto3 clients (client), the ownership marker as tags (tags), the
owner-prefixed engine names (names), GuardedKind, the verbs every kind of the two engines shares
(guarded), a bucket's lifecycle document (rules) and the bucket scan both engines' scanners use (scan).
"""
