"""providers.naming: identity on what today's rules accept, sanitizing everything else into a name the
engine accepts, stably, with a hash suffix where a limit cuts."""

from __future__ import annotations

import hashlib
import inspect
import random
import string

import pytest

from providers import identity, naming
from providers.localstack import names as localstack
from providers.minio import access_key as minio
from providers.s3 import names as s3
from providers.kafka import names as kafka
from providers.nats import names as nats
from providers.postgres import names as postgres
from providers.redis import client as redis
from providers.errors import InvalidSpec

#: Names today's rules accept unchanged for most engines (lowercase, '-', digits).
PLAIN = ["shop", "acme", "acme-uploads", "shop-x", "a1b", "x" * 40, "acme-2024-logs"]


def hash8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def legacy(function, *args, **kwargs):
    """Today's (owner-prefixed, refusing) rule: where a provider function takes `naming`, PREFIXED is it."""
    if "naming" in inspect.signature(function).parameters:
        kwargs["naming"] = identity.PREFIXED
    return function(*args, **kwargs)


# --- identity on today's valid names ------------------------------------------


@pytest.mark.parametrize("text", [*PLAIN, "_x1", "a" * 63, "shop_x", "a-b-c"])
def test_postgres_identifier_is_todays_identifier_on_valid_names(text):
    assert naming.postgres_identifier(text) == postgres.identifier(text)
    assert naming.postgres_role(text) == postgres.role_identifier(text)


@pytest.mark.parametrize("text", [*PLAIN, "acme.uploads", "a.-b", "1shop", "abc", "a" * 63, "x-1.2.3"])
def test_s3_bucket_is_todays_bucket_name_on_valid_names(text):
    assert naming.s3_bucket(text) == legacy(s3.bucket_name, text, text)


@pytest.mark.parametrize("text", [*PLAIN, "acme.uploads", "1shop", "abc", "a" * 63, "x-1.2.3"])
def test_bucket_is_todays_minio_bucket_name_on_valid_names(text):
    assert naming.bucket(text) == legacy(minio.MinioBucket.engine_name, text, text)


@pytest.mark.parametrize("text", [*PLAIN, "acme.key", "a_b", "abc-", "a" * 128])
def test_minio_access_key_is_todays_on_valid_names(text):
    assert naming.minio_access_key(text) == legacy(minio.access_key_name, text, text)


@pytest.mark.parametrize("name, owner", [("uploads", "acme"), ("a.b-c", "shop-x"), ("x" * 244, "a"), ("a", "y" * 244)])
def test_lifecycle_rule_parts_are_todays_rule_id_on_valid_names(name, owner):
    mapped = f"{s3.RULE_PREFIX}{naming.lifecycle_rule_part(owner)}:{naming.lifecycle_rule_part(name)}"
    assert mapped == legacy(s3.rule_id, name, owner)


@pytest.mark.parametrize("text, limit", [
    *[(text, 80) for text in PLAIN], ("Acme_Orders", 80), ("acme-jobs.fifo", 80), ("q" * 80, 80),
    ("q" * 75 + ".fifo", 80), ("t" * 256, 256), ("T" * 251 + ".fifo", 256),
])
def test_sqs_sns_is_todays_fifo_capable_name_on_valid_names(text, limit):
    # The legacy function owner-prefixes: naming the owner after the base maps the text alone.
    today = legacy(localstack.fifo_capable_name, text, text.removesuffix(".fifo"), service="q", limit=limit)
    assert naming.sqs_sns(text, limit=limit) == today


@pytest.mark.parametrize("text, length", [
    *[(text, (1, 128)) for text in PLAIN], ("Acme.Clicks_1", (1, 128)), ("k", (1, 128)), ("k" * 128, (1, 128)),
    ("abc", (3, 255)), ("Orders.v2", (3, 255)), ("d" * 255, (3, 255)),
])
def test_kinesis_dynamodb_is_todays_plain_name_on_valid_names(text, length):
    assert naming.kinesis_dynamodb(text, length=length) == legacy(localstack.plain_name, text, text, service="s",
                                                                  length=length)


@pytest.mark.parametrize("text", [*PLAIN, "acme_x", "a_b-c", "n" * 255])
def test_nats_is_todays_nats_name_on_valid_names(text):
    assert naming.nats(text) == legacy(nats.nats_name, text, text)
    assert naming.nats(text[:252], limit=252) == legacy(nats.nats_name, text[:252], text[:252], limit=252)


