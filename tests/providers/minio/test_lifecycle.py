"""MinIO lifecycle rules: one expiration rule per declaration on a bucket of its project."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from providers.errors import Conflict, NotFound
from providers.identity import SANITIZED
from providers.lifecycle import is_stale
from providers.minio.lifecycle import MinioLifecycle
from tests.providers.conftest import props
from tests.providers.s3.contract import BucketOutOfBand


def lifecycle_inputs(provider, owner: str, name: str = "expire", **params) -> dict:
    result = provider.check({}, props("minio", "objects", "lifecycle", name, owner,
                                      {"bucket": "data", "expireDays": 7, "prefix": "tmp/", **params}))
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def rules(oob: BucketOutOfBand, bucket: str) -> dict[str, dict]:
    try:
        return {r["ID"]: r for r in oob.s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]}
    except ClientError:
        return {}


def put_foreign_rule(oob: BucketOutOfBand, bucket: str) -> None:
    foreign = {"ID": "keep-me", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Expiration": {"Days": 90}}
    oob.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [foreign]})


def test_lifecycle_create_then_create_again_adopts(configure, owner, buckets, oob):
    bucket = buckets()["bucket"]
    lifecycle = configure(MinioLifecycle())
    first = lifecycle.create(lifecycle_inputs(lifecycle, owner))
    second = lifecycle.create(lifecycle_inputs(lifecycle, owner))
    rule = f"devstack:{owner}:expire"
    assert (first.outs["bucket"], first.outs["rule"]) == (second.outs["bucket"], second.outs["rule"]) == (bucket, rule)
    assert list(rules(oob, bucket)) == [rule]
    assert rules(oob, bucket)[rule]["Expiration"] == {"Days": 7}
    assert rules(oob, bucket)[rule]["Filter"] == {"Prefix": "tmp/"}
    assert lifecycle.diff("id", lifecycle.read("id", first.outs).outs, lifecycle_inputs(lifecycle, owner)).changes is False


def test_lifecycle_updates_in_place_and_keeps_other_rules(configure, owner, buckets, oob):
    bucket = buckets()["bucket"]
    put_foreign_rule(oob, bucket)
    lifecycle = configure(MinioLifecycle())
    outs = lifecycle.create(lifecycle_inputs(lifecycle, owner)).outs
    changed = lifecycle_inputs(lifecycle, owner, expireDays=30, prefix="cache/")
    assert (lifecycle.diff("id", outs, changed).replaces, lifecycle.diff("id", outs, changed).changes) == ([], True)
    lifecycle.update("id", outs, changed)
    live = rules(oob, bucket)
    assert live[f"devstack:{owner}:expire"]["Expiration"] == {"Days": 30}
    assert live[f"devstack:{owner}:expire"]["Filter"] == {"Prefix": "cache/"}
    assert live["keep-me"]["Expiration"] == {"Days": 90}
    # Moving the rule to another bucket, or renaming it, replaces it.
    assert lifecycle.diff("id", outs, lifecycle_inputs(lifecycle, owner, bucket="other")).replaces == ["params.bucket"]
    assert lifecycle.diff("id", outs, {**changed, "name": "other"}).replaces == ["name"]


def test_replacement_on_another_bucket_moves_the_retained_rule(configure, owner, buckets, oob):
    """Replacing after `bucket` changed skips the delete (retained); the new rule must not be doubled."""
    first, second = buckets("data")["bucket"], buckets("other")["bucket"]
    lifecycle = configure(MinioLifecycle())
    lifecycle.create(lifecycle_inputs(lifecycle, owner))
    outs = lifecycle.create(lifecycle_inputs(lifecycle, owner, bucket="other")).outs
    assert outs["bucket"] == second
    assert (list(rules(oob, first)), list(rules(oob, second))) == ([], [outs["rule"]])


def test_two_rules_on_one_bucket_applied_at_once_both_land(configure, owner, buckets, oob):
    bucket = buckets()["bucket"]
    lifecycle = configure(MinioLifecycle())
    names = [f"rule{i}" for i in range(4)]
    with ThreadPoolExecutor(4) as pool:  # Pulumi's provider runs 4 workers
        list(pool.map(lambda n: lifecycle.create(lifecycle_inputs(lifecycle, owner, name=n)), names))
    assert sorted(rules(oob, bucket)) == sorted(f"devstack:{owner}:{n}" for n in names)


def test_lifecycle_drift_and_disappearance(configure, owner, buckets, oob):
    bucket = buckets()["bucket"]
    lifecycle = configure(MinioLifecycle())
    inputs = lifecycle_inputs(lifecycle, owner)
    outs = lifecycle.create(inputs).outs
    tampered = {**rules(oob, bucket)[outs["rule"]], "Expiration": {"Days": 1}, "Status": "Disabled"}
    oob.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [tampered]})
    read = lifecycle.read("id", outs)
    assert (read.outs["params"]["expire_days"], read.outs["params"]["enabled"]) == (1, False)
    assert lifecycle.diff("id", read.outs, inputs).changes is True
    lifecycle.update("id", read.outs, inputs)
    assert rules(oob, bucket)[outs["rule"]]["Expiration"] == {"Days": 7}
    oob.s3.delete_bucket_lifecycle(Bucket=bucket)
    assert is_stale(lifecycle.read("id", outs).outs)


def test_lifecycle_rule_widened_outside_is_drift_and_restored(configure, owner, buckets, oob):
    """Same days, prefix and status, but also non-current versions expired: it deletes more than declared."""
    bucket = buckets()["bucket"]
    lifecycle = configure(MinioLifecycle())
    inputs = lifecycle_inputs(lifecycle, owner)
    outs = lifecycle.create(inputs).outs
    assert lifecycle.read("id", outs).outs["ruleInSync"] is True
    widened = {**rules(oob, bucket)[outs["rule"]], "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}
    oob.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [widened]})
    read = lifecycle.read("id", outs).outs
    assert read["ruleInSync"] is False and read["params"] == inputs["params"]
    assert lifecycle.diff("id", read, inputs).changes
    lifecycle.update("id", read, inputs)
    assert "NoncurrentVersionExpiration" not in rules(oob, bucket)[outs["rule"]]
    assert lifecycle.read("id", outs).outs["ruleInSync"] is True


def test_lifecycle_retained_then_purged_delete_leaves_bucket_and_other_rules(configure, owner, buckets, oob):
    bucket = buckets()["bucket"]
    put_foreign_rule(oob, bucket)
    lifecycle = configure(MinioLifecycle())
    outs = lifecycle.create(lifecycle_inputs(lifecycle, owner)).outs
    lifecycle.delete("id", outs)
    assert outs["rule"] in rules(oob, bucket)
    lifecycle.delete("id", {**outs, "purge": True})
    assert list(rules(oob, bucket)) == ["keep-me"] and oob.exists(bucket)
    lifecycle.delete("id", {**outs, "purge": True})  # already gone is fine


def test_lifecycle_on_a_bucket_of_another_project_is_a_conflict(configure, owner, buckets, oob):
    # Project `<owner>-x` declares bucket "b": `<owner>-x-b`, which is project <owner>'s bucket "x-b".
    theirs = buckets("x-b")["bucket"]
    lifecycle = configure(MinioLifecycle())
    with pytest.raises(Conflict, match=f"bucket '{theirs}' belongs to project '{owner}'"):
        lifecycle.create(lifecycle_inputs(lifecycle, f"{owner}-x", bucket="b"))
    assert rules(oob, theirs) == {}


def test_lifecycle_on_a_foreign_or_missing_bucket_fails_clearly(configure, owner, oob):
    lifecycle = configure(MinioLifecycle())
    with pytest.raises(NotFound, match=f"bucket '{owner}-data' does not exist"):
        lifecycle.create(lifecycle_inputs(lifecycle, owner))
    oob.foreign(f"{owner}-data")
    try:
        with pytest.raises(Conflict, match="something devstack does not manage"):
            lifecycle.create(lifecycle_inputs(lifecycle, owner))
        assert rules(oob, f"{owner}-data") == {}
    finally:
        oob.cleanup(f"{owner}-data")


@pytest.mark.parametrize("params, field", [
    pytest.param({"bucket": "data", "expireDays": 0}, "params.expireDays", id="zero-days"),
    pytest.param({"bucket": "Da ta", "expireDays": 3}, "params.bucket", id="bucket-not-a-name"),
    pytest.param({"bucket": "data", "expireDays": 3, "days": 3}, "params.days", id="unknown"),
])
def test_lifecycle_bad_params_fail_check(configure, owner, params, field):
    lifecycle = configure(MinioLifecycle())
    failures = lifecycle.check({}, props("minio", "objects", "lifecycle", "expire", owner, params)).failures
    assert field in [f.property for f in failures]


def test_a_lifecycle_without_a_bucket_param_goes_on_the_bucket_of_its_own_name(configure, owner, buckets, oob):
    """Spec 27: `name: acme-uploads`, `params: {expireDays: 7}` is a rule on bucket acme-uploads."""
    bucket = buckets("uploads")["bucket"]
    buckets(owner)  # the project's own bucket, which the rule must not go on
    lifecycle = configure(MinioLifecycle())
    inputs = lifecycle.check({}, props("minio", "objects", "lifecycle", "uploads", owner, {"expireDays": 7})).inputs
    assert inputs["params"]["bucket"] == "uploads"
    outs = lifecycle.create(inputs).outs
    assert (outs["bucket"], list(rules(oob, bucket))) == (bucket, [f"devstack:{owner}:uploads"])
    assert rules(oob, owner) == {}
    explicit = {**inputs, "params": {**inputs["params"], "bucket": "uploads"}}
    assert lifecycle.diff("id", lifecycle.read("id", outs).outs, explicit).changes is False
    # A name no bucket could have under the owner-prefixed rules is refused as the bucket it defaults to;
    # a new declaration maps it instead.
    failures = lifecycle.check({}, props("minio", "objects", "lifecycle", "a..b", owner, {"expireDays": 7})).failures
    assert [(f.property, "'..'" in f.reason) for f in failures] == [("params.bucket", True)]
    assert lifecycle.check({}, props("minio", "objects", "lifecycle", "a..b", owner, {"expireDays": 7},
                                     naming=SANITIZED)).failures == []
