"""`python -m bench.run [--sizes 30,120,300]`: devstack against its two baselines, on the real engines.

B1  `pulumi up` creating N tenant resources over all six engines, beside
    (a) the same engine operations done directly with the client libraries
    and (b) `pulumi up` of N no-op dynamic resources (Pulumi's own floor).
    The three run in turn, --repeat rounds at each N; medians are reported.
B2  no-change `pulumi preview` and `pulumi up` at the largest N, beside the
    no-op floor, the two in turn at each repetition; then ours again with
    every instance on a closed port, which succeeds only if check and diff
    make no engine call.
B3  `pulumi refresh` at the largest N, beside the no-op floor, in turn too.
B4  peak RSS of the dynamic-provider process (the kernel's VmHWM).

Prints progress to stderr, a table to stdout, and writes JSON (default
bench/results/<date>.json). Every stack lives on a temporary file backend,
every resource is purged on destroy, and a final sweep by the run's name
prefix removes and counts anything left. A watchdog ends a step (the pulumi
processes this run started, by pid) that outlives --step-timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from pulumi import automation as auto

from bench import cpu, direct, memory, stacks, sweep
from bench import workload as wl
from bench.report import median, targets, table
from tools.engines.base import closed_port
from tools.pulumi_env import checkpoint_mode, let_plugins_see_sigint

RESULTS = Path(__file__).resolve().parent / "results"
_started = time.monotonic()


def progress(message: str) -> None:
    print(f"[{time.monotonic() - _started:7.1f}s] {message}", file=sys.stderr, flush=True)


@contextmanager
def watchdog(seconds: float, what: str) -> Iterator[None]:
    """Terminate this run's child processes (by pid) if `what` takes longer than `seconds`."""

    def expire() -> None:
        progress(f"{what}: over {seconds:.0f}s, terminating its processes")
        for pid in memory.descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


