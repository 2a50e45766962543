"""SNS topics beyond the contract."""

from __future__ import annotations

from providers.localstack.topic import Topic
from tests.providers.localstack.helpers import TopicOutOfBand, checked


def test_fifo_topic_is_created_as_fifo(provider_for, owner):
    topic, oob = provider_for(Topic), TopicOutOfBand()
    name = f"{owner}-events.fifo"
    try:
        outs = topic.create(checked(topic, "events.fifo", owner, {"fifo": True})).outs
        assert outs["topicArn"].endswith(":" + name)
        assert oob.sns.get_topic_attributes(TopicArn=outs["topicArn"])["Attributes"]["FifoTopic"] == "true"
    finally:
        oob.cleanup(name)
