"""Which kinds each engine's provider serves: the single source of kinds.

Validation, the components and the tools all ask this module; an engine is
one provider module that exposes `KINDS`. Modules are imported lazily so an
engine's client library is loaded only when a workspace uses that engine.
"""

from __future__ import annotations

import importlib

from providers.base import KindProvider

#: Every engine devstack knows, mapped to the module of its provider.
ENGINE_MODULES: dict[str, str] = {
    "postgres": "providers.postgres",
    "redis": "providers.redis",
    "minio": "providers.minio",
    "localstack": "providers.localstack",
    "nats": "providers.nats",
    "kafka": "providers.kafka",
}


def engines() -> tuple[str, ...]:
    return tuple(ENGINE_MODULES)


def kinds(engine: str) -> dict[str, type[KindProvider]]:
    """The kinds `engine` serves; KeyError for an engine devstack does not know."""
    module = importlib.import_module(ENGINE_MODULES[engine])
    return dict(module.KINDS)


def provider_class(engine: str, kind: str) -> type[KindProvider]:
    return kinds(engine)[kind]