class Runner:
    """Runs the steps of one benchmark and keeps the measurements."""

    def __init__(self, args: argparse.Namespace) -> None:
        from tools.engines.credentials import admin_credentials

        self.args, self.shared, self.admin = args, wl.local_shared(), admin_credentials()
        self.results: dict[str, Any] = {"b1": {}, "b4": {}, "leftovers": {}, "load": []}
        self.prefixes: list[str] = []
        #: CPU-seconds of the last timed step: "client" (what it ran), "engines" and "by_engine".
        self.last_cpu: dict[str, Any] = {}

    def timed(self, what: str, action: Callable[[], Any], rss: str | None = None) -> tuple[float, Any]:
        """Run `action` under the watchdog; seconds and result. With `rss`, record the provider's peak RSS."""
        progress(f"{what} ...")
        self.results["load"].append([what, round(os.getloadavg()[0], 2)])
        with watchdog(self.args.step_timeout, what), memory.PeakSampler() as sampler, cpu.CpuMeter() as meter:
            start = time.monotonic()
            outcome = action()
            seconds = time.monotonic() - start
        self.last_cpu = {"client": round(meter.children + meter.own, 2), "engines": round(meter.engines, 2),
                         "by_engine": {name: round(used, 2) for name, used in meter.by_engine.items()}}
        if rss:
            self.results["b4"][rss] = max(self.results["b4"].get(rss, 0), sampler.peak)
        progress(f"{what}: {seconds:.1f}s" + (f", provider peak {sampler.peak / 2**20:.0f} MB" if rss else ""))
        return seconds, outcome

    def repeat(self, what: str, action: Callable[[], Any], rss: str | None = None) -> list[float]:
        return [self.timed(f"{what} #{i + 1}", action, rss)[0] for i in range(self.args.repeat)]

    # --- B1 per size ----------------------------------------------------

    def size(self, n: int, largest: bool) -> None:
        """B1 at one size: (a), (b) and ours in turn, `--repeat` rounds; the row holds each one's median.

        Interleaved rounds, so a slow spell of the machine weighs on all three alike.
        B2 and B3 use the stacks of the first round at the largest size, both kept up meanwhile.
        """
        workload = wl.Workload(wl.new_prefix(), n)
        self.prefixes.append(workload.prefix)
        runs: dict[str, list[float]] = {"direct": [], "noop": [], "ours": []}
        cpu_runs: dict[str, list[dict[str, Any]]] = {key: [] for key in runs}

        def measured(key: str, seconds: float) -> None:
            runs[key].append(seconds)
            cpu_runs[key].append(self.last_cpu)

        for i in range(self.args.repeat):
            label = f"N={n} round {i + 1}/{self.args.repeat}"
            measured("direct", self.direct(label, workload))
            with stacks.scratch_dir() as noop_base, stacks.scratch_dir() as ours_base:
                noop = stacks.noop_stack(noop_base, workload)
                try:
                    measured("noop", self.noop(noop, workload, label))
                    ours = stacks.devstack_stack(ours_base, workload, self.admin, self.args.providers_from)
                    try:
                        measured("ours", self.ours(ours, workload, label))
                        if largest and i == 0:
                            self.steady(noop, ours, workload)
                    finally:
                        self.destroy(f"{label} devstack destroy (purge)", ours, "destroy", n, rss="devstack")
                finally:
                    self.destroy(f"{label} (b) no-op destroy", noop, "destroy_noop", n)
        self.results["b1"][str(n)] = {"prefix": workload.prefix, "projects": len(workload.projects),
                                      **{key: median(values) for key, values in runs.items()}, "runs": runs,
                                      "cpu": cpu_runs}

    def destroy(self, what: str, stack: auto.Stack, key: str, n: int, rss: str | None = None) -> None:
        """Destroy a stack and keep its time. A failure is recorded, not raised: raised from a `finally`,
        it would hide the error that stopped the run; the final sweep removes what it left."""
        try:
            seconds, _ = self.timed(what, stack.destroy, rss=rss)
        except auto.errors.CommandError as err:
            self.results.setdefault("destroy_errors", []).append(f"{what}: {str(err).strip()[-1000:]}")
            progress(f"{what} failed: {str(err).strip().splitlines()[-1][:200]}")
            return
        self.results.setdefault(key, {}).setdefault(str(n), []).append(seconds)

    def direct(self, label: str, workload: wl.Workload) -> float:
        seconds = self.timed(f"{label} (a) direct", lambda: direct.run(workload, self.shared, self.admin))[1]
        swept = sweep.sweep(workload.prefix, self.shared, self.admin)
        if sum(swept.values()) != _expected_objects(workload):
            raise RuntimeError(f"direct baseline made {swept}, expected {_expected_objects(workload)} objects")
        return seconds

    def noop(self, stack: auto.Stack, workload: wl.Workload, label: str) -> float:
        seconds, up = self.timed(f"{label} (b) no-op up", stack.up, rss="noop")
        _expect(up, "create", _expected_resources(workload, implied=False))
        return seconds

    def ours(self, stack: auto.Stack, workload: wl.Workload, label: str) -> float:
        seconds, up = self.timed(f"{label} devstack up", stack.up, rss="devstack")
        _expect(up, "create", _expected_resources(workload, implied=True))
        live = sweep.sweep(workload.prefix, self.shared, self.admin, dry_run=True)
        if sum(live.values()) != _expected_objects(workload):
            raise RuntimeError(f"after up the engines hold {live}, expected {_expected_objects(workload)} objects")
        return seconds

    # --- B2 and B3 ----------------------------------------------------------

    def steady(self, noop: auto.Stack, ours: auto.Stack, workload: wl.Workload) -> None:
        """B2 (no-change preview and up) and B3 (refresh) on both stacks, the floor and ours in turn
        at each repetition, so a slow spell of the machine weighs on both alike."""
        n = workload.size
        steps = {
            "preview": (noop.preview, lambda: _unchanged(ours.preview())),
            "up": (lambda: noop.up(expect_no_changes=True), lambda: ours.up(expect_no_changes=True)),
            "refresh": (noop.refresh, lambda: _unchanged(ours.refresh())),
        }
        times: dict[str, dict[str, list[float]]] = {"noop": {}, "ours": {}}
        cpu_used: dict[str, dict[str, list[dict[str, Any]]]] = {"noop": {}, "ours": {}}
        for step, (floor_action, our_action) in steps.items():
            what = f"{step}, no change" if step != "refresh" else step
            for i in range(self.args.repeat):
                times["noop"].setdefault(step, []).append(
                    self.timed(f"N={n} (b) no-op {what} #{i + 1}", floor_action)[0])
                cpu_used["noop"].setdefault(step, []).append(self.last_cpu)
                times["ours"].setdefault(step, []).append(
                    self.timed(f"N={n} devstack {what} #{i + 1}", our_action, rss="devstack")[0])
                cpu_used["ours"].setdefault(step, []).append(self.last_cpu)
        self.results["steady_cpu"] = cpu_used
        self.results["b2_noop"] = {step: times["noop"][step] for step in ("preview", "up")}
        self.results["b2"] = {step: times["ours"][step] for step in ("preview", "up")}
        self.results["b3_noop"], self.results["b3"] = times["noop"]["refresh"], times["ours"]["refresh"]
        self.results["b2"]["pure"] = self.purity(ours, workload)

    def purity(self, stack: auto.Stack, workload: wl.Workload) -> bool:
        """A preview with every instance on a closed port passes only if check and diff call no engine. It
        plans an update of every resource (their `host` and `port` outputs follow the config), and nothing
        else; it is not applied."""
        files = [f"{p}/devstack.yaml" for p in workload.projects]
        dead = {name: {**inst, "port": closed_port()} for name, inst in self.shared.items()}
        stacks.configure(stack, files, self.admin, dead)
        try:
            self.timed(f"N={workload.size} preview, engines unreachable", lambda: _only_updates(stack.preview()))
            return True
        except auto.errors.CommandError as err:
            progress(f"diff is not pure: {str(err).strip().splitlines()[-1][:300]}")
            return False
        finally:
            stacks.configure(stack, files, self.admin)
            self.timed(f"N={workload.size} preview, engines back", lambda: _unchanged(stack.preview()))

    # --- the whole run ----------------------------------------------------

    def run(self) -> dict[str, Any]:
        sizes = sorted(self.args.sizes)
        try:
            for n in sizes:
                if time.monotonic() - _started > self.args.budget:
                    progress(f"budget of {self.args.budget:.0f}s spent: N={n} not measured")
                    break
                try:
                    self.size(n, largest=n == sizes[-1])
                except (RuntimeError, auto.errors.CommandError) as err:
                    # Keep what was measured; the report says where the run stopped and why.
                    self.results["error"] = f"N={n}: {str(err).strip()[-2000:]}"
                    progress(f"N={n} failed, stopping: {str(err).strip().splitlines()[-1][:200]}")
                    break
        finally:
            for prefix in self.prefixes:
                self.results["leftovers"][prefix] = self.sweep(prefix)
        return self.results

    def sweep(self, prefix: str) -> int:
        """Drop what `prefix` left in the engines; how many objects that was (-1: the sweep failed)."""
        try:
            left = sweep.sweep(prefix, self.shared, self.admin)
        except Exception as err:  # an engine restarted or its credential changed: report, do not hide the run
            progress(f"cannot sweep {prefix}: {err}; run `python -m bench.sweep {prefix}` when the engines are back")
            return -1
        if sum(left.values()):
            progress(f"swept {left} left behind by {prefix}")
        return sum(left.values())


