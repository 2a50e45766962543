"""Engine identifiers from devstack names: one pure function per engine rule.

Each function maps one whole text (the caller decides what text: a name, an
owner, `<owner>-<name>`) to an identifier its engine accepts, sanitizing
instead of refusing. The contract, for every function:

- pure and stable: the same text maps to the same identifier in every process;
- identity on every text today's rule in the engine's provider accepts, so
  resources made under that rule stay where they are;
- where a length limit cuts (or a minimum, or a reserved form, is not met), a
  prefix is kept and `<sep><first 8 hex digits of sha256(text)>` appended, so
  two long texts sharing a prefix stay apart;
- not injective ("Shop" and "shop" make one bucket): `collisions` finds the
  texts that share an identifier, for the caller to refuse.

Only what no mapping can honestly save (an empty text, a name the engine
reserves for itself) raises InvalidSpec.

The limits below repeat the providers' own: the providers import this module,
never the reverse.
"""

from __future__ import annotations

import hashlib
import re
from typing import Callable, Iterable

from providers.errors import InvalidSpec

#: A name devstack accepts (a project's or a resource's): every function below maps any of them.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "names use letters, digits, '-', '_' and '.', start with a letter or digit and have at most 128 characters"

#: Hex digits of sha256(original text) appended where a mapping cuts or pads.
HASH_LENGTH = 8

# PostgreSQL: NAMEDATALEN - 1 bytes; psycopg quotes every identifier, so a leading digit is fine.
POSTGRES_MAX_BYTES = 63
POSTGRES_RESERVED_ROLES = frozenset({"public", "none"})
POSTGRES_RESERVED_ROLE_PREFIX = "pg_"
#: The databases initdb makes.
POSTGRES_SERVER_DATABASES = frozenset({"postgres", "template0", "template1"})

# S3 bucket names (DNS labels): https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html
BUCKET_LENGTH = (3, 63)
BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")

MINIO_ACCESS_KEY_LENGTH = (3, 128)

#: A lifecycle rule id is `devstack:<owner>:<name>`, at most 255 characters.
RULE_PREFIX = "devstack:"
MAX_RULE_ID = 255
#: The most one part of a rule id can take: the other part takes at least one character.
MAX_RULE_PART = MAX_RULE_ID - len(RULE_PREFIX) - len(":") - 1

FIFO = ".fifo"
SQS_MAX, SNS_MAX = 80, 256
KINESIS_LENGTH, DYNAMODB_LENGTH = (1, 128), (3, 255)

#: The NATS server refuses longer stream names.
NATS_MAX = 255
#: Kafka topics, principals and consumer groups.
KAFKA_MAX = 249
#: Redis ACL user names and key prefixes, as providers.redis allows them.
REDIS_MAX = 64


def _digest(text: str) -> str:
    # hashlib, not hash(): the built-in is salted per process.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LENGTH]


def suffixed(text: str, mapped: str, limit: int, *, sep: str = "-", strip: str = "") -> str:
    """`mapped` cut to leave room for `<sep><hash of text>` and then that appended: at most `limit`
    characters. `strip`: characters the kept part may not end with. The hash alone when nothing is kept."""
    room = limit - len(sep) - HASH_LENGTH
    if room < 0:
        raise ValueError(f"a limit of {limit} leaves no room for the hash suffix")
    kept = mapped[:room].rstrip(strip)
    return f"{kept}{sep}{_digest(text)}" if kept else _digest(text)


def _fit(text: str, mapped: str, length: tuple[int, int], *, sep: str = "-", strip: str = "") -> str:
    """`mapped` when its length is within `length`, else cut or padded with the hash suffix."""
    low, high = length
    return mapped if low <= len(mapped) <= high else suffixed(text, mapped, high, sep=sep, strip=strip)


def _require(text: str, what: str) -> None:
    if not text:
        raise InvalidSpec("map", repr(text), f"{what} cannot be empty", "give the declaration a name")


