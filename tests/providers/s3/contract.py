"""The contract every bucket-like kind of MinIO and LocalStack passes on its real engine.

Each kind is one `Case` row: how it is declared, what changes in place, what
replaces, and an `OutOfBand` helper that reaches the engine with a plain boto3
client (never through the provider) to look, tamper, fill and clean up. The
`KindContract` tests run over every row: tests/providers/localstack/test_contract.py
runs them on every LocalStack kind, tests/providers/minio/test_bucket.py on MinIO's buckets.
"""

from __future__ import annotations

import functools
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from providers.base import KindProvider
from providers.errors import Conflict, EngineUnavailable, InvalidSpec
from providers.identity import PREFIXED
from providers.lifecycle import is_stale
from tests.providers.conftest import props
from tools.engines.ports import PORTS

AWS_ENDPOINT = f"http://127.0.0.1:{PORTS['localstack']}"
REGION = "us-east-1"


def require_server(url: str, what: str, engine: str) -> None:
    """Fail (never skip) when the engine does not answer: a test that cannot run must say so."""
    try:
        urllib.request.urlopen(url, timeout=3)
    except urllib.error.HTTPError:
        pass  # it answered
    except OSError as err:
        pytest.fail(f"{what} does not answer at {url} ({err}); start it with `python -m tools.engines start {engine}`")


@functools.cache
def admin_key() -> tuple[str, str]:
    """The admin key pair the engine was started with: moto enforces IAM and refuses any key it does not hold."""
    from tools.engines.credentials import admin_credentials

    credential = admin_credentials()["localstack"]
    return credential.user, credential.password


def aws(service: str, endpoint: str = AWS_ENDPOINT, key: str | None = None, secret: str | None = None):
    """A plain boto3 client, as the admin unless given another key pair."""
    key, secret = (key, secret) if key else admin_key()
    config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, aws_access_key_id=key,
                        aws_secret_access_key=secret, config=config)


def gone(call: Callable[[], Any], *codes: str) -> bool:
    """True when `call` fails with one of `codes` (or a 404): the resource does not exist."""
    try:
        call()
    except ClientError as err:
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if err.response["Error"]["Code"] in codes or status == 404:
            return True
        raise
    return False


class OutOfBand:
    """What a test does to a resource behind the provider's back, by engine name."""

    def exists(self, name: str) -> bool: ...
    def tags(self, name: str) -> dict[str, str]: ...
    def live(self, name: str) -> dict[str, Any]: ...
    def tamper(self, name: str) -> None: ...
    def destroy(self, name: str) -> None: ...
    def foreign(self, name: str) -> None: ...
    def fill(self, name: str) -> None: ...
    def filled(self, name: str) -> bool: ...

    def cleanup(self, name: str) -> None:
        if self.exists(name):
            self.destroy(name)


class BucketOutOfBand(OutOfBand):
    def __init__(self, endpoint: str = AWS_ENDPOINT, key: str | None = None, secret: str | None = None):
        self.s3 = aws("s3", endpoint, key, secret)

    def exists(self, name):
        return not gone(lambda: self.s3.head_bucket(Bucket=name), "NoSuchBucket")

    def tags(self, name):
        try:
            return {t["Key"]: t["Value"] for t in self.s3.get_bucket_tagging(Bucket=name)["TagSet"]}
        except ClientError:
            return {}

    def live(self, name):
        user = {k: v for k, v in self.tags(name).items() if not k.startswith("devstack-") and k != "managed-by"}
        return {"versioning": self.s3.get_bucket_versioning(Bucket=name).get("Status") == "Enabled", "tags": user}

    def tamper(self, name):
        tags = {**self.tags(name), "team": "tampered"}
        self.s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]})

    def destroy(self, name):
        for page in self.s3.get_paginator("list_object_versions").paginate(Bucket=name):
            for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                self.s3.delete_object(Bucket=name, Key=v["Key"], VersionId=v["VersionId"])
        self.s3.delete_bucket(Bucket=name)

    def foreign(self, name):
        self.s3.create_bucket(Bucket=name)

    def fill(self, name):
        # Two versions, a delete marker and another object: a purge must remove them all.
        self.s3.put_object(Bucket=name, Key="a.txt", Body=b"one")
        self.s3.put_object(Bucket=name, Key="a.txt", Body=b"two")
        self.s3.delete_object(Bucket=name, Key="a.txt")
        self.s3.put_object(Bucket=name, Key="b.txt", Body=b"three")

    def filled(self, name):
        page = self.s3.list_object_versions(Bucket=name)
        return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", [])) >= 4


