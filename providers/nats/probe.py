"""`devstack doctor`'s check of a NATS server: it trusts this stack's operator and runs JetStream."""

from __future__ import annotations

import ssl

from providers.engine import PROBE_TIMEOUT, Probed, Rejected, Unfit
from providers.errors import EngineUnavailable
from providers.instances import SharedInstance
from providers.nats.claims import all_accounts
from providers.nats.session import (JETSTREAM_FIX, JETSTREAM_MISSING, admin_credential, connect_fix, nats, nats_errors,
                                    run_private, servers)


def probe(instance: SharedInstance) -> Probed:
    async def check() -> str:
        seen: list[Exception] = []

        async def remember(err: Exception) -> None:
            seen.append(err)

        try:
            # The system account's admin: it proves the server trusts this stack's operator (operator mode).
            client = await nats.connect(**servers(instance), **admin_credential(instance.password()),
                                        allow_reconnect=False, max_reconnect_attempts=1, connect_timeout=PROBE_TIMEOUT,
                                        error_cb=remember)
        except Exception as err:
            cause = seen[-1] if seen else err
            if isinstance(cause, nats_errors.AuthorizationError) or "authorization" in str(cause).lower():
                raise Rejected(f"{cause}: the server does not trust this stack's NATS operator, or is not in "
                               f"operator mode") from err
            if isinstance(cause, ssl.SSLError):
                raise EngineUnavailable("connect to", f"nats instance {instance.name!r} at {instance.address}",
                                        str(cause), connect_fix(instance, cause)) from err
            raise
        try:
            accounts = await all_accounts(client)
            if not client._server_info.get("jetstream"):  # the server's INFO says whether it runs JetStream
                raise Unfit(JETSTREAM_MISSING, JETSTREAM_FIX)
            v = client.connected_server_version
            version = f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else "")
            return f"{version}, operator mode, {len(accounts) - 1} project account(s)"
        finally:
            await client.close()

    return Probed(run_private(check()))
