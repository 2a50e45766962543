"""MinIO: buckets, lifecycle rules and bucket-scoped access keys, one project kept from another's.

Buckets and lifecycle rules are the shared S3 implementation (providers.s3), named `<owner>` or
`<owner>-<name>` and tagged with the ownership marker. An `access_key` is a MinIO user made through the
admin API with one canned policy that reaches only the project's buckets (`<owner>`, `<owner>-*`) and
leaves bucket management to devstack; that policy is its marker (providers.minio.keys). Each bucket has
a key of its own too, the user `<bucket>~key`, reaching that bucket alone. A bucket is never made
within reach of another project's keys, nor a key with another project's bucket within its reach.
"""

from providers.engine import Engine
# The kinds are re-exported: states written earlier pickle each as providers.minio.<Class>.
from providers.minio.access_key import AccessKey  # noqa: F401
from providers.minio.bucket import MinioBucket  # noqa: F401
from providers.minio.lifecycle import MinioLifecycle  # noqa: F401
from providers.minio.probe import probe
from providers.minio.scan import scan

ENGINE = Engine(kinds={"bucket": MinioBucket, "lifecycle": MinioLifecycle, "access_key": AccessKey},
                scan=scan, probe=probe)
