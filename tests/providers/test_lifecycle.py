"""The lifecycle clocks (providers.lifecycle) and diff's view of a stale entry: pure, no engine."""

from __future__ import annotations

from datetime import timedelta

import pytest

from providers import lifecycle
from providers.lifecycle import ACTIVE, FIRST_SEEN, LAST_SEEN, LIFECYCLE, STALE
from providers.postgres.database import Database
from tests.providers.test_base_diff import BASE, OUTPUTS

EARLY, LATE = "2026-01-02T03:04:05Z", "2026-06-07T08:09:10Z"


def test_a_first_observation_sets_both_clocks_to_now():
    before = lifecycle.now()
    made = lifecycle.active(None)
    assert made[LIFECYCLE] == ACTIVE and made[FIRST_SEEN] == made[LAST_SEEN]
    assert before <= lifecycle.parsed(made[LAST_SEEN]) <= lifecycle.now()


@pytest.mark.parametrize("olds", [
    pytest.param({}, id="written-before-the-clocks"),
    pytest.param({FIRST_SEEN: "not a time", LAST_SEEN: 17}, id="unreadable"),
])
def test_outputs_without_clocks_get_them_at_the_next_write(olds):
    seen = lifecycle.active(olds)
    assert seen[FIRST_SEEN] == seen[LAST_SEEN] and lifecycle.parsed(seen[LAST_SEEN]) is not None


def test_an_observation_keeps_first_seen_and_advances_last_seen():
    before = lifecycle.now()
    seen = lifecycle.active({LIFECYCLE: ACTIVE, FIRST_SEEN: EARLY, LAST_SEEN: EARLY})
    assert seen[FIRST_SEEN] == EARLY and lifecycle.parsed(seen[LAST_SEEN]) >= before


def test_an_older_observation_never_overwrites_a_newer_one():
    recorded = {FIRST_SEEN: EARLY, LAST_SEEN: LATE}
    delayed = lifecycle.active(recorded, observed=lifecycle.parsed(EARLY) + timedelta(days=1))
    assert (delayed[FIRST_SEEN], delayed[LAST_SEEN]) == (EARLY, LATE)


def test_no_clock_is_ever_in_the_future():
    ahead = lifecycle.stamp(lifecycle.now() + timedelta(days=3))
    seen = lifecycle.active({FIRST_SEEN: ahead, LAST_SEEN: ahead}, observed=lifecycle.now() + timedelta(hours=1))
    now = lifecycle.now()
    assert lifecycle.parsed(seen[LAST_SEEN]) <= now and lifecycle.parsed(seen[FIRST_SEEN]) <= now
    assert seen[FIRST_SEEN] <= seen[LAST_SEEN]


def test_a_miss_keeps_the_clocks_and_establishes_none():
    assert lifecycle.stale({LIFECYCLE: ACTIVE, FIRST_SEEN: EARLY, LAST_SEEN: LATE, "x": 1}) == {
        LIFECYCLE: STALE, FIRST_SEEN: EARLY, LAST_SEEN: LATE}
    assert lifecycle.stale({"x": 1}) == {LIFECYCLE: STALE}


def test_the_recorded_form_round_trips():
    assert lifecycle.stamp(lifecycle.parsed(LATE)) == LATE
    assert lifecycle.without_clocks({LIFECYCLE: ACTIVE, FIRST_SEEN: EARLY, LAST_SEEN: LATE, "x": 1}) == {
        LIFECYCLE: ACTIVE, "x": 1}


@pytest.mark.parametrize("clocks, changes", [
    pytest.param({}, False, id="written-before-the-clocks"),
    pytest.param({LIFECYCLE: ACTIVE, FIRST_SEEN: EARLY, LAST_SEEN: LATE}, False, id="active"),
    pytest.param({LIFECYCLE: STALE, FIRST_SEEN: EARLY, LAST_SEEN: LATE}, True, id="stale"),
])
def test_diff_reports_a_stale_entry_and_nothing_else_of_the_lifecycle(clocks, changes):
    """diff is pure: Database() is not even configured. Only a stale entry is a change (its update makes
    it again); clocks alone, or their absence, never are."""
    result = Database().diff("id", {**OUTPUTS, **clocks}, BASE)
    assert (result.changes, result.replaces) == (changes, [])


def test_the_inputs_a_stale_read_records_are_those_the_outputs_were_made_from():
    """What the preview compares with the program's inputs: the stale mark alone must differ."""
    recorded = Database()._inputs_of({**OUTPUTS, "naming": 2, LIFECYCLE: ACTIVE, LAST_SEEN: LATE})
    assert recorded == BASE
