"""`python -m bench.plot RESULTS.json... [--out PNG]`: B1's time against N, one line per side and mode.

Each results file is one `python -m bench.run` (its `checkpoints` mode recorded in it); every side (ours,
Pulumi's no-op floor, the direct baseline) is drawn against N with its mode in the legend, on log-log axes
so linear growth is a line of slope 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.report import median

SIDES = {"ours": "devstack", "noop": "Pulumi no-op floor", "direct": "direct engine calls"}
STYLES = {"end-of-run": "-", "every-step": "--"}


def series(report: dict) -> dict[str, list[tuple[int, float]]]:
    """side -> [(N, median seconds)] of one report's B1."""
    by_side: dict[str, list[tuple[int, float]]] = {side: [] for side in SIDES}
    for size, measured in sorted(report.get("b1", {}).items(), key=lambda item: int(item[0])):
        for side in SIDES:
            runs = (measured.get("runs") or {}).get(side)
            if runs:
                by_side[side].append((int(size), median(runs)))
    return by_side


def draw(reports: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # a file, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for report in reports:
        mode = report.get("checkpoints", "every-step")
        for (side, label), color in zip(SIDES.items(), ("tab:blue", "tab:orange", "tab:green")):
            points = series(report)[side]
            if points:
                axes.plot(*zip(*points), STYLES.get(mode, ":"), marker="o", color=color, label=f"{label} ({mode})")
    axes.set(xscale="log", yscale="log", xlabel="N tenant resources", ylabel="seconds (median)",
             title="pulumi up creating N resources")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plot", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="bench.run JSON files")
    parser.add_argument("--out", type=Path, help="PNG to write (default: beside the first JSON)")
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.results]
    out = args.out or args.results[0].with_suffix(".png")
    draw(reports, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
