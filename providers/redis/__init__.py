"""Redis: a logical database index and ACL users per project in a shared server.

Each project gets its own logical database (`redis_index`) and ACL users
(`acl_user`) whose key and channel patterns cover only `<owner>:*`, without
the commands that reach across tenants. Redis has no comment field, so two
reserved hashes in db 0 are the ownership markers; no tenant can touch them
because no tenant's key pattern covers the reserved `devstack:` prefix (the
owner name `devstack` is refused). docs/engines/redis.md says what the ACL
rules can and cannot isolate.
"""

from providers.engine import Engine
from providers.redis.acl_user import AclUser  # noqa: F401  (states pickle providers.redis.AclUser)
from providers.redis.probe import probe
from providers.redis.redis_index import RedisIndex  # noqa: F401  (states pickle providers.redis.RedisIndex)
from providers.redis.scan import scan

ENGINE = Engine(kinds={"redis_index": RedisIndex, "acl_user": AclUser}, scan=scan, probe=probe)
