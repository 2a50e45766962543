"""The minio kinds (bucket, lifecycle, access_key) against the real MinIO server.

MinIO must run at 127.0.0.1:29000 (`python -m tools.engines start minio`);
when it does not, every test here FAILS saying so, never skips. Buckets run
the same `KindContract` as LocalStack's; lifecycle rules and access keys
are tested here, tenant isolation on MinIO itself: project A's key can
neither list, read nor write project B's bucket.
"""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from botocore.exceptions import ClientError
from minio.credentials import StaticProvider
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin

from providers.credentials import hashed_password, predictable_password
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound
from providers.identity import Identity
from providers.minio import AccessKey, MinioBucket, MinioLifecycle, tenant_policy
from providers.identity import PREFIXED, SANITIZED
from tests.providers.conftest import props
from tests.providers.test_localstack_provider import BucketOutOfBand, Case, KindContract, aws, require_server

MINIO = "127.0.0.1:29000"
ENDPOINT = f"http://{MINIO}"


@pytest.fixture(scope="module", autouse=True)
def minio_running():
    require_server(f"{ENDPOINT}/minio/health/live", "MinIO (instance 'objects')", "minio")


class MinioBucketOutOfBand(BucketOutOfBand):
    """A bucket's cleanup removes the bucket's own key (user and policy) too."""

    def __init__(self, admin_api: MinioAdmin, *args):
        super().__init__(*args)
        self.admin = admin_api

    def cleanup(self, name):
        super().cleanup(name)
        for call in (lambda: self.admin.user_remove(f"{name}~key"), lambda: self.admin.policy_remove(f"devstack-{name}~key")):
            try:
                call()
            except MinioAdminException:
                pass


@pytest.fixture
def minio_admin(admin) -> MinioAdmin:
    return MinioAdmin(endpoint=MINIO, credentials=StaticProvider(admin["minio"].user, admin["minio"].password), secure=False)


@pytest.fixture
def oob(admin, minio_admin) -> BucketOutOfBand:
    return MinioBucketOutOfBand(minio_admin, ENDPOINT, admin["minio"].user, admin["minio"].password)


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


# --- lifecycle ---------------------------------------------------------------------


@pytest.fixture
def buckets(configure, owner, oob):
    """Create a project's buckets by declaration name; all of them are removed after the test."""
    made: list[str] = []

    def make(name: str = "data", project: str | None = None, params: dict | None = None, **policy) -> dict:
        provider = configure(MinioBucket())
        inputs = provider.check({}, props("minio", "objects", "bucket", name, project or owner, params, **policy)).inputs
        outs = provider.create(inputs).outs
        made.append(outs["bucket"])
        return outs

    yield make
    for bucket in made:
        oob.cleanup(bucket)


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
    assert lifecycle.read("id", outs).id == ""


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
    anonymous = f"http://127.0.0.1:29000/{bucket}/private.txt"
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


# --- access keys -------------------------------------------------------------------


@pytest.fixture
def keys(configure, owner, minio_admin):
    """Create access keys; their users and policies are removed after the test."""
    made: list[str] = []

    def make(name: str | None = None, project: str | None = None, **policy) -> tuple[AccessKey, dict]:
        provider = configure(AccessKey())
        project = project or owner
        inputs = provider.check({}, props("minio", "objects", "access_key", name or project, project,
                                          policy.pop("params", {}), **policy)).inputs
        made.append(AccessKey.engine_name(name or project, project, naming=PREFIXED))
        return provider, provider.create(inputs).outs

    yield make
    for key in made:
        for call in (lambda: minio_admin.user_remove(key), lambda: minio_admin.policy_remove(f"devstack-{key}")):
            try:
                call()
            except MinioAdminException:
                pass


def as_key(outs: dict):
    return aws("s3", ENDPOINT, outs["accessKey"], outs["secretKey"])


def denied(call) -> bool:
    try:
        call()
    except ClientError as err:
        return err.response["Error"]["Code"] in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")
    return False


