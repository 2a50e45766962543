"""Kinesis streams beyond the contract: on-demand mode and untagged streams."""

from __future__ import annotations

import pytest

from providers.errors import Conflict
from providers.localstack.stream import Stream
from tests.providers.localstack.helpers import StreamOutOfBand, checked
from tests.providers.s3.contract import AWS_ENDPOINT


def test_a_stream_switched_to_on_demand_is_drift_and_provisioned_again(provider_for, owner):
    """An on-demand stream has no fixed shard count, and UpdateShardCount refuses it."""
    stream, oob = provider_for(Stream), StreamOutOfBand()
    name = f"{owner}-clicks"
    try:
        inputs = checked(stream, "clicks", owner, {"shardCount": 2})
        outs = stream.create(inputs).outs
        arn = oob.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
        oob.kinesis.update_stream_mode(StreamARN=arn, StreamModeDetails={"StreamMode": "ON_DEMAND"})
        refreshed = stream.read("id", outs).outs
        assert stream.diff("id", refreshed, inputs).changes is True
        stream.update("id", refreshed, checked(stream, "clicks", owner, {"shardCount": 1}))
        summary = oob.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        assert (summary["StreamModeDetails"]["StreamMode"], summary["OpenShardCount"]) == ("PROVISIONED", 1)
    finally:
        oob.cleanup(name)


def test_an_untagged_stream_is_foreign_but_the_message_shows_the_way_out(provider_for, owner):
    """moto ignores CreateStream's tags: a create cut before they are added leaves an untagged stream, as one
    made by hand looks. Not taken for ours, but the error says how to get past it: not "choose another name"."""
    stream, oob = provider_for(Stream), StreamOutOfBand()
    name = f"{owner}-clicks"
    oob.foreign(name)
    try:
        with pytest.raises(Conflict, match="it is untagged, as a create cut short leaves it") as refused:
            stream.create(checked(stream, "clicks", owner, {}))
        assert (f"`aws --endpoint-url {AWS_ENDPOINT} kinesis delete-stream --stream-name {name}`"
                in str(refused.value))
        oob.kinesis.add_tags_to_stream(StreamName=name, Tags={"team": "payments"})  # someone's, plainly
        with pytest.raises(Conflict) as refused:
            stream.create(checked(stream, "clicks", owner, {}))
        assert "cut short" not in str(refused.value) and "choose another `name`" in str(refused.value)
        assert oob.tags(name) == {"team": "payments"}  # nothing was changed
    finally:
        oob.cleanup(name)
