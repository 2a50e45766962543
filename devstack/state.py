"""Reading the state: the tenant resources a stack's ledger tracks, its config, and the providers
configured from it (the one way devstack drops data in an engine).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from devstack.errors import EngineError, IdentityConflict, InvalidQuery
from devstack.stack import PROGRAM_PROJECT, cli_error, run_cli, short_name
from providers.identity import Identity

#: The type prefix of every tenant resource: `pulumi-python:dynamic/<engine>:<kind>`.
DYNAMIC_PREFIX = "pulumi-python:dynamic/"
#: Pulumi's marker for a secret value in a deployment (`stack export`).
SECRET_SIG = "4dabf18193072939515e22adb298388d"
REDACTED = "[secret]"
#: An entry's lifecycle: present at its last observation, missed by a later one, or removed (a tombstone).
ACTIVE, STALE, DELETED = "active", "stale", "deleted"
LIFECYCLES = (ACTIVE, STALE, DELETED)
#: The outputs in which the providers keep an entry's lifecycle and observation clocks (ISO-8601, UTC).
LIFECYCLE_OUTPUTS = ("lifecycle", "firstSeen", "lastSeen")


def parse_time(value: object) -> datetime | None:
    """An ISO-8601 time (a trailing Z, nanoseconds as Pulumi writes them) as an aware UTC datetime; None if unset."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # Python takes 6 digits of a fraction at most
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[:min(digits, 6)]}{rest[digits:]}"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Tracked:
    """One tenant resource as the state records it.

    `props` are its outputs (inputs for a resource that has none yet) with
    secret values either revealed or replaced by "[secret]"; `secrets` names
    the top-level props that are secret.
    """

    urn: str
    ident: Identity
    props: dict[str, Any]
    secrets: frozenset[str]
    entry: dict[str, Any] = field(repr=False, compare=False)

    @property
    def sort_key(self) -> tuple[str, ...]:
        """The stable order of list: project, engine, instance, kind, name (urn breaks ties)."""
        i = self.ident
        return (i.owner, i.engine, i.instance, i.kind, i.name, self.urn)

    @property
    def dependencies(self) -> list[str]:
        return list(self.entry.get("dependencies") or [])

    @property
    def lifecycle(self) -> str:
        """active or stale, as the last refresh or `up` left it; an entry without the field is active."""
        return STALE if self.props.get("lifecycle") == STALE else ACTIVE

    @property
    def first_seen(self) -> datetime | None:
        """When the resource was first observed: `firstSeen`, else the entry's `created`."""
        return parse_time(self.props.get("firstSeen")) or parse_time(self.entry.get("created"))

    @property
    def last_seen(self) -> datetime | None:
        """When it was last observed present: `lastSeen`, else the entry's `modified` (or `created`)."""
        return (parse_time(self.props.get("lastSeen")) or parse_time(self.entry.get("modified"))
                or self.first_seen)

    @property
    def observed(self) -> datetime | None:
        """The time of the lifecycle this entry holds: the later of last seen and the entry's `modified`
        (the write of a create, an update or the refresh that marked it stale; `lastSeen` is to the second)."""
        times = [t for t in (parse_time(self.entry.get("modified")), self.last_seen) if t is not None]
        return max(times) if times else None


def export_deployment(stack: auto.Stack, show_secrets: bool = False) -> dict[str, Any]:
    """The stack's deployment; secrets stay ciphertext unless `show_secrets`."""
    if show_secrets:
        try:
            return stack.export_stack().deployment or {}
        except auto.errors.CommandError as err:
            raise EngineError("export", f"stack {stack.name!r}", cli_error(err)) from err
    return json.loads(run_cli(stack, "stack", "export")).get("deployment") or {}


def _reveal(value: Any, show: bool) -> tuple[Any, bool]:
    """(value with secrets revealed or redacted, whether it held a secret)."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            if show and "plaintext" in value:
                return json.loads(value["plaintext"]), True
            return REDACTED, True
        pairs = {key: _reveal(item, show) for key, item in value.items()}
        return {key: pair[0] for key, pair in pairs.items()}, any(pair[1] for pair in pairs.values())
    if isinstance(value, list):
        pairs = [_reveal(item, show) for item in value]
        return [pair[0] for pair in pairs], any(pair[1] for pair in pairs)
    return value, False


def _tracked(entry: dict[str, Any], show: bool) -> Tracked | None:
    """A state entry as Tracked, or None when it is not a tenant resource."""
    if not str(entry.get("type", "")).startswith(DYNAMIC_PREFIX) or entry.get("delete"):
        return None
    raw = entry.get("outputs") or entry.get("inputs") or {}
    props, secrets = {}, set()
    for key, value in raw.items():
        props[key], secret = _reveal(value, show)
        if secret:
            secrets.add(key)
    try:
        ident = Identity.from_props(props)
    except KeyError:
        return None  # not one of ours: no identity envelope
    return Tracked(urn=entry["urn"], ident=ident, props=props, secrets=frozenset(secrets), entry=entry)


def tracked_resources(stack: auto.Stack, show_secrets: bool = False) -> list[Tracked]:
    """Every tenant resource of the stack's state, in the stable list order."""
    return read_state(stack, show_secrets)[0]


