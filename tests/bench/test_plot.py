"""bench.plot: B1's medians per side, drawn for each checkpoint mode."""

from __future__ import annotations

import json

from bench import plot


def report(mode: str, scale: float) -> dict:
    return {"checkpoints": mode, "b1": {
        str(n): {"runs": {"ours": [n * scale, n * scale * 3], "noop": [n * scale / 2], "direct": [n / 10]}}
        for n in (30, 120, 300)}}


def test_each_side_is_its_median_against_n_in_order():
    assert plot.series(report("end-of-run", 0.01))["ours"] == [(30, 0.6), (120, 2.4), (300, 6.0)]
    assert plot.series({"b1": {"30": {"runs": {"ours": [1.0]}}}})["direct"] == []


def test_both_modes_are_drawn_to_one_png(tmp_path):
    files = []
    for mode, scale in (("end-of-run", 0.01), ("every-step", 0.03)):
        files.append(tmp_path / f"{mode}.json")
        files[-1].write_text(json.dumps(report(mode, scale)))
    out = tmp_path / "b1.png"
    assert plot.main([str(f) for f in files] + ["--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