def _expected_resources(workload: wl.Workload, *, implied: bool) -> int:
    """Pulumi resources an up creates: stack, workspace, one component per project, N tenants, and (ours,
    `implied`) the NATS account the program adds to each project with a NATS declaration."""
    with_nats = {project for project, _instance, engine, _kind in workload.resources() if engine == "nats"}
    return 2 + len(workload.projects) + workload.size + (len(with_nats) if implied else 0)


def _expected_objects(workload: wl.Workload) -> int:
    """Engine objects the sweep counts: a postgres database is a database plus its role, a redis
    acl_user is a user plus its marker entry, a minio bucket also its own key (a user and its policy);
    every other resource is one object."""
    per = {"postgres": 2, "redis": 2, "minio": 3}
    return sum(per.get(engine, 1) for _p, _i, engine, _k in workload.resources())


def _expect(result: auto.UpResult, op: str, count: int) -> None:
    changes = {k: v for k, v in (result.summary.resource_changes or {}).items() if k != "same"}
    if changes != {op: count}:
        raise RuntimeError(f"expected {count} x {op}, the run reported {changes}")


def _unchanged(result: Any) -> Any:
    counts = getattr(result, "change_summary", None) or result.summary.resource_changes or {}
    changed = {k: v for k, v in counts.items() if str(getattr(k, "value", k)) != "same"}
    if changed:
        raise RuntimeError(f"expected no changes, got {changed}")
    return result


def _only_updates(result: Any) -> Any:
    counts = {str(getattr(k, "value", k)): v for k, v in (result.change_summary or {}).items()}
    if set(counts) - {"same", "update"}:
        raise RuntimeError(f"expected updates of addresses only, got {counts}")
    return result


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(mem_kb / 2**20, 1),
            "os": platform.platform(), "python": platform.python_version(), "pulumi": "v3.260.0"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30,120,300", type=lambda s: [int(x) for x in s.split(",")],
                        help="tenant resource counts (default 30,120,300); B2/B3 run at the largest")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of B1 at each size, and runs of each B2/B3 measurement (medians reported)")
    parser.add_argument("--budget", type=float, default=1800, help="stop starting new sizes after this many seconds")
    parser.add_argument("--step-timeout", type=float, default=600, help="end any single step after this many seconds")
    parser.add_argument("--out", type=Path, help="JSON file (default bench/results/<date>.json)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra environment for every pulumi run, devstack and floor alike (repeatable)")
    parser.add_argument("--providers-from", type=Path, metavar="DIR",
                        help="put DIR first on PYTHONPATH of devstack's pulumi runs: measures a prototype of "
                             "providers/ or components/ kept in DIR instead of the checkout's")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    let_plugins_see_sigint()
    stacks.EXTRA_ENV.update(item.split("=", 1) for item in args.env)
    now = datetime.now(timezone.utc)
    results = Runner(args).run()
    report = {"date": now.isoformat(timespec="seconds"), "machine": machine(), "sizes": sorted(args.sizes),
              "repeat": args.repeat, "providers_from": str(args.providers_from or ""), "env": args.env,
              "checkpoints": checkpoint_mode(), **results}
    report["targets"] = targets(report)
    out = args.out or RESULTS / f"{now.date().isoformat()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    progress(f"wrote {out}")
    return 0 if all(t["met"] for t in report["targets"].values()) and "error" not in report else 1


if __name__ == "__main__":
    sys.exit(main())
