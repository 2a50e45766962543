"""Local shared engines: `python -m tools.engines start|stop|status|reset [ENGINE ...]`.

The registry below is the one list of engines, in start order (stop runs in
reverse). Modules are imported on first use so that a missing or broken
engine module only affects that engine.
"""
from __future__ import annotations

import importlib

from tools.engines.base import Engine

#: engine name -> module under tools.engines that exposes ENGINE
ENGINES: dict[str, str] = {
    "postgres": "postgres",
    "redis": "redis",
    "minio": "minio",
    "localstack": "localstack",  # moto in server mode, see localstack.py
    "nats": "nats",
    "kafka": "kafka",
}


def load(name: str) -> Engine:
    """Import the engine's module and return its ENGINE.

    Raises KeyError for a name not in ENGINES and whatever the import raises
    for a missing or broken module; callers report that per engine.
    """
    module = importlib.import_module(f"{__name__}.{ENGINES[name]}")
    return module.ENGINE
