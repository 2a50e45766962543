"""SQS queues: FIFO, drift set outside devstack, and one dropped while looked at."""

from __future__ import annotations

import json


from providers.lifecycle import is_stale
from providers.localstack.queue import Queue
from tests.providers.localstack.helpers import QueueOutOfBand, checked


def test_fifo_queue_keeps_its_suffix_and_updates_deduplication_in_place(provider_for, owner):
    queue, oob = provider_for(Queue), QueueOutOfBand()
    name = f"{owner}-jobs.fifo"
    try:
        outs = queue.create(checked(queue, "jobs.fifo", owner, {"fifo": True})).outs
        assert outs["queue"] == name and outs["queueUrl"].endswith("/" + name)
        assert oob.attributes(name)["FifoQueue"] == "true"
        changed = checked(queue, "jobs.fifo", owner, {"fifo": True, "contentBasedDeduplication": True})
        assert queue.diff("id", outs, changed).replaces == []
        queue.update("id", outs, changed)
        assert oob.attributes(name)["ContentBasedDeduplication"] == "true"
    finally:
        oob.cleanup(name)


def test_a_dead_letter_queue_or_policy_set_outside_is_drift_and_removed(provider_for, owner):
    """A RedrivePolicy moves the queue's messages to any queue, another project's too."""
    queue, oob = provider_for(Queue), QueueOutOfBand()
    name, elsewhere = f"{owner}-jobs", f"{owner}x-dead"
    try:
        inputs = checked(queue, "jobs", owner, {})
        outs = queue.create(inputs).outs
        assert queue.read("id", outs).outs["configInSync"] is True
        target = oob.sqs.create_queue(QueueName=elsewhere)["QueueUrl"]
        arn = oob.sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        extras = {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1}),
                  "Policy": json.dumps({"Version": "2012-10-17", "Statement": [
                      {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": outs["queueArn"]}]})}
        for extra, value in extras.items():
            oob.sqs.set_queue_attributes(QueueUrl=oob.url(name), Attributes={extra: value})
            refreshed = queue.read("id", outs).outs
            assert refreshed["configInSync"] is False, extra
            assert queue.diff("id", refreshed, inputs).changes is True
            queue.update("id", refreshed, inputs)
            assert extra not in oob.attributes(name)
            assert queue.read("id", outs).outs["configInSync"] is True
    finally:
        oob.cleanup(name)
        oob.cleanup(elsewhere)


def test_a_queue_another_run_drops_while_it_is_looked_at_is_gone_not_a_traceback(provider_for, owner, monkeypatch):
    """Two workspaces purging one project's queue at once: one finds it and loses it between two calls."""
    from providers.localstack import queue as localstack

    queue, oob = provider_for(Queue), QueueOutOfBand()
    name = f"{owner}-jobs"
    try:
        outs = queue.create(checked(queue, "jobs", owner, {})).outs
        real = localstack._queue_url

        def found_then_dropped(sqs, wanted):
            url = real(sqs, wanted)
            if url:
                oob.sqs.delete_queue(QueueUrl=url)  # the other run's purge, right after this look
            return url

        monkeypatch.setattr(localstack, "_queue_url", found_then_dropped)
        assert is_stale(queue.read("id", outs).outs)  # gone, as a refresh a moment later sees it
        monkeypatch.undo()
        outs = queue.create(checked(queue, "jobs", owner, {})).outs
        real_remove = Queue.remove

        def dropped_first(self, instance, ident, observed):
            oob.sqs.delete_queue(QueueUrl=observed.attributes["queueUrl"])
            real_remove(self, instance, ident, observed)

        monkeypatch.setattr(Queue, "remove", dropped_first)
        queue.delete("id", {**outs, "purge": True})  # nothing left to drop: done, no error
        assert not oob.exists(name)
    finally:
        oob.cleanup(name)
