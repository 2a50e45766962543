"""What every LocalStack kind needs beside the boto3 clients of providers.s3.client: the engine's
"not there" answers, its account and flavour (moto or LocalStack), and waiting for a resource to settle."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from functools import wraps
from typing import TYPE_CHECKING, Any, Callable


from providers.errors import EngineUnavailable
from providers.identity import Identity
from providers.instances import SharedInstance
from providers.s3.client import (aws_client, boto_errors, endpoint_of, error_code, region_of, tls_failure,
                                 tls_options)
from providers.markers import Observed

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

ENGINE_NAME = "localstack"
#: How long to wait for a stream or table to become ACTIVE (moto: at once; AWS: seconds).
ACTIVE_TIMEOUT = 60.0


def wait_until(ready: Callable[[], bool], what: str, instance: SharedInstance) -> None:
    """Poll `ready` until it holds, at most ACTIVE_TIMEOUT seconds."""
    deadline = time.monotonic() + ACTIVE_TIMEOUT
    while not ready():
        if time.monotonic() > deadline:
            raise EngineUnavailable("wait for", what, f"not ACTIVE after {ACTIVE_TIMEOUT:.0f} s on {instance.address}",
                                    "check the engine's log; the resource may finish later, then run `pulumi refresh`")
        time.sleep(0.2)


def missing(err: ClientError, *codes: str) -> bool:
    return error_code(err) in codes


#: What SQS, SNS, Kinesis and DynamoDB answer about a resource that is not there.
GONE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "ResourceNotFoundException", "NotFound")


def vanished_is_none(observe: Callable[..., Observed | None]) -> Callable[..., Observed | None]:
    """An observe that finds the resource and then loses it (another run's purge dropped it between two
    calls) sees nothing, as it would have a moment later."""
    @wraps(observe)
    def looking(self: Any, instance: SharedInstance, ident: Identity) -> Observed | None:
        try:
            return observe(self, instance, ident)
        except boto_errors.ClientError as err:
            if missing(err, *GONE):
                return None
            raise

    return looking


_accounts: dict[tuple[str, str], str] = {}


def account_id(instance: SharedInstance) -> str:
    """The account the admin key acts as (moto: 123456789012, LocalStack: 000000000000), asked once."""
    key = (endpoint_of(instance), instance.admin_user)
    if key not in _accounts:
        _accounts[key] = str(aws_client(instance, "sts").get_caller_identity()["Account"])
    return _accounts[key]


def location(instance: SharedInstance) -> dict[str, Any]:
    return {"host": instance.host, "port": instance.port, "region": region_of(instance)}


_emulators: dict[str, str] = {}


def http_opener(instance: SharedInstance, direct: bool = True) -> urllib.request.OpenerDirector:
    """An HTTP client of the instance for what is not an AWS API: over TLS, verifying the server as the AWS
    clients do; `direct`: never via the environment's proxy."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})] if direct else []
    if instance.tls is not None:
        tls_options(instance, ENGINE_NAME)  # refuses what the AWS clients would refuse
        handlers.append(urllib.request.HTTPSHandler(context=instance.tls.ssl_context()))
    return urllib.request.build_opener(*handlers)


def emulator(instance: SharedInstance) -> str:
    """"moto" when the server serves moto's dashboard page (GET /moto-api/), else "localstack"; asked once."""
    endpoint = endpoint_of(instance)
    if endpoint not in _emulators:
        try:
            with http_opener(instance).open(f"{endpoint}/moto-api/", timeout=3) as answer:
                _emulators[endpoint] = "moto" if answer.status == 200 else "localstack"
        except urllib.error.HTTPError:
            _emulators[endpoint] = "localstack"
        except OSError as err:
            hint = instance.tls_hint() if instance.tls and tls_failure(err) else instance.start_hint()
            raise EngineUnavailable("connect to", f"{ENGINE_NAME} instance {instance.name!r} at {instance.address}",
                                    str(err), hint) from err
    return _emulators[endpoint]


def ignoring(codes: tuple[str, ...], call: Callable[[], Any]) -> Any:
    """`call()`, or None when it fails with one of `codes` (already gone)."""
    try:
        return call()
    except boto_errors.ClientError as err:
        if missing(err, *codes):
            return None
        raise
