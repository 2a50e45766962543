"""Out-of-band access to each LocalStack kind's resources, and provider inputs as check() makes them."""

from __future__ import annotations

from providers.base import KindProvider
from tests.providers.conftest import props
from tests.providers.s3.contract import REGION, OutOfBand, aws, gone


class QueueOutOfBand(OutOfBand):
    sqs = aws("sqs")

    def url(self, name):
        return self.sqs.get_queue_url(QueueName=name)["QueueUrl"]

    def exists(self, name):
        return not gone(lambda: self.url(name), "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")

    def tags(self, name):
        return self.sqs.list_queue_tags(QueueUrl=self.url(name)).get("Tags", {})

    def attributes(self, name):
        return self.sqs.get_queue_attributes(QueueUrl=self.url(name), AttributeNames=["All"])["Attributes"]

    def live(self, name):
        live = self.attributes(name)
        return {"visibility_timeout": int(live["VisibilityTimeout"]), "delay_seconds": int(live["DelaySeconds"])}

    def tamper(self, name):
        self.sqs.set_queue_attributes(QueueUrl=self.url(name), Attributes={"VisibilityTimeout": "99"})

    def destroy(self, name):
        self.sqs.delete_queue(QueueUrl=self.url(name))

    def foreign(self, name):
        self.sqs.create_queue(QueueName=name)

    def fill(self, name):
        self.sqs.send_message(QueueUrl=self.url(name), MessageBody="kept")

    def filled(self, name):
        return int(self.attributes(name)["ApproximateNumberOfMessages"]) == 1


class TopicOutOfBand(OutOfBand):
    sns = aws("sns")

    def arn(self, name):
        account = aws("sts").get_caller_identity()["Account"]
        return f"arn:aws:sns:{REGION}:{account}:{name}"

    def exists(self, name):
        return not gone(lambda: self.sns.get_topic_attributes(TopicArn=self.arn(name)), "NotFound")

    def tags(self, name):
        return {t["Key"]: t["Value"] for t in self.sns.list_tags_for_resource(ResourceArn=self.arn(name))["Tags"]}

    def live(self, name):
        return {"display_name": self.sns.get_topic_attributes(TopicArn=self.arn(name))["Attributes"].get("DisplayName", "")}

    def tamper(self, name):
        self.sns.set_topic_attributes(TopicArn=self.arn(name), AttributeName="DisplayName", AttributeValue="tampered")

    def destroy(self, name):
        self.sns.delete_topic(TopicArn=self.arn(name))

    def foreign(self, name):
        self.sns.create_topic(Name=name)

    def fill(self, name):
        queue = aws("sqs").create_queue(QueueName=f"{name}-subscriber")["QueueUrl"]
        arn = aws("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.sns.subscribe(TopicArn=self.arn(name), Protocol="sqs", Endpoint=arn)

    def filled(self, name):
        return len(self.sns.list_subscriptions_by_topic(TopicArn=self.arn(name))["Subscriptions"]) == 1

    def cleanup(self, name):
        super().cleanup(name)
        QueueOutOfBand().cleanup(f"{name}-subscriber")


class StreamOutOfBand(OutOfBand):
    kinesis = aws("kinesis")

    def exists(self, name):
        return not gone(lambda: self.kinesis.describe_stream_summary(StreamName=name), "ResourceNotFoundException")

    def tags(self, name):
        return {t["Key"]: t["Value"] for t in self.kinesis.list_tags_for_stream(StreamName=name)["Tags"]}

    def live(self, name):
        summary = self.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        return {"shard_count": summary["OpenShardCount"], "retention_hours": summary["RetentionPeriodHours"]}

    def tamper(self, name):
        self.kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=72)

    def destroy(self, name):
        self.kinesis.delete_stream(StreamName=name, EnforceConsumerDeletion=True)

    def foreign(self, name):
        self.kinesis.create_stream(StreamName=name, ShardCount=1)

    def fill(self, name):
        self.kinesis.put_record(StreamName=name, Data=b"kept", PartitionKey="k")

    def filled(self, name):
        shard = self.kinesis.list_shards(StreamName=name)["Shards"][0]["ShardId"]
        iterator = self.kinesis.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        return len(self.kinesis.get_records(ShardIterator=iterator["ShardIterator"])["Records"]) == 1


class TableOutOfBand(OutOfBand):
    ddb = aws("dynamodb")

    def exists(self, name):
        return not gone(lambda: self.ddb.describe_table(TableName=name), "ResourceNotFoundException")

    def tags(self, name):
        arn = self.ddb.describe_table(TableName=name)["Table"]["TableArn"]
        return {t["Key"]: t["Value"] for t in self.ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]}

    def live(self, name):
        table = self.ddb.describe_table(TableName=name)["Table"]
        ttl = self.ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        return {"billing_mode": table["BillingModeSummary"]["BillingMode"],
                "read_capacity": table["ProvisionedThroughput"]["ReadCapacityUnits"],
                "ttl_attribute": ttl.get("AttributeName") if ttl["TimeToLiveStatus"] == "ENABLED" else None}

    def tamper(self, name):
        self.ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "tampered"})

    def destroy(self, name):
        self.ddb.delete_table(TableName=name)

    def foreign(self, name):
        self.ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")

    def fill(self, name):
        self.ddb.put_item(TableName=name, Item={"id": {"S": "kept"}})

    def filled(self, name):
        return "Item" in self.ddb.get_item(TableName=name, Key={"id": {"S": "kept"}})


def checked(provider: KindProvider, name: str, owner: str, params: dict, **policy) -> dict:
    raw = props(provider.engine, "aws", provider.kind, name, owner, params, **policy)
    result = provider.check({}, raw)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs
