"""The loopback ports of the local engines: the one place they are written (the local stack's config
in stacks/Pulumi.local.yaml repeats the client ports for Pulumi)."""

from __future__ import annotations

#: The port each engine's clients connect to.
PORTS: dict[str, int] = {
    "postgres": 25432,
    "redis": 26379,
    "minio": 29000,
    "localstack": 24566,
    "nats": 24222,
    "kafka": 29092,
}

MINIO_CONSOLE_PORT = 29001
NATS_MONITOR_PORT = 28222
KAFKA_CONTROLLER_PORT = 29093
KAFKA_INTERNAL_PORT = 29094
