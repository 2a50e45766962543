"""NATS names and subjects: how a declaration maps to a stream, consumer or bucket name, and the
subject rules that keep each project's streams under its own prefix `<owner>.>`."""

from __future__ import annotations

import re

from pulumi.dynamic import CheckFailure

from providers import naming as naming_rules
from providers.errors import InvalidSpec

#: The engine's name in ids and messages.
ENGINE_NAME = "nats"
#: The server refuses longer stream names ("maximum allowed is 255"); KV adds "KV_".
MAX_NAME = 255
KV_STREAM_PREFIX = "KV_"
# Lowercase only: JetStream stores a stream under a directory of its name, and
# on a case-insensitive filesystem "Shop" and "shop" would share one.
_NAME = re.compile(r"[a-z0-9_-]+")
_NAME_RULE = (
    "NATS names (streams, consumers, KV buckets) use lowercase letters, digits, '-' and '_' only: "
    "no '.', '*', '>', spaces or path separators"
)


def nats_name(name: str, owner: str, limit: int = MAX_NAME) -> str:
    """`<owner>` for the default declaration, else `<owner>_<name>`; InvalidSpec names the broken rule."""
    mapped = owner if name == owner else f"{owner}_{name}"
    for part, value in (("owner", owner), ("name", name)):
        if not _NAME.fullmatch(value):
            raise InvalidSpec("map", f"{part} {value!r}", _NAME_RULE)
    if len(mapped) > limit:
        raise InvalidSpec("map", repr(mapped), f"NATS names here are at most {limit} characters")
    return mapped


def subject_token(owner: str) -> str:
    """The project's name as one subject token: no '.', which would put its subjects inside another
    project's (`acme.shop.>` in `acme.>`)."""
    return naming_rules.nats(owner)


def owner_subjects(owner: str) -> str:
    """The subject space a project owns: everything under `<owner>.`."""
    return f"{subject_token(owner)}.>"


def default_subjects(name: str, owner: str) -> list[str]:
    """`<owner>.>` for the default stream; `<owner>.<name>.>` for others, so named streams never overlap
    (the default one overlaps every other: validation asks for subjects of its own then, see Stream.clash)."""
    return [owner_subjects(owner)] if name == owner else [f"{subject_token(owner)}.{name}.>"]


def subject_error(subject: str) -> str | None:
    """Why `subject` is not a valid NATS subject (filter), or None."""
    if not subject or any(c.isspace() for c in subject):
        return "a subject is non-empty and has no whitespace"
    tokens = subject.split(".")
    if any(not t for t in tokens):
        return "a subject has no empty tokens (no leading, trailing or double '.')"
    if any(("*" in t or ">" in t) and t not in ("*", ">") for t in tokens):
        return "'*' and '>' are whole tokens only"
    if ">" in tokens[:-1]:
        return "'>' may only be the last token"
    return None


def subject_within(subject: str, pattern: str) -> bool:
    """True when every subject `subject` matches is also matched by `pattern`."""
    have, want = subject.split("."), pattern.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or have[i] == ">":
            return False
        if token != "*" and have[i] != token:
            return False
    return len(have) == len(want)


def filters_inside(filter_subject: str | None, subjects: list[str]) -> bool:
    """Whether a consumer filtering on `filter_subject` (None: everything) gets only what a stream
    on `subjects` holds."""
    return not filter_subject or any(subject_within(filter_subject, s) for s in subjects)


def subjects_overlap(one: str, other: str) -> bool:
    """True when some subject matches both filters (NATS refuses two streams that share one)."""
    mine, theirs = one.split("."), other.split(".")
    for a, b in zip(mine, theirs):
        if ">" in (a, b):
            return True
        if a != b and "*" not in (a, b):
            return False
    return len(mine) == len(theirs)


def subjects_failures(field: str, subjects: list[str], owner: str) -> list[CheckFailure]:
    """The tenant check: every subject must be valid and inside `<owner>.>`."""
    failures = []
    for subject in subjects:
        problem = subject_error(subject)
        if problem is None and not subject_within(subject, owner_subjects(owner)):
            problem = f"{subject!r} is outside the project's subjects {owner_subjects(owner)!r}"
        elif problem is not None:
            problem = f"{subject!r}: {problem}"
        if problem:
            failures.append(CheckFailure(field, problem))
    return failures