# --- PostgreSQL -------------------------------------------------------------


def postgres_identifier(text: str) -> str:
    """A PostgreSQL identifier: lowercase, [a-z0-9_] ('-' and any other character become '_'),
    at most 63 bytes."""
    _require(text, "a PostgreSQL identifier")
    mapped = re.sub(r"[^a-z0-9_]", "_", text.lower())
    # Every character is ASCII now: 63 characters are 63 bytes.
    return _fit(text, mapped, (1, POSTGRES_MAX_BYTES), sep="_")


def postgres_role(text: str) -> str:
    """`postgres_identifier`, for a role; InvalidSpec for what PostgreSQL reserves ('public', 'none',
    'pg_*'): a role renamed around the rule would not be the role the project asked for."""
    mapped = postgres_identifier(text)
    if mapped in POSTGRES_RESERVED_ROLES or mapped.startswith(POSTGRES_RESERVED_ROLE_PREFIX):
        raise InvalidSpec("map", repr(text), f"PostgreSQL reserves the role name {mapped!r} "
                          "('public', 'none' and every 'pg_*' name)", "choose another name")
    return mapped


def postgres_database(text: str) -> str:
    """`postgres_identifier`, for a database; InvalidSpec for the databases every server has."""
    mapped = postgres_identifier(text)
    if mapped in POSTGRES_SERVER_DATABASES:
        raise InvalidSpec("map", repr(text), f"every PostgreSQL server has a database {mapped!r} of its own",
                          "choose another name")
    return mapped


# --- S3 and MinIO -----------------------------------------------------------


def _dots(run: re.Match[str]) -> str:
    # MinIO refuses '-' next to '.', S3 refuses '..': a run holding a '.' becomes one '.', or one '-'.
    return "-" if "-" in run.group() else "."


def _bucket(text: str, *, minio: bool) -> str:
    _require(text, "a bucket name")
    mapped = re.sub(r"[^a-z0-9.-]", "-", text.lower())
    mapped = re.sub(r"[.-]*\.[.-]*", _dots, mapped) if minio else re.sub(r"\.{2,}", ".", mapped)
    mapped = mapped.strip(".-")
    reserved = False
    while mapped.startswith(BUCKET_RESERVED_PREFIXES):
        # A suffix cannot undo a reserved prefix: drop it, and let the hash keep the name apart.
        prefix = next(p for p in BUCKET_RESERVED_PREFIXES if mapped.startswith(p))
        mapped, reserved = mapped[len(prefix):].lstrip(".-"), True
    low, high = BUCKET_LENGTH
    if reserved or not low <= len(mapped) <= high or _IPV4.fullmatch(mapped) or mapped.endswith(
            BUCKET_RESERVED_SUFFIXES):
        return suffixed(text, mapped, high, strip=".-")
    return mapped


def bucket(text: str) -> str:
    """A bucket name for MinIO and LocalStack alike: lowercase, [a-z0-9.-] ('_' and any other character
    become '-'), no '..', no '-' next to '.' (MinIO's rule: such a run becomes one '-'), a letter or
    digit at both ends, 3-63 characters, not an IPv4 address, no reserved prefix or suffix."""
    return _bucket(text, minio=True)


def s3_bucket(text: str) -> str:
    """`bucket` under S3's rules alone: identity also on the names S3 takes and MinIO does not ('a.-b')."""
    return _bucket(text, minio=False)


def minio_access_key(text: str) -> str:
    """A MinIO user (access key id): lowercase, [a-z0-9._-] (any other character becomes '-'),
    starting with a letter or digit, 3-128 characters."""
    _require(text, "a MinIO access key")
    mapped = re.sub(r"[^a-z0-9._-]", "-", text.lower()).lstrip("._-")
    return _fit(text, mapped, MINIO_ACCESS_KEY_LENGTH)


