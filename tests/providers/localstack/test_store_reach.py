"""The access key on the secret store's instance: its policy reads the project's own store entries, nothing
else of the store; the grant round-trips through `policy_reach`, so an edited one is drift the update repairs."""

from __future__ import annotations

import hashlib
import json

import pytest
from botocore.exceptions import ClientError

from providers.description import REACH
from providers.errors import Conflict
from providers.localstack.access_key import AccessKey, store_from_config
from providers.localstack.policy import key_policy, policy_reach, reach_entry, store_entry
from providers.localstack.stored_secret import SecretsManagerSecret, SsmParameter
from tests.conftest import configured
from tests.providers.localstack.helpers import checked
from tests.providers.s3.contract import REGION, aws

ACCOUNT = "123456789012"
DATA = ["bucket:shop-media", "queue:shop-jobs", "stream:shop-clicks", "table:shop-items", "topic:shop-done"]


@pytest.mark.parametrize("server, digest", [
    ("moto", "aa5652a784390883b74662efe66f4a55613805f63310fba271f464e522219ddd"),
    ("localstack", "ec02909161ba3c82d4b23bac24805e286d699c7f18848009cf7bf5ef44409e43"),
])
def test_a_key_reading_no_store_gets_the_same_document_byte_for_byte(server, digest):
    # Pinned: keys already made compare their live policy with this text, and must not read as drift.
    text = json.dumps(key_policy(DATA, REGION, ACCOUNT, server))
    assert hashlib.sha256(text.encode()).hexdigest() == digest