def test_access_key_create_then_create_again_adopts(owner, buckets, keys, minio_admin):
    bucket = buckets()["bucket"]
    provider, first = keys()
    _, second = keys()  # run twice: same user, same predictable secret
    assert (first["accessKey"], first["policy"]) == (owner, f"devstack-{owner}")
    assert first["secretKey"] == second["secretKey"] and AccessKey.secret_outputs == ("secretKey",)
    info = json.loads(minio_admin.user_info(owner))
    assert (info["policyName"], info["status"]) == (f"devstack-{owner}", "enabled")
    assert json.loads(json.loads(minio_admin.policy_info(f"devstack-{owner}"))["ID"])["owner"] == owner
    client = as_key(first)
    client.put_object(Bucket=bucket, Key="k", Body=b"v")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    inputs = provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs
    assert provider.diff("id", provider.read("id", first).outs, inputs).changes is False


def test_tenant_isolation_a_key_reaches_only_its_own_project(owner, buckets, keys, oob):
    other = f"{owner}b"
    mine, theirs = buckets("data")["bucket"], buckets("data", project=other)["bucket"]
    oob.s3.put_object(Bucket=theirs, Key="secret.txt", Body=b"B's data")
    _, a = keys(credentials="generated")
    _, b = keys(project=other, credentials="generated")
    client = as_key(a)
    assert [x["Name"] for x in client.list_buckets()["Buckets"]] == [mine]
    assert denied(lambda: client.list_objects_v2(Bucket=theirs))
    assert denied(lambda: client.get_object(Bucket=theirs, Key="secret.txt"))
    assert denied(lambda: client.put_object(Bucket=theirs, Key="planted.txt", Body=b"x"))
    assert denied(lambda: client.delete_object(Bucket=theirs, Key="secret.txt"))
    assert [o["Key"] for o in oob.s3.list_objects_v2(Bucket=theirs)["Contents"]] == ["secret.txt"]
    # ... and B's key is as confined, while both use their own bucket freely.
    assert denied(lambda: as_key(b).list_objects_v2(Bucket=mine))
    as_key(b).put_object(Bucket=theirs, Key="own.txt", Body=b"ok")
    client.put_object(Bucket=mine, Key="own.txt", Body=b"ok")
    # Bucket management stays with devstack: no re-tagging (the marker) or deleting.
    assert denied(lambda: client.put_bucket_tagging(Bucket=mine, Tagging={"TagSet": []}))
    assert denied(lambda: client.delete_bucket(Bucket=mine))
    assert denied(lambda: client.create_bucket(Bucket=f"{owner}-sneaky"))
    encryption = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
    assert denied(lambda: client.put_bucket_encryption(Bucket=mine, ServerSideEncryptionConfiguration=encryption))
    assert denied(lambda: client.delete_bucket_encryption(Bucket=mine))
    assert denied(lambda: client.put_bucket_notification_configuration(
        Bucket=mine, NotificationConfiguration={"QueueConfigurations": []}))


def test_a_key_an_earlier_release_made_gets_this_releases_policy_at_the_first_up(owner, buckets, keys, minio_admin):
    """Release 1's policy let a key set its bucket's encryption. Nothing drifted, so a refresh finds no
    change: the first plain `pulumi up` after the upgrade must update it, without asking the engine."""
    bucket = buckets()["bucket"]
    provider, outs = keys()
    earlier = tenant_policy(Identity.from_props(outs), outs["stack"])
    earlier["Statement"][1]["Action"] = [a for a in earlier["Statement"][1]["Action"]
                                         if a not in ("s3:PutEncryptionConfiguration", "s3:PutBucketNotification",
                                                      "s3:PutReplicationConfiguration")]
    minio_admin.policy_add(outs["policy"], policy=earlier)
    made_earlier = {key: value for key, value in outs.items() if key != "accessRules"}
    encryption = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
    as_key(outs).put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=encryption)

    inputs = provider.check(made_earlier, props("minio", "objects", "access_key", owner, owner)).inputs
    assert provider.diff("id", made_earlier, inputs).changes is True
    updated = provider.update("id", made_earlier, inputs).outs
    assert denied(lambda: as_key(updated).put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration=encryption))
    assert updated["secretKey"] == outs["secretKey"]
    assert provider.diff("id", updated, inputs).changes is False


