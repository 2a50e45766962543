"""Peak resident memory of the dynamic-provider processes a benchmark step starts.

psutil is not a dependency: this reads /proc. Only descendants of this
process are sampled, so other people's pulumi runs on the machine do not count.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tools.engines.base import process_stat

#: The plugin runs `python -m tools.provider_server` (Pulumi's server, more workers); plain
#: `-m pulumi.dynamic` is what a stock shim runs.
MARKERS = (b"tools.provider_server", b"pulumi.dynamic")


def process_tree() -> dict[int, list[int]]:
    """parent pid -> child pids, for every process visible in /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        fields = process_stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is None:
            continue  # not a process, or it ended while we looked
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def descendants(root: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """Every process below `root`, in `tree` (a process_tree() already read) or in /proc as it is now."""
    tree, found, todo = process_tree() if tree is None else tree, [], [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def provider_rss(root: int) -> dict[int, int]:
    """pid -> peak resident bytes so far (VmHWM) of every dynamic-provider process below `root`."""
    sizes = {}
    for pid in descendants(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if not any(marker in cmdline for marker in MARKERS):
                continue
            sizes[pid] = _high_water_mark(pid)
        except (OSError, StopIteration, ValueError):
            continue
    return sizes


def _high_water_mark(pid: int) -> int:
    """The kernel's own peak RSS of the process, so short spikes between samples still count."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024  # reported in kB


class PeakSampler:
    """Samples provider RSS every `interval` seconds while in use; `peak` is the largest single process seen."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.peak, self.processes = interval, 0, 0
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            sizes = provider_rss(os.getpid())
            self._seen.update(sizes)
            self.processes = len(self._seen)
            self.peak = max([self.peak, *sizes.values()])
