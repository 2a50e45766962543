"""PostgreSQL identifier mapping: pure, stable, and explicit about the rule a name breaks."""

from __future__ import annotations

import pytest

from providers.errors import InvalidSpec
from providers.postgres.names import identifier


@pytest.mark.parametrize(
    "name, expected",
    [("shop", "shop"), ("my-shop", "my_shop"), ("_x1", "_x1"), ("a" * 63, "a" * 63)],
)
def test_identifier_maps_valid_names(name, expected):
    assert identifier(name) == expected
    assert identifier(name) == identifier(name)  # stable across calls


@pytest.mark.parametrize(
    "name, rule",
    [
        pytest.param("", "cannot be empty", id="empty"),
        pytest.param("a" * 64, "at most 63 bytes", id="64-bytes"),
        pytest.param("Shop", "lowercase", id="uppercase"),
        pytest.param('x"; DROP DATABASE y; --', "lowercase", id="injection"),
        pytest.param("1shop", "starting with a letter", id="leading-digit"),
        pytest.param("../etc", "lowercase", id="path"),
        pytest.param("café", "lowercase", id="unicode"),
    ],
)
def test_identifier_rejects_with_the_rule(name, rule):
    with pytest.raises(InvalidSpec, match=rule):
        identifier(name)
