"""Pushed secrets: a generated credential kept in the workspace's secret store, where services read it.

One small class per store with the same verbs: `aws-sm` (a Secrets Manager secret) and `aws-ssm` (an SSM
Parameter Store SecureString), both served by a LocalStack-engine instance (or AWS). The entry is named
`<prefix><project>/<instance>/<kind>/<name>/<attribute>` (`entry_name`), carries the ownership marker as
tags, and holds one secret attribute of one resource with `credentials: generated`. Its `value` input is
a Pulumi secret, so the state keeps it encrypted. An entry is not a tenant resource: its props carry no
identity envelope (`engine`, `kind`), so the ledger, gc and `devstack resource` never list it; it goes
with the resource it holds a value of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from pulumi.dynamic import (CheckFailure, CheckResult, ConfigureRequest, CreateResult, DiffResult, ReadResult,
                            ResourceProvider, UpdateResult)

from providers.errors import Conflict, InvalidSpec
from providers.identity import Identity
from providers.instances import SharedInstance, instances_from_config
from providers.localstack.client import ENGINE_NAME, ignoring
from providers.s3.client import aws_client, boto_errors, error_code, reachable
from providers.s3.tags import marker_tags, tag_dict, tag_list, tags_owner, tags_workspace

#: The input holding the secret value (registered as a Pulumi secret, so the state keeps it encrypted).
VALUE = "value"
#: What replaces an entry rather than updating it: another store, instance or name is another entry.
IDENTITY = ("store", "storeInstance", "secretId")


@dataclass(frozen=True)
class Stored:
    """What a store holds under an entry's name: its marker, value and ARN."""

    owner: str | None
    workspace: str | None
    value: str | None
    arn: str


