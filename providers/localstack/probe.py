"""`devstack doctor`'s check of a LocalStack (or moto) server: the admin key is accepted; the version, and
how far the emulator keeps projects apart."""

from __future__ import annotations

import importlib.metadata
import json

from providers.engine import PROBE_TIMEOUT, Probed, Rejected
from providers.errors import first_line
from providers.instances import SharedInstance
from providers.localstack.client import emulator, http_opener
from providers.localstack.policy import UNISOLATED, UNISOLATED_STORE
from providers.s3.client import aws_client, boto_errors, client_as, endpoint_of, http_status

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def probe(instance: SharedInstance) -> Probed:
    try:
        aws_client(instance, "sts").get_caller_identity()
    except boto_errors.ClientError as err:
        if http_status(err) in (401, 403):
            raise Rejected(first_line(err)) from err
        raise
    return Probed(_version(instance), _isolation(instance))


def _isolation(instance: SharedInstance) -> tuple[str, ...]:
    """How far the emulator keeps projects apart: a made-up key is tried (refused only where it checks
    credentials); where it does, the services it checks by action alone (docs/engines.md)."""
    try:
        client_as(instance, "sts", "devstack-doctor-unknown", "devstack-doctor-unknown").get_caller_identity()
    except boto_errors.ClientError:
        unisolated = UNISOLATED.get(emulator(instance), ()) + UNISOLATED_STORE.get(emulator(instance), ())
        return (f"per-project isolation is not enforced by the emulator for {', '.join(unisolated)}: it checks "
                f"their actions, not which resource, so a project's access_key reaches other projects' resources "
                f"there (S3 and SQS are enforced; docs/engines.md)",) if unisolated else ()
    return ("it accepts any access key: no access_key keeps projects apart here (the local engine checks keys "
            "once restarted: python -m tools.engines stop localstack, then start; LocalStack enforces IAM "
            "only with ENFORCE_IAM=1, a Pro feature)",)


def _version(instance: SharedInstance) -> str:
    """LocalStack reports its version on /_localstack/health; moto (our local engine) has no such call."""
    base, opener = endpoint_of(instance), http_opener(instance, direct=False)
    try:
        with opener.open(f"{base}/_localstack/health", timeout=PROBE_TIMEOUT) as response:
            return str(json.load(response).get("version") or "unknown")
    except (OSError, ValueError):
        pass
    try:
        with opener.open(f"{base}/moto-api/", timeout=PROBE_TIMEOUT):
            return f"moto {importlib.metadata.version('moto')}" if instance.host in LOOPBACK else "moto"
    except (OSError, importlib.metadata.PackageNotFoundError):
        return "unknown"