def test_a_predictable_secret_is_the_project_name_padded_and_an_earlier_hashed_one_is_kept(buckets, keys, minio_admin):
    """MinIO wants 8 characters: the project's name is repeated up to them. A key an earlier release made
    holds `dev-<sha256>`, which its services hold too: a re-up, a refresh and an update keep it."""
    project = f"k{secrets.token_hex(2)}"  # 5 characters
    bucket = buckets("data", project=project)["bucket"]
    provider, outs = keys(project=project)
    assert outs["secretKey"] == project * 2
    as_key(outs).put_object(Bucket=bucket, Key="k", Body=b"v")
    hashed = hashed_password(Identity.from_props(outs), project)
    minio_admin.user_add(project, hashed)  # what an earlier release's create set, its state beside it
    earlier = {**outs, "secretKey": hashed}
    inputs = provider.check({}, props("minio", "objects", "access_key", project, project)).inputs
    assert provider.diff("id", earlier, inputs).changes is False
    assert provider.read("id", earlier).outs == earlier  # no drift
    kept = provider.update("id", earlier, {**inputs, "purge": True}).outs
    assert kept["secretKey"] == hashed
    assert as_key(kept).get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    opted = provider.update("id", kept, {**inputs, "params": {"rotation": 1}}).outs
    assert opted["secretKey"] == predictable_password(project, 1, 8) == f"{project}-1{project}-1"
    assert as_key(opted).get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    assert denied(lambda: as_key(kept).get_object(Bucket=bucket, Key="k"))


def test_rotation_changes_the_secret_in_place(owner, buckets, keys):
    buckets()
    provider, outs = keys(credentials="generated")
    same = provider.check({}, props("minio", "objects", "access_key", owner, owner, {}, credentials="generated", purge=True)).inputs
    kept = provider.update("id", outs, same).outs  # an unrelated change keeps the generated secret
    assert kept["secretKey"] == outs["secretKey"]
    rotated_inputs = {**same, "params": {"rotation": 1}}
    assert (provider.diff("id", kept, rotated_inputs).replaces, provider.diff("id", kept, rotated_inputs).changes) == ([], True)
    rotated = provider.update("id", kept, rotated_inputs).outs
    assert rotated["secretKey"] != outs["secretKey"]
    assert denied(lambda: as_key(outs).list_buckets())
    as_key(rotated).list_buckets()


def session_of(outs: dict):
    """An S3 client on temporary credentials the key minted for itself (STS AssumeRole, which MinIO lets
    every user call and no policy can deny), valid for a day."""
    sts = aws("sts", ENDPOINT, outs["accessKey"], outs["secretKey"])
    minted = sts.assume_role(RoleArn="arn:minio:iam:::role/any", RoleSessionName="tenant", DurationSeconds=86400)["Credentials"]
    return boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1", aws_access_key_id=minted["AccessKeyId"],
                        aws_secret_access_key=minted["SecretAccessKey"], aws_session_token=minted["SessionToken"])


def test_temporary_credentials_end_with_a_rotation_and_a_purge(owner, buckets, keys, configure):
    """A rotation ends what the old secret minted; a purge ends it for good, so a key made later under the
    same user name (another project's: `<owner>`'s key `b` and `<owner>-b`'s own are one MinIO user) does
    not bring it back with the new key's reach."""
    bucket = buckets()["bucket"]
    provider, outs = keys("b", credentials="generated")
    inputs = provider.check({}, props("minio", "objects", "access_key", "b", owner, {}, credentials="generated")).inputs
    session = session_of(outs)
    session.put_object(Bucket=bucket, Key="k", Body=b"v")  # it works, with the key's reach
    kept = provider.update("id", outs, {**inputs, "purge": True}).outs
    session.list_objects_v2(Bucket=bucket)  # an update that keeps the secret keeps the sessions
    rotated = provider.update("id", kept, {**inputs, "purge": True, "params": {"rotation": 1}}).outs
    assert denied(lambda: session.list_objects_v2(Bucket=bucket))

    later = session_of(rotated)
    provider.delete("id", {**rotated, "purge": True})
    other = f"{owner}-b"
    theirs = buckets(project=other)["bucket"]
    _, reused = keys(project=other)
    assert reused["accessKey"] == outs["accessKey"]  # the same MinIO user as the purged one
    as_key(reused).put_object(Bucket=theirs, Key="theirs", Body=b"B's data")
    assert denied(lambda: later.get_object(Bucket=theirs, Key="theirs"))