class StoredSecret(ResourceProvider):
    """An entry of a secret store. Subclasses implement `observe`, `put_new`, `put_value` and `remove`.

    create adopts an entry of the same project (a killed run's) and refuses another's (Conflict); read
    reports `inSync: false` when the entry is gone, changed or another's, and the next diff turns that into
    an update that writes it again; delete removes only an entry that carries this project's marker.
    """

    store: ClassVar[str]
    #: The characters and length the store allows in a name.
    name_chars: ClassVar[re.Pattern[str]]
    name_limit: ClassVar[int]
    allowed: ClassVar[str]

    serialize_as_secret_always = False  # admin credentials arrive through configure, never pickled

    def __init__(self) -> None:
        super().__init__()
        self._instances: dict[str, SharedInstance] = {}

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return (type(self), ())

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._instances = {}

    # --- hooks -------------------------------------------------------------

    def observe(self, instance: SharedInstance, name: str) -> Stored | None:
        """The entry called `name`, or None when there is none."""
        raise NotImplementedError

    def put_new(self, instance: SharedInstance, name: str, value: str, tags: dict[str, str]) -> str:
        """Create the entry with its value and marker tags; return its ARN."""
        raise NotImplementedError

    def put_value(self, instance: SharedInstance, name: str, value: str, tags: dict[str, str]) -> str:
        """Write the value and marker tags of an existing entry; return its ARN."""
        raise NotImplementedError

    def remove(self, instance: SharedInstance, name: str) -> None:
        """Delete the entry; nothing when it is already gone."""
        raise NotImplementedError

    # --- Pulumi verbs ------------------------------------------------------

    def configure(self, req: ConfigureRequest) -> None:
        self._instances = instances_from_config(req.config)

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        """Why the store refuses `name`, or None."""
        if not 1 <= len(name) <= cls.name_limit:
            return f"{cls.store} names have 1-{cls.name_limit} characters ({name!r} has {len(name)})"
        if not cls.name_chars.fullmatch(name):
            return f"{cls.store} refuses the name {name!r} ({cls.allowed})"
        return None

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = [CheckFailure(key, "is required") for key in (*IDENTITY, "owner") if not news.get(key)]
        if news.get("store") != self.store:
            failures.append(CheckFailure("store", f"this provider serves {self.store} only"))
        elif news.get("secretId") and (problem := self.name_problem(str(news["secretId"]))):
            failures.append(CheckFailure("secretId", problem))
        return CheckResult(news, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Pure: another store, instance or name replaces; a new value, marker or an out-of-sync read updates."""
        replaces = [key for key in IDENTITY if olds.get(key) != news.get(key)]
        changes = [key for key in (VALUE, "owner", "stack") if olds.get(key) != news.get(key)]
        changes += ["inSync"] if olds.get("inSync") is False else []
        return DiffResult(changes=bool(replaces or changes), replaces=replaces,
                          stables=[key for key in IDENTITY if key not in replaces], delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        instance, name = self._instance(props, "push"), str(props["secretId"])
        with reachable(instance, ENGINE_NAME):
            arn = self._write("push", instance, props)
        return CreateResult(f"{self.store}:{props['storeInstance']}:{name}", {**props, "arn": arn, "inSync": True})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        instance = self._instance(props, "read")
        with reachable(instance, ENGINE_NAME):
            found = self.observe(instance, str(props["secretId"]))
        # Gone, changed or another's: kept as last written, and the next up writes it again (or refuses).
        in_sync = found is not None and found.owner == props.get("owner") and found.value == props.get(VALUE)
        arn = found.arn if found is not None else props.get("arn")
        return ReadResult(id_, {**props, "arn": arn, "inSync": in_sync})

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        instance = self._instance(news, "update")
        with reachable(instance, ENGINE_NAME):
            arn = self._write("update", instance, news)
        return UpdateResult({**news, "arn": arn, "inSync": True})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        instance, name = self._instance(props, "delete"), str(props["secretId"])
        with reachable(instance, ENGINE_NAME):
            found = self.observe(instance, name)
            # Another's entry under the name (made since) stays: it holds its own credential.
            if found is not None and found.owner == props.get("owner"):
                self.remove(instance, name)

    # --- helpers -------------------------------------------------------------

    def _write(self, verb: str, instance: SharedInstance, props: dict[str, Any]) -> str:
        """Put the value under the name: a new entry, or one this project's marker is on; Conflict otherwise."""
        ident = self.identity(props)
        name, value, tags = ident.name, str(props[VALUE]), marker_tags(ident, props.get("stack"))
        found = self.observe(instance, name)
        if found is None:
            return self.put_new(instance, name, value, tags)
        if found.owner != ident.owner:
            who = f"project {found.owner!r}" if found.owner else "something devstack does not manage"
            raise Conflict(verb, f"{self.store} entry {ident}", f"{name!r} exists and belongs to {who}",
                           "choose another secretStore.prefix, or remove that entry; nothing was changed")
        return self.put_value(instance, name, value, tags)

    def identity(self, props: dict[str, Any]) -> Identity:
        """The canonical form of an entry in messages and markers (never an input: entries are no tenants)."""
        return Identity(engine=ENGINE_NAME, instance=str(props["storeInstance"]), kind=self.store,
                        name=str(props["secretId"]), owner=str(props["owner"]))

    def _instance(self, props: dict[str, Any], verb: str) -> SharedInstance:
        try:
            return self._instances[str(props["storeInstance"])]
        except KeyError:
            raise InvalidSpec(verb, f"{self.store} entry {props.get('secretId')!r}",
                              f"the workspace has no shared instance {props.get('storeInstance')!r}",
                              "name a localstack instance of devstack:workspace.shared in secretStore.instance") from None


class SecretsManagerSecret(StoredSecret):
    """`aws-sm`: a Secrets Manager secret whose SecretString is the value."""

    store = "aws-sm"
    name_chars = re.compile(r"[A-Za-z0-9/_+=.@-]+")
    name_limit = 512
    allowed = "letters, digits and /_+=.@-"

    def observe(self, instance: SharedInstance, name: str) -> Stored | None:
        sm = aws_client(instance, "secretsmanager")
        described = ignoring(("ResourceNotFoundException",), lambda: sm.describe_secret(SecretId=name))
        if described is None or described.get("DeletedDate"):
            return None  # one scheduled for deletion is gone to its readers
        tags = tag_dict(described.get("Tags", []))
        answer = ignoring(("ResourceNotFoundException",), lambda: sm.get_secret_value(SecretId=name)) or {}
        return Stored(owner=tags_owner(tags), workspace=tags_workspace(tags), value=answer.get("SecretString"),
                      arn=described["ARN"])

    def put_new(self, instance: SharedInstance, name: str, value: str, tags: dict[str, str]) -> str:
        sm = aws_client(instance, "secretsmanager")
        try:
            return sm.create_secret(Name=name, SecretString=value, Tags=tag_list(tags))["ARN"]
        except boto_errors.ClientError as err:
            if error_code(err) != "InvalidRequestException":
                raise
        # Scheduled for deletion (a delete with a recovery window): the name is still taken until restored.
        sm.restore_secret(SecretId=name)
        return self.put_value(instance, name, value, tags)

    def put_value(self, instance: SharedInstance, name: str, value: str, tags: dict[str, str]) -> str:
        sm = aws_client(instance, "secretsmanager")
        sm.tag_resource(SecretId=name, Tags=tag_list(tags))
        return sm.put_secret_value(SecretId=name, SecretString=value)["ARN"]

    def remove(self, instance: SharedInstance, name: str) -> None:
        sm = aws_client(instance, "secretsmanager")
        # At once: a recovery window would hold the name, and the next up could not make it again.
        ignoring(("ResourceNotFoundException",),
                 lambda: sm.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True))


