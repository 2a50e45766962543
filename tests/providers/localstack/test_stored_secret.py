"""Secret-store entries (aws-sm, aws-ssm) on moto: push, rotate, delete, and a read after an out-of-band delete."""

from __future__ import annotations

import pytest

from providers.errors import Conflict
from providers.localstack.stored_secret import STORES, SecretsManagerSecret, SsmParameter, default_prefix, entry_name
from tests.providers.s3.contract import aws, gone


def stored_value(store: str, name: str) -> str | None:
    """What a service reads: the secret's string, or the parameter decrypted; None when there is none."""
    if store == "aws-sm":
        sm = aws("secretsmanager")
        return None if gone(lambda: sm.get_secret_value(SecretId=name), "ResourceNotFoundException") else \
            sm.get_secret_value(SecretId=name)["SecretString"]
    if gone(lambda: aws("ssm").get_parameter(Name=name), "ParameterNotFound"):
        return None
    return aws("ssm").get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]


def entry_props(store: str, owner: str, value: str) -> dict:
    name = entry_name(default_prefix(store, "test"), owner, "pg/database/app", "password")
    return {"store": store, "storeInstance": "aws", "secretId": name, "owner": owner, "stack": "test", "value": value}


@pytest.mark.parametrize("store", sorted(STORES))
def test_push_rotate_refresh_delete(configure, owner, store):
    provider = configure(STORES[store]())
    props = entry_props(store, owner, "first-secret")
    assert not provider.check({}, props).failures
    try:
        outs = provider.create(props).outs
        assert stored_value(store, props["secretId"]) == "first-secret" and outs["inSync"] is True
        assert outs["arn"].startswith("arn:aws:")
        # A run-twice: the same inputs change nothing.
        assert not provider.diff("id", outs, props).changes

        rotated = {**props, "value": "second-secret"}
        assert provider.diff("id", outs, rotated).changes and not provider.diff("id", outs, rotated).replaces
        outs = provider.update("id", outs, rotated).outs
        assert stored_value(store, props["secretId"]) == "second-secret"

        assert provider.read("id", outs).outs["inSync"] is True
        _delete_out_of_band(store, props["secretId"])
        refreshed = provider.read("id", outs).outs
        assert refreshed["inSync"] is False and provider.diff("id", refreshed, rotated).changes
        provider.update("id", refreshed, rotated)
        assert stored_value(store, props["secretId"]) == "second-secret"
    finally:
        provider.delete("id", props)
    assert stored_value(store, props["secretId"]) is None
    provider.delete("id", props)  # already gone: nothing to do


def test_another_projects_entry_is_refused_and_kept(configure, owner):
    provider = configure(SecretsManagerSecret())
    theirs = entry_props("aws-sm", owner, "theirs")
    provider.create({**theirs, "owner": f"{owner}x"})
    try:
        with pytest.raises(Conflict, match=r"belongs to project"):
            provider.create(theirs)
        provider.delete("id", theirs)  # not ours: stays
        assert stored_value("aws-sm", theirs["secretId"]) == "theirs"
    finally:
        provider.delete("id", {**theirs, "owner": f"{owner}x"})


@pytest.mark.parametrize("store, name, problem", [
    ("aws-ssm", "devstack/ws/p/pg/database/p/password", "a leading '/'"),
    ("aws-sm", "devstack/ws/p p/password", "refuses the name"),
], ids=["ssm-without-leading-slash", "sm-space"])
def test_check_refuses_names_the_store_refuses(store, name, problem):
    failures = STORES[store]().check({}, {**entry_props(store, "p", "v"), "secretId": name}).failures
    assert [f.property for f in failures] == ["secretId"] and problem in failures[0].reason


def _delete_out_of_band(store: str, name: str) -> None:
    if store == "aws-sm":
        aws("secretsmanager").delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
    else:
        aws("ssm").delete_parameter(Name=name)


def test_classes_name_their_store():
    assert (SecretsManagerSecret.store, SsmParameter.store) == ("aws-sm", "aws-ssm")
