"""Which workspace a marker proves a resource belongs to (a purge lets go of another workspace's)."""

from __future__ import annotations

import pytest

from providers.markers import marked_elsewhere, marker_workspace, moves_from

THIS = marker_workspace("local", "this clone's salt")


@pytest.mark.parametrize("marked, elsewhere", [
    (THIS, False),
    (marker_workspace("local", "another clone's salt"), True),  # a stack of the same name, another ledger
    (marker_workspace("team", "this clone's salt"), True),
    ("team", True),  # another stack's, marked before markers named their ledger
    ("local", False),  # this stack's name, marked before markers named their ledger: nothing proves otherwise
    (None, False),  # the engine keeps no workspace for it
])
def test_a_marker_proves_another_workspace_only_by_its_stack_or_its_ledger(marked, elsewhere):
    assert marked_elsewhere(marked, THIS) is elsewhere


def test_a_ledger_that_predates_the_digest_claims_every_marker_of_its_stack_name():
    assert marked_elsewhere(THIS, "local") is False
    assert marked_elsewhere(marker_workspace("team", "salt"), "local") is True
    assert marked_elsewhere(THIS, None) is False


OLD = marker_workspace("old", "the old clone's salt")


@pytest.mark.parametrize("origin, marked, moves", [
    (OLD, OLD, True),  # as the Conflict names it
    ("old", OLD, True),  # its stack name alone: any ledger of that name
    ("old", "old", True),  # marked before markers named their ledger
    (OLD, marker_workspace("old", "another clone's salt"), False),  # the same name, another ledger
    (OLD, "old", False),  # a bare marker does not prove the ledger named
    ("team", OLD, False),
    (None, OLD, False),  # no adopt entry for the project
    ("old", None, False),
])
def test_a_create_takes_over_only_from_the_workspace_the_adopt_entry_names(origin, marked, moves):
    assert moves_from(origin, marked) is moves
