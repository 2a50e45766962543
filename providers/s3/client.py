"""The AWS-API client MinIO and LocalStack share: one boto3 client per (instance, service, key), and
the engine's failures named.

Clients are built lazily from one session and never pickled; every answer is checked to come from the
instance's engine (MinIO and LocalStack each speak S3 well enough to answer for the other). An instance
with `tls:` is reached over https, its certificate verified as `tls:` says (`tls_options`).
"""

from __future__ import annotations

import ssl
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, Iterator

from providers.clients import LazyModule, one_per_key
from providers.errors import EngineUnavailable, Unsupported, first_line
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
    return f"{instance.scheme('http', 'https')}://{instance.address}"


def tls_options(instance: SharedInstance, engine: str) -> tuple[str | bool, tuple[str, str] | None]:
    """(verify, client certificate) of `instance` as boto3 takes them: `verify` a CA file, True (the
    system's CA store) or False (`tls.verify: false`); the certificate's (cert, key) files or None.

    The AWS SDK checks the server's certificate against the host it connects to and has no setting for
    another name, so a `tls.serverName` other than the host is refused rather than ignored.
    """
    tls = instance.tls
    if tls is None:
        return True, None
    name = tls.server_name_for(instance.host)
    if tls.verify and name != instance.host:
        raise Unsupported("connect to", f"{engine} instance {instance.name!r} at {instance.address}",
                          f"tls.serverName {name!r} differs from the host, and the AWS SDK verifies the "
                          "server's certificate against the host it connects to",
                          f"set shared.{instance.name}.host to {name!r} (a name that resolves to the server), "
                          f"or remove shared.{instance.name}.tls.serverName")
    return (tls.ca_path() or True) if tls.verify else False, tls.client_cert()


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
def _client(service: str, endpoint: str, region: str, key: str, secret: str, engine: str,
            verify: str | bool = True, client_cert: tuple[str, str] | None = None) -> BaseClient:
    config = botocore_config.Config(
        connect_timeout=3,
        read_timeout=30,
        retries={"max_attempts": 2, "mode": "standard"},
        # MinIO and moto serve buckets under the endpoint's path, not as subdomains.
        s3={"addressing_style": "path"},
        client_cert=client_cert,
    )
    client = _session().client(
        service, endpoint_url=endpoint, region_name=region,
        aws_access_key_id=key, aws_secret_access_key=secret, config=config, verify=verify,
    )
    # Every answer, errors included, passes here before the client parses or raises it.
    client.meta.events.register("after-call", lambda http_response, **_: expect_server(engine, http_response.headers.get("Server")))
    return client


def aws_client(instance: SharedInstance, service: str) -> BaseClient:
    """The admin client of `service` on `instance` (thread-safe, cached per process)."""
    return _client(service, endpoint_of(instance), region_of(instance), instance.admin_user, instance.password(),
                   instance.engine, *tls_options(instance, instance.engine))


def client_as(instance: SharedInstance, service: str, key: str, secret: str) -> BaseClient:
    """A client of `service` on `instance` signing with another key pair (a tenant's)."""
    return _client(service, endpoint_of(instance), region_of(instance), key, secret, instance.engine,
                   *tls_options(instance, instance.engine))


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
            instance.tls_hint() if instance.tls and tls_failure(err) else instance.start_hint(),
        ) from err


def tls_failure(err: BaseException) -> bool:
    """Whether `err`, or an error it arose from, is a failed TLS handshake (an unverified certificate, say)."""
    seen: BaseException | None = err
    while seen is not None:
        # ssl's own, or botocore's and urllib3's wrappers of it (neither subclasses ssl.SSLError).
        if isinstance(seen, ssl.SSLError) or type(seen).__name__ == "SSLError":
            return True
        reason = getattr(seen, "reason", None)  # urllib3's MaxRetryError keeps its cause here
        seen = seen.__cause__ or seen.__context__ or (reason if isinstance(reason, BaseException) else None)
    return False


