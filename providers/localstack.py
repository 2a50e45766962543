"""LocalStack: per-project AWS-API resources (S3, SQS, SNS, Kinesis, DynamoDB).

On this machine the engine is moto in server mode (tools/engines/localstack.py);
the providers speak only the AWS APIs through boto3, so LocalStack itself
serves them as well. Buckets are the shared S3 implementation of
`providers.s3`. Every other kind carries the ownership marker as the
service's own tags and its name mapped to the service's charset and length
rules (providers.naming; a FIFO queue or topic keeps its `.fifo` suffix last).
"""

from __future__ import annotations

import re
import time
from functools import wraps
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from providers import naming as naming_rules
from providers import s3
from providers.base import KindProvider, Observed
from providers.errors import Conflict, EngineUnavailable, InvalidSpec, NotFound
from providers.identity import PREFIXED, Identity
from providers.instances import SharedInstance

if TYPE_CHECKING:  # botocore.client takes 0.1s to import; clients come from s3.aws_client
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

ENGINE = "localstack"
FIFO = ".fifo"
#: How long to wait for a stream or table to become ACTIVE (moto: at once; AWS: seconds).
ACTIVE_TIMEOUT = 60.0
_SQS_SNS_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_KINESIS_DYNAMODB_CHARS = re.compile(r"[A-Za-z0-9_.-]+")


class LocalstackBucket(s3.Bucket):
    engine = ENGINE
    keeps_deleted_tags = True


# --- shared steps ------------------------------------------------------------


def fifo_capable_name(name: str, owner: str, *, service: str, limit: int, naming: int) -> str:
    """SQS/SNS name, sanitized (a final `.fifo` kept) or owner-prefixed (PREFIXED: a declaration named
    `<x>.fifo` maps to `<owner>-<x>.fifo`)."""
    if naming != PREFIXED:
        return naming_rules.sqs_sns(name, limit=limit)
    fifo = name.endswith(FIFO)
    base = s3.prefixed(name[: -len(FIFO)] if fifo else name, owner)
    mapped = base + (FIFO if fifo else "")
    if not 1 <= len(mapped) <= limit:
        rule = f"{service} names are 1-{limit} characters long, '.fifo' included ({mapped!r} has {len(mapped)})"
    elif not _SQS_SNS_CHARS.fullmatch(base):
        rule = f"{service} names use only letters, digits, '-' and '_', plus a final '.fifo' ({mapped!r} does not)"
    else:
        return mapped
    raise InvalidSpec("map", f"{service} name {mapped!r}", rule)


def plain_name(name: str, owner: str, *, service: str, length: tuple[int, int], naming: int) -> str:
    """Kinesis/DynamoDB name (letters, digits, '_', '-' and '.'): sanitized, or owner-prefixed (PREFIXED)."""
    if naming != PREFIXED:
        return naming_rules.kinesis_dynamodb(name, length=length)
    mapped = s3.prefixed(name, owner)
    rule = s3.name_rule(mapped, service=service, length=length, charset=_KINESIS_DYNAMODB_CHARS,
                        allowed="letters, digits, '_', '-' and '.'")
    if rule:
        raise InvalidSpec("map", f"{service} name {mapped!r}", rule)
    return mapped


def fifo_rules(name: str, fifo: bool, deduplication: bool, what: str) -> list[tuple[str, str]]:
    """A FIFO queue or topic and its name agree: FIFO exactly when the name ends in `.fifo`."""
    if fifo and not name.endswith(FIFO):
        return [("params.fifo", f"a FIFO {what}'s name must end in '.fifo' (name the declaration '{name}.fifo')")]
    if not fifo and name.endswith(FIFO):
        return [("params.fifo", f"a {what} named '*.fifo' is a FIFO {what}: set fifo: true")]
    if deduplication and not fifo:
        return [("params.contentBasedDeduplication", f"only a FIFO {what} deduplicates by content")]
    return []