@pytest.mark.parametrize("text", [*PLAIN, "acme.orders", "Acme.Orders_v2", ".x", "...", "k" * 244])
def test_kafka_is_todays_kafka_name_on_valid_names(text):
    assert "o." + naming.kafka(text) == legacy(kafka.kafka_name, text, "o")


@pytest.mark.parametrize("text", [*PLAIN, "Acme_Shop", "k" * 249])
def test_kafka_project_is_todays_kafka_name_on_valid_names(text):
    assert naming.kafka_project(text) == legacy(kafka.kafka_name, text, text)
    assert naming.kafka(text) == legacy(kafka.kafka_name, text, text)


@pytest.mark.parametrize("text", [*PLAIN, "Acme.Cache_1", "r" * 64])
def test_redis_is_todays_engine_name_on_valid_names(text):
    assert naming.redis(text) == legacy(redis.engine_name, text, text)


# --- case and charset ---------------------------------------------------------


@pytest.mark.parametrize("mapping, text, expected", [
    pytest.param(naming.postgres_identifier, "Shop.X-1", "shop_x_1", id="postgres-case-dot-dash"),
    pytest.param(naming.postgres_identifier, "1shop", "1shop", id="postgres-leading-digit-kept"),
    pytest.param(naming.postgres_identifier, "café", "caf_", id="postgres-non-ascii"),
    pytest.param(naming.postgres_identifier, 'x"; DROP', "x___drop", id="postgres-injection"),
    pytest.param(naming.s3_bucket, "Shop_Uploads", "shop-uploads", id="s3-case-underscore"),
    pytest.param(naming.s3_bucket, "a..b", "a.b", id="s3-double-dot"),
    pytest.param(naming.s3_bucket, "a.-b", "a.-b", id="s3-dash-next-to-dot-is-s3-valid"),
    pytest.param(naming.s3_bucket, "shop-", "shop", id="s3-trailing-dash"),
    pytest.param(naming.bucket, "a.-b", "a-b", id="minio-dash-next-to-dot"),
    pytest.param(naming.bucket, "a-.-.b", "a-b", id="minio-dash-dot-run"),
    pytest.param(naming.bucket, "a...b", "a.b", id="minio-dot-run"),
    pytest.param(naming.minio_access_key, "Shop.Key_1", "shop.key_1", id="minio-key-case"),
    pytest.param(naming.lifecycle_rule_part, "Shop_X", "shop-x", id="rule-part"),
    pytest.param(naming.nats, "Acme.Orders", "acme_orders", id="nats-case-dot"),
    pytest.param(naming.kafka, "Acme Orders/é", "Acme-Orders--", id="kafka-case-kept"),
    pytest.param(naming.kafka_project, "acme.shop", "acme_shop", id="kafka-project-no-dot"),
    pytest.param(naming.redis, "Acme:Cache", "Acme-Cache", id="redis-colon"),
    pytest.param(naming.redis, "_x", "x", id="redis-leading"),
    pytest.param(lambda t: naming.sqs_sns(t, limit=80), "Acme.Jobs.fifo", "Acme-Jobs.fifo", id="sqs-fifo-kept"),
    pytest.param(lambda t: naming.sqs_sns(t, limit=80), "a.FIFO", "a-FIFO", id="sqs-fifo-is-case-sensitive"),
    pytest.param(lambda t: naming.kinesis_dynamodb(t, length=(1, 128)), "Acme:Clicks", "Acme-Clicks",
                 id="kinesis-colon"),
])
def test_case_and_charset(mapping, text, expected):
    assert mapping(text) == expected


# --- length limits, minimum lengths, rules only a suffix fixes ----------------

#: (function of one text, limit, separator, filler character that survives the mapping)
LIMITED = [
    pytest.param(naming.postgres_identifier, 63, "_", "a", id="postgres"),
    pytest.param(naming.s3_bucket, 63, "-", "b", id="s3-bucket"),
    pytest.param(naming.bucket, 63, "-", "b", id="minio-bucket"),
    pytest.param(naming.minio_access_key, 128, "-", "k", id="minio-key"),
    pytest.param(naming.lifecycle_rule_part, naming.MAX_RULE_PART, "-", "r", id="rule-part"),
    pytest.param(lambda t: naming.sqs_sns(t, limit=80), 80, "-", "Q", id="sqs"),
    pytest.param(lambda t: naming.sqs_sns(t, limit=256), 256, "-", "T", id="sns"),
    pytest.param(lambda t: naming.kinesis_dynamodb(t, length=(1, 128)), 128, "-", "S", id="kinesis"),
    pytest.param(lambda t: naming.kinesis_dynamodb(t, length=(3, 255)), 255, "-", "D", id="dynamodb"),
    pytest.param(naming.nats, 255, "_", "n", id="nats"),
    pytest.param(lambda t: naming.nats(t, limit=252), 252, "_", "n", id="nats-kv"),
    pytest.param(naming.kafka, 249, "-", "K", id="kafka"),
    pytest.param(naming.kafka_project, 249, "-", "P", id="kafka-project"),
    pytest.param(naming.redis, 64, "-", "R", id="redis"),
]


