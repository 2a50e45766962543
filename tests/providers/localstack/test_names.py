"""Engine names of the LocalStack kinds follow each service's rules; FIFO names and flags agree."""

from __future__ import annotations

import pytest

from providers.errors import InvalidSpec
from providers.identity import PREFIXED
from providers.localstack.queue import Queue
from providers.localstack.stream import Stream
from providers.localstack.table import Table
from providers.localstack.topic import Topic
from tests.providers.conftest import props


def test_fifo_flag_and_name_must_agree(provider_for, owner):
    queue, topic = provider_for(Queue), provider_for(Topic)
    for provider in (queue, topic):
        named_fifo = props("localstack", "aws", provider.kind, "jobs.fifo", owner, {})
        assert [f.property for f in provider.check({}, named_fifo).failures] == ["params.fifo"]
        flagged = props("localstack", "aws", provider.kind, "jobs", owner, {"fifo": True})
        failure = provider.check({}, flagged).failures[0]
        assert failure.property == "params.fifo" and "must end in '.fifo'" in failure.reason


@pytest.mark.parametrize("kind, name, rule", [
    pytest.param(Queue, "x" * 80, "1-80 characters", id="sqs-length"),
    pytest.param(Queue, "a.b", "letters, digits, '-' and '_'", id="sqs-dot"),
    pytest.param(Topic, "x" * 256, "1-256 characters", id="sns-length"),
    pytest.param(Topic, "a b", "letters, digits, '-' and '_'", id="sns-space"),
    pytest.param(Stream, "x" * 128, "1-128 characters", id="kinesis-length"),
    pytest.param(Stream, "a/b", "letters, digits, '_', '-' and '.'", id="kinesis-slash"),
    pytest.param(Table, "x" * 255, "3-255 characters", id="dynamodb-length"),
    pytest.param(Table, "a:b", "letters, digits, '_', '-' and '.'", id="dynamodb-colon"),
])
def test_engine_names_follow_each_service_rules(kind, name, rule, owner):
    with pytest.raises(InvalidSpec, match=rule.replace(".", r"\.").replace("(", r"\(")):
        kind.engine_name(name, owner, naming=PREFIXED)
    assert kind.engine_name("ok", owner, naming=PREFIXED) == f"{owner}-ok"
    assert kind.engine_name(owner, owner, naming=PREFIXED) == owner