def test_access_key_drift_is_read_and_repaired(owner, buckets, keys, minio_admin):
    buckets()
    provider, outs = keys()
    inputs = provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs
    minio_admin.policy_set("readwrite", user=owner)
    minio_admin.user_disable(owner)
    read = provider.read("id", outs)
    assert sorted(read.outs["outOfBand"]) == ["policy", "status"]
    diff = provider.diff("id", read.outs, inputs)
    assert (diff.changes, diff.replaces) == (True, [])
    repaired = provider.update("id", read.outs, inputs).outs
    assert json.loads(minio_admin.user_info(owner))["policyName"] == f"devstack-{owner}"
    assert provider.read("id", repaired).outs["outOfBand"] == []
    minio_admin.user_add(owner, "reset-out-of-band")
    assert provider.read("id", repaired).outs["outOfBand"] == ["secretKey"]
    as_key(provider.update("id", repaired, inputs).outs).list_buckets()  # the stored secret works again
    minio_admin.user_remove(owner)
    assert provider.read("id", repaired).id == ""


def test_a_key_whose_policy_lost_its_marker_is_refused_with_the_way_out(owner, buckets, keys, configure,
                                                                        minio_admin, oob):
    """`mc admin policy create` over the key's policy drops its ID, where the marker is. Nothing then says
    whose key the user is (another workspace's project may map to the same user): a refresh forgets it, and
    the create refuses it naming what to remove, in an order MinIO accepts; done, the up makes it again."""
    buckets()
    theirs = buckets("data", project=f"{owner}b")["bucket"]
    oob.s3.put_object(Bucket=theirs, Key="secret.txt", Body=b"B's data")
    provider, outs = keys()
    inputs = provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs
    minio_admin.policy_add(outs["policy"], policy={"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:*"], "Resource": ["arn:aws:s3:::*"]}]})
    assert provider.read("id", outs).id == ""
    with pytest.raises(Conflict, match="no devstack policy .*rewritten without its marker") as refused:
        provider.create(inputs)
    removals = re.findall(r"`mc admin (\w+) rm ALIAS ([\w-]+)`", refused.value.hint)
    assert removals == [("user", owner), ("policy", outs["policy"])]
    for kind, name in removals:  # as the hint says, in its order
        (minio_admin.user_remove if kind == "user" else minio_admin.policy_remove)(name)
    made = provider.create(inputs).outs
    assert denied(lambda: as_key(made).get_object(Bucket=theirs, Key="secret.txt"))


def test_a_create_meeting_an_unmarked_policy_of_its_name_says_what_to_remove(owner, configure, minio_admin):
    """The user is free, but a `devstack-<key>` without a marker stands: nothing says whose it was."""
    policy = f"devstack-{owner}"
    unmarked = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": ["arn:aws:s3:::*"]}]}
    provider = configure(AccessKey())
    inputs = provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs
    minio_admin.policy_add(policy, policy=unmarked)
    try:
        with pytest.raises(Conflict, match=f"policy '{policy}' exists .* without devstack's marker") as refused:
            provider.create(inputs)
        assert f"remove the policy (`mc admin policy rm ALIAS {policy}`)" in refused.value.hint
        assert owner not in json.loads(minio_admin.user_list() or "{}")
        assert "ID" not in json.loads(minio_admin.policy_info(policy))
    finally:
        minio_admin.policy_remove(policy)


