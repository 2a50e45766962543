"""Fixtures of the Kafka provider tests: the admin client, the providers, and the cleanup of each test's owner."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialDeletion

from providers.kafka.acl import Acl
from providers.kafka.owners import read_markers, write_marker
from providers.kafka.topic import Topic
from tests.kafka_clients import TIMEOUT, settings
from tests.providers.kafka.helpers import everything, instance


@pytest.fixture
def kadmin(admin) -> AdminClient:
    return AdminClient(settings(admin["kafka"].user, admin["kafka"].password))


@pytest.fixture
def topic(configure):
    return configure(Topic())


@pytest.fixture
def acl(configure):
    return configure(Acl())


@pytest.fixture(autouse=True)
def cleanup(kadmin, configure, owner):
    """Drop the topics, ACLs, credentials and markers of this test's owner (and of `<owner>_b`)."""
    yield
    ours = lambda name: name == owner or name.startswith((f"{owner}.", f"{owner}_"))  # noqa: E731
    topics = [t for t in kadmin.list_topics(timeout=TIMEOUT).topics if ours(t)]
    for future in (kadmin.delete_topics(topics).values() if topics else []):
        future.result(timeout=TIMEOUT)
    principals = {b.principal for b in kadmin.describe_acls(everything()).result(timeout=TIMEOUT)
                  if ours(b.principal.removeprefix("User:"))}
    if principals:
        for future in kadmin.delete_acls([everything(p) for p in sorted(principals)]).values():
            future.result(timeout=TIMEOUT)
    users = [d.user for d in kadmin.describe_user_scram_credentials().result(timeout=TIMEOUT).values() if ours(d.user)]
    if users:
        deletions = [UserScramCredentialDeletion(u, ScramMechanism.SCRAM_SHA_512) for u in users]
        for future in kadmin.alter_user_scram_credentials(deletions).values():
            future.result(timeout=TIMEOUT)
    provider = configure(Topic())
    for key in read_markers(instance(provider), kadmin):
        if ours(key.split(":", 1)[1]):
            write_marker(instance(provider), key, None)
