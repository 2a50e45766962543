"""The benchmark's targets and its table, computed from the JSON report alone.

Targets: B1 devstack <= 1.3 x max(direct, no-op) at every N and growing
linearly (issue 8), and <= direct + no-op at every N, growing from the
next-to-largest N to the largest at most 1.08 x as much as N does (300 -> 1000:
3.6 x; issue 35); B2 no-change preview and up <= 1.2 x the no-op floor, with no
engine call; B4 provider peak RSS under 200 MB.

Beside each time target stands the least ratio devstack's CPU-seconds allow
(bench/cpu.py): a step needing C CPU-seconds takes at least C / cores, so when
that bound is over the target, no overlap of the work can meet it; only less
work can.
"""

from __future__ import annotations

import statistics
from typing import Any

B1_FACTOR, B2_FACTOR, B4_LIMIT_MB = 1.3, 1.2, 200
#: "Linear": the cost per added resource over the last interval is at most this times that of the first.
LINEAR_SLACK = 1.3
#: Between the two largest sizes, time may grow at most this times as much as N.
GROWTH_SLACK = 1.08


def median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def marginal(times: dict[int, float]) -> list[float]:
    """Seconds per added resource between consecutive sizes."""
    sizes = sorted(times)
    return [(times[b] - times[a]) / (b - a) for a, b in zip(sizes, sizes[1:])]


def series(report: dict[str, Any], key: str) -> dict[int, float]:
    return {int(n): row[key] for n, row in report["b1"].items() if key in row}


def cpu_seconds(runs: list[dict[str, float]] | None) -> float | None:
    """Median CPU-seconds, client and engines together, of a step's runs."""
    return median([run["client"] + run["engines"] for run in runs]) if runs else None


def _bound(report: dict[str, Any], runs: list[dict[str, float]] | None, floor: float) -> str:
    """`; CPU bound ...`: the least wall time, as a ratio to `floor`, that devstack's CPU-seconds allow."""
    used, cores = cpu_seconds(runs), report["machine"]["cores"]
    if not used:
        return ""
    return f"; its {used:.1f} CPU-s take >= {used / cores:.1f} s on {cores} cores: CPU bound {used / cores / floor:.2f} x"


