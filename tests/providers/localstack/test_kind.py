"""What the LocalStack kinds share (providers.localstack.kind): a create that finds its resource made meanwhile."""

from __future__ import annotations

import pytest

from providers.localstack.queue import Queue
from providers.localstack.topic import Topic
from tests.providers.localstack.helpers import QueueOutOfBand, TopicOutOfBand, checked


@pytest.mark.parametrize("kind, oob", [(Queue, QueueOutOfBand()), (Topic, TopicOutOfBand())], ids=["queue", "topic"])
def test_create_that_finds_ours_from_another_run_re_marks_it(kind, oob, provider_for, owner, monkeypatch):
    # The create call applies attributes and tags in one go, so a fresh resource is not
    # converged again; one that appeared after observe (made by another run) still is.
    provider, name = provider_for(kind), f"{owner}-jobs"
    try:
        provider.create(checked(provider, "jobs", owner, {}, stack="other"))
        monkeypatch.setattr(provider, "observe", lambda *_: None)  # as if it appeared just after observe
        outs = provider.create(checked(provider, "jobs", owner, {})).outs
        assert all(outs[k] not in (None, "") for k in kind.attributes)
        assert (oob.tags(name)["devstack-owner"], oob.tags(name)["devstack-stack"]) == (owner, "test")
    finally:
        oob.cleanup(name)
