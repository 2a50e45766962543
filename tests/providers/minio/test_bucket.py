"""MinIO buckets: the KindContract, S3 naming, drift, the reach of other projects' keys, and each bucket's own key."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from minio.error import MinioAdminException

from providers.errors import Conflict, EngineUnavailable, InvalidSpec
from providers.identity import PREFIXED, Identity
from providers.minio.bucket import MinioBucket
from providers.minio.keys import tenant_policy
from providers.minio.lifecycle import MinioLifecycle
from tests.providers.conftest import props
from tests.providers.minio.helpers import ENDPOINT, as_key, denied
from tests.providers.s3.contract import Case, KindContract
from tools.engines.ports import PORTS


class TestMinioBucket(KindContract):
    @pytest.fixture
    def case(self, oob) -> Case:
        return Case(MinioBucket, "objects", oob,
                    params={"versioning": True, "tags": {"team": "a"}},
                    update={"versioning": False, "tags": {"team": "b"}},
                    updated={"versioning": False, "tags": {"team": "b"}},
                    tampered={"tags": {"team": "tampered"}},
                    replace={"objectLock": True}, replaces=("params.object_lock",),
                    bad=[({"versioning": "sometimes"}, "params.versioning"), ({"tags": {"devstack-owner": "x"}}, "params.tags"),
                         ({"objectLock": True}, "params.versioning"), ({"region": "eu"}, "params.region")])


@pytest.mark.parametrize("name, owner, rule", [
    pytest.param("Data", "shop", "lowercase letters, digits", id="uppercase"),
    pytest.param("a..b", "shop", "must not contain '..'", id="double-dot"),
    pytest.param("a.-b", "shop", "must not have '-' next to '.'", id="dot-hyphen"),
    pytest.param("a-.b", "shop", "must not have '-' next to '.'", id="hyphen-dot"),
    pytest.param("x" * 60, "shop", "3-63 characters", id="too-long"),
    pytest.param("ab", "ab", "3-63 characters", id="too-short"),
    pytest.param("data-", "shop", "begin and end with a letter or digit", id="trailing-hyphen"),
    pytest.param("10.0.0.1", "10.0.0.1", "IP address", id="ip-address"),
    pytest.param("my_data", "shop", "lowercase letters, digits", id="underscore"),
    pytest.param("logs.2024", "shop", None, id="valid-with-dot"),
])
def test_bucket_names_follow_s3_rules(configure, name, owner, rule):
    provider = configure(MinioBucket())
    failures = provider.check({}, props("minio", "objects", "bucket", name, owner)).failures
    if rule is None:
        assert failures == []
    else:
        assert [f.property for f in failures] == ["name"] and rule in failures[0].reason


def test_bucket_names_are_owner_prefixed():
    assert MinioBucket.engine_name("data", "shop", naming=PREFIXED) == "shop-data"
    assert MinioBucket.engine_name("shop", "shop", naming=PREFIXED) == "shop"


def test_bucket_policy_set_outside_is_drift_and_removed(configure, owner, buckets, oob):
    """A bucket policy (here: anyone may read) reaches past the keys' own policies."""
    outs = buckets()
    bucket = outs["bucket"]
    provider = configure(MinioBucket())
    inputs = provider.check({}, props("minio", "objects", "bucket", "data", owner)).inputs
    oob.s3.put_object(Bucket=bucket, Key="private.txt", Body=b"mine")
    public = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ["*"]},
                                                       "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{bucket}/*"]}]}
    oob.s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(public))
    anonymous = f"http://127.0.0.1:{PORTS['minio']}/{bucket}/private.txt"
    assert urllib.request.urlopen(anonymous, timeout=5).read() == b"mine"
    read = provider.read("id", outs).outs
    assert read["bucketPolicy"] is True and provider.diff("id", read, inputs).changes
    provider.update("id", read, inputs)
    with pytest.raises(urllib.error.HTTPError, match="403"):
        urllib.request.urlopen(anonymous, timeout=5)
    assert provider.read("id", outs).outs["bucketPolicy"] is False