@dataclass
class Case:
    """One kind as the contract tests exercise it."""

    kind: type[KindProvider]
    instance: str
    oob: OutOfBand
    params: dict[str, Any]                # as written in devstack.yaml
    update: dict[str, Any]                # an in-place change, merged into params
    updated: dict[str, Any]               # what oob.live() reads after it
    tampered: dict[str, Any]              # params read() reports after oob.tamper()
    replace: dict[str, Any] | None = None  # a create-only change, merged into params ...
    replaces: tuple[str, ...] = ()          # ... and the params diff must then report as replaced
    bad: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # params -> failing field
    name: str = "data"

    @property
    def id(self) -> str:
        return f"{self.kind.engine}-{self.kind.kind}"


class KindContract:
    """Contract tests every kind passes on its real engine; subclasses provide the `case` fixture."""

    @pytest.fixture
    def kit(self, case: Case, configure, owner):
        """(provider, owner, engine name); whatever the test leaves in the engine is removed after it."""
        name = case.kind.engine_name(case.name, owner, naming=PREFIXED)
        yield configure(case.kind()), owner, name
        case.oob.cleanup(name)

    @staticmethod
    def inputs(provider: KindProvider, case: Case, owner: str, params: dict | None = None, **policy) -> dict:
        """Resource inputs after check(), exactly as Pulumi passes them to create/diff/update."""
        raw = props(case.kind.engine, case.instance, case.kind.kind, case.name, owner,
                    case.params if params is None else params, **policy)
        result = provider.check({}, raw)
        assert result.failures == [], [(f.property, f.reason) for f in result.failures]
        return result.inputs

    def test_create_then_create_again_adopts_without_change(self, case, kit):
        provider, owner, name = kit
        first = provider.create(self.inputs(provider, case, owner))
        second = provider.create(self.inputs(provider, case, owner))  # run twice: adopted, nothing new
        assert first.id == second.id == f"{case.kind.engine}/{case.instance}/{case.kind.kind}/{case.name}@{owner}"
        assert {k: first.outs[k] for k in case.kind.attributes} == {k: second.outs[k] for k in case.kind.attributes}
        assert all(first.outs[k] not in (None, "") for k in case.kind.attributes)
        tags = case.oob.tags(name)
        assert (tags["managed-by"], tags["devstack-owner"], tags["devstack-stack"]) == ("devstack", owner, "test")
        # A read right after create reports no drift: the next diff is empty.
        read = provider.read(first.id, first.outs)
        assert provider.diff(first.id, read.outs, self.inputs(provider, case, owner)).changes is False

    def test_one_made_by_someone_else_after_the_observe_is_not_taken_over(self, case, kit, monkeypatch):
        """Another stack makes it between create's observe and its act: refused, not re-tagged as ours
        (a later purge would have dropped the other one's data)."""
        provider, owner, name = kit
        inputs = self.inputs(provider, case, owner)
        observe, calls = provider.observe, []

        def stale_first(*args):
            calls.append(args)
            if len(calls) == 1:
                case.oob.foreign(name)  # made meanwhile, right after this observe found nothing
                return None
            return observe(*args)

        monkeypatch.setattr(provider, "observe", stale_first)
        with pytest.raises(Conflict):
            provider.create(inputs)
        assert "devstack-owner" not in case.oob.tags(name)

    def test_update_in_place(self, case, kit):
        provider, owner, name = kit
        outs = provider.create(self.inputs(provider, case, owner)).outs
        changed = self.inputs(provider, case, owner, {**case.params, **case.update})
        diff = provider.diff("id", outs, changed)
        assert (diff.changes, diff.replaces) == (True, [])
        outs = provider.update("id", outs, changed).outs
        assert {k: case.oob.live(name)[k] for k in case.updated} == case.updated
        assert provider.diff("id", provider.read("id", outs).outs, changed).changes is False

    def test_create_only_and_identity_changes_replace(self, case, kit):
        provider, owner, _ = kit
        outs = provider.create(self.inputs(provider, case, owner)).outs
        renamed = {**self.inputs(provider, case, owner), "name": "other"}
        assert provider.diff("id", outs, renamed).replaces == ["name"]
        if case.replace is None:
            return  # every param of this kind changes in place
        # diff is pure and sees params only: the cross-field rules of check() do not matter here.
        spec = case.kind.Spec.model_validate({**case.params, **case.replace})
        replaced = {**self.inputs(provider, case, owner), "params": spec.model_dump(mode="json"), "purge": True}
        diff = provider.diff("id", {**outs, "purge": True}, replaced)  # under purge: false, refused (see test_diff)
        assert (diff.replaces, diff.delete_before_replace) == (list(case.replaces), True)

    def test_read_detects_drift_and_disappearance(self, case, kit):
        provider, owner, name = kit
        inputs = self.inputs(provider, case, owner)
        outs = provider.create(inputs).outs
        case.oob.tamper(name)
        read = provider.read("id", outs)
        assert {k: read.outs["params"][k] for k in case.tampered} == case.tampered
        assert provider.diff("id", read.outs, inputs).changes is True
        # The next up repairs it in place.
        provider.update("id", read.outs, inputs)
        assert provider.diff("id", provider.read("id", outs).outs, inputs).changes is False
        case.oob.destroy(name)
        assert is_stale(provider.read("id", outs).outs)

    def test_retained_delete_keeps_data_and_purged_delete_drops(self, case, kit):
        provider, owner, name = kit
        outs = provider.create(self.inputs(provider, case, owner)).outs
        case.oob.fill(name)
        provider.delete("id", outs)  # purge not asked for
        assert case.oob.exists(name) and case.oob.filled(name)
        provider.delete("id", {**outs, "purge": True})
        assert not case.oob.exists(name)
        provider.delete("id", {**outs, "purge": True})  # already gone is fine

    def test_resource_of_another_project_is_a_conflict_and_untouched(self, case, kit):
        provider, owner, name = kit
        outs = provider.create(self.inputs(provider, case, owner)).outs
        # Project `<owner>-data` names its declaration after itself: the same engine name.
        other = owner + "-" + case.name
        intruder = {**self.inputs(provider, case, other), "name": other}
        assert case.kind.engine_name(other, other, naming=PREFIXED) == name
        with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
            provider.create(intruder)
        with pytest.raises(Conflict, match=f"belongs to project '{owner}'"):
            provider.delete("id", {**intruder, "purge": True})
        assert case.oob.tags(name)["devstack-owner"] == owner
        assert not is_stale(provider.read("id", outs).outs)

    def test_foreign_resource_is_a_conflict_and_untouched(self, case, kit):
        provider, owner, name = kit
        case.oob.foreign(name)
        with pytest.raises(Conflict, match="something devstack does not manage"):
            provider.create(self.inputs(provider, case, owner))
        assert "managed-by" not in case.oob.tags(name)

    def test_bad_params_and_names_fail_check_naming_the_field(self, case, configure, owner):
        provider = configure(case.kind())
        for params, failing in case.bad:
            raw = props(case.kind.engine, case.instance, case.kind.kind, case.name, owner, params)
            fields = [f.property for f in provider.check({}, raw).failures]
            assert failing in fields, (params, fields)
        raw = props(case.kind.engine, case.instance, case.kind.kind, "Bad Name!", owner, case.params)
        failures = provider.check({}, raw).failures
        assert [f.property for f in failures] == ["name"] and "names" in failures[0].reason
        with pytest.raises(InvalidSpec):
            provider.create(raw)

    def test_engine_down_names_engine_address_and_fix(self, case, configure, owner):
        provider = configure(case.kind())
        provider._instances[case.instance] = provider._instances[case.instance].model_copy(update={"port": 1})
        pattern = rf"{case.kind.engine} instance '{case.instance}' at 127\.0\.0\.1:1.*tools\.engines start {case.kind.engine}"
        with pytest.raises(EngineUnavailable, match=pattern):
            provider.create(self.inputs(provider, case, owner))


    def test_another_s3_server_at_the_address_is_refused_not_read_as_gone(self, case, kit):
        """A port pointing at MinIO for LocalStack, or at LocalStack for MinIO: each answers S3 calls,
        and its "no such bucket" read as gone would drop the resource from the ledger at a refresh."""
        provider, owner, name = kit
        made = provider.create(self.inputs(provider, case, owner, purge=True))
        other = next(i for i in provider._instances.values() if i.engine in {"minio", "localstack"} - {case.kind.engine})
        real = provider._instances[case.instance]
        provider._instances[case.instance] = real.model_copy(update={"port": other.port})
        refused = rf"{case.kind.engine} instance '{case.instance}' at 127\.0\.0\.1:{other.port}: the server there answers as .*, not as {case.kind.engine}.*check shared\.{case.instance}\.host and \.port"
        with pytest.raises(EngineUnavailable, match=refused):
            provider.read(made.id, made.outs)
        with pytest.raises(EngineUnavailable, match=refused):
            provider.delete(made.id, made.outs)
        assert case.oob.tags(name)["devstack-owner"] == owner
