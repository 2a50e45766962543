"""LocalStack's `access_key`: an IAM user whose one inline policy reaches exactly the project's resources."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from pulumi.dynamic import CheckFailure, CheckResult, ConfigureRequest, ReadResult
from pydantic import BaseModel, Field


from providers.description import REACH
from providers.errors import Conflict
from providers.identity import Identity
from providers.instances import WORKSPACE_KEY, SharedInstance, parse_object
from providers.lifecycle import is_stale
from providers.localstack.client import ENGINE_NAME, GONE, account_id, emulator, ignoring, location, missing
from providers.localstack.kind import AwsSpec
from providers.localstack.names import iam_user_name
from providers.localstack.policy import (DATA_ACTIONS, REACHED_KINDS, STORE, key_policy, policy_reach, resource_arns,
                                         store_entry)
from providers.localstack.stored_secret import default_prefix
from providers.localstack.queue import _queue_url
from providers.localstack.table import table_tags
from providers.s3.bucket import bucket_tags
from providers.s3.client import aws_client, boto_errors, client_as, error_code, region_of
from providers.s3.guarded import GuardedKind
from providers.s3.tags import marker_tags, tag_dict, tag_list, tags_owner, tags_workspace
from providers.markers import Observed

if TYPE_CHECKING:
    from botocore.client import BaseClient


POLICY_NAME = "devstack"
PREDICTABLE_REFUSED = ("the emulator draws an IAM access key's id and secret itself, so the key cannot have the "
                       "predictable secret; set `credentials: generated` on this access_key")


def _canonical(document: Mapping[str, Any] | None) -> str:
    return json.dumps(document, sort_keys=True) if document else ""


def store_from_config(config: Any) -> tuple[str, str, str] | None:
    """(kind, instance, prefix) of the workspace's `secretStore` in the provider's config, None without one."""
    workspace = parse_object(config.get(WORKSPACE_KEY)) or {}
    store = workspace.get("secretStore") or {}
    if not store.get("kind") or not store.get("instance"):
        return None
    kind = str(store["kind"])
    prefix = store.get("prefix") or default_prefix(kind, str(workspace.get("name", "")))
    return kind, str(store["instance"]).removeprefix("workspace.shared."), str(prefix)


def resource_owner(instance: SharedInstance, kind: str, name: str) -> tuple[bool, str | None]:
    """(whether it exists, the owner its marker names) of the `kind` called `name`."""
    client = aws_client(instance, {"bucket": "s3", "queue": "sqs", "topic": "sns", "stream": "kinesis",
                                   "table": "dynamodb"}[kind])

    def tags() -> dict[str, str]:
        if kind == "bucket":
            return bucket_tags(client, name)
        if kind == "queue":
            url = _queue_url(client, name)
            return client.list_queue_tags(QueueUrl=url).get("Tags", {}) if url else None
        if kind == "topic":
            arn = resource_arns(kind, name, region_of(instance), account_id(instance))[0]
            return tag_dict(client.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        if kind == "stream":
            return tag_dict(client.list_tags_for_stream(StreamName=name).get("Tags", []))
        return table_tags(client, client.describe_table(TableName=name)["Table"]["TableArn"])

    found = ignoring((*GONE, "NoSuchBucket"), tags)
    return found is not None, tags_owner(found) if found is not None else None


class AccessKeySpec(AwsSpec):
    """Params of an `access_key`. Bumping `rotation` issues a new key pair in place."""

    rotation: int = Field(default=0, ge=0)


class AccessKey(GuardedKind):
    """An IAM user whose one inline policy reaches exactly the project's resources on the instance.

    The program fills `reach` with them (`<kind>:<name>`, every bucket, queue, topic, stream and table the
    project declares there), and on the instance serving the workspace's secret store with the project's
    entries there (`store:<kind>:<prefix><project>/`); the policy lets the key use their data, not manage
    them, and read those entries. The emulator draws the key pair, so only `credentials: generated` is
    possible; the secret is a secret output, kept across updates until `rotation` or the credential policy
    changes. The marker is the user's tags. `read` reports
    out-of-band changes in `outOfBand` (policy edited or gone, other policies or groups, other keys, the
    stored key deleted, deactivated or its secret no longer working), which the next diff turns into an update.
    """

    engine = ENGINE_NAME
    kind = "access_key"
    logins = True
    Spec = AccessKeySpec
    # The project's resources first: the policy names them, and they must be tagged as its own by then.
    after_kinds = REACHED_KINDS
    reach_kind = REACHED_KINDS
    attributes = ("host", "port", "region", "user", "accessKey", "secretKey")
    secret_outputs = ("secretKey",)
    #: (kind, instance, prefix) of the workspace's secret store, from configure; None without one.
    _store: tuple[str, str, str] | None = None

    def configure(self, req: ConfigureRequest) -> None:
        super().configure(req)
        self._store = store_from_config(req.config)

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return iam_user_name(name, owner, naming=naming)

    @classmethod
    def exact_reach(cls, props: Mapping[str, Any]) -> list[str]:
        return sorted({str(entry) for entry in props.get(REACH) or []})

    @classmethod
    def static_check(cls, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        result = super().static_check(olds, news)
        if news.get("credentials", "predictable") == "predictable":
            result.failures.append(CheckFailure("credentials", PREDICTABLE_REFUSED))
        return result

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        user, iam = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "iam")
        found = ignoring(("NoSuchEntity",), lambda: iam.list_user_tags(UserName=user))
        if found is None:
            return None
        tags = tag_dict(found.get("Tags", []))
        observed = Observed(owner=tags_owner(tags), workspace=tags_workspace(tags),
                            attributes={**location(instance), "user": user})
        if observed.owner == ident.owner:
            observed.attributes["outOfBand"] = self._out_of_band(instance, iam, ident, user)
        return observed

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = super().read(id_, props)
        if not is_stale(result.outs) and props.get("accessKey") and props.get("secretKey"):
            instance = self._instance(Identity.from_props(props), "read")
            with self.engine_errors(props):
                if not self._key_works(instance, result.outs["user"], props["accessKey"], props["secretKey"]):
                    result.outs["outOfBand"] = [*result.outs.get("outOfBand", []), "secretKey"]
        return result

    def drift(self, olds: dict[str, Any]) -> list[str]:
        return list(olds.get("outOfBand") or [])

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        user, iam = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "iam")
        reach = self._reach(instance, ident, props)
        if self.observe(instance, ident) is None:
            try:
                iam.create_user(UserName=user, Tags=tag_list(marker_tags(ident, props.get("stack"))))
            except boto_errors.ClientError as err:
                if not missing(err, "EntityAlreadyExists"):
                    raise
                self._owned(instance, ident, "create")  # made meanwhile: ours to converge, or a Conflict
        return self._converge(instance, iam, ident, user, reach, props.get("stack"), keep=None)

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        user, iam = self.engine_name(ident.name, ident.owner, naming=ident.naming), aws_client(instance, "iam")
        spec = AccessKeySpec.model_validate(new.get("params") or {})
        # The key pair survives any update but a new rotation or credential policy, or a broken stored one.
        same = (old.get("credentials"), (old.get("params") or {}).get("rotation")) == (new.get("credentials"), spec.rotation)
        usable = same and old.get("accessKey") and "secretKey" not in (old.get("outOfBand") or [])
        keep = (str(old["accessKey"]), str(old.get("secretKey"))) if usable else None
        return self._converge(instance, iam, ident, user, self._reach(instance, ident, new), new.get("stack"), keep=keep)

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        user, iam = observed.attributes["user"], aws_client(instance, "iam")
        # IAM deletes a user only once nothing hangs on it any more.
        for key in iam.list_access_keys(UserName=user).get("AccessKeyMetadata", []):
            ignoring(("NoSuchEntity",), lambda key=key: iam.delete_access_key(UserName=user, AccessKeyId=key["AccessKeyId"]))
        self._revoke_other_grants(iam, user, keep_inline=None)
        iam.delete_user(UserName=user)

    
    def _reach(self, instance: SharedInstance, ident: Identity, props: Mapping[str, Any]) -> list[str]:
        """The entries `props` ask the key to reach; Conflict when one exists and is not the project's."""
        reach = self.exact_reach(props)
        foreign = self._foreign(instance, ident, reach)
        if foreign:
            entry, holder = foreign[0]
            if entry.startswith(f"{STORE}:"):
                raise Conflict("grant", f"access_key {ident}", f"{entry!r} is not the project's part of the "
                               f"workspace's secret store ({self._own_store(ident) or 'none on this instance'})",
                               "a key reads only its project's entries; nothing was changed")
            who = f"project {holder!r}" if holder else "something devstack does not manage"
            raise Conflict("grant", f"access_key {ident}", f"{entry.replace(':', ' ', 1)!r} belongs to {who}",
                           "a key reaches only its project's resources; nothing was changed")
        return reach

    def _own_store(self, ident: Identity) -> str | None:
        """The reach entry of the project's own secret-store entries, when this key's instance serves the store."""
        if self._store is None or self._store[1] != ident.instance:
            return None
        kind, _, prefix = self._store
        return store_entry(kind, f"{prefix}{ident.owner}/")

    def _foreign(self, instance: SharedInstance, ident: Identity, reach: Iterable[str]) -> list[tuple[str, str | None]]:
        """(entry, the owner its marker names) of those of `reach` that exist without this project's marker; a
        store entry other than the project's own (`_own_store`) with no owner."""
        foreign = []
        for entry in reach:
            kind, _, name = entry.partition(":")
            if kind == STORE:
                foreign += [(entry, None)] if entry != self._own_store(ident) else []
                continue
            exists, owner = resource_owner(instance, kind, name) if kind in DATA_ACTIONS else (True, None)
            if exists and owner != ident.owner:
                foreign.append((entry, owner))
        return foreign

    def _expected(self, instance: SharedInstance, reach: Iterable[str]) -> dict[str, Any] | None:
        return key_policy(reach, region_of(instance), account_id(instance), emulator(instance))

    def _out_of_band(self, instance: SharedInstance, iam: BaseClient, ident: Identity, user: str) -> list[str]:
        """What differs from a key devstack made: its policy (rebuilt from the resources it names, which must
        be the project's; on the store's instance it must read the project's entries), other grants, other or
        inactive keys."""
        document = ignoring(("NoSuchEntity",), lambda: iam.get_user_policy(UserName=user, PolicyName=POLICY_NAME))
        live = document["PolicyDocument"] if document else None
        live = json.loads(live) if isinstance(live, str) else live
        reached, own_store = policy_reach(live), self._own_store(ident)
        drifted = []
        if _canonical(live) != _canonical(self._expected(instance, reached)) or self._foreign(instance, ident, reached) \
                or (own_store and own_store not in reached):
            drifted.append("policy")
        inline = [name for name in iam.list_user_policies(UserName=user).get("PolicyNames", []) if name != POLICY_NAME]
        if inline or iam.list_attached_user_policies(UserName=user).get("AttachedPolicies") \
                or iam.list_groups_for_user(UserName=user).get("Groups"):
            drifted.append("grants")
        keys = iam.list_access_keys(UserName=user).get("AccessKeyMetadata", [])
        if len(keys) != 1 or keys[0].get("Status") != "Active":
            drifted.append("accessKeys")
        return drifted

    @staticmethod
    def _key_works(instance: SharedInstance, user: str, key: str, secret: str) -> bool:
        """Whether the stored key is the user's, active, and its secret still signs (GetCallerIdentity needs no grant)."""
        iam = aws_client(instance, "iam")
        keys = ignoring(("NoSuchEntity",), lambda: iam.list_access_keys(UserName=user)) or {}
        if not any(k["AccessKeyId"] == key and k.get("Status") == "Active" for k in keys.get("AccessKeyMetadata", [])):
            return False
        try:
            client_as(instance, "sts", key, secret).get_caller_identity()
        except boto_errors.ClientError as err:
            if error_code(err) in ("SignatureDoesNotMatch", "InvalidClientTokenId", "403"):
                return False
            raise
        return True

    def _converge(self, instance: SharedInstance, iam: BaseClient, ident: Identity, user: str, reach: list[str],
                  stack: str | None, keep: tuple[str, str] | None) -> dict[str, Any]:
        """Marker, the one policy, no other grant, and one active key: `keep` (id, secret) when the user still
        has it, else a new one. Each step idempotent."""
        iam.tag_user(UserName=user, Tags=tag_list(marker_tags(ident, stack)))
        policy = self._expected(instance, reach)
        if policy:
            iam.put_user_policy(UserName=user, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(policy))
        else:
            ignoring(("NoSuchEntity",), lambda: iam.delete_user_policy(UserName=user, PolicyName=POLICY_NAME))
        self._revoke_other_grants(iam, user, keep_inline=POLICY_NAME)
        live = [k["AccessKeyId"] for k in iam.list_access_keys(UserName=user).get("AccessKeyMetadata", [])]
        kept = keep if keep and keep[0] in live else None
        # Others first: IAM holds at most two keys per user.
        for key in live:
            if kept is None or key != kept[0]:
                iam.delete_access_key(UserName=user, AccessKeyId=key)
        if kept:
            iam.update_access_key(UserName=user, AccessKeyId=kept[0], Status="Active")
        else:
            made = iam.create_access_key(UserName=user)["AccessKey"]
            kept = (made["AccessKeyId"], made["SecretAccessKey"])
        return {**location(instance), "user": user, "accessKey": kept[0], "secretKey": kept[1], "outOfBand": []}

    @staticmethod
    def _revoke_other_grants(iam: BaseClient, user: str, keep_inline: str | None) -> None:
        """Every inline policy but `keep_inline`, every attached policy and every group of `user`."""
        for name in iam.list_user_policies(UserName=user).get("PolicyNames", []):
            if name != keep_inline:
                iam.delete_user_policy(UserName=user, PolicyName=name)
        for attached in iam.list_attached_user_policies(UserName=user).get("AttachedPolicies", []):
            iam.detach_user_policy(UserName=user, PolicyArn=attached["PolicyArn"])
        for group in iam.list_groups_for_user(UserName=user).get("Groups", []):
            iam.remove_user_from_group(GroupName=group["GroupName"], UserName=user)
