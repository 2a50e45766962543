"""moto's server with IAM enforced from its first request and devstack's admin key already in it.

    python -m tools.engines.moto_server -H HOST -p PORT [--cert CERT --key KEY] ADMIN_FILE

moto checks credentials only with INITIAL_NO_AUTH_ACTION_COUNT set (the
engine sets 0: every request is checked), and then accepts only access keys
its in-memory IAM holds. IAM's CreateAccessKey draws random ids and secrets,
so the stack config's admin credential (an id and secret devstack chose)
could never be one of them: this launcher puts it into moto's IAM backend
before the server takes a request, on every start. The user is named after
the key id, with an inline policy that allows everything.

The credential arrives in ADMIN_FILE (0600, JSON `{"user", "password"}`),
which is deleted once read: it is never in argv or the environment.

moto's own /moto-api/ endpoints answer without any credential (reset every
backend and the admin with it, switch authentication off, dump every model
with its secrets): they are refused, except GET /moto-api/ (the dashboard
page), by which `devstack doctor` tells moto from LocalStack.

With --cert and --key (PEM files) it serves https only, with that certificate.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

#: The policy of the admin user: devstack creates, tags and drops every kind, and manages IAM users.
ADMIN_POLICY = json.dumps({"Version": "2012-10-17",
                           "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
MOTO_API = "/moto-api/"


def seed_admin(user: str, secret: str) -> None:
    """Make IAM user `user` with an access key whose id is `user` and whose secret is `secret`.

    Uses moto's backend objects (moto 5.x): the API itself has no call that sets a key's id.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends

    iam = iam_backends[DEFAULT_ACCOUNT_ID]["aws"]
    iam.create_user(region_name="us-east-1", user_name=user)
    iam.put_user_policy(user, "devstack-admin", ADMIN_POLICY)
    key = iam.create_access_key(user)
    iam.access_keys.pop(key.physical_resource_id)
    key.access_key_id, key.secret_access_key = user, secret
    # The backend finds a request's account by the key's id among these.
    iam.access_keys[key.physical_resource_id] = key


def refusing_moto_api(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """`app`, answering 403 to every /moto-api/ request but GET /moto-api/ (see the module docstring)."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path.startswith(MOTO_API.rstrip("/")) and (path, method) != (MOTO_API, "GET"):
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"moto's control API is switched off on this server (devstack enforces IAM here)\n"]
        return app(environ, start_response)

    return guarded


def read_admin(path: Path) -> tuple[str, str]:
    """(user, password) from the launcher's file, which is deleted at once."""
    try:
        data = json.loads(path.read_text())
    finally:
        path.unlink(missing_ok=True)
    return str(data["user"]), str(data["password"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.engines.moto_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument("--cert", type=Path, help="serve https with this certificate (PEM)")
    parser.add_argument("--key", type=Path, help="the certificate's private key (PEM)")
    parser.add_argument("admin_file", type=Path)
    args = parser.parse_args(argv)
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    seed_admin(*read_admin(args.admin_file))
    # As moto.server does: a stop signal ends the process cleanly.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = refusing_moto_api(DomainDispatcherApplication(create_backend_app))
    tls = (str(args.cert), str(args.key)) if args.cert else None
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler, ssl_context=tls)


if __name__ == "__main__":
    main()
