"""`devstack doctor`'s check of a Redis server: the admin logs in and may run what devstack sends, and
nobody gets in without a password."""

from __future__ import annotations

from providers.engine import PROBE_TIMEOUT, NoAnswer, Probed, Rejected, Unfit
from providers.instances import SharedInstance
from providers.redis.client import admin_fix, connect, no_retry, redis_py

#: Commands the provider's admin sends, asked of ACL DRYRUN (Redis 7): each kind's own, not each argument.
REDIS_ADMIN_COMMANDS = (("CONFIG", "GET", "databases"), ("EVALSHA", "0" * 40, "0"), ("ACL", "SETUSER", "probe"),
                        ("ACL", "SAVE"), ("FLUSHDB",), ("HSET", "devstack:probe", "f", "v"))


def probe(instance: SharedInstance) -> Probed:
    client = connect(instance, username=instance.admin_user, password=instance.password(),
                     socket_timeout=PROBE_TIMEOUT, socket_connect_timeout=PROBE_TIMEOUT, retry=no_retry())
    try:
        version = str(client.info("server")["redis_version"])
        for command in REDIS_ADMIN_COMMANDS:
            try:
                answer = str(client.execute_command("ACL", "DRYRUN", instance.admin_user, *command), "utf-8")
            except redis_py.ResponseError as err:  # a renamed or disabled command, or no ACL DRYRUN for the admin
                if "unknown subcommand" in str(err).lower():
                    break  # before Redis 7 there is no ACL DRYRUN to ask
                answer = str(err)
            if answer != "OK":
                raise Unfit(f"{instance.admin_user!r} cannot run {' '.join(command[:2])}: {answer}",
                            admin_fix(instance.admin_user))
        _closed_to_strangers(instance)
        return Probed(version)
    except redis_py.AuthenticationError as err:
        raise Rejected(str(err)) from err
    except redis_py.TimeoutError as err:  # connected, then no answer (its connect is checked before)
        raise NoAnswer(f"no answer within {PROBE_TIMEOUT:.0f}s") from err
    finally:
        client.close()


def _closed_to_strangers(instance: SharedInstance) -> None:
    """Unfit when a client without credentials gets in: it is Redis's `default` user, and a `default` that
    may log in (no requirepass, `nopass`) reaches every tenant's keys past their ACL users."""
    stranger = connect(instance, socket_timeout=PROBE_TIMEOUT, socket_connect_timeout=PROBE_TIMEOUT,
                       retry=no_retry())
    try:
        stranger.ping()
    except (redis_py.AuthenticationError, redis_py.exceptions.NoPermissionError):
        return
    finally:
        stranger.close()
    raise Unfit("so does anyone without a password (as Redis's `default` user): every tenant's keys are open to "
                "them, whatever their ACL users allow",
                "turn the default user off (`ACL SETUSER default off`, then ACL SAVE), or give it a password "
                "(requirepass)")