def targets(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name -> {"met": bool, "detail": str}, one per target the report has data for."""
    found: dict[str, dict[str, Any]] = {}
    for n, row in sorted(report["b1"].items(), key=lambda item: int(item[0])):
        floor = max(row["direct"], row["noop"])
        ratio = row["ours"] / floor
        found[f"B1 N={n}"] = {"met": ratio <= B1_FACTOR, "detail": f"{ratio:.2f} x max(a, b) (<= {B1_FACTOR})"
                                                                     + _bound(report, row.get("cpu", {}).get("ours"), floor)}
    for n, row in sorted(report["b1"].items(), key=lambda item: int(item[0])):
        both = row["direct"] + row["noop"]
        found[f"B1 N={n} within (a)+(b)"] = {"met": row["ours"] <= both,
                                              "detail": f"{row['ours'] / both:.2f} x (a)+(b) (<= 1)"
                                                        + _bound(report, row.get("cpu", {}).get("ours"), both)}
    ours_by_n = series(report, "ours")
    if len(ours_by_n) >= 2:
        small, large = sorted(ours_by_n)[-2:]
        growth, allowed = ours_by_n[large] / ours_by_n[small], GROWTH_SLACK * large / small
        found[f"B1 growth {small} -> {large}"] = {"met": growth <= allowed,
                                                  "detail": f"{growth:.2f} x (<= {allowed:.2f} x)"}
    slopes = marginal(series(report, "ours"))
    if len(slopes) >= 2:
        growth = slopes[-1] / slopes[0] if slopes[0] > 0 else float("inf")
        found["B1 linear"] = {"met": growth <= LINEAR_SLACK,
                              "detail": f"ms per added resource {' -> '.join(f'{s * 1000:.0f}' for s in slopes)}"
                                        f" ({growth:.2f} x, <= {LINEAR_SLACK})"}
    for step in ("preview", "up"):
        ours, floor = median(report.get("b2", {}).get(step)), median(report.get("b2_noop", {}).get(step))
        if ours and floor:
            found[f"B2 {step}"] = {"met": ours <= B2_FACTOR * floor,
                                   "detail": f"{ours / floor:.2f} x no-op floor (<= {B2_FACTOR})"
                                             + _bound(report, report.get("steady_cpu", {}).get("ours", {}).get(step), floor)}
    if "b2" in report:
        found["B2 no engine call"] = {"met": bool(report["b2"].get("pure")),
                                      "detail": "preview passes with every engine unreachable"}
    peak = report.get("b4", {}).get("devstack")
    if peak:
        found["B4"] = {"met": peak < B4_LIMIT_MB * 2**20, "detail": f"{peak / 2**20:.0f} MB (< {B4_LIMIT_MB} MB)"}
    return found


def _median_of(value: float | list[float] | None) -> float | None:
    """A list's median; a single number (reports of one round) as it is."""
    return median(value) if isinstance(value, list) else value


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def b1_table(report: dict[str, Any]) -> list[str]:
    # Reports from before B1 had rounds hold one run per size and no "runs".
    rounds = max((len(row["runs"]["ours"]) for row in report["b1"].values() if "runs" in row), default=1)
    lines = [f"B1, median of {rounds} round{'s' if rounds != 1 else ''} at each N:", "",
             "| N | devstack `up` | (a) direct | (b) no-op `up` | ours/(a) | ours/(b) | ours/((a)+(b)) | devstack destroy (purge) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, row in sorted(report["b1"].items(), key=lambda item: int(item[0])):
        lines.append(f"| {n} | {_s(row['ours'])} | {_s(row['direct'])} | {_s(row['noop'])} | "
                     f"{_x(row['ours'] / row['direct'])} | {_x(row['ours'] / row['noop'])} | "
                     f"{_x(row['ours'] / (row['direct'] + row['noop']))} | "
                     f"{_s(_median_of(report.get('destroy', {}).get(n)))} |")
    sizes = sorted(int(n) for n in report["b1"])
    if len(sizes) >= 2:
        first, last = str(sizes[0]), str(sizes[-1])
        growth = {k: report["b1"][last][k] / report["b1"][first][k] for k in ("ours", "direct", "noop")}
        lines.append(f"| growth {first} -> {last} ({int(last) / int(first):.0f} x N) | {_x(growth['ours'])} x | "
                     f"{_x(growth['direct'])} x | {_x(growth['noop'])} x | | | | |")
        slopes = {k: marginal(series(report, k)) for k in ("ours", "direct", "noop")}
        lines.append("| ms per added resource | " + " | ".join(
            " -> ".join(f"{s * 1000:.0f}" for s in slopes[k]) for k in ("ours", "direct", "noop")) + " | | | | |")
    return lines


def b2_table(report: dict[str, Any]) -> list[str]:
    if "b2" not in report:
        return []
    n = max(int(k) for k in report["b1"])
    lines = [f"| at N = {n} (median of {report['repeat']}) | devstack | no-op floor | ratio |", "|---|---:|---:|---:|"]
    rows = [("B2 `preview`, no change", report["b2"].get("preview"), report.get("b2_noop", {}).get("preview")),
            ("B2 `up`, no change", report["b2"].get("up"), report.get("b2_noop", {}).get("up")),
            ("B3 `refresh`", report.get("b3"), report.get("b3_noop"))]
    for label, ours, floor in rows:
        o, f = median(ours), median(floor)
        lines.append(f"| {label} | {_s(o)} | {_s(f)} | {_x(o / f) if o and f else '-'} |")
    return lines


def cpu_table(report: dict[str, Any]) -> list[str]:
    """CPU-seconds of each measured step, client + engines (medians), and the wall time they need at least."""
    cores = report["machine"]["cores"]
    rows = [(f"B1 N={n} {label}", row.get("cpu", {}).get(key)) for n, row in
            sorted(report["b1"].items(), key=lambda item: int(item[0]))
            for key, label in (("ours", "devstack `up`"), ("direct", "(a) direct"), ("noop", "(b) no-op `up`"))]
    for step in ("preview", "up", "refresh"):
        for key, label in (("ours", "devstack"), ("noop", "no-op")):
            rows.append((f"{step} {label}", report.get("steady_cpu", {}).get(key, {}).get(step)))
    lines = [f"CPU-seconds per step (median; client: the pulumi processes, or (a)'s threads; engines: the local "
             f"engines'), and the least wall time they allow on {cores} cores:", "",
             "| step | client | engines | together | / cores |", "|---|---:|---:|---:|---:|"]
    for label, runs in rows:
        if runs:
            client, engines = median([r["client"] for r in runs]), median([r["engines"] for r in runs])
            together = cpu_seconds(runs) or 0.0
            lines.append(f"| {label} | {client:.1f} | {engines:.1f} | {together:.1f} | {together / cores:.1f} s |")
    return lines if len(lines) > 4 else []


def engine_cpu_table(report: dict[str, Any]) -> list[str]:
    """Each engine's CPU-seconds in B1 at the largest N (medians): devstack's `up` beside the same operations
    done directly; the no-op floor calls no engine, so its column is what the engines spend idle meanwhile."""
    if not report["b1"]:
        return []  # the run stopped before any size was measured: its error says why
    n = max(report["b1"], key=int)
    cpu_runs = report["b1"][n].get("cpu", {})
    columns = (("ours", "devstack `up`"), ("direct", "(a) direct"), ("noop", "(b) no-op `up` (idle)"))
    names = sorted({name for key, _ in columns for run in cpu_runs.get(key, []) for name in run.get("by_engine", {})})
    if not names:
        return []
    lines = [f"Each engine's CPU-seconds at N={n} (median):", "",
             "| engine | " + " | ".join(label for _, label in columns) + " |", "|---|" + "---:|" * len(columns)]
    for name in names:
        cells = [median([run["by_engine"][name] for run in cpu_runs.get(key, []) if name in run.get("by_engine", {})])
                 for key, _ in columns]
        lines.append(f"| {name} | " + " | ".join("-" if cell is None else f"{cell:.2f}" for cell in cells) + " |")
    return lines


def table(report: dict[str, Any]) -> str:
    m = report["machine"]
    head = [f"devstack benchmark, {report['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, "
            f"{m['os']}, Python {m['python']}, pulumi {m['pulumi']}", ""]
    rss = report.get("b4", {})
    b4 = [f"B4 peak RSS of the provider process: devstack {rss.get('devstack', 0) / 2**20:.0f} MB, "
          f"no-op {rss.get('noop', 0) / 2**20:.0f} MB"]
    checks = [f"- {'met   ' if t['met'] else 'MISSED'} {name}: {t['detail']}" for name, t in report["targets"].items()]
    left = sum(report.get("leftovers", {}).values())
    loads = [load for _step, load in report.get("load", [])]
    tail = [f"left behind in the engines after the run: {left}"]
    if report.get("error"):
        tail.append(f"THE RUN STOPPED EARLY: {report['error'].splitlines()[-1][:300]}")
    if loads:
        tail.append(f"machine load (1-min average) at the start of each step: {min(loads):.1f} to {max(loads):.1f}, "
                    f"median {statistics.median(loads):.1f}")
    if report.get("providers_from"):
        tail.append(f"providers and components measured from {report['providers_from']}")
    if report.get("env"):
        tail.append(f"extra environment of every pulumi run: {' '.join(report['env'])}")
    return "\n".join(head + b1_table(report) + [""] + b2_table(report) + [""] + cpu_table(report) + [""]
                     + engine_cpu_table(report) + [""] + b4 + [""] + checks + [""] + tail)
