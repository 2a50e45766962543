"""MinIO access keys: a user per key whose policy reaches only its project's buckets (tenant isolation on
MinIO itself)."""

from __future__ import annotations

import json
import re
import secrets

import boto3
import pytest
from minio.credentials import StaticProvider
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin

from providers.credentials import hashed_password, predictable_password
from providers.errors import Conflict
from providers.identity import SANITIZED, Identity
from providers.lifecycle import is_stale, without_clocks
from providers.minio.access_key import AccessKey
from providers.minio.bucket import MinioBucket
from providers.minio.keys import tenant_policy
from tests.providers.conftest import props
from tests.providers.minio.helpers import ENDPOINT, as_key, denied
from tests.providers.s3.contract import aws
from tools.engines.ports import PORTS


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
    assert without_clocks(provider.read("id", earlier).outs) == without_clocks(earlier)  # no drift
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
    assert is_stale(provider.read("id", repaired).outs)


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
    assert is_stale(provider.read("id", outs).outs)
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
    tenant = MinioAdmin(endpoint=f"127.0.0.1:{PORTS['minio']}", credentials=StaticProvider(owner, outs["secretKey"]),
                        secure=False)
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


def test_devstacks_purge_of_a_key_on_an_instance_that_does_not_answer_names_it(owner, configure, monkeypatch):
    """`devstack rm --purge-data` drops through the provider outside a Pulumi verb: the failure still names
    the instance, its address and the fix (it had been urllib3's MaxRetryError alone)."""
    from devstack import state as ledger

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
    # Nothing was created: a refresh finds nothing.
    assert is_stale(provider.read("id", props("minio", "objects", "access_key", owner, owner)).outs)


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