@pytest.mark.parametrize("mapping, limit, sep, char", LIMITED)
def test_exactly_at_the_limit_is_kept_and_one_over_is_cut_with_the_hash(mapping, limit, sep, char):
    assert mapping(char * limit) == char * limit
    over = char * (limit + 1)
    assert mapping(over) == char * (limit - 1 - naming.HASH_LENGTH) + sep + hash8(over)
    assert len(mapping(over)) == limit


@pytest.mark.parametrize("mapping, limit, sep, char", LIMITED)
def test_long_names_sharing_a_70_char_prefix_stay_apart(mapping, limit, sep, char):
    prefix = char * 70
    first, second = prefix + "x" * limit + "1", prefix + "x" * limit + "2"
    assert mapping(first) != mapping(second)
    assert len(mapping(first)) <= limit and len(mapping(second)) <= limit


@pytest.mark.parametrize("text", ["Ä" * 40, "é" * 63, "日本" * 30])
def test_postgres_identifiers_stay_within_63_bytes(text):
    assert len(naming.postgres_identifier(text).encode()) <= naming.POSTGRES_MAX_BYTES


@pytest.mark.parametrize("text, limit", [("Q" * 90 + ".fifo", 80), ("T" * 300 + ".fifo", 256)])
def test_a_cut_fifo_name_keeps_fifo_last_and_within_the_limit(text, limit):
    mapped = naming.sqs_sns(text, limit=limit)
    assert mapped.endswith(".fifo") and len(mapped) == limit
    assert mapped == text[: limit - 5 - 9] + "-" + hash8(text) + ".fifo"


@pytest.mark.parametrize("mapping, text, kept", [
    pytest.param(naming.s3_bucket, "a", "a", id="s3-bucket-1-char"),
    pytest.param(naming.bucket, "Ab", "ab", id="bucket-2-chars"),
    pytest.param(naming.minio_access_key, "K", "k", id="minio-key-1-char"),
    pytest.param(lambda t: naming.kinesis_dynamodb(t, length=(3, 255)), "Ab", "Ab", id="dynamodb-2-chars-case-kept"),
])
def test_a_name_under_the_minimum_is_padded_with_the_hash(mapping, text, kept):
    assert mapping(text) == kept + "-" + hash8(text)


@pytest.mark.parametrize("mapping, text, expected", [
    pytest.param(naming.s3_bucket, "192.168.1.1", "192.168.1.1-" + hash8("192.168.1.1"), id="ipv4"),
    pytest.param(naming.bucket, "shop-s3alias", "shop-s3alias-" + hash8("shop-s3alias"), id="suffix"),
    pytest.param(naming.s3_bucket, "logs.mrap", "logs.mrap-" + hash8("logs.mrap"), id="suffix-mrap"),
    pytest.param(naming.s3_bucket, "xn--shop", "shop-" + hash8("xn--shop"), id="prefix-dropped"),
    pytest.param(naming.bucket, "sthree-xn--a", "a-" + hash8("sthree-xn--a"), id="prefixes-dropped"),
    pytest.param(naming.s3_bucket, "_", hash8("_"), id="nothing-survives"),
    pytest.param(naming.kafka, ".", ".-" + hash8("."), id="kafka-dot"),
    pytest.param(naming.kafka, "..", "..-" + hash8(".."), id="kafka-dot-dot"),
    pytest.param(lambda t: naming.sqs_sns(t, limit=80), ".fifo", hash8(".fifo") + ".fifo", id="fifo-alone"),
])
def test_a_rule_only_the_suffix_fixes(mapping, text, expected):
    assert mapping(text) == expected


# --- refused --------------------------------------------------------------------