def wait_until(ready: Callable[[], bool], what: str, instance: SharedInstance) -> None:
    """Poll `ready` until it holds, at most ACTIVE_TIMEOUT seconds."""
    deadline = time.monotonic() + ACTIVE_TIMEOUT
    while not ready():
        if time.monotonic() > deadline:
            raise EngineUnavailable("wait for", what, f"not ACTIVE after {ACTIVE_TIMEOUT:.0f} s on {instance.address}",
                                    "check the engine's log; the resource may finish later, then run `pulumi refresh`")
        time.sleep(0.2)


def missing(err: ClientError, *codes: str) -> bool:
    return s3.error_code(err) in codes


#: What SQS, SNS, Kinesis and DynamoDB answer about a resource that is not there.
GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "ResourceNotFoundException", "NotFound")


def vanished_is_none(observe: Callable[..., Observed | None]) -> Callable[..., Observed | None]:
    """An observe that finds the resource and then loses it (another run's purge dropped it between two
    calls) sees nothing, as it would have a moment later."""
    @wraps(observe)
    def looking(self: Any, instance: SharedInstance, ident: Identity) -> Observed | None:
        try:
            return observe(self, instance, ident)
        except s3.boto_errors.ClientError as err:
            if missing(err, *GONE):
                return None
            raise

    return looking


_accounts: dict[tuple[str, str], str] = {}


def account_id(instance: SharedInstance) -> str:
    """The account the admin key acts as (moto: 123456789012, LocalStack: 000000000000), asked once."""
    key = (s3.endpoint_of(instance), instance.admin_user)
    if key not in _accounts:
        _accounts[key] = str(s3.aws_client(instance, "sts").get_caller_identity()["Account"])
    return _accounts[key]


