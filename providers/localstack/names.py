"""Engine names of the LocalStack kinds: each service's charset and length rules (providers.naming), a FIFO
queue or topic keeping its `.fifo` suffix last."""

from __future__ import annotations

import re

from providers import naming as naming_rules
from providers.errors import InvalidSpec
from providers.identity import PREFIXED
from providers.s3.names import name_rule, prefixed, prefixed_name

FIFO = ".fifo"
_SQS_SNS_CHARS = re.compile(r"[A-Za-z0-9_-]+")
_KINESIS_DYNAMODB_CHARS = re.compile(r"[A-Za-z0-9_.-]+")
_IAM_USER_CHARS = re.compile(r"[A-Za-z0-9_.-]+")


def fifo_capable_name(name: str, owner: str, *, service: str, limit: int, naming: int) -> str:
    """SQS/SNS name, sanitized (a final `.fifo` kept) or owner-prefixed (PREFIXED: a declaration named
    `<x>.fifo` maps to `<owner>-<x>.fifo`)."""
    if naming != PREFIXED:
        return naming_rules.sqs_sns(name, limit=limit)
    fifo = name.endswith(FIFO)
    base = prefixed(name[: -len(FIFO)] if fifo else name, owner)
    mapped = base + (FIFO if fifo else "")
    if not 1 <= len(mapped) <= limit:
        rule = f"{service} names are 1-{limit} characters long, '.fifo' included ({mapped!r} has {len(mapped)})"
    elif not _SQS_SNS_CHARS.fullmatch(base):
        rule = f"{service} names use only letters, digits, '-' and '_', plus a final '.fifo' ({mapped!r} does not)"
    else:
        return mapped
    raise InvalidSpec("map", f"{service} name {mapped!r}", rule)


def plain_name(name: str, owner: str, *, service: str, length: tuple[int, int], naming: int) -> str:
    """Kinesis/DynamoDB name (letters, digits, '_', '-' and '.'): sanitized, or owner-prefixed (PREFIXED)."""
    if naming != PREFIXED:
        return naming_rules.kinesis_dynamodb(name, length=length)
    mapped = prefixed(name, owner)
    rule = name_rule(mapped, service=service, length=length, charset=_KINESIS_DYNAMODB_CHARS,
                     allowed="letters, digits, '_', '-' and '.'")
    if rule:
        raise InvalidSpec("map", f"{service} name {mapped!r}", rule)
    return mapped


def fifo_rules(name: str, fifo: bool, deduplication: bool, what: str) -> list[tuple[str, str]]:
    """A FIFO queue or topic and its name agree: FIFO exactly when the name ends in `.fifo`."""
    if fifo and not name.endswith(FIFO):
        return [("params.fifo", f"a FIFO {what}'s name must end in '.fifo' (name the declaration '{name}.fifo')")]
    if not fifo and name.endswith(FIFO):
        return [("params.fifo", f"a {what} named '*.fifo' is a FIFO {what}: set fifo: true")]
    if deduplication and not fifo:
        return [("params.contentBasedDeduplication", f"only a FIFO {what} deduplicates by content")]
    return []


def iam_user_name(name: str, owner: str, *, naming: int) -> str:
    """The IAM user (one per access_key): the name sanitized, or owner-prefixed (PREFIXED)."""
    if naming != PREFIXED:
        return naming_rules.kinesis_dynamodb(name, length=(1, 64))
    return prefixed_name(name, owner, service="IAM user", length=(1, 64), charset=_IAM_USER_CHARS,
                         allowed="letters, digits, '_', '-' and '.'")
