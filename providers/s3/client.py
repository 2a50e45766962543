"""The AWS-API client MinIO and LocalStack share: one boto3 client per (instance, service, key), and
the engine's failures named.

Clients are built lazily from one session and never pickled; every answer is checked to come from the
instance's engine (MinIO and LocalStack each speak S3 well enough to answer for the other).
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, Iterator

from providers.clients import LazyModule, one_per_key
from providers.errors import EngineUnavailable, first_line
from providers.instances import SharedInstance

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

# Imported on the first engine call: the program, check and diff never need them.
boto3 = LazyModule("boto3")
botocore_config = LazyModule("botocore.config")
boto_errors = LazyModule("botocore.exceptions")
urllib3_errors = LazyModule("urllib3.exceptions")

DEFAULT_REGION = "us-east-1"


def transport_failures() -> tuple[type[Exception], ...]:
    """Errors that mean the engine did not answer (as opposed to answering "no")."""
    return boto_errors.ConnectionError, boto_errors.HTTPClientError, urllib3_errors.HTTPError


def region_of(instance: SharedInstance) -> str:
    """us-east-1 unless the instance names a region (SharedInstance has no such field yet)."""
    return instance.region or DEFAULT_REGION


def endpoint_of(instance: SharedInstance) -> str:
    return f"http://{instance.address}"


@cache
def _session() -> Any:
    """The boto3 session every client is built from, so service models and endpoint rules are parsed once.

    A session is not safe across threads (its clients are): only `_client` calls
    this, and it runs under one_per_key's lock.
    """
    return boto3.session.Session()


class ForeignServer(Exception):
    """An answer from another kind of server than the instance's engine."""


def expect_server(engine: str, server: str | None) -> None:
    """Refuse an answer MinIO gave for LocalStack, or another server gave for MinIO.

    Each speaks S3 well enough to answer: a port that points at the other one
    would read every bucket as gone, and a refresh would drop them from the ledger.
    MinIO names itself in every response's Server header.
    """
    if ("minio" in (server or "").lower()) != (engine == "minio"):
        raise ForeignServer(f"the server there answers as {server or 'an unnamed server'}, not as {engine}")


@one_per_key
def _client(service: str, endpoint: str, region: str, key: str, secret: str, engine: str) -> BaseClient:
    config = botocore_config.Config(
        connect_timeout=3,
        read_timeout=30,
        retries={"max_attempts": 2, "mode": "standard"},
        # MinIO and moto serve buckets under the endpoint's path, not as subdomains.
        s3={"addressing_style": "path"},
    )
    client = _session().client(
        service, endpoint_url=endpoint, region_name=region,
        aws_access_key_id=key, aws_secret_access_key=secret, config=config,
    )
    # Every answer, errors included, passes here before the client parses or raises it.
    client.meta.events.register("after-call", lambda http_response, **_: expect_server(engine, http_response.headers.get("Server")))
    return client


def aws_client(instance: SharedInstance, service: str) -> BaseClient:
    """The admin client of `service` on `instance` (thread-safe, cached per process)."""
    return _client(service, endpoint_of(instance), region_of(instance), instance.admin_user, instance.password(),
                   instance.engine)


def client_as(instance: SharedInstance, service: str, key: str, secret: str) -> BaseClient:
    """A client of `service` on `instance` signing with another key pair (a tenant's)."""
    return _client(service, endpoint_of(instance), region_of(instance), key, secret, instance.engine)


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def http_status(err: ClientError) -> int:
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


#: Error codes with which an S3 engine refuses the admin credentials themselves (HeadBucket says only 403).
ADMIN_REJECTED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "403")


def admin_rejected(instance: SharedInstance, engine: str, err: Exception) -> EngineUnavailable:
    cause = first_line(err)
    return EngineUnavailable("log in to", f"{engine} instance {instance.name!r} at {instance.address}",
                             f"it refuses the admin credentials ({cause})",
                             f"check devstack:{instance.admin_secret} in the stack config")


@contextmanager
def reachable(instance: SharedInstance, engine: str) -> Iterator[None]:
    """Turn "the engine did not answer" (or refused the admin) into EngineUnavailable naming it,
    its address and the fix."""
    try:
        yield
    except boto_errors.ClientError as err:
        if error_code(err) not in ADMIN_REJECTED:
            raise
        raise admin_rejected(instance, engine, err) from err
    except ForeignServer as err:
        raise EngineUnavailable("connect to", f"{engine} instance {instance.name!r} at {instance.address}", str(err),
                                f"check shared.{instance.name}.host and .port in the stack config") from err
    except transport_failures() as err:
        raise EngineUnavailable(
            "connect to", f"{engine} instance {instance.name!r} at {instance.address}", first_line(err),
            instance.start_hint(),
        ) from err