@pytest.mark.parametrize("mapping, text, rule", [
    pytest.param(naming.postgres_role, "public", "reserves the role name 'public'", id="public"),
    pytest.param(naming.postgres_role, "None", "reserves the role name 'none'", id="none"),
    pytest.param(naming.postgres_role, "pg-monitor", "reserves the role name 'pg_monitor'", id="pg-star"),
    pytest.param(naming.postgres_database, "Template1", "has a database 'template1'", id="template1"),
    pytest.param(naming.postgres_database, "postgres", "has a database 'postgres'", id="postgres"),
    *[pytest.param(mapping, "", "cannot be empty", id=f"empty-{mapping.__name__}")
      for mapping in (naming.postgres_identifier, naming.s3_bucket, naming.bucket, naming.minio_access_key,
                      naming.lifecycle_rule_part, naming.nats, naming.kafka, naming.kafka_project, naming.redis)],
])
def test_what_no_mapping_saves_is_refused_naming_the_rule(mapping, text, rule):
    with pytest.raises(InvalidSpec, match=rule) as raised:
        mapping(text)
    assert raised.value.verb == "map" and raised.value.what == repr(text)


# --- stability and collisions ---------------------------------------------------


def test_the_hash_suffix_is_sha256_and_stable():
    text = "acme-" + "very-long-bucket-name-" * 4
    # Hard-coded: a changed hash would move every cut name's resource.
    assert naming.bucket(text) == "acme-very-long-bucket-name-very-long-bucket-name-very-4c06be0e"
    assert naming.bucket(text) == naming.bucket(text)


def test_collisions_lists_the_texts_sharing_an_identifier():
    found = naming.collisions(["Shop", "shop", "shop_", "other", "Shop", "o.x", "o_x"], naming.bucket)
    assert found == {"shop": ["Shop", "shop", "shop_"]}
    assert naming.collisions(["a.b", "a_b", "a-b"], naming.postgres_identifier) == {"a_b": ["a.b", "a_b", "a-b"]}
    assert naming.collisions(["Acme", "acme"], naming.kafka) == {}


# --- every accepted project name maps to a name its engine accepts -----------

_FIRST = string.ascii_letters + string.digits
_REST = _FIRST + "._-"


def _generated(count: int = 400) -> list[str]:
    rng = random.Random(27)
    names = []
    for _ in range(count):
        length = rng.choice([1, 2, 3, rng.randint(1, 128), rng.randint(60, 128)])
        names.append(rng.choice(_FIRST) + "".join(rng.choice(_REST) for _ in range(length - 1)))
    return names


GENERATED = _generated()


def test_every_accepted_name_maps_to_what_each_engine_accepts():
    for text in GENERATED:
        ident = naming.postgres_identifier(text)
        assert len(ident.encode()) <= 63 and set(ident) <= set(string.ascii_lowercase + string.digits + "_"), text
        if not ident[0].isdigit():
            assert postgres.identifier(ident) == ident
        bucket = naming.s3_bucket(text)
        assert s3.bucket_rule(bucket) is None, (text, bucket)
        bucket = naming.bucket(text)
        assert s3.bucket_rule(bucket) is None and ".-" not in bucket and "-." not in bucket, (text, bucket)
        assert legacy(minio.MinioBucket.engine_name, bucket, bucket) == bucket
        key = naming.minio_access_key(text)
        assert legacy(minio.access_key_name, key, key) == key
        part = naming.lifecycle_rule_part(text)
        assert legacy(s3.rule_id, part, "a") == f"devstack:a:{part}"
        for limit in (80, 256):
            queue = naming.sqs_sns(text, limit=limit)
            assert legacy(localstack.fifo_capable_name, queue, queue.removesuffix(".fifo"), service="q",
                          limit=limit) == queue
            assert queue.endswith(".fifo") == text.endswith(".fifo")
        for length in ((1, 128), (3, 255)):
            stream = naming.kinesis_dynamodb(text, length=length)
            assert legacy(localstack.plain_name, stream, stream, service="s", length=length) == stream
        for mapped, today in [
            (naming.nats(text), lambda m: legacy(nats.nats_name, m, m)),
            (naming.kafka(text), lambda m: legacy(kafka.kafka_name, m, "o").removeprefix("o.")),
            (naming.kafka_project(text), lambda m: legacy(kafka.kafka_name, m, m)),
            (naming.redis(text), lambda m: legacy(redis.engine_name, m, m)),
        ]:
            assert today(mapped) == mapped, (text, mapped)


@pytest.mark.parametrize("mapping", [
    naming.postgres_identifier, naming.s3_bucket, naming.bucket, naming.minio_access_key,
    naming.lifecycle_rule_part, naming.nats, naming.kafka, naming.kafka_project, naming.redis,
    lambda t: naming.sqs_sns(t, limit=80), lambda t: naming.kinesis_dynamodb(t, length=(3, 255)),
])
def test_mapping_is_idempotent_on_generated_names(mapping):
    # A mapped name is a name its engine accepts, so mapping it again keeps it.
    for text in GENERATED:
        assert mapping(mapping(text)) == mapping(text), text