@pytest.mark.parametrize("entry, sid, actions, arns", [
    ("store:aws-sm:devstack/team/shop/", "ReadSecretsManager",
     ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
     [f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:devstack/team/shop/*"]),
    ("store:aws-ssm:/devstack/team/shop/", "ReadParameterStore",
     ["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"],
     [f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/devstack/team/shop",
      f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/devstack/team/shop/*"]),
], ids=["aws-sm", "aws-ssm"])
def test_the_store_grant_reads_the_projects_entries_and_round_trips(entry, sid, actions, arns):
    document = key_policy([*DATA, entry], REGION, ACCOUNT, "localstack")
    # The data statements as they were, then the store's, and nothing on "*".
    assert document["Statement"] == [*key_policy(DATA, REGION, ACCOUNT, "localstack")["Statement"],
                                     {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": arns}]
    assert policy_reach(document) == sorted([*DATA, entry])
    # moto checks these actions against no resource: there they are on "*" too, or the key could not read at all.
    on_moto = key_policy([*DATA, entry], REGION, ACCOUNT, "moto")["Statement"]
    assert on_moto[-2]["Resource"] == arns and set(actions) <= set(on_moto[-1]["Action"]) and on_moto[-1]["Resource"] == "*"
    assert policy_reach(key_policy([entry], REGION, ACCOUNT, "moto")) == [entry]


@pytest.mark.parametrize("arn, entry", [
    ("arn:aws:secretsmanager:r:1:secret:devstack/team/*", "store:aws-sm:devstack/team/"),
    ("arn:aws:secretsmanager:r:1:secret:devstack/team/shop/pg/database/shop/dsn-AbCdEf", None),
    ("arn:aws:secretsmanager:r:1:secret:*", None),
    ("arn:aws:secretsmanager:r:1:secret:devstack/*/shop/*", None),
    ("arn:aws:ssm:r:1:parameter/devstack/team/shop/pg/database/shop/dsn", "store:aws-ssm:/devstack/team/shop/pg/database/shop/dsn/"),
    ("arn:aws:ssm:r:1:parameter/*", "store:aws-ssm:/"),
    ("arn:aws:ssm:r:1:parameter/devstack/team/sho?/*", None),
    ("arn:aws:ssm:r:1:document/x", None),
], ids=["sm-wider", "sm-one-entry", "sm-all", "sm-wildcard-inside", "ssm-one-entry", "ssm-all", "ssm-wildcard",
        "ssm-other-resource"])
def test_an_edited_store_arn_reads_back_as_an_entry_the_key_does_not_have_or_as_nothing(arn, entry):
    """Either way the rebuilt document differs from the live one, or the entry is not the project's: drift."""
    assert reach_entry(arn) == entry


@pytest.mark.parametrize("store, expected", [
    (None, None),
    ({"kind": "aws-sm", "instance": "aws"}, ("aws-sm", "aws", "devstack/local/")),
    ({"kind": "aws-ssm", "instance": "workspace.shared.aws"}, ("aws-ssm", "aws", "/devstack/local/")),
    ({"kind": "aws-ssm", "instance": "aws", "prefix": "/team/"}, ("aws-ssm", "aws", "/team/")),
], ids=["none", "aws-sm-default", "aws-ssm-default", "prefix"])
def test_the_provider_reads_the_store_from_the_workspace_config(store, expected):
    workspace = {"name": "local", "shared": {}, **({"secretStore": store} if store else {})}
    assert store_from_config({"devstack:workspace": json.dumps(workspace)}) == expected


# --- on the real local moto ----------------------------------------------------------------------------


@pytest.fixture
def store_key(admin, local_workspace):
    """`store_key(kind)`: an AccessKey configured as in a workspace whose `kind` store is served by `aws`."""
    passwords = {engine: credential.password for engine, credential in admin.items()}

    def make(kind: str, provider=None):
        workspace = {**local_workspace, "secretStore": {"kind": kind, "instance": "aws"}}
        return configured(provider or AccessKey(), workspace, passwords)

    return make


def key_inputs(key: AccessKey, owner: str, reach: list[str]) -> dict:
    return {**checked(key, "key", owner, {}, credentials="generated", purge=True), REACH: reach}


def push(store_key, kind: str, owner: str, name: str, value: str) -> dict:
    """An entry of project `owner` as the program pushes it; its props."""
    provider = store_key(kind, SecretsManagerSecret() if kind == "aws-sm" else SsmParameter())
    props = {"store": kind, "storeInstance": "aws", "secretId": name, "owner": owner, "stack": "local", "value": value}
    provider.create(props)
    return props


def read_as_a_service(kind: str, name: str, key: str, secret: str) -> str:
    if kind == "aws-ssm":
        return aws("ssm", key=key, secret=secret).get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
    return aws("secretsmanager", key=key, secret=secret).get_secret_value(SecretId=name)["SecretString"]


def policy(user: str) -> dict:
    return aws("iam").get_user_policy(UserName=user, PolicyName="devstack")["PolicyDocument"]


@pytest.mark.parametrize("kind, prefix", [("aws-sm", "devstack/local/"), ("aws-ssm", "/devstack/local/")])
def test_the_key_reads_its_projects_entries_and_an_edited_grant_is_drift_the_update_repairs(
        store_key, owner, kind, prefix):
    key, user = store_key(kind), f"{owner}-key"
    own = store_entry(kind, f"{prefix}{owner}/")
    inputs = key_inputs(key, owner, [own])
    entry = push(store_key, kind, owner, f"{prefix}{owner}/aws/queue/jobs/password", "s3cret-value")
    try:
        outs = key.create(inputs).outs
        assert policy_reach(policy(user)) == [own]
        assert read_as_a_service(kind, entry["secretId"], outs["accessKey"], outs["secretKey"]) == "s3cret-value"
        assert key.read("id", outs).outs["outOfBand"] == []

        # Widened to the whole workspace's store, then taken away: each is drift, and the update repairs it.
        for edit in ("widen", "remove"):
            edited = policy(user)
            if edit == "widen":
                edited["Statement"][0]["Resource"] = [arn.replace(f"/{owner}", "") for arn in edited["Statement"][0]["Resource"]]
            else:  # a valid document of a key that reads no store
                edited = key_policy([f"bucket:{owner}-none"], REGION, ACCOUNT, "moto")
            aws("iam").put_user_policy(UserName=user, PolicyName="devstack", PolicyDocument=json.dumps(edited))
            read = key.read("id", outs).outs
            assert read["outOfBand"] == ["policy"], edit
            if edit == "remove":  # moto checks the action: without the grant the key reads nothing
                with pytest.raises(ClientError, match="403|AccessDenied"):
                    read_as_a_service(kind, entry["secretId"], outs["accessKey"], outs["secretKey"])
            assert key.diff("id", read, inputs).changes
            outs = key.update("id", read, inputs).outs
            assert policy_reach(policy(user)) == [own] and key.read("id", outs).outs["outOfBand"] == []
            assert read_as_a_service(kind, entry["secretId"], outs["accessKey"], outs["secretKey"]) == "s3cret-value"
    finally:
        key.delete("id", {**inputs, "user": user})
        store_key(kind, SecretsManagerSecret() if kind == "aws-sm" else SsmParameter()).delete("id", entry)


def test_a_key_never_reaches_another_projects_store_entries(store_key, owner):
    key = store_key("aws-sm")
    for reach in ([store_entry("aws-sm", f"devstack/local/{owner}b/")], [store_entry("aws-sm", "devstack/local/")],
                  [store_entry("aws-ssm", f"/devstack/local/{owner}/")]):
        with pytest.raises(Conflict, match="is not the project's part of the workspace's secret store"):
            key.create(key_inputs(key, owner, reach))
        with pytest.raises(ClientError):
            aws("iam").get_user(UserName=f"{owner}-key")
