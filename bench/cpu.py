"""CPU-seconds a benchmark step costs: its own client work and the local engines' work.

A step that needs C CPU-seconds cannot take less than C / cores of wall time, however
well its parts overlap; the report sets that bound beside each time target. The
client side is what the step ran: the `pulumi` processes (with the program and the
provider they start and wait for) or, for the direct baseline, this process's own
threads. The engine side is the local engines' processes with every process below them,
running or finished (PostgreSQL's backends, one per session).
"""

from __future__ import annotations

import os
import resource

from bench.memory import descendants, process_tree
from tools.engines import ENGINES, load
from tools.engines.base import process_stat

TICKS = os.sysconf("SC_CLK_TCK")


def engine_pids() -> dict[str, int]:
    """The local engines `tools.engines start` began and that still run, by name."""
    pids = {name: load(name).running_pid() for name in ENGINES}
    return {name: pid for name, pid in pids.items() if pid is not None}


def process_seconds(pid: int) -> float:
    """User and system time of `pid` and of its children it has waited for; 0 once it is gone."""
    fields = process_stat(pid)
    return sum(int(value) for value in fields[11:15]) / TICKS if fields else 0.0  # utime stime cutime cstime


def tree_seconds(pid: int, tree: dict[int, list[int]] | None = None) -> float:
    """process_seconds of `pid` and of every live process below it (in `tree`, if given). A child's
    time reaches its parent's only once the parent has waited for it: a PostgreSQL backend whose
    session has just closed is often still exiting when a step ends."""
    return sum(process_seconds(each) for each in (pid, *descendants(pid, tree)))


def _usage(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """CPU-seconds spent while in use: `children` (processes run and waited for), `own` (this
    process, the direct baseline's threads), `engines` and each engine's share, `by_engine`."""

    def __init__(self) -> None:
        self.children = self.own = self.engines = 0.0
        self.by_engine: dict[str, float] = {}
        self._pids: dict[str, int] = {}

    def __enter__(self) -> "CpuMeter":
        self._pids = engine_pids()
        self._start = (_usage(resource.RUSAGE_CHILDREN), _usage(resource.RUSAGE_SELF), self._engine_seconds())
        return self

    def __exit__(self, *_exc: object) -> None:
        children, own, engines = self._start
        self.children = _usage(resource.RUSAGE_CHILDREN) - children
        self.own = _usage(resource.RUSAGE_SELF) - own
        self.by_engine = {name: seconds - engines[name] for name, seconds in self._engine_seconds().items()}
        self.engines = sum(self.by_engine.values())

    def _engine_seconds(self) -> dict[str, float]:
        tree = process_tree()  # one walk of /proc for all engines
        return {name: tree_seconds(pid, tree) for name, pid in self._pids.items()}