def test_a_deny_turned_off_by_a_condition_is_a_policy_edit(owner, buckets, keys, minio_admin):
    """The Deny statements keep their actions and resources but match nobody: the key may then make its
    bucket public. Every field of a statement counts, not only its effect, actions and resources."""
    bucket = buckets()["bucket"]
    provider, outs = keys()
    inputs = provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs
    document = json.loads(minio_admin.policy_info(f"devstack-{owner}"))
    for statement in document["Statement"]:
        if statement["Effect"] == "Deny":
            statement["Condition"] = {"StringEquals": {"aws:username": "nobody-at-all"}}
    minio_admin.policy_add(f"devstack-{owner}", policy=document)
    read = provider.read("id", outs)
    assert read.outs["outOfBand"] == ["policy"]
    provider.update("id", read.outs, inputs)
    assert provider.read("id", outs).outs["outOfBand"] == []
    assert denied(lambda: as_key(outs).put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                                                "Resource": f"arn:aws:s3:::{bucket}/*"}]})))


def test_access_key_groups_and_service_accounts_are_drift_and_removed(owner, buckets, keys, minio_admin, oob):
    """A group (with its policies) or a service account would reach past the project, or outlive a
    rotation: read reports both, the next update removes them, and the key cannot make its own."""
    theirs = buckets("data", project=f"{owner}b")["bucket"]
    oob.s3.put_object(Bucket=theirs, Key="secret.txt", Body=b"B's data")
    provider, outs = keys()
    inputs = provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs
    tenant = MinioAdmin(endpoint="127.0.0.1:29000", credentials=StaticProvider(owner, outs["secretKey"]), secure=False)
    with pytest.raises(MinioAdminException, match="403"):
        tenant.add_service_account(access_key=f"{owner}sa", secret_key="minted-by-the-tenant")
    # As under a policy edited out of band (or written before the deny): the tenant mints one.
    policy = json.loads(minio_admin.policy_info(f"devstack-{owner}"))
    policy["Statement"] = [s for s in policy["Statement"] if not str(s.get("Action")).count("admin:")]
    minio_admin.policy_add(f"devstack-{owner}", policy=policy)
    tenant.add_service_account(access_key=f"{owner}sa", secret_key="minted-by-the-tenant")
    group = f"{owner}-group"
    minio_admin.group_add(group, [owner])
    minio_admin.policy_set("readonly", group=group)
    try:
        assert as_key(outs).get_object(Bucket=theirs, Key="secret.txt")["Body"].read() == b"B's data"
        read = provider.read("id", outs)
        assert sorted(read.outs["outOfBand"]) == ["groups", "policy", "serviceAccounts"]
        assert provider.diff("id", read.outs, inputs).changes
        repaired = provider.update("id", read.outs, inputs).outs
        assert not json.loads(minio_admin.user_info(owner)).get("memberOf")
        assert json.loads(minio_admin.list_service_account(owner)).get("accounts") in (None, [])
        assert denied(lambda: as_key(outs).get_object(Bucket=theirs, Key="secret.txt"))
        assert provider.read("id", repaired).outs["outOfBand"] == []
    finally:
        members = json.loads(minio_admin.group_info(group)).get("members") or []
        if members:
            minio_admin.group_remove(group, members)
        minio_admin.group_remove(group)


def test_access_key_retained_then_purged_delete(owner, buckets, keys, minio_admin):
    buckets()
    provider, outs = keys()
    provider.delete("id", outs)
    as_key(outs).list_buckets()  # retained: the key still works
    provider.delete("id", {**outs, "purge": True})
    assert denied(lambda: as_key(outs).list_buckets())
    with pytest.raises(MinioAdminException):
        minio_admin.policy_info(f"devstack-{owner}")
    provider.delete("id", {**outs, "purge": True})  # already gone is fine


def test_an_access_key_on_another_s3_server_is_refused_not_read_as_gone(owner, buckets, keys, minio_admin):
    """The instance's port pointing at LocalStack: its admin API answers as a missing bucket "minio"."""
    buckets()
    provider, outs = keys()
    aws_port = next(i.port for i in provider._instances.values() if i.engine == "localstack")
    provider._instances["objects"] = provider._instances["objects"].model_copy(update={"port": aws_port})
    refused = rf"minio instance 'objects' at 127\.0\.0\.1:{aws_port}: the server there answers as .*, not as minio"
    with pytest.raises(EngineUnavailable, match=refused):
        provider.read("id", outs)
    with pytest.raises(EngineUnavailable, match=refused):
        provider.delete("id", {**outs, "purge": True})
    assert json.loads(minio_admin.user_info(owner))["status"] == "enabled"