def location(instance: SharedInstance) -> dict[str, Any]:
    return {"host": instance.host, "port": instance.port, "region": s3.region_of(instance)}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _AwsKind(s3.GuardedKind):
    """A LocalStack kind: converge = apply the spec to the live resource, marker tags included."""

    engine = ENGINE

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        self.enforce("create", ident, spec)
        observed = self.observe(instance, ident)
        if observed is None:
            made = self.make(instance, ident, spec, props.get("stack"))
            if made is not None:
                return made
        elif observed.owner != ident.owner:  # made meanwhile by another stack: `create`'s observe came first
            raise self._conflict("create", ident, observed)
        return self.converge(instance, ident, spec, props.get("stack"))

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        try:
            super().drop(instance, ident, props)
        except s3.boto_errors.ClientError as err:
            if missing(err, *GONE):  # another run's drop came first
                raise NotFound("drop", f"{self.kind} {ident}", "it was dropped meanwhile") from err
            raise

    def update_resource(
        self, instance: SharedInstance, ident: Identity, old: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        spec = self.Spec.model_validate(new.get("params") or {})
        self.enforce("update", ident, spec)
        return self.converge(instance, ident, spec, new.get("stack"))

    def make(self, instance: SharedInstance, ident: Identity, spec: Any, stack: str | None) -> dict[str, Any] | None:
        """Create the resource, marker tags included where the API takes them at creation.

        Return its attributes when the creation call applied the whole spec, or None
        to have `converge` finish it.
        """
        raise NotImplementedError

    def converge(self, instance: SharedInstance, ident: Identity, spec: Any, stack: str | None) -> dict[str, Any]:
        """Bring the live resource in line with `spec`; return its attributes."""
        raise NotImplementedError

    def made_meanwhile(self, instance: SharedInstance, ident: Identity, err: Exception) -> None:
        """After a create refused because the name exists now: ours (the SDK retried a call whose
        first reply was lost, or another run of this project made it) goes on to converge; anything
        else is a Conflict."""
        observed = self.observe(instance, ident) or Observed(owner=None)
        if observed.owner != ident.owner:
            raise self._conflict("create", ident, observed) from err

    def claimed(self, ident: Identity, tags: dict[str, str]) -> None:
        """After a create call that succeeds on an existing name: it must carry our marker."""
        if s3.tags_owner(tags) != ident.owner:
            raise self._conflict("create", ident, Observed(owner=s3.tags_owner(tags)))


# --- SQS queue ----------------------------------------------------------------

#: Spec field -> SQS attribute, all integers.
QUEUE_ATTRIBUTES = {
    "visibility_timeout": "VisibilityTimeout",
    "message_retention_period": "MessageRetentionPeriod",
    "delay_seconds": "DelaySeconds",
    "receive_wait_time_seconds": "ReceiveMessageWaitTimeSeconds",
}

#: Settings a queue has none of unless set outside devstack: a dead-letter queue (moving messages to
#: any queue, another project's too) and an access policy. Drift when set.
QUEUE_EXTRAS = ("RedrivePolicy", "Policy")


class QueueSpec(_Spec):
    """Params of a `queue`. FIFO is fixed at creation; the rest change in place (defaults = SQS's)."""

    fifo: bool = False
    visibility_timeout: int = Field(default=30, ge=0, le=43200, alias="visibilityTimeout")
    message_retention_period: int = Field(default=345600, ge=60, le=1209600, alias="messageRetentionPeriod")
    delay_seconds: int = Field(default=0, ge=0, le=900, alias="delaySeconds")
    receive_wait_time_seconds: int = Field(default=0, ge=0, le=20, alias="receiveWaitTimeSeconds")
    content_based_deduplication: bool = Field(default=False, alias="contentBasedDeduplication")


def _queue_url(sqs: BaseClient, name: str) -> str | None:
    try:
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])
    except s3.boto_errors.ClientError as err:
        if missing(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            return None
        raise


def _queue_attributes(spec: QueueSpec) -> dict[str, str]:
    attributes = {sqs_name: str(getattr(spec, field)) for field, sqs_name in QUEUE_ATTRIBUTES.items()}
    if spec.fifo:
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
    return attributes


class Queue(_AwsKind):
    """An SQS queue, standard or FIFO, tagged with the ownership marker."""

    kind = "queue"
    Spec = QueueSpec
    create_only = frozenset({"fifo"})
    attributes = ("host", "port", "region", "queue", "queueUrl", "queueArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return fifo_capable_name(name, owner, service="SQS queue", limit=80, naming=naming)

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, QueueSpec)
        return fifo_rules(name, spec.fifo, spec.content_based_deduplication, "queue")

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sqs")
        url = _queue_url(sqs, name)
        if url is None:
            return None
        live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        params: dict[str, Any] = {field: int(live[attr]) for field, attr in QUEUE_ATTRIBUTES.items() if attr in live}
        params["fifo"] = live.get("FifoQueue") == "true"
        params["content_based_deduplication"] = live.get("ContentBasedDeduplication") == "true"
        tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
        return Observed(
            owner=s3.tags_owner(tags),
            workspace=s3.tags_workspace(tags),
            params=params,
            attributes={**location(instance), "queue": name, "queueUrl": url, "queueArn": live["QueueArn"],
                        "configInSync": not any(live.get(extra) for extra in QUEUE_EXTRAS)},
        )

    def make(self, instance: SharedInstance, ident: Identity, spec: QueueSpec, stack: str | None) -> dict[str, Any] | None:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sqs")
        attributes = {**_queue_attributes(spec), **({"FifoQueue": "true"} if spec.fifo else {})}
        marker = s3.marker_tags(ident, stack)
        url = sqs.create_queue(QueueName=name, Attributes=attributes, tags=marker)["QueueUrl"]
        # CreateQueue returns an existing queue of the same attributes: it must be ours.
        tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
        self.claimed(ident, tags)
        # Attributes and tags went in with the create; a queue another run made needs re-marking.
        return self._attributes(instance, sqs, name, url) if tags == marker else None

    def converge(self, instance: SharedInstance, ident: Identity, spec: QueueSpec, stack: str | None) -> dict[str, Any]:
        name, sqs = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sqs")
        url = _queue_url(sqs, name)
        live = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        # An empty value removes the setting.
        extras = {extra: "" for extra in QUEUE_EXTRAS if live.get(extra)}
        sqs.set_queue_attributes(QueueUrl=url, Attributes={**_queue_attributes(spec), **extras})
        sqs.tag_queue(QueueUrl=url, Tags=s3.marker_tags(ident, stack))
        return self._attributes(instance, sqs, name, url)

    @staticmethod
    def _attributes(instance: SharedInstance, sqs: BaseClient, name: str, url: str) -> dict[str, Any]:
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return {**location(instance), "queue": name, "queueUrl": url, "queueArn": arn, "configInSync": True}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        s3.aws_client(instance, "sqs").delete_queue(QueueUrl=observed.attributes["queueUrl"])


# --- SNS topic ----------------------------------------------------------------


class TopicSpec(_Spec):
    """Params of a `topic`. FIFO is fixed at creation; the display name changes in place."""

    fifo: bool = False
    display_name: str = Field(default="", max_length=100, alias="displayName")
    content_based_deduplication: bool = Field(default=False, alias="contentBasedDeduplication")


def _topic_attributes(spec: TopicSpec) -> dict[str, str]:
    attributes = {"DisplayName": spec.display_name}
    if spec.fifo:
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
    return attributes


class Topic(_AwsKind):
    """An SNS topic, standard or FIFO, tagged with the ownership marker."""

    kind = "topic"
    Spec = TopicSpec
    create_only = frozenset({"fifo"})
    attributes = ("host", "port", "region", "topic", "topicArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return fifo_capable_name(name, owner, service="SNS topic", limit=256, naming=naming)

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, TopicSpec)
        return fifo_rules(name, spec.fifo, spec.content_based_deduplication, "topic")

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sns")
        # SNS has no lookup by name; the ARN is determined by region, account and name.
        arn = f"arn:aws:sns:{s3.region_of(instance)}:{account_id(instance)}:{name}"
        try:
            live = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
        except s3.boto_errors.ClientError as err:
            if missing(err, "NotFound", "NotFoundException"):
                return None
            raise
        params = {"fifo": live.get("FifoTopic") == "true", "display_name": live.get("DisplayName", ""),
                  "content_based_deduplication": live.get("ContentBasedDeduplication") == "true"}
        tags = s3.tag_dict(sns.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        return Observed(owner=s3.tags_owner(tags), workspace=s3.tags_workspace(tags), params=params,
                        attributes={**location(instance), "topic": name, "topicArn": arn})

    def make(self, instance: SharedInstance, ident: Identity, spec: TopicSpec, stack: str | None) -> dict[str, Any] | None:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sns")
        attributes = {**_topic_attributes(spec), **({"FifoTopic": "true"} if spec.fifo else {})}
        marker = s3.marker_tags(ident, stack)
        arn = sns.create_topic(Name=name, Attributes=attributes, Tags=s3.tag_list(marker))["TopicArn"]
        # CreateTopic is idempotent: an existing topic must already be ours.
        tags = s3.tag_dict(sns.list_tags_for_resource(ResourceArn=arn).get("Tags", []))
        self.claimed(ident, tags)
        # Attributes and tags went in with the create; a topic another run made needs re-marking.
        return {**location(instance), "topic": name, "topicArn": arn} if tags == marker else None

    def converge(self, instance: SharedInstance, ident: Identity, spec: TopicSpec, stack: str | None) -> dict[str, Any]:
        name, sns = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "sns")
        arn = f"arn:aws:sns:{s3.region_of(instance)}:{account_id(instance)}:{name}"
        live = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
        for attribute, value in _topic_attributes(spec).items():
            if live.get(attribute, "") != value:
                sns.set_topic_attributes(TopicArn=arn, AttributeName=attribute, AttributeValue=value)
        sns.tag_resource(ResourceArn=arn, Tags=s3.tag_list(s3.marker_tags(ident, stack)))
        return {**location(instance), "topic": name, "topicArn": arn}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        s3.aws_client(instance, "sns").delete_topic(TopicArn=observed.attributes["topicArn"])


# --- Kinesis stream -----------------------------------------------------------


class StreamSpec(_Spec):
    """Params of a `stream` (provisioned mode); both change in place."""

    shard_count: int = Field(default=1, ge=1, le=500, alias="shardCount")
    retention_hours: int = Field(default=24, ge=24, le=8760, alias="retentionHours")


def _stream_summary(kinesis: BaseClient, name: str) -> dict[str, Any] | None:
    try:
        summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    except s3.boto_errors.ClientError as err:
        if missing(err, "ResourceNotFoundException"):
            return None
        raise
    return None if summary.get("StreamStatus") == "DELETING" else summary


def _on_demand(summary: dict[str, Any]) -> bool:
    return (summary.get("StreamModeDetails") or {}).get("StreamMode") == "ON_DEMAND"


class Stream(_AwsKind):
    """A provisioned Kinesis data stream tagged with the ownership marker."""

    kind = "stream"
    Spec = StreamSpec
    attributes = ("host", "port", "region", "stream", "streamArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return plain_name(name, owner, service="Kinesis stream", length=(1, 128), naming=naming)

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "kinesis")
        summary = _stream_summary(kinesis, name)
        if summary is None:
            return None
        tags = s3.tag_dict(kinesis.list_tags_for_stream(StreamName=name).get("Tags", []))
        # Switched to on-demand out of band, it has no fixed shard count: none, which the next up sets again.
        shards = None if _on_demand(summary) else summary.get("OpenShardCount")
        return Observed(
            owner=s3.tags_owner(tags),
            workspace=s3.tags_workspace(tags),
            params={"shard_count": shards, "retention_hours": summary.get("RetentionPeriodHours")},
            attributes={**location(instance), "stream": name, "streamArn": summary["StreamARN"]},
        )

    def _conflict(self, verb: str, ident: Identity, observed: Observed) -> Conflict:
        conflict = super()._conflict(verb, ident, observed)
        if verb != "create" or observed.owner is not None:
            return conflict
        # moto ignores CreateStream's tags and converge adds them after: a create cut between the two
        # leaves an untagged stream, which devstack must not take for its own (one made by hand looks the same).
        name, instance = self.engine_name(ident.name, ident.owner, naming=ident.naming), self._instances[ident.instance]
        if s3.aws_client(instance, "kinesis").list_tags_for_stream(StreamName=name).get("Tags"):
            return conflict
        return Conflict(verb, conflict.what, conflict.cause,
                        s3.cut_short_hint("untagged", instance, f"kinesis delete-stream --stream-name {name}"))

    def make(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str | None) -> None:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "kinesis")
        try:
            kinesis.create_stream(StreamName=name, ShardCount=spec.shard_count,
                                  StreamModeDetails={"StreamMode": "PROVISIONED"}, Tags=s3.marker_tags(ident, stack))
        except s3.boto_errors.ClientError as err:
            if not missing(err, "ResourceInUseException"):
                raise
            self.made_meanwhile(instance, ident, err)
        self._wait_active(instance, kinesis, name)

    def converge(self, instance: SharedInstance, ident: Identity, spec: StreamSpec, stack: str | None) -> dict[str, Any]:
        name, kinesis = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "kinesis")
        # Tags first: some servers (moto) ignore the Tags of CreateStream.
        kinesis.add_tags_to_stream(StreamName=name, Tags=s3.marker_tags(ident, stack))
        summary = _stream_summary(kinesis, name) or {}
        if _on_demand(summary):  # the shard count of an on-demand stream cannot be set
            kinesis.update_stream_mode(StreamARN=summary["StreamARN"], StreamModeDetails={"StreamMode": "PROVISIONED"})
            self._wait_active(instance, kinesis, name)
            summary = _stream_summary(kinesis, name) or {}
        if summary.get("OpenShardCount") != spec.shard_count:
            kinesis.update_shard_count(StreamName=name, TargetShardCount=spec.shard_count, ScalingType="UNIFORM_SCALING")
            self._wait_active(instance, kinesis, name)
        retention = summary.get("RetentionPeriodHours", 24)
        if retention < spec.retention_hours:
            kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=spec.retention_hours)
        elif retention > spec.retention_hours:
            kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=spec.retention_hours)
        return {**location(instance), "stream": name, "streamArn": summary.get("StreamARN")}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        name = observed.attributes["stream"]
        s3.aws_client(instance, "kinesis").delete_stream(StreamName=name, EnforceConsumerDeletion=True)

    @staticmethod
    def _wait_active(instance: SharedInstance, kinesis: BaseClient, name: str) -> None:
        wait_until(lambda: (_stream_summary(kinesis, name) or {}).get("StreamStatus") == "ACTIVE",
                   f"Kinesis stream {name!r}", instance)


