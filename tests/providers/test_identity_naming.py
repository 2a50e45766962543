"""How a resource's naming is chosen and kept (providers.identity)."""

from __future__ import annotations

import hashlib

import pytest

from providers import registry
from providers.errors import InvalidSpec
from providers.identity import CURRENT_NAMING, PREFIXED, SANITIZED, Identity, naming_of

IDENT = {"engine": "minio", "instance": "s3", "kind": "bucket", "name": "acme-uploads", "owner": "acme"}


def test_a_resource_that_records_no_naming_was_named_by_the_prefixed_rules():
    assert naming_of(IDENT) == PREFIXED
    assert Identity.from_props(IDENT).naming == PREFIXED
    assert Identity.from_props({**IDENT, "naming": 2.0}).naming == SANITIZED  # Pulumi hands numbers back as floats


def test_naming_takes_no_part_in_identity():
    assert Identity.from_props(IDENT) == Identity.from_props({**IDENT, "naming": SANITIZED})
    assert "naming" not in Identity.field_names()


@pytest.mark.parametrize("props, default, naming", [
    ({}, PREFIXED, PREFIXED),  # outputs of a resource made before namings were recorded
    ({}, CURRENT_NAMING, CURRENT_NAMING),  # inputs: a create takes today's
    ({"naming": PREFIXED}, CURRENT_NAMING, PREFIXED),  # asked for
])
def test_the_naming_props_record_else_the_default(props, default, naming):
    assert naming_of(props, default) == naming


def test_check_keeps_no_naming_among_the_inputs():
    """A refresh compares the inputs with what the program registers, which knows no naming: kept in the
    outputs only, it shows in no diff."""
    checked = registry.provider_class("minio", "bucket")().check({}, {**IDENT, "params": {}})
    assert checked.failures == [] and "naming" not in checked.inputs


@pytest.mark.parametrize("engine, kind, name, prefixed, sanitized", [
    ("minio", "bucket", "acme-uploads", "acme-acme-uploads", "acme-uploads"),
    ("minio", "bucket", "uploads", "acme-uploads", "uploads"),
    ("minio", "bucket", "Uploads", None, "uploads"),
    ("minio", "bucket", "acme", "acme", "acme"),
    ("minio", "access_key", "ci-bot", "acme-ci-bot", "ci-bot"),
    ("minio", "lifecycle", "expire", "devstack:acme:expire", "devstack:acme:expire"),
    ("localstack", "bucket", "a" * 70, None, "a" * 54 + "-" + hashlib.sha256(b"a" * 70).hexdigest()[:8]),
    ("localstack", "queue", "jobs.fifo", "acme-jobs.fifo", "jobs.fifo"),
    ("localstack", "table", "Orders", "acme-Orders", "Orders"),
    ("kafka", "topic", "acme.orders", "acme.acme.orders", "acme.orders"),
    ("kafka", "topic", "orders", "acme.orders", "orders"),
    ("kafka", "acl", "svc", "acme.svc", "svc"),
    ("nats", "stream", "x", "acme_x", "x"),
    ("nats", "stream", "Events.v1", None, "events_v1"),
    ("nats", "kv", "cache", "acme_cache", "cache"),
    ("postgres", "database", "Orders", None, "orders"),
    ("postgres", "database", "acme-db", "acme_db", "acme_db"),  # databases never took the prefix
    ("postgres", "user", "reader", "acme_reader", "reader"),
    ("postgres", "user", "acme", "acme_acme", "acme_acme"),  # `acme` is its databases' login role
    ("postgres", "role", "Read.Ers", None, "read_ers"),
    ("redis", "acl_user", "cache", "acme-cache", "cache"),
    ("redis", "redis_index", "acme", "acme", "acme"),
])
def test_each_engine_maps_a_name_by_the_naming_it_records(engine, kind, name, prefixed, sanitized):
    kind_class = registry.provider_class(engine, kind)
    if prefixed is None:
        with pytest.raises(InvalidSpec):
            kind_class.engine_name(name, "acme", naming=PREFIXED)
    else:
        assert kind_class.engine_name(name, "acme", naming=PREFIXED) == prefixed
    assert kind_class.engine_name(name, "acme", naming=SANITIZED) == sanitized


@pytest.mark.parametrize("engine, kind, name", [
    ("postgres", "user", "pg_monitor"), ("postgres", "role", "public"), ("postgres", "database", "template1"),
    ("redis", "acl_user", "default"), ("kafka", "acl", "devstack-admin"),
])
def test_a_name_the_engine_keeps_for_itself_is_refused(engine, kind, name):
    with pytest.raises(InvalidSpec):
        registry.provider_class(engine, kind).engine_name(name, "acme", naming=SANITIZED)
