"""Kafka: per-project topics and a SASL/SCRAM principal with prefixed ACLs.

Names: a project's default declaration maps to the project's name without
'.' (`project_topic`), any other to its own name (Kafka's charset
[a-zA-Z0-9._-], at most 249 characters; see providers.naming). With no '.' in
it, the prefix `<project>.` belongs to exactly one project, and a topic another
project names inside it is refused: that is what makes prefixed ACLs a tenant
boundary. An acl grants the project's topics named outside its prefix by name.
A resource whose outputs record no naming keeps `<owner>.<name>`.

Ownership: Kafka has nowhere on a topic or principal to keep a marker, so the
markers live in a registry topic only the admin reads (providers.kafka.owners).
"""

from providers.engine import Engine
from providers.kafka.acl import Acl  # noqa: F401  (states pickle providers.kafka.Acl)
from providers.kafka.probe import probe
from providers.kafka.scan import scan
from providers.kafka.topic import Topic  # noqa: F401  (states pickle providers.kafka.Topic)

ENGINE = Engine(kinds={"topic": Topic, "acl": Acl}, scan=scan, probe=probe)