def lifecycle_rule_part(text: str, *, limit: int = MAX_RULE_PART) -> str:
    """The `<owner>` or `<name>` of a lifecycle rule id `devstack:<owner>:<name>`: lowercase,
    [a-z0-9.-] ('_' and any other character become '-'), starting with a letter or digit.
    `limit`: what the id's 255 characters leave for this part once the other is mapped."""
    _require(text, "a lifecycle rule name")
    mapped = re.sub(r"[^a-z0-9.-]", "-", text.lower()).lstrip(".-")
    return _fit(text, mapped, (1, limit))


# --- LocalStack: SQS, SNS, Kinesis, DynamoDB --------------------------------


def sqs_sns(text: str, *, limit: int) -> str:
    """An SQS queue (limit 80) or SNS topic (limit 256) name: [A-Za-z0-9_-], case kept ('.' and any
    other character become '-'), a final '.fifo' kept last and counted in the limit."""
    _require(text, "a queue or topic name")
    fifo = FIFO if text.endswith(FIFO) else ""
    base = re.sub(r"[^A-Za-z0-9_-]", "-", text.removesuffix(FIFO) if fifo else text)
    return _fit(text, base, (1, limit - len(fifo))) + fifo


def kinesis_dynamodb(text: str, *, length: tuple[int, int]) -> str:
    """A Kinesis stream (length (1, 128)) or DynamoDB table (length (3, 255)) name: [A-Za-z0-9_.-],
    case kept (any other character becomes '-')."""
    _require(text, "a stream or table name")
    return _fit(text, re.sub(r"[^A-Za-z0-9_.-]", "-", text), length)


# --- NATS, Kafka, Redis -----------------------------------------------------


def nats(text: str, *, limit: int = NATS_MAX) -> str:
    """A NATS stream, consumer or KV bucket name: lowercase (JetStream keeps a stream in a directory
    of its name, and filesystems may fold case), [a-z0-9_-] ('.' and any other character become '_')."""
    _require(text, "a NATS name")
    return _fit(text, re.sub(r"[^a-z0-9_-]", "_", text.lower()), (1, limit), sep="_")


def kafka(text: str) -> str:
    """A Kafka topic, principal or consumer group: [A-Za-z0-9._-], case kept (any other character
    becomes '-'), at most 249 characters, never '.' or '..'."""
    _require(text, "a Kafka name")
    mapped = re.sub(r"[^A-Za-z0-9._-]", "-", text)
    if mapped in (".", ".."):  # names Kafka refuses: the hash makes them a name
        return suffixed(text, mapped, KAFKA_MAX)
    return _fit(text, mapped, (1, KAFKA_MAX))


def kafka_project(text: str) -> str:
    """The project of an ACL prefix `<project>.`: `kafka` without '.', which separates the project
    from the rest of a name ('.' becomes '_')."""
    _require(text, "a Kafka project name")
    return _fit(text, re.sub(r"[^A-Za-z0-9_-]", "_", text), (1, KAFKA_MAX))


def redis(text: str) -> str:
    """A Redis ACL user name or key prefix: [A-Za-z0-9_.-], case kept (any other character, ':'
    included, becomes '-'), starting with a letter or digit, at most 64 characters."""
    _require(text, "a Redis name")
    mapped = re.sub(r"[^A-Za-z0-9_.-]", "-", text).lstrip("_.-")
    return _fit(text, mapped, (1, REDIS_MAX))


# --- collisions -------------------------------------------------------------


def collisions(texts: Iterable[str], mapping: Callable[[str], str]) -> dict[str, list[str]]:
    """Each identifier two or more distinct texts map to, with those texts in the order given:
    the declarations a caller must refuse, since they would share one engine object."""
    by_name: dict[str, list[str]] = {}
    for text in texts:
        originals = by_name.setdefault(mapping(text), [])
        if text not in originals:
            originals.append(text)
    return {name: originals for name, originals in by_name.items() if len(originals) > 1}
