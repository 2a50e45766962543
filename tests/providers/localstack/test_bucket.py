"""S3 buckets on moto beyond the contract: racing creates, tags, and the marker of a purged bucket."""

from __future__ import annotations

import pytest

from providers.errors import Conflict, EngineUnavailable, Unsupported
from providers.lifecycle import is_stale
from providers.localstack.bucket import LocalstackBucket
from providers.s3.bucket import bucket_tags
from tests.providers.conftest import props
from tests.providers.localstack.helpers import checked
from tests.providers.s3.contract import AWS_ENDPOINT, BucketOutOfBand


def test_two_projects_creating_one_bucket_at_once_end_with_one_holder(provider_for, owner, monkeypatch):
    """Project `<owner>`'s bucket `y` and project `<owner>-y`'s own are one S3 bucket, and S3 in us-east-1
    answers 200 to both creates: both had tagged it as theirs, the last tag winning. Now one gives it up."""
    import threading

    from providers.s3 import bucket as s3

    oob = BucketOutOfBand()
    name = f"{owner}-y"
    both_looked = threading.Barrier(2, timeout=30)
    real = s3.bucket_exists
    monkeypatch.setattr(s3, "bucket_exists", lambda client, bucket: (real(client, bucket), both_looked.wait())[0])
    outcomes: dict[str, str] = {}

    def create(name_: str, project: str) -> None:
        bucket = provider_for(LocalstackBucket)
        try:
            bucket.create(checked(bucket, name_, project, {}))
            outcomes[project] = "created"
        except Conflict:
            outcomes[project] = "conflict"

    try:
        threads = [threading.Thread(target=create, args=args) for args in (("y", owner), (name, name))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes.values()) == ["conflict", "created"], outcomes
        (winner,) = [project for project, outcome in outcomes.items() if outcome == "created"]
        assert oob.tags(name)["devstack-owner"] == winner
    finally:
        oob.cleanup(name)


def test_tags_the_engine_would_refuse_fail_check(provider_for, owner):
    bucket = provider_for(LocalstackBucket)
    for tags, why in (({"a*b": "x"}, "'a*b' does not"), ({"k": "v#!"}, "'v#!' does not"), ({"aws:x": "y"}, "'aws:'")):
        failures = bucket.check({}, props("localstack", "aws", "bucket", "tagged", owner, {"tags": tags})).failures
        assert [f.property for f in failures] == ["params.tags"] and why in failures[0].reason, failures


def test_bucket_adoption_refuses_a_different_object_lock(provider_for, owner):
    bucket, oob = provider_for(LocalstackBucket), BucketOutOfBand()
    name = f"{owner}-locked"
    try:
        outs = bucket.create(checked(bucket, "locked", owner, {"versioning": True, "objectLock": True})).outs
        with pytest.raises(Unsupported, match="exists with params.objectLock true .*declare objectLock: true"):
            bucket.create(checked(bucket, "locked", owner, {"versioning": True}))
        oob.s3.put_object(Bucket=name, Key="k", Body=b"v")
        bucket.delete("id", {**outs, "purge": True})  # locked buckets (no retention set) still purge
        assert not oob.exists(name)
    finally:
        oob.cleanup(name)


def test_a_purged_buckets_marker_does_not_pass_to_the_next_bucket_of_its_name(provider_for, owner):
    """moto keeps a deleted bucket's tags and hands them to the next bucket made under the name: one made
    by hand after a purge would carry the marker, and gc --prune would drop it, data and all, as an orphan."""
    bucket, oob = provider_for(LocalstackBucket), BucketOutOfBand()
    name = f"{owner}-b1"
    try:
        outs = bucket.create(checked(bucket, "b1", owner, {}, purge=True)).outs
        bucket.delete("id", outs)
        oob.s3.create_bucket(Bucket=name)  # someone's own, afterwards
        assert bucket_tags(oob.s3, name) == {}
        assert is_stale(bucket.read("id", outs).outs)  # not ours: a refresh marks it stale
    finally:
        oob.cleanup(name)


def test_a_bucket_whose_delete_gets_no_answer_keeps_its_marker(provider_for, owner, monkeypatch):
    """The purge takes the tags off just before DeleteBucket: a delete that may not have happened puts
    them back, or the bucket, if it stands, is left unmarked (foreign) and its ledger entry stuck."""
    from botocore.exceptions import ReadTimeoutError
    from providers.s3.client import aws_client

    bucket, oob = provider_for(LocalstackBucket), BucketOutOfBand()
    name = f"{owner}-b2"
    try:
        outs = bucket.create(checked(bucket, "b2", owner, {}, purge=True)).outs

        def no_answer(**_):
            raise ReadTimeoutError(endpoint_url=AWS_ENDPOINT)

        monkeypatch.setattr(aws_client(bucket._instances["aws"], "s3"), "delete_bucket", no_answer)
        with pytest.raises(EngineUnavailable):
            bucket.delete("id", outs)
        assert bucket_tags(oob.s3, name)["devstack-owner"] == owner
    finally:
        oob.cleanup(name)