# --- DynamoDB table -----------------------------------------------------------


class KeySpec(_Spec):
    """One key attribute: `{name: id, type: S}`, or just `id` (a string key)."""

    name: str = Field(min_length=1, max_length=255)
    type: Literal["S", "N", "B"] = "S"

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class TableSpec(_Spec):
    """Params of a `table`. The key schema is fixed at creation; billing, throughput and TTL change in place."""

    hash_key: KeySpec = Field(alias="hashKey")
    range_key: KeySpec | None = Field(default=None, alias="rangeKey")
    billing_mode: Literal["PAY_PER_REQUEST", "PROVISIONED"] = Field(default="PAY_PER_REQUEST", alias="billingMode")
    read_capacity: int | None = Field(default=None, ge=1, alias="readCapacity")
    write_capacity: int | None = Field(default=None, ge=1, alias="writeCapacity")
    ttl_attribute: str | None = Field(default=None, min_length=1, max_length=255, alias="ttlAttribute")


def table_tags(ddb: BaseClient, arn: str) -> dict[str, str]:
    """Every tag of a table, a page at a time (10 on moto). moto's TagResource adds a key again instead of
    replacing its value (the last one is live) and then pages by key, round and round: stop at a token seen."""
    tags: dict[str, str] = {}
    token: str | None = None
    seen: set[str] = set()
    while True:
        page = ddb.list_tags_of_resource(ResourceArn=arn, **({"NextToken": token} if token else {}))
        tags.update(s3.tag_dict(page.get("Tags", [])))
        token = page.get("NextToken")
        if not token or token in seen:
            return tags
        seen.add(token)


