"""The engines devstack knows: one table, each row an engine package's `ENGINE` (kinds, scan, probe).

Validation, the components, `devstack doctor`, garbage collection and the
tools all ask this module. Packages are imported lazily so an engine's client
library is loaded only when a workspace uses that engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from providers.base import KindProvider
    from providers.engine import Engine

#: Every engine devstack knows, mapped to its package.
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


def engine(name: str) -> Engine:
    """The registry row of engine `name`; KeyError for an engine devstack does not know."""
    return importlib.import_module(ENGINE_MODULES[name]).ENGINE


def kinds(engine_name: str) -> dict[str, type[KindProvider]]:
    """The kinds `engine_name` serves; KeyError for an engine devstack does not know."""
    return dict(engine(engine_name).kinds)


def provider_class(engine_name: str, kind: str) -> type[KindProvider]:
    return kinds(engine_name)[kind]