def test_a_lifecycle_rule_set_outside_is_drift_and_removed_and_the_projects_own_stay(configure, owner, buckets, oob):
    """An expiry rule no lifecycle of the project made (here: every object after a day) would delete its data."""
    outs = buckets()
    bucket = outs["bucket"]
    provider, lifecycle = configure(MinioBucket()), configure(MinioLifecycle())
    inputs = provider.check({}, props("minio", "objects", "bucket", "data", owner)).inputs
    lifecycle.create(lifecycle.check({}, props("minio", "objects", "lifecycle", "tmp", owner,
                                               {"bucket": "data", "expireDays": 7, "prefix": "tmp/"})).inputs)
    ours = f"devstack:{owner}:tmp"
    rules = oob.s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    evil = {"ID": "evil", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1}}
    oob.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules + [evil]})
    read = provider.read("id", outs).outs
    assert read["foreignRules"] == ["evil"] and provider.diff("id", read, inputs).changes
    provider.update("id", read, inputs)
    assert [r["ID"] for r in oob.s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]] == [ours]
    assert provider.read("id", outs).outs["foreignRules"] == []


def test_a_bucket_is_never_created_within_another_projects_key_reach(owner, buckets, keys, configure, oob):
    keys()
    bucket = configure(MinioBucket())
    extended = f"{owner}-x"
    with pytest.raises(Conflict, match=f"within reach of the access keys of project '{owner}'"):
        bucket.create(bucket.check({}, props("minio", "objects", "bucket", extended, extended)).inputs)
    assert not oob.exists(extended)


def test_a_bucket_undoes_itself_when_a_key_reaching_it_was_made_while_it_was(owner, configure, oob, minio_admin,
                                                                             monkeypatch):
    """Bucket and key check each other before they act: a key that passed its check before the bucket
    existed (another project of the same up, another stack) is caught by the bucket's check after it."""
    from providers.s3.bucket import Bucket

    extended, policy = f"{owner}-x", f"devstack-{owner}"
    make_bucket = Bucket._create_bucket

    def key_made_meanwhile(self, *args, **kwargs):
        make_bucket(self, *args, **kwargs)
        # What the key's create does once its own check has passed: project `owner`'s policy reaches `<owner>-x`.
        minio_admin.policy_add(policy, policy=tenant_policy(Identity("minio", "objects", "access_key", owner, owner), "t"))

    monkeypatch.setattr(Bucket, "_create_bucket", key_made_meanwhile)
    bucket = configure(MinioBucket())
    try:
        with pytest.raises(Conflict, match=f"within reach of the access keys of project '{owner}'"):
            bucket.create(bucket.check({}, props("minio", "objects", "bucket", extended, extended)).inputs)
        assert not oob.exists(extended)
    finally:
        minio_admin.policy_remove(policy)
        oob.cleanup(extended)


def test_tags_the_engine_refuses_leave_no_bucket_behind(configure, owner, oob, monkeypatch):
    """Should MinIO refuse a bucket's tags past validation, the bucket this create made does not stay
    behind empty and unmarked (every later up would refuse it as foreign)."""
    import re

    from providers.s3 import bucket as s3

    monkeypatch.setattr(s3, "_TAG_TEXT", re.compile(r".*"))  # as if validation let them through
    bucket = configure(MinioBucket())
    inputs = bucket.check({}, props("minio", "objects", "bucket", "tagged", owner, {"tags": {"a*b": "x"}})).inputs
    with pytest.raises(InvalidSpec, match="params.tags: the engine refused them"):
        bucket.create(inputs)
    assert not oob.exists(f"{owner}-tagged")


def test_a_purge_whose_minio_goes_away_before_deletebucket_leaves_the_bucket_marked(configure, owner, oob, monkeypatch):
    """MinIO forgets a deleted bucket's tags, so they stay on to the end: taken off first (as on moto, which
    keeps them) and the engine gone before DeleteBucket, nothing could put them back, and the rerun met an
    emptied bucket it called foreign."""
    from botocore.exceptions import EndpointConnectionError
    from providers.s3.bucket import bucket_tags
    from providers.s3.client import aws_client

    bucket = configure(MinioBucket())
    outs = bucket.create(bucket.check({}, props("minio", "objects", "bucket", "b", owner, purge=True)).inputs).outs
    client = aws_client(bucket._instances["objects"], "s3")

    def gone(**_):
        raise EndpointConnectionError(endpoint_url=ENDPOINT)

    try:
        monkeypatch.setattr(client, "delete_bucket", gone)
        monkeypatch.setattr(client, "put_bucket_tagging", gone)
        with pytest.raises(EngineUnavailable):
            bucket.delete("id", outs)
        assert bucket_tags(oob.s3, outs["bucket"])["devstack-owner"] == owner
        monkeypatch.undo()
        bucket.delete("id", outs)  # the rerun finishes the purge
        assert not oob.exists(outs["bucket"])
    finally:
        oob.cleanup(outs["bucket"])


