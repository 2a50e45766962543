"""The KindContract (tests/providers/s3/contract.py) over every LocalStack kind but the access key."""

from __future__ import annotations

import pytest

from providers.localstack.bucket import LocalstackBucket
from providers.localstack.queue import Queue
from providers.localstack.stream import Stream
from providers.localstack.table import Table
from providers.localstack.topic import Topic
from tests.providers.localstack.helpers import QueueOutOfBand, StreamOutOfBand, TableOutOfBand, TopicOutOfBand
from tests.providers.s3.contract import BucketOutOfBand, Case, KindContract

LOCALSTACK_CASES = [
    Case(LocalstackBucket, "aws", BucketOutOfBand(),
         params={"versioning": True, "tags": {"team": "a"}},
         update={"versioning": False, "tags": {"team": "b"}},
         updated={"versioning": False, "tags": {"team": "b"}},
         tampered={"tags": {"team": "tampered"}},
         replace={"objectLock": True}, replaces=("params.object_lock",),
         bad=[({"versioning": "sometimes"}, "params.versioning"), ({"tags": {"managed-by": "me"}}, "params.tags"),
              ({"objectLock": True}, "params.versioning"), ({"color": "red"}, "params.color")]),
    Case(Queue, "aws", QueueOutOfBand(),
         params={"visibilityTimeout": 45},
         update={"visibilityTimeout": 60, "delaySeconds": 5},
         updated={"visibility_timeout": 60, "delay_seconds": 5},
         tampered={"visibility_timeout": 99},
         replace={"fifo": True}, replaces=("params.fifo",),
         bad=[({"visibilityTimeout": -1}, "params.visibilityTimeout"), ({"delaySeconds": 901}, "params.delaySeconds"),
              ({"fifo": True}, "params.fifo"), ({"contentBasedDeduplication": True}, "params.contentBasedDeduplication")]),
    Case(Topic, "aws", TopicOutOfBand(),
         params={"displayName": "Orders"},
         update={"displayName": "Orders v2"},
         updated={"display_name": "Orders v2"},
         tampered={"display_name": "tampered"},
         replace={"fifo": True}, replaces=("params.fifo",),
         bad=[({"displayName": "x" * 101}, "params.displayName"), ({"fifo": True}, "params.fifo")]),
    Case(Stream, "aws", StreamOutOfBand(),
         params={"shardCount": 1},
         update={"shardCount": 2, "retentionHours": 48},
         updated={"shard_count": 2, "retention_hours": 48},
         tampered={"retention_hours": 72},
         bad=[({"shardCount": 0}, "params.shardCount"), ({"retentionHours": 12}, "params.retentionHours")]),
    Case(Table, "aws", TableOutOfBand(),
         params={"hashKey": {"name": "id", "type": "S"}},
         update={"billingMode": "PROVISIONED", "readCapacity": 2, "writeCapacity": 3, "ttlAttribute": "expires"},
         updated={"billing_mode": "PROVISIONED", "read_capacity": 2, "ttl_attribute": "expires"},
         tampered={"ttl_attribute": "tampered"},
         replace={"hashKey": {"name": "pk", "type": "N"}}, replaces=("params.hash_key",),
         bad=[({}, "params.hashKey"), ({"hashKey": {"name": "id", "type": "X"}}, "params.hashKey.type"),
              ({"hashKey": "id", "billingMode": "PROVISIONED"}, "params.readCapacity"),
              ({"hashKey": "id", "readCapacity": 2}, "params.readCapacity"),
              ({"hashKey": "id", "rangeKey": "id"}, "params.rangeKey")]),
]


class TestLocalstackKinds(KindContract):
    @pytest.fixture(params=LOCALSTACK_CASES, ids=lambda case: case.id)
    def case(self, request) -> Case:
        return request.param