def test_devstacks_purge_of_a_key_on_an_instance_that_does_not_answer_names_it(owner, configure, monkeypatch):
    """`devstack rm --purge-data` drops through the provider outside a Pulumi verb: the failure still names
    the instance, its address and the fix (it had been urllib3's MaxRetryError alone)."""
    from devstack import ledger

    provider = configure(AccessKey())
    provider._instances["objects"] = provider._instances["objects"].model_copy(update={"port": 1})
    monkeypatch.setattr(ledger, "configured_provider", lambda config, engine, kind: provider)
    ident = Identity("minio", "objects", "access_key", owner, owner)
    with pytest.raises(ledger.EngineError, match=r"minio instance 'objects' at 127\.0\.0\.1:1: .*start it with"):
        ledger.drop_data({}, ident, {**props("minio", "objects", "access_key", owner, owner), "purge": True})


def test_access_key_purge_cut_after_the_user_went_removes_the_policy_when_run_again(owner, keys, configure,
                                                                                     minio_admin):
    """The policy outlived a cut drop: the re-run removes it, so `<owner>-*` buckets of another project
    can be made again (a policy of this project keeps them out of its reach)."""
    provider, outs = keys()
    minio_admin.user_remove(outs["accessKey"])  # the first drop, cut before policy_remove
    provider.delete("id", {**outs, "purge": True})
    with pytest.raises(MinioAdminException):
        minio_admin.policy_info(f"devstack-{owner}")
    other = configure(MinioBucket())
    made = other.create(other.check({}, props("minio", "objects", "bucket", f"{owner}-x", f"{owner}-x")).inputs).outs
    other.delete("id", {**made, "purge": True})


def test_access_key_of_another_project_is_a_conflict_and_untouched(owner, buckets, keys, configure):
    buckets("k")
    _, outs = keys(name="k")
    intruder = configure(AccessKey())
    other = f"{owner}-k"
    inputs = intruder.check({}, props("minio", "objects", "access_key", other, other)).inputs
    with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
        intruder.create(inputs)
    with pytest.raises(Conflict):
        intruder.delete("id", {**inputs, "purge": True})
    as_key(outs).list_objects_v2(Bucket=f"{owner}-k")  # A's key is untouched


def test_foreign_user_is_a_conflict_and_untouched(configure, owner, minio_admin):
    minio_admin.user_add(owner, "foreign-secret-1")
    minio_admin.policy_set("readonly", user=owner)
    try:
        provider = configure(AccessKey())
        with pytest.raises(Conflict, match="something devstack does not manage.*no devstack policy.*mc admin user rm ALIAS"):
            provider.create(provider.check({}, props("minio", "objects", "access_key", owner, owner)).inputs)
        assert json.loads(minio_admin.user_info(owner))["policyName"] == "readonly"
        with pytest.raises(MinioAdminException):
            minio_admin.policy_info(f"devstack-{owner}")
    finally:
        minio_admin.user_remove(owner)


@pytest.mark.parametrize("name, params, field", [
    pytest.param(None, {"rotation": -1}, "params.rotation", id="negative-rotation"),
    pytest.param(None, {"rotation": "often"}, "params.rotation", id="rotation-not-int"),
    pytest.param(None, {"policy": "readwrite"}, "params.policy", id="unknown"),
    pytest.param("Key=1", {}, "name", id="reserved-characters"),
])
def test_access_key_bad_params_fail_check(configure, owner, name, params, field):
    provider = configure(AccessKey())
    failures = provider.check({}, props("minio", "objects", "access_key", name or owner, owner, params)).failures
    assert [f.property for f in failures] == [field]


