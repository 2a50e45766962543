"""Kafka names: a project's prefix and the rules a name keeps."""

from __future__ import annotations

import pytest

from providers.errors import InvalidSpec
from providers.identity import PREFIXED
from providers.kafka.names import kafka_name


@pytest.mark.parametrize(
    ("name", "owner", "expected"),
    [("shop", "shop", "shop"), ("orders", "shop", "shop.orders"), ("orders.v2", "shop-x", "shop-x.orders.v2")],
    ids=["default", "named", "dotted-name"],
)
def test_kafka_name(name, owner, expected):
    assert kafka_name(name, owner, naming=PREFIXED) == expected


@pytest.mark.parametrize(
    ("name", "owner", "rule"),
    [("orders", "a.b", "no '.'"), ("ord/ers", "shop", "letters, digits"), ("..", "shop", "letters, digits"),
     ("x" * 250, "shop", "at most 249")],
    ids=["dotted-owner", "slash", "dotdot", "too-long"],
)
def test_kafka_name_rules(name, owner, rule):
    with pytest.raises(InvalidSpec, match=rule):
        kafka_name(name, owner, naming=PREFIXED)
