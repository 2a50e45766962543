"""Engine clients in the provider process: one per key, client libraries imported on first use."""

from __future__ import annotations

import importlib
import threading
from functools import lru_cache, wraps
from types import ModuleType
from typing import Any, Callable, TypeVar

C = TypeVar("C")


def one_per_key(factory: Callable[..., C]) -> Callable[..., C]:
    """Memoize a client factory per argument tuple, building each client once in the process.

    Under a lock: the provider serves calls on many threads, and threads racing
    to build the same client would each pay for it (a boto3 client loads
    megabytes of service model, a Kafka client a SASL handshake) only for all
    but one to be dropped.
    """
    cached, lock = lru_cache(maxsize=None)(factory), threading.Lock()

    @wraps(factory)
    def client(*key: Any) -> C:
        with lock:
            return cached(*key)

    return client


_IMPORTS = threading.Lock()


def lazy_import(module: str) -> ModuleType:
    """Import a client library on first use, for libraries the program, check and diff never need.

    One thread at a time: the provider serves calls on many threads, and a
    package imported by two of them at once can show one a half-initialized
    module ("cannot import name ... partially initialized module").
    """
    with _IMPORTS:
        return importlib.import_module(module)


class LazyModule:
    """A module that is imported (by `lazy_import`) when one of its attributes is first read.

    For a provider module's client library, bound at module level as the import
    would bind it (`psycopg = LazyModule("psycopg")`): the program, check and
    diff load every kind's module but never call an engine, so they need not pay
    for importing its library.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        # Only reached for what the instance lacks, i.e. every attribute of the module.
        # The module is kept once imported: SQL composition reads attributes by the hundred per call.
        if self._module is None:
            self._module = lazy_import(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"
