"""Which workspace a marker proves a resource belongs to (a purge lets go of another workspace's)."""

from __future__ import annotations

import pytest

from providers.base import marked_elsewhere, marker_workspace

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