class SsmParameter(StoredSecret):
    """`aws-ssm`: an SSM Parameter Store SecureString (encrypted with the account's default key)."""

    store = "aws-ssm"
    # A name with a hierarchy starts with '/'; every entry name has one.
    name_chars = re.compile(r"/[A-Za-z0-9/_.-]+")
    name_limit = 1011
    allowed = "a leading '/', then letters, digits and /_.-"

    def observe(self, instance: SharedInstance, name: str) -> Stored | None:
        ssm = aws_client(instance, "ssm")
        answer = ignoring(("ParameterNotFound",), lambda: ssm.get_parameter(Name=name, WithDecryption=True))
        if answer is None:
            return None
        tags = tag_dict(ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name).get("TagList", []))
        return Stored(owner=tags_owner(tags), workspace=tags_workspace(tags), value=answer["Parameter"]["Value"],
                      arn=answer["Parameter"]["ARN"])

    def put_new(self, instance: SharedInstance, name: str, value: str, tags: dict[str, str]) -> str:
        ssm = aws_client(instance, "ssm")
        ssm.put_parameter(Name=name, Value=value, Type="SecureString", Tags=tag_list(tags))
        return self._arn(instance, name)

    def put_value(self, instance: SharedInstance, name: str, value: str, tags: dict[str, str]) -> str:
        ssm = aws_client(instance, "ssm")
        # SSM takes no tags with Overwrite: the marker goes on separately.
        ssm.put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)
        ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId=name, Tags=tag_list(tags))
        return self._arn(instance, name)

    def remove(self, instance: SharedInstance, name: str) -> None:
        ssm = aws_client(instance, "ssm")
        ignoring(("ParameterNotFound",), lambda: ssm.delete_parameter(Name=name))

    @staticmethod
    def _arn(instance: SharedInstance, name: str) -> str:
        return aws_client(instance, "ssm").get_parameter(Name=name)["Parameter"]["ARN"]


#: Each store `secretStore.kind` may name, by kind.
STORES: dict[str, type[StoredSecret]] = {cls.store: cls for cls in (SecretsManagerSecret, SsmParameter)}


def entry_name(prefix: str, project: str, key: str, attribute: str) -> str:
    """The name of the entry holding `attribute` of the project's resource `key` (`<instance>/<kind>/<name>`)."""
    return f"{prefix}{project}/{key}/{attribute}"


def default_prefix(kind: str, workspace: str) -> str:
    """`devstack/<workspace>/`, with the leading '/' an SSM hierarchy needs for `aws-ssm`."""
    return f"{'/' if kind == SsmParameter.store else ''}devstack/{workspace}/"
