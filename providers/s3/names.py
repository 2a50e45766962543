"""Engine names of the S3 kinds and of every MinIO and LocalStack kind: owner-prefixed (`<owner>-<name>`,
or `<owner>` alone when the declaration is named after its project), checked against the service's rules."""

from __future__ import annotations

import re

from providers import naming as naming_rules
from providers.errors import InvalidSpec
from providers.identity import PREFIXED

_BUCKET_CHARS = re.compile(r"[a-z0-9.-]+")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
#: A lifecycle rule's id begins with it: the rule's ownership marker (rules carry no tags).
RULE_PREFIX = "devstack:"
_RULE_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*")


def prefixed(name: str, owner: str) -> str:
    """`<owner>-<name>`, or `<owner>` alone for the declaration named after its project."""
    return owner if name == owner else f"{owner}-{name}"


def prefixed_name(name: str, owner: str, *, service: str, length: tuple[int, int], charset: re.Pattern[str],
                  allowed: str) -> str:
    """`prefixed(name, owner)` when it keeps `service`'s naming rules; InvalidSpec naming the broken one."""
    mapped = prefixed(name, owner)
    rule = name_rule(mapped, service=service, length=length, charset=charset, allowed=allowed)
    if rule:
        raise InvalidSpec("map", f"{service} name {mapped!r}", rule)
    return mapped


def name_rule(mapped: str, *, service: str, length: tuple[int, int], charset: re.Pattern[str], allowed: str) -> str | None:
    """The first naming rule `mapped` breaks, or None: length first, then characters."""
    low, high = length
    if not low <= len(mapped) <= high:
        return f"{service} names are {low}-{high} characters long ({mapped!r} has {len(mapped)})"
    if not charset.fullmatch(mapped):
        return f"{service} names use only {allowed} ({mapped!r} does not)"
    return None


def bucket_rule(mapped: str) -> str | None:
    """The first S3 bucket naming rule `mapped` breaks, or None."""
    rule = name_rule(mapped, service="S3 bucket", length=(3, 63), charset=_BUCKET_CHARS,
                     allowed="lowercase letters, digits, '-' and '.'")
    if rule:
        return rule
    if not (mapped[0].isalnum() and mapped[-1].isalnum()):
        return f"S3 bucket names begin and end with a letter or digit ({mapped!r} does not)"
    if ".." in mapped:
        return f"S3 bucket names must not contain '..' ({mapped!r} does)"
    if _IPV4.fullmatch(mapped):
        return f"S3 bucket names must not look like an IP address ({mapped!r} does)"
    if mapped.startswith(_RESERVED_PREFIXES) or mapped.endswith(_RESERVED_SUFFIXES):
        return f"S3 reserves the prefixes {', '.join(_RESERVED_PREFIXES)} and the suffixes {', '.join(_RESERVED_SUFFIXES)}"
    return None


def bucket_name(name: str, owner: str, *, naming: int) -> str:
    """The bucket of a declaration: its name sanitized (SANITIZED), or owner-prefixed (PREFIXED, where
    InvalidSpec names the S3 rule it breaks)."""
    if naming != PREFIXED:
        return naming_rules.bucket(name)
    mapped = prefixed(name, owner)
    rule = bucket_rule(mapped)
    if rule:
        raise InvalidSpec("map", f"bucket name {mapped!r}", rule,
                          "buckets are named `<project>-<name>`, or after the project alone")
    return mapped


def rule_id(name: str, owner: str, *, naming: int) -> str:
    """`devstack:<owner>:<name>`: the reserved prefix is the rule's ownership marker (rules carry no tags).
    Rule ids take any text: SANITIZED keeps both parts as they are (no name devstack accepts has a ':')."""
    mapped = f"{RULE_PREFIX}{owner}:{name}"
    if naming != PREFIXED:
        prefix = f"{RULE_PREFIX}{owner}:"
        return mapped if len(mapped) <= 255 else prefix + naming_rules.suffixed(name, name, 255 - len(prefix))
    if len(mapped) > 255:
        raise InvalidSpec("map", f"lifecycle rule {mapped!r}", "S3 lifecycle rule ids are at most 255 characters")
    if not (_RULE_NAME.fullmatch(name) and _RULE_NAME.fullmatch(owner)):
        raise InvalidSpec("map", f"lifecycle rule {mapped!r}",
                          "lifecycle names use lowercase letters, digits, '-' and '.', starting with a letter or digit")
    return mapped
