"""Helpers of the Kafka provider tests: the admin's view of topics, grants and markers, and the inputs of each kind."""

from __future__ import annotations

import json

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient, ConfigResource,
                                   ConfigSource, ResourcePatternType, ResourceType)

from providers.kafka.owners import read_markers
from tests.kafka_clients import TIMEOUT, settings
from tests.providers.conftest import props
from tests.waiting import eventually


def instance(provider):
    return provider._instances["kafka"]


def everything(principal: str | None = None) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def checked(provider, inputs: dict, olds: dict | None = None) -> dict:
    result = provider.check(olds or {}, inputs)
    assert result.failures == [], [(f.property, f.reason) for f in result.failures]
    return result.inputs


def failures(provider, inputs: dict, olds: dict | None = None) -> dict[str, str]:
    return {f.property: f.reason for f in provider.check(olds or {}, inputs).failures}


def describe(kadmin, name: str):
    try:
        return kadmin.describe_topics(TopicCollection([name]))[name].result(timeout=TIMEOUT)
    except KafkaException as err:
        if err.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise


def topic_configs(kadmin, name: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    (future,) = kadmin.describe_configs([resource]).values()
    return {k: e.value for k, e in future.result(timeout=TIMEOUT).items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def marker_of(provider, kadmin, key: str) -> dict | None:
    text = read_markers(instance(provider), kadmin).get(key)
    return json.loads(text) if text else None


def code(outcome) -> int | None:
    return outcome.code() if isinstance(outcome, KafkaError) else None


def topic_inputs(topic, owner: str, name: str = "orders", olds: dict | None = None, **params) -> dict:
    return checked(topic, props("kafka", "kafka", "topic", name, owner, params), olds)


def acl_inputs(acl, owner: str, olds: dict | None = None, credentials: str = "predictable", **params) -> dict:
    return checked(acl, props("kafka", "kafka", "acl", owner, owner, params, credentials=credentials), olds)


def can_log_in(user: str, password: str) -> bool:
    """True once the broker accepts the credential, False as soon as it rejects it."""
    errors: list[KafkaError] = []
    client = AdminClient({**settings(user, password), "error_cb": errors.append})

    def verdict() -> str | None:
        try:
            client.list_topics(timeout=0.5)
            return "accepted"
        except KafkaException:
            client.poll(0.1)  # serves error_cb
        if any(e.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED) for e in errors):
            return "rejected"
        return None

    return eventually(verdict, TIMEOUT, f"the broker to accept or reject {user!r}") == "accepted"


def tenant_admin(user: str, password: str) -> AdminClient:
    return AdminClient(settings(user, password))
