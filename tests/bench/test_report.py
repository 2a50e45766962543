"""bench.report: the targets of issue 35, within direct + no-op and growing as N does."""

from __future__ import annotations

from bench import report


def b1(times: dict[int, tuple[float, float, float]]) -> dict:
    """A report whose B1 medians are (ours, direct, noop) at each N."""
    return {"machine": {"cores": 2}, "b1": {
        str(n): {"ours": ours, "direct": direct, "noop": noop} for n, (ours, direct, noop) in times.items()}}


def test_ours_within_direct_plus_noop_is_met_at_equality_and_missed_above():
    found = report.targets(b1({300: (10.0, 6.0, 4.0), 1000: (33.1, 24.0, 9.0)}))
    assert found["B1 N=300 within (a)+(b)"]["met"]
    assert not found["B1 N=1000 within (a)+(b)"]["met"]
    assert "1.00 x (a)+(b)" in found["B1 N=1000 within (a)+(b)"]["detail"]


def test_growth_between_the_two_largest_sizes_is_bounded_by_n_growth_with_slack():
    linear = report.targets(b1({30: (1.0, 1.0, 1.0), 300: (10.0, 6.0, 4.0), 1000: (36.0, 24.0, 9.0)}))
    assert linear["B1 growth 300 -> 1000"] == {"met": True, "detail": "3.60 x (<= 3.60 x)"}
    faster = report.targets(b1({300: (10.0, 6.0, 4.0), 1000: (36.1, 24.0, 9.0)}))
    assert not faster["B1 growth 300 -> 1000"]["met"]
