"""NATS JetStream: an account per project, with its streams, durable consumers, KV buckets and users.

The server runs in operator mode (providers.nats.auth): each project gets an
account of its own, pushed to the running server by the `account` kind, and
everything else of the project lives in it, out of every other project's
reach. Services log in as a `user` of the account.

Names: a project's default declaration (name == owner) maps to `<owner>`,
any other to `<owner>_<name>`; KV buckets live in the stream `KV_<bucket>`.
Subjects: every stream's subjects stay under the owner's prefix `<owner>.>`
(check() refuses anything else), and a user may publish and subscribe there.

Ownership: the marker goes into the stream's (and consumer's) `metadata`
as `devstack.managed-by`, `devstack.owner` and `devstack.stack` (server 2.10+),
and into the account JWT's description.
"""

from providers.engine import Engine
from providers.nats.account import Account  # noqa: F401  (states pickle providers.nats.Account)
from providers.nats.consumer import Consumer  # noqa: F401  (states pickle providers.nats.Consumer)
from providers.nats.kv import Kv  # noqa: F401  (states pickle providers.nats.Kv)
from providers.nats.probe import probe
from providers.nats.scan import scan
from providers.nats.stream import Stream  # noqa: F401  (states pickle providers.nats.Stream)
from providers.nats.user import User  # noqa: F401  (states pickle providers.nats.User)

ENGINE = Engine(kinds={"account": Account, "stream": Stream, "consumer": Consumer, "kv": Kv, "user": User},
                scan=scan, probe=probe)
