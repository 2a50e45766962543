"""Kafka names: a project's topics, principals and consumer groups, and the prefix that makes them its own."""

from __future__ import annotations

import re

from providers import naming as naming_rules
from providers.errors import InvalidSpec
from providers.identity import PREFIXED

MAX_TOPIC = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
# No '.' in a project name: '.' separates the owner from the rest of a name.
_OWNER_CHARS = re.compile(r"[a-zA-Z0-9_-]+")


def kafka_name(name: str, owner: str, *, naming: int) -> str:
    """SANITIZED: the project's own name (`project_topic`) for the default declaration, else the name,
    sanitized. PREFIXED: `<owner>` for the default declaration, else `<owner>.<name>`; InvalidSpec names
    the broken rule."""
    if naming != PREFIXED:
        return project_topic(owner) if name == owner else naming_rules.kafka(name)
    if not _OWNER_CHARS.fullmatch(owner):
        raise InvalidSpec("map", f"owner {owner!r}", "Kafka project names use letters, digits, '-' and '_' "
                          "(no '.': it separates the project from the rest of a topic name)")
    mapped = owner if name == owner else f"{owner}.{name}"
    if not _TOPIC_CHARS.fullmatch(name) or name in (".", ".."):
        raise InvalidSpec("map", f"name {name!r}", "Kafka names use letters, digits, '.', '_' and '-' only")
    if len(mapped) > MAX_TOPIC:
        raise InvalidSpec("map", repr(mapped), f"Kafka names (topics, principals, groups) are at most {MAX_TOPIC} characters")
    return mapped


def project_topic(owner: str) -> str:
    """The project's own name in Kafka (its default topic and principal): no '.', which would put one
    project's names inside another's prefix (`acme.shop` in `acme.`)."""
    return naming_rules.kafka_project(owner)


def owner_prefix(owner: str) -> str:
    """The prefix of every topic and consumer group a project owns (besides the bare `<owner>`)."""
    return f"{project_topic(owner)}."


def within_prefix(name: str, owner: str) -> bool:
    """Whether the project's prefixed grants (`<owner>` and `<owner>.*`) reach topic or group `name`."""
    return name == project_topic(owner) or name.startswith(owner_prefix(owner))