def _describe_table(ddb: BaseClient, name: str) -> dict[str, Any] | None:
    try:
        table = ddb.describe_table(TableName=name)["Table"]
    except s3.boto_errors.ClientError as err:
        if missing(err, "ResourceNotFoundException"):
            return None
        raise
    return None if table.get("TableStatus") == "DELETING" else table


def _throughput(spec: TableSpec) -> dict[str, int | None]:
    return {"ReadCapacityUnits": spec.read_capacity, "WriteCapacityUnits": spec.write_capacity}


def _table_params(table: dict[str, Any], ttl: dict[str, Any]) -> dict[str, Any]:
    """The live table in the shape of TableSpec.model_dump()."""
    types = {d["AttributeName"]: d["AttributeType"] for d in table.get("AttributeDefinitions", [])}
    keys = {k["KeyType"]: k["AttributeName"] for k in table.get("KeySchema", [])}
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
    throughput = (table.get("ProvisionedThroughput") or {}) if billing == "PROVISIONED" else {}
    return {
        "hash_key": {"name": keys["HASH"], "type": types.get(keys["HASH"], "S")},
        "range_key": {"name": keys["RANGE"], "type": types.get(keys["RANGE"], "S")} if "RANGE" in keys else None,
        "billing_mode": billing,
        "read_capacity": throughput.get("ReadCapacityUnits"),
        "write_capacity": throughput.get("WriteCapacityUnits"),
        "ttl_attribute": ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") else None,
    }