def test_a_key_never_reaches_a_bucket_of_a_project_whose_name_extends_its_own(owner, buckets, keys, configure):
    """Keys reach `<owner>-*`; project `<owner>-x` would have its buckets there. Neither order is allowed."""
    extended = f"{owner}-x"
    buckets("data", project=extended)  # `<owner>-x-data`
    with pytest.raises(Conflict, match=f"bucket '{extended}-data' is within the key's reach .*project '{extended}'"):
        keys()
    provider = configure(AccessKey())
    assert provider.read("id", props("minio", "objects", "access_key", owner, owner)).id == ""  # nothing was created


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
    import providers.s3

    extended, policy = f"{owner}-x", f"devstack-{owner}"
    make_bucket = providers.s3.Bucket._create_bucket

    def key_made_meanwhile(self, *args, **kwargs):
        make_bucket(self, *args, **kwargs)
        # What the key's create does once its own check has passed: project `owner`'s policy reaches `<owner>-x`.
        minio_admin.policy_add(policy, policy=tenant_policy(Identity("minio", "objects", "access_key", owner, owner), "t"))

    monkeypatch.setattr(providers.s3.Bucket, "_create_bucket", key_made_meanwhile)
    bucket = configure(MinioBucket())
    try:
        with pytest.raises(Conflict, match=f"within reach of the access keys of project '{owner}'"):
            bucket.create(bucket.check({}, props("minio", "objects", "bucket", extended, extended)).inputs)
        assert not oob.exists(extended)
    finally:
        minio_admin.policy_remove(policy)
        oob.cleanup(extended)


def test_a_key_undoes_itself_when_a_bucket_within_its_reach_was_made_while_it_was(owner, configure, oob,
                                                                                  minio_admin, monkeypatch):
    extended = f"{owner}-x"
    converge = AccessKey._converge

    def bucket_made_meanwhile(*args, **kwargs):
        converge(*args, **kwargs)
        oob.foreign(extended)  # made after the key's check had listed the buckets

    monkeypatch.setattr(AccessKey, "_converge", staticmethod(bucket_made_meanwhile))
    key = configure(AccessKey())
    try:
        with pytest.raises(Conflict, match=f"bucket '{extended}' is within the key's reach"):
            key.create(key.check({}, props("minio", "objects", "access_key", owner, owner)).inputs)
        assert owner not in json.loads(minio_admin.user_list() or "{}")
        assert f"devstack-{owner}" not in json.loads(minio_admin.policy_list() or "{}")
    finally:
        oob.cleanup(extended)


def test_a_key_is_refused_while_a_foreign_bucket_sits_within_its_reach(owner, keys, oob):
    oob.foreign(f"{owner}-raw")
    try:
        with pytest.raises(Conflict, match=f"bucket '{owner}-raw' .*something devstack does not manage"):
            keys()
    finally:
        oob.cleanup(f"{owner}-raw")


def test_tags_the_engine_refuses_leave_no_bucket_behind(configure, owner, oob, monkeypatch):
    """Should MinIO refuse a bucket's tags past validation, the bucket this create made does not stay
    behind empty and unmarked (every later up would refuse it as foreign)."""
    import re

    from providers import s3

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
    from providers.s3 import aws_client, bucket_tags

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


@pytest.mark.parametrize("kind", [MinioBucket, AccessKey], ids=["bucket", "access_key"])
def test_a_wrong_admin_secret_is_named_as_such(kind, admin, local_workspace, owner):
    """The engine runs and refuses the admin: one line naming the config key, not a client traceback."""
    from providers.errors import EngineUnavailable
    from tests.conftest import configured

    passwords = {engine: credential.password for engine, credential in admin.items()}
    provider = configured(kind(), local_workspace, {**passwords, "minio": "not-the-admin-secret"})
    inputs = provider.check({}, props("minio", "objects", kind.kind, owner, owner)).inputs
    with pytest.raises(EngineUnavailable, match="refuses the admin credentials") as refused:
        provider.create(inputs)
    secret_key = local_workspace["shared"]["objects"]["adminSecret"]
    assert f"check devstack:{secret_key} in the stack config" in str(refused.value)


def test_a_bucket_written_into_while_it_is_purged_is_emptied_again_then_a_conflict(configure, owner, buckets, oob,
                                                                                   monkeypatch):
    """The project's services may still write while its bucket is purged: an object landing between the
    emptying and DeleteBucket is emptied again; one that keeps landing is a Conflict, the bucket kept."""
    from providers import s3

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


