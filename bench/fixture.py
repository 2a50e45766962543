"""`python -m bench.fixture [--repeat 3] [--json FILE]`: what devstack's pytest fixture costs, beside Pulumi's floor.

For one resource of each engine's main kind (bench.workload.MIX: a PostgreSQL database, a Redis ACL user, a
MinIO bucket, a LocalStack queue, a NATS stream, a Kafka topic), the fixture's set-up
(devstack.ephemeral.Ephemeral.start: a fresh stack on a file backend, its config, `pulumi up`, the
service's environment) and its teardown (the project's data dropped, its ledger entries removed, the
directory removed). The floor does the same with bench/noop_program.py and one no-op resource: a stack
made and configured, `up`, its outputs read; then `destroy`. Each case runs --repeat times, in turn with
the floor; medians are printed. Workspaces live in a temporary directory, never the checkout's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import stacks
from bench import workload as wl
from devstack.ephemeral import Engines, Ephemeral
from tools.pulumi_env import let_plugins_see_sigint

PHASES = ("open", "config", "up", "env")
FLOOR = "floor: 1 no-op resource"


def ours(instance: str, kind: str, engines: Engines, root: Path) -> dict[str, float]:
    """One fixture's set-up and teardown for one resource on `instance`, with the set-up's phases."""
    project = {"name": "bench", "resources": [{"uses": instance, "kind": kind}]}
    started = time.monotonic()
    ephemeral = Ephemeral(project, engines=engines, root=root).start()
    setup = time.monotonic() - started
    started = time.monotonic()
    ephemeral.close()
    return {"setup": setup, "teardown": time.monotonic() - started,
            **{phase: ephemeral.timings.get(phase, 0.0) for phase in PHASES}}


def floor() -> dict[str, float]:
    """Pulumi's floor for the same steps: one no-op resource, its stack made and configured (`open`), up, its
    outputs read (`env`), destroyed."""
    with stacks.scratch_dir() as base:
        started = time.monotonic()
        stack = stacks.noop_stack(base, wl.Workload(wl.new_prefix(), 1))
        made = time.monotonic()
        stack.up()
        up = time.monotonic()
        stack.outputs()
        setup = time.monotonic()
        stack.destroy()
        return {"setup": setup - started, "teardown": time.monotonic() - setup, "open": made - started, "config": 0.0,
                "up": up - made, "env": setup - up}


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in rounds), 2) for key in rounds[0]}


def measure(repeat: int) -> dict[str, dict[str, float]]:
    engines = Engines.of_workspace()
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="devstack-bench-fixture-") as tmp:
        for i in range(repeat):
            for instance, (engine, kind) in wl.MIX.items():
                label = f"{engine} {kind}"
                print(f"round {i + 1}/{repeat}: {label}", file=sys.stderr, flush=True)
                results.setdefault(label, []).append(ours(instance, kind, engines, Path(tmp)))
                results.setdefault(FLOOR, []).append(floor())
    results[FLOOR] = results.pop(FLOOR)  # printed last
    return {label: medians(rounds) for label, rounds in results.items()}


def table(results: dict[str, dict[str, float]]) -> str:
    lines = ["| one resource | set-up | (open, config, up, env) | teardown |", "|---|---:|---|---:|"]
    for label, r in results.items():
        phases = ", ".join(f"{r[p]:.1f}" for p in PHASES)
        lines.append(f"| {label} | {r['setup']:.1f} s | {phases} | {r['teardown']:.1f} s |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fixture", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per case (default 3); medians are reported")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    args = parser.parse_args(argv)
    let_plugins_see_sigint()
    results = measure(args.repeat)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps({"repeat": args.repeat, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