def read_state(stack: auto.Stack, show_secrets: bool = False) -> tuple[list[Tracked], datetime | None]:
    """Every tenant resource of the stack's state (tracked_resources), and when the state was written."""
    deployment = export_deployment(stack, show_secrets)
    entries = deployment.get("resources") or []
    found = [t for t in (_tracked(e, show_secrets) for e in entries) if t is not None]
    return sorted(found, key=lambda t: t.sort_key), parse_time((deployment.get("manifest") or {}).get("time"))


# --- the stack's config, and the providers configured from it ------------------------------


def stack_config(stack: auto.Stack) -> dict[str, Any]:
    """The stack's config with secrets decrypted (admin credentials): key -> value."""
    try:
        return {key: value.value for key, value in stack.get_all_config().items()}
    except auto.errors.CommandError as err:
        from components.yamlfile import stack_config_file

        display = stack_config_file(Path(stack.workspace.work_dir), short_name(stack))
        raise EngineError("read the config of", f"stack {stack.name!r}", cli_error(err),
                          f"fix {display}, or the passphrase if it cannot be decrypted "
                          f"(PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE)") from err


def workspace_problems(stack: auto.Stack, config: Mapping[str, Any]) -> list[str]:
    """The problems `pulumi preview` reports in the stack config's `devstack:workspace`, located in its file."""
    from components.validation import WorkspaceInvalid, validate
    from components.yamlfile import load_yaml_if_usable, stack_config_file
    from providers.instances import parse_object

    root = Path(stack.workspace.work_dir)
    display = stack_config_file(root, short_name(stack))
    try:
        validate(parse_object(config.get("devstack:workspace")), root, load_yaml_if_usable(root / display, display),
                 display)
    except WorkspaceInvalid as invalid:
        return [str(p) for p in invalid.problems if p.file == display]
    except ValueError as err:  # not a JSON object at all
        return [f"{display}: config.devstack:workspace: {err}"]
    return []


def instances_config(stack: auto.Stack) -> dict[str, Any]:
    """The stack's config (`stack_config`), once its shared instances are known to be usable: the engine
    calls build them from it. InvalidQuery (nothing done) naming the file, line and field otherwise."""
    from pydantic import ValidationError

    from components.models import WorkspaceConfig
    from providers.instances import WORKSPACE_KEY, instances_from_config, parse_object

    config = stack_config(stack)
    try:
        instances_from_config(config)
        raw = parse_object(config.get(WORKSPACE_KEY))
        if raw is not None:  # the whole of it: a misspelt `projects` would make every project an orphan
            WorkspaceConfig.model_validate(raw)
    except (ValidationError, ValueError, AttributeError, TypeError) as err:
        found = workspace_problems(stack, config) or [str(err).splitlines()[0]]
        raise InvalidQuery("read", f"the workspace of stack {short_name(stack)!r}", "; ".join(found),
                           "fix the stack config; nothing was changed") from None
    return config


def configured_provider(config: Mapping[str, Any], engine: str, kind: str):
    """The kind's provider, configured exactly as Pulumi configures it (admin secrets via configure)."""
    from pulumi.dynamic import Config, ConfigureRequest

    from providers import registry

    provider = registry.provider_class(engine, kind)()
    provider.configure(ConfigureRequest(Config(raw_config=dict(config), project_name=PROGRAM_PROJECT)))
    return provider


def drop_data(config: Mapping[str, Any], ident: Identity, props: Mapping[str, Any]) -> bool:
    """Drop one resource's data through its provider: one engine call. False when it was already gone.

    Raises IdentityConflict when the engine gives it to someone else, another
    workspace included (nothing dropped), EngineError when the engine fails.
    """
    from providers import errors as perr

    provider = configured_provider(config, ident.engine, ident.kind)
    try:
        provider.purge(ident, props)
    except perr.NotFound:
        return False
    except perr.Conflict as err:
        raise IdentityConflict("drop", str(ident), err.cause, err.hint or "it was not dropped") from err
    except perr.EngineUnavailable as err:  # its `what` is the instance: name it
        raise EngineError("drop", str(ident), f"cannot {err.verb} {err.what}: {err.cause}", err.hint) from err
    except perr.DevstackError as err:
        raise EngineError("drop", str(ident), err.cause, err.hint) from err
    except Exception as err:  # a client library's own error: still "cannot drop <id>", cause chained
        raise EngineError("drop", str(ident), f"{type(err).__name__}: {err}") from err
    return True