# --- a bucket's own key ------------------------------------------------------------


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


def test_a_scan_counts_a_buckets_key_as_part_of_its_bucket(configure, owner, buckets, oob):
    """gc must not list it as an orphan access key, nor as a foreign user; one left behind by its bucket
    is listed as that bucket, which gc --prune then drops (the purge test above drops such a key)."""
    from devstack.scan import scan

    outs = buckets("data")
    instance = configure(MinioBucket())._instances["objects"]
    ours = [(f.kind, f.engine_name, f.owner) for f in scan(instance) if f.owner == owner or owner in f.engine_name]
    assert ours == [("bucket", outs["bucket"], owner)]
    oob.destroy(outs["bucket"])
    left = [(f.kind, f.engine_name, f.owner, f.name) for f in scan(instance, ["bucket", "access_key"])
            if owner in f.engine_name]
    assert left == [("bucket", outs["bucket"], owner, "data")]


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


# --- sanitized naming: explicit names are the engine's, keys reach them by name ----------------------


def test_an_explicit_name_is_the_bucket_and_an_access_key_reaches_it_by_name(configure, owner, oob, minio_admin):
    mine, theirs = f"x{owner}-files", f"y{owner}-files"  # outside `<owner>`/`<owner>-*`
    buckets, key = configure(MinioBucket()), configure(AccessKey())
    made = []
    try:
        for name, project in ((mine, owner), (theirs, f"{owner}b")):
            outs = buckets.create(buckets.check({}, props("minio", "objects", "bucket", name, project,
                                                          naming=SANITIZED)).inputs).outs
            made.append(outs["bucket"])
            assert (outs["bucket"], outs["naming"]) == (name, SANITIZED)
        asked = props("minio", "objects", "access_key", owner, owner, naming=SANITIZED)
        with pytest.raises(Conflict, match=f"bucket '{theirs}' does not belong to project '{owner}'"):
            key.create(key.check({}, {**asked, "reach": [mine, theirs]}).inputs)
        inputs = key.check({}, {**asked, "reach": [mine]}).inputs
        outs = key.create(inputs).outs
        client = as_key(outs)
        client.put_object(Bucket=mine, Key="k", Body=b"v")
        assert client.get_object(Bucket=mine, Key="k")["Body"].read() == b"v"
        assert denied(lambda: client.list_objects_v2(Bucket=theirs))
        read = key.read("id", outs).outs
        assert read["outOfBand"] == [] and key.diff("id", read, inputs).changes is False
        assert key.diff("id", read, {**inputs, "reach": []}).changes is True
        # Someone lists another project's bucket in the key's policy: drift, and the next update takes it back.
        document = json.loads(minio_admin.policy_info(f"devstack-{owner}"))
        document["Statement"][0]["Resource"] += [f"arn:aws:s3:::{theirs}", f"arn:aws:s3:::{theirs}/*"]
        minio_admin.policy_add(f"devstack-{owner}", policy=document)
        read = key.read("id", outs).outs
        assert read["outOfBand"] == ["policy"]
        key.update("id", read, inputs)
        assert key.read("id", outs).outs["outOfBand"] == [] and denied(lambda: client.list_objects_v2(Bucket=theirs))
    finally:
        for name in made:
            oob.cleanup(name)
        for call in (lambda: minio_admin.user_remove(owner), lambda: minio_admin.policy_remove(f"devstack-{owner}")):
            try:
                call()
            except MinioAdminException:
                pass


def test_a_declaration_made_again_adopts_its_bucket_under_the_prefixed_name(buckets, configure, owner):
    legacy = buckets("data")  # named by the owner-prefixed rules, as before the sanitized naming
    assert legacy["bucket"] == f"{owner}-data"
    provider = configure(MinioBucket())
    again = {key: value for key, value in props("minio", "objects", "bucket", "data", owner).items() if key != "naming"}
    outs = provider.create(provider.check({}, again).inputs).outs
    assert (outs["bucket"], outs["naming"]) == (f"{owner}-data", PREFIXED)  # not an empty `data` beside it
    assert outs["secretKey"] == legacy["secretKey"]
