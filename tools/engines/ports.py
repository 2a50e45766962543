"""The loopback ports of the local engines: the one place they are written (the local stack's config
in stacks/Pulumi.local.yaml repeats the client ports for Pulumi)."""

from __future__ import annotations

import os

#: Added to every port: a second set of engines (the TLS pass of the tests) runs beside the first.
OFFSET = int(os.environ.get("DEVSTACK_ENGINES_PORT_OFFSET", "0"))

#: The port each engine's clients connect to.
PORTS: dict[str, int] = {
    "postgres": 25432,
    "redis": 26379,
    "minio": 29000,
    "localstack": 24566,
    "nats": 24222,
    "kafka": 29092,
}
PORTS = {name: port + OFFSET for name, port in PORTS.items()}

MINIO_CONSOLE_PORT = 29001 + OFFSET
NATS_MONITOR_PORT = 28222 + OFFSET
KAFKA_CONTROLLER_PORT = 29093 + OFFSET
KAFKA_INTERNAL_PORT = 29094 + OFFSET
