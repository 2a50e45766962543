"""`devstack env`: a service's environment, from the stack output `<project>.services.<service>.env`, and the
values the workspace's secret store serves (`<project>.services.<service>.secretStore`) read from the store."""

from __future__ import annotations

import json
from typing import Any

from pulumi import automation as auto
from pulumi.runtime.rpc import UNKNOWN

from devstack.errors import EngineError, NotFound
from devstack.models import ServiceEnv
from devstack.stack import run_cli, short_name
from devstack.state import REDACTED


def _env_text(value: Any) -> str:
    """Environment values are text; numbers and booleans as JSON writes them."""
    return value if isinstance(value, str) else json.dumps(value)


def service_env(stack: auto.Stack, project: str, service: str, *, show_secrets: bool = False) -> ServiceEnv:
    """The service's environment; secret values are "[secret]" unless `show_secrets`.

    The masked output decides which variables are secret; the plaintext one
    is read only when `show_secrets` asks for it.
    """
    masked = json.loads(run_cli(stack, "stack", "output", "--json") or "{}")
    env = _service_section(masked, stack.name, project, service)
    unknown = sorted(k for k, v in env.items() if UNKNOWN in str(v))
    if unknown:  # Pulumi's placeholder for a value not known yet: never hand it to a service
        raise NotFound("read the environment of", f"{project}/{service}",
                       f"{', '.join(unknown)} have no value yet: a resource they import is declared but was not "
                       f"applied (a targeted update, such as a `devstack` verb's, leaves the others out)",
                       f"run `pulumi up --stack {short_name(stack)}`")
    stored = _stored_vars(masked, project, service)
    env.update({var: REDACTED for var in stored})  # served by the secret store: a value only when asked for
    secret = sorted(k for k, v in env.items() if v == REDACTED)
    if show_secrets and set(secret) - set(stored):
        plain = json.loads(run_cli(stack, "stack", "output", "--json", "--show-secrets") or "{}")
        # The plain values over the masked ones; a store-served variable is in neither (its _SECRET_ID is).
        env = {**env, **_service_section(plain, stack.name, project, service)}
    if show_secrets and stored:
        env.update(_read_from_store(stack, f"{project}/{service}", stored))
    return ServiceEnv(workspace=stack.name, project=project, service=service,
                      env={k: _env_text(v) for k, v in sorted(env.items())}, secret_vars=secret, secrets_shown=show_secrets)


def last_up_failed(stack: auto.Stack) -> bool:
    """Whether the stack's last update failed: its resources may then be newer than its outputs."""
    try:
        updates = stack.history(page_size=20, show_secrets=False)
    except auto.errors.CommandError:
        return False  # no history to tell: say nothing rather than fail the command
    return next((u.result == "failed" for u in updates if u.kind == "update"), False)


def _stored_vars(outputs: dict[str, Any], project: str, service: str) -> dict[str, dict[str, str]]:
    """Variable -> its secret-store entry (`kind`, `instance`, `id`), for those the store serves
    (components.secret_store): the outputs hold `<VAR>_SECRET_ID`, never the value."""
    services = (outputs.get(project) or {}).get("services") or {}
    return dict((services.get(service) or {}).get("secretStore") or {})


def _read_from_store(stack: auto.Stack, what: str, stored: dict[str, dict[str, str]]) -> dict[str, str]:
    """The values of `stored` as a service reads them, with the store instance's admin credential."""
    from devstack.state import instances_config
    from providers import errors as perr
    from providers.instances import instances_from_config
    from providers.localstack.stored_secret import STORES
    from providers.s3.client import reachable

    instances = instances_from_config(instances_config(stack))
    values = {}
    for var, entry in sorted(stored.items()):
        instance = instances.get(entry["instance"])
        if instance is None:
            raise NotFound("read the environment of", what, f"{var} is kept in {entry['kind']} on instance "
                           f"{entry['instance']!r}, which the workspace no longer declares",
                           "declare it again under shared, or run `pulumi up` after changing secretStore")
        try:
            with reachable(instance, instance.engine):
                found = STORES[entry["kind"]]().observe(instance, entry["id"])
        except perr.DevstackError as err:
            raise EngineError("read the environment of", what, f"cannot {err.verb} {err.what}: {err.cause}",
                              err.hint) from err
        if found is None or found.value is None:
            raise NotFound("read the environment of", what,
                           f"{var}'s entry {entry['id']!r} is not in {entry['kind']} on instance {entry['instance']!r}",
                           f"run `pulumi up --stack {short_name(stack)}` to push it again")
        values[var] = found.value
    return values


def _service_section(outputs: dict[str, Any], workspace: str, project: str, service: str) -> dict[str, Any]:
    if project not in outputs:
        raise NotFound("read the environment of", f"{project}/{service}",
                       f"workspace {workspace!r} has no project {project!r}",
                       f"projects with outputs: {', '.join(sorted(outputs)) or 'none'}")
    services = (outputs[project] or {}).get("services") or {}
    if service not in services:
        raise NotFound("read the environment of", f"{project}/{service}",
                       f"project {project!r} has no service {service!r}",
                       f"its services: {', '.join(sorted(services)) or 'none'}")
    return dict((services[service] or {}).get("env") or {})
