"""A create-only change of a retained resource fails check, before anything is deleted.

Pulumi deletes the old resource with the settings it had: with `purge: false` the delete keeps it, and the
replacement's create finds it with the old value and refuses to adopt it, part-way through the up. Check
says so instead, so the preview fails. Lifecycle rules are the exception: a retained rule moves to its
new bucket.
"""

from __future__ import annotations

import json

import pytest

from providers import registry
from tests.providers.conftest import props

CASES = [
    pytest.param("postgres", "pg", "database", {"locale": "C.UTF-8"}, {"locale": "C"}, "params.locale", '"C.UTF-8"',
                 id="postgres-database-locale"),
    pytest.param("redis", "cache", "redis_index", {"index": 61}, {"index": 62}, "params.index", "61", id="redis-index-pin"),
    pytest.param("localstack", "aws", "table", {"hashKey": {"name": "id", "type": "S"}},
                 {"hashKey": {"name": "pk", "type": "S"}}, "params.hashKey", '{"name": "id", "type": "S"}',
                 id="localstack-table-key"),
    pytest.param("nats", "events", "stream", {}, {"storage": "memory"}, "params.storage", '"file"', id="nats-stream-storage"),
    pytest.param("kafka", "kafka", "topic", {}, {"replicationFactor": 2}, "params.replicationFactor", "1",
                 id="kafka-topic-replication"),
]


def as_pulumi_stores(inputs: dict) -> dict:
    """Inputs as Pulumi hands them back: every number a float."""
    return json.loads(json.dumps(inputs), parse_int=float)


@pytest.mark.parametrize("engine, instance, kind, before, after, field, live", CASES)
def test_a_create_only_change_of_a_retained_resource_fails_check(configure, owner, engine, instance, kind, before,
                                                                 after, field, live):
    provider = configure(registry.provider_class(engine, kind)())
    olds = as_pulumi_stores(provider.check({}, props(engine, instance, kind, owner, owner, before)).inputs)
    failures = {f.property: f.reason for f in provider.check(olds, props(engine, instance, kind, owner, owner, after)).failures}
    assert list(failures) == [field]
    assert f"cannot change from {live} while the {kind} is retained (purge: false)" in failures[field]
    assert "set `purge: true`" in failures[field]
    # Setting purge in the same up does not help: Pulumi deletes with the old settings.
    assert field in {f.property for f in provider.check(olds, props(engine, instance, kind, owner, owner, after,
                                                                    purge=True)).failures}
    # A new name is another resource: the retained one stays as it is, and nothing is refused.
    renamed = provider.check(olds, props(engine, instance, kind, "other", owner, after)).failures
    assert not [f for f in renamed if "is retained" in f.reason]


def test_a_retained_lifecycle_rule_moves_to_its_new_bucket(configure, owner):
    provider = configure(registry.provider_class("minio", "lifecycle")())
    olds = provider.check({}, props("minio", "objects", "lifecycle", "expire", owner, {"bucket": "a", "expireDays": 1})).inputs
    news = props("minio", "objects", "lifecycle", "expire", owner, {"bucket": "b", "expireDays": 1})
    assert provider.check(olds, news).failures == []