class Table(_AwsKind):
    """A DynamoDB table tagged with the ownership marker."""

    kind = "table"
    Spec = TableSpec
    create_only = frozenset({"hash_key", "range_key"})
    attributes = ("host", "port", "region", "table", "tableArn")

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        return plain_name(name, owner, service="DynamoDB table", length=(3, 255), naming=naming)

    def spec_rules(self, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        assert isinstance(spec, TableSpec)
        provisioned = spec.billing_mode == "PROVISIONED"
        rules = []
        for field, value in (("readCapacity", spec.read_capacity), ("writeCapacity", spec.write_capacity)):
            if provisioned and value is None:
                rules.append((f"params.{field}", "is required with billingMode: PROVISIONED"))
            if not provisioned and value is not None:
                rules.append((f"params.{field}", "applies only with billingMode: PROVISIONED"))
        if spec.range_key and spec.range_key.name == spec.hash_key.name:
            rules.append(("params.rangeKey", "must differ from hashKey"))
        return rules

    @vanished_is_none
    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "dynamodb")
        table = _describe_table(ddb, name)
        if table is None:
            return None
        ttl = ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
        tags = table_tags(ddb, table["TableArn"])
        return Observed(owner=s3.tags_owner(tags), workspace=s3.tags_workspace(tags), params=_table_params(table, ttl),
                        attributes={**location(instance), "table": name, "tableArn": table["TableArn"]})

    def make(self, instance: SharedInstance, ident: Identity, spec: TableSpec, stack: str | None) -> None:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "dynamodb")
        keys = [(spec.hash_key, "HASH")] + ([(spec.range_key, "RANGE")] if spec.range_key else [])
        args: dict[str, Any] = {
            "TableName": name,
            "KeySchema": [{"AttributeName": key.name, "KeyType": role} for key, role in keys],
            "AttributeDefinitions": [{"AttributeName": key.name, "AttributeType": key.type} for key, _ in keys],
            "BillingMode": spec.billing_mode,
            "Tags": s3.tag_list(s3.marker_tags(ident, stack)),
        }
        if spec.billing_mode == "PROVISIONED":
            args["ProvisionedThroughput"] = _throughput(spec)
        try:
            ddb.create_table(**args)
        except s3.boto_errors.ClientError as err:
            if not missing(err, "ResourceInUseException"):
                raise
            self.made_meanwhile(instance, ident, err)
        self._wait_active(instance, ddb, name)

    def converge(self, instance: SharedInstance, ident: Identity, spec: TableSpec, stack: str | None) -> dict[str, Any]:
        name, ddb = self.engine_name(ident.name, ident.owner, naming=ident.naming), s3.aws_client(instance, "dynamodb")
        table = _describe_table(ddb, name) or {}
        live = _table_params(table, ddb.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {}))
        self._converge_billing(instance, ddb, name, spec, live)
        self._converge_ttl(ddb, name, spec.ttl_attribute, live["ttl_attribute"])
        marker = s3.marker_tags(ident, stack)
        if not marker.items() <= table_tags(ddb, table["TableArn"]).items():
            # Untagged first: moto would keep the old values beside the new ones.
            ddb.untag_resource(ResourceArn=table["TableArn"], TagKeys=sorted(marker))
            ddb.tag_resource(ResourceArn=table["TableArn"], Tags=s3.tag_list(marker))
        return {**location(instance), "table": name, "tableArn": table["TableArn"]}

    def remove(self, instance: SharedInstance, ident: Identity, observed: Observed) -> None:
        s3.aws_client(instance, "dynamodb").delete_table(TableName=observed.attributes["table"])

    # --- steps -----------------------------------------------------------

    def _converge_billing(
        self, instance: SharedInstance, ddb: BaseClient, name: str, spec: TableSpec, live: dict[str, Any]
    ) -> None:
        wanted = (spec.billing_mode, spec.read_capacity, spec.write_capacity)
        if wanted == (live["billing_mode"], live["read_capacity"], live["write_capacity"]):
            return
        args: dict[str, Any] = {"TableName": name, "BillingMode": spec.billing_mode}
        if spec.billing_mode == "PROVISIONED":
            args["ProvisionedThroughput"] = _throughput(spec)
        ddb.update_table(**args)
        self._wait_active(instance, ddb, name)

    @staticmethod
    def _converge_ttl(ddb: BaseClient, name: str, wanted: str | None, live: str | None) -> None:
        """DynamoDB enables TTL on one attribute at a time: disable the old one before enabling another."""
        if live and live != wanted:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": False, "AttributeName": live})
        if wanted and wanted != live:
            ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": wanted})

    @staticmethod
    def _wait_active(instance: SharedInstance, ddb: BaseClient, name: str) -> None:
        wait_until(lambda: (_describe_table(ddb, name) or {}).get("TableStatus") == "ACTIVE",
                   f"DynamoDB table {name!r}", instance)


#: The kinds this engine's provider serves: the single source of kinds for validation.
KINDS: dict[str, type[KindProvider]] = {
    "bucket": LocalstackBucket,
    "queue": Queue,
    "topic": Topic,
    "stream": Stream,
    "table": Table,
}