def test_an_empty_untagged_bucket_is_foreign_but_the_message_shows_the_way_out(configure, owner, oob):
    """A create cut between CreateBucket and the tagging leaves exactly this; a bucket made by hand
    looks the same, so it is not taken for ours, but the error says how to get past it."""
    provider = configure(MinioBucket())
    inputs = provider.check({}, props("minio", "objects", "bucket", "data", owner)).inputs
    name = f"{owner}-data"
    oob.foreign(name)
    try:
        with pytest.raises(Conflict, match="empty and untagged, as a create cut short leaves it") as refused:
            provider.create(inputs)
        endpoint = f"http://127.0.0.1:{configure(MinioBucket())._instances['objects'].port}"
        assert f"`aws --endpoint-url {endpoint} s3 rb s3://{name}`" in str(refused.value)
        oob.s3.put_object(Bucket=name, Key="k", Body=b"v")
        with pytest.raises(Conflict) as refused:
            provider.create(inputs)
        assert "cut short" not in str(refused.value) and "choose another `name`" in str(refused.value)
        assert oob.tags(name) == {}  # nothing was changed
    finally:
        oob.cleanup(name)


def test_a_bucket_written_into_while_it_is_purged_is_emptied_again_then_a_conflict(configure, owner, buckets, oob,
                                                                                   monkeypatch):
    """The project's services may still write while its bucket is purged: an object landing between the
    emptying and DeleteBucket is emptied again; one that keeps landing is a Conflict, the bucket kept."""
    from providers.s3 import bucket as s3

    outs = buckets("data")
    provider = configure(MinioBucket())
    emptied = s3.empty_bucket
    landings = {"left": 0}

    def a_writer_lands_after(client, bucket, **kwargs):  # what a service writing meanwhile does
        emptied(client, bucket, **kwargs)
        if landings["left"]:
            landings["left"] -= 1
            oob.s3.put_object(Bucket=bucket, Key=f"late-{landings['left']}", Body=b"x")

    monkeypatch.setattr(s3, "empty_bucket", a_writer_lands_after)
    landings["left"] = s3.REMOVE_ATTEMPTS
    with pytest.raises(Conflict, match="objects kept arriving while it was emptied"):
        provider.delete("id", {**outs, "purge": True})
    assert oob.s3.head_bucket(Bucket=outs["bucket"])  # kept
    landings["left"] = 1  # one late write, then the writer stops
    provider.delete("id", {**outs, "purge": True})
    with pytest.raises(Exception, match="404|NoSuchBucket|Not Found"):
        oob.s3.head_bucket(Bucket=outs["bucket"])


