"""providers.nats.names: the subject rules."""

from __future__ import annotations

import pytest

from providers.nats.names import subject_within


@pytest.mark.parametrize(
    ("subject", "pattern", "inside"),
    [
        ("shop.orders", "shop.>", True),
        ("shop.>", "shop.>", True),
        ("shop.*.created", "shop.>", True),
        ("shop", "shop.>", False),
        (">", "shop.>", False),
        ("*.orders", "shop.>", False),
        ("shop.orders.x", "shop.orders.*", True),
        ("shop.*", "shop.orders", False),
        ("shopping.x", "shop.>", False),
    ],
    ids=["literal", "same-wildcard", "star-inside", "bare-prefix", "everything", "star-owner", "star-pattern",
         "star-vs-literal", "longer-owner"],
)
def test_subject_within(subject, pattern, inside):
    assert subject_within(subject, pattern) is inside