def bucket_inputs(provider: MinioBucket, owner: str, name: str = "data", params: dict | None = None, **policy) -> dict:
    result = provider.check({}, props("minio", "objects", "bucket", name, owner, params, **policy))
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def test_a_buckets_own_key_reaches_that_bucket_alone(configure, owner, buckets, oob):
    """Spec 27's `credentials: generated` on a bucket: a key for it and nothing else, not even the
    project's other buckets; a re-up changes nothing."""
    other_project = buckets("data", project=f"{owner}b")["bucket"]
    second = buckets("second")["bucket"]
    outs = buckets("data", credentials="generated")
    bucket, provider = outs["bucket"], configure(MinioBucket())
    assert outs["accessKey"] == f"{bucket}~key" and MinioBucket.secret_outputs == ("secretKey",)
    client = as_key(outs)
    client.put_object(Bucket=bucket, Key="k", Body=b"v")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    for elsewhere in (second, other_project):
        oob.s3.put_object(Bucket=elsewhere, Key="k", Body=b"theirs")
        assert denied(lambda: client.get_object(Bucket=elsewhere, Key="k"))
        assert denied(lambda: client.put_object(Bucket=elsewhere, Key="planted", Body=b"x"))
        assert denied(lambda: client.list_objects_v2(Bucket=elsewhere))
    assert denied(lambda: client.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": []}))
    assert denied(lambda: client.delete_bucket(Bucket=bucket))
    inputs = bucket_inputs(provider, owner, credentials="generated")
    assert provider.diff("id", provider.read("id", outs).outs, inputs).changes is False
    # Its key reaches no `<owner>-*` pattern: a project whose name extends this one's may still have buckets.
    assert buckets("y", project=f"{owner}-x")["bucket"] == f"{owner}-x-y"


def test_a_buckets_generated_secret_survives_updates_and_drift_is_read_and_repaired(configure, owner, buckets,
                                                                                     minio_admin):
    outs = buckets("data", credentials="generated")
    provider, key = configure(MinioBucket()), outs["accessKey"]
    changed = bucket_inputs(provider, owner, params={"versioning": True}, credentials="generated")
    updated = provider.update("id", outs, changed).outs
    assert updated["secretKey"] == outs["secretKey"]
    minio_admin.policy_set("readwrite", user=key)
    minio_admin.user_disable(key)
    read = provider.read("id", updated).outs
    assert sorted(read["keyOutOfBand"]) == ["policy", "status"]
    diff = provider.diff("id", read, changed)
    assert (diff.changes, diff.replaces) == (True, [])
    repaired = provider.update("id", read, changed).outs
    assert repaired["secretKey"] == outs["secretKey"] and provider.read("id", repaired).outs["keyOutOfBand"] == []
    as_key(repaired).put_object(Bucket=outs["bucket"], Key="k", Body=b"v")
    minio_admin.user_add(key, "reset-out-of-band")
    assert provider.read("id", repaired).outs["keyOutOfBand"] == ["secretKey"]
    minio_admin.user_remove(key)
    gone = provider.read("id", repaired)
    assert gone.id and gone.outs["keyOutOfBand"] == ["accessKey"]  # the bucket stands; its key is drift
    as_key(provider.update("id", gone.outs, changed).outs).list_objects_v2(Bucket=outs["bucket"])


def test_a_bucket_an_earlier_release_made_gets_its_key_at_the_first_up(configure, owner, buckets, oob):
    """No refresh first, nothing replaced: the revision input alone makes the up update it in place."""
    outs = buckets("data")
    provider = configure(MinioBucket())
    made_earlier = {k: v for k, v in outs.items() if k not in ("accessKey", "secretKey", "keyOutOfBand", "accessRules")}
    oob.admin.user_remove(outs["accessKey"])  # as an earlier release left it: no key
    oob.admin.policy_remove(f"devstack-{outs['accessKey']}")
    oob.s3.put_object(Bucket=outs["bucket"], Key="kept", Body=b"data")
    inputs = provider.check(made_earlier, props("minio", "objects", "bucket", "data", owner)).inputs
    diff = provider.diff("id", made_earlier, inputs)
    assert (diff.changes, diff.replaces) == (True, [])
    updated = provider.update("id", made_earlier, inputs).outs
    assert as_key(updated).get_object(Bucket=outs["bucket"], Key="kept")["Body"].read() == b"data"
    assert provider.diff("id", updated, inputs).changes is False


def test_a_buckets_purge_drops_its_key_even_when_the_bucket_went_first(configure, owner, buckets, oob, minio_admin):
    provider = configure(MinioBucket())
    first, second = buckets("one"), buckets("two")
    provider.delete("id", first)  # retained: the key stays with its bucket
    as_key(first).list_objects_v2(Bucket=first["bucket"])
    provider.delete("id", {**first, "purge": True})
    assert not oob.exists(first["bucket"]) and denied(lambda: as_key(first).list_objects_v2(Bucket=first["bucket"]))
    with pytest.raises(MinioAdminException):
        minio_admin.policy_info(f"devstack-{first['accessKey']}")
    oob.destroy(second["bucket"])  # a purge cut after the bucket went (or the bucket removed by hand)
    provider.delete("id", {**second, "purge": True})
    assert second["accessKey"] not in json.loads(minio_admin.user_list() or "{}")


def test_a_declaration_made_again_adopts_its_bucket_under_the_prefixed_name(buckets, configure, owner):
    legacy = buckets("data")  # named by the owner-prefixed rules, as before the sanitized naming
    assert legacy["bucket"] == f"{owner}-data"
    provider = configure(MinioBucket())
    again = {key: value for key, value in props("minio", "objects", "bucket", "data", owner).items() if key != "naming"}
    outs = provider.create(provider.check({}, again).inputs).outs
    assert (outs["bucket"], outs["naming"]) == (f"{owner}-data", PREFIXED)  # not an empty `data` beside it
    assert outs["secretKey"] == legacy["secretKey"]
