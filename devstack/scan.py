"""Complete scans of shared engines: every resource of the scanned kinds, ours or not.

Providers answer "does this one resource exist"; garbage collection needs
"list everything in the engine". One small scanner per engine does that
with the provider module's own helpers (admin connections, marker parsing,
engine names), so a scan reads markers exactly as the providers write them.

A scan yields `Found(engine, instance, kind, engine_name, owner, stack,
name)`: `owner` is read from the ownership marker (None = no marker of
ours: foreign), `stack` is the workspace recorded in the marker when the
engine keeps it, `name` the declaration name when the marker records it.
What each engine's scan cannot see is in its package's scan module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from providers.errors import InvalidSpec
from providers.identity import CURRENT_NAMING, PREFIXED
from providers.engine import Found
from providers.instances import SharedInstance


# --- declaration names back from engine names ------------------------------------------


def declaration_name(engine: str, kind: str, engine_name: str, owner: str, hints: Iterable[str | None] = ()) -> str | None:
    """A declaration name that maps to `engine_name` for `owner`, or None.

    Engine names are `<owner>`, `<owner><sep><name>` (sep '-', '_' or '.'),
    the name itself (postgres databases) or `devstack:<owner>:<name>`
    (lifecycle rules); a FIFO name keeps `.fifo` last.
    Each candidate is verified with the kind's own `engine_name`.
    """
    candidates = [h for h in hints if h] + [owner]
    for prefix in dict.fromkeys((owner, owner.replace("-", "_"))):
        for sep in "-_.":
            if engine_name.startswith(prefix + sep):
                candidates.append(engine_name[len(prefix) + len(sep):])
    if engine_name.endswith(".fifo"):
        candidates.append(owner + ".fifo")
    candidates.append(engine_name.removeprefix(f"devstack:{owner}:"))  # lifecycle rule ids
    candidates.append(engine_name)  # an explicit name is the engine name itself
    for candidate in dict.fromkeys(candidates):
        if naming_mapping(engine, kind, candidate, owner, engine_name) is not None:
            return candidate
    return None


def naming_mapping(engine: str, kind: str, name: str, owner: str, engine_name: str) -> int | None:
    """The naming (providers.identity) under which declaration `name` of `owner` maps to `engine_name`, or None."""
    from providers import registry

    kind_class = registry.provider_class(engine, kind)
    for naming in (PREFIXED, CURRENT_NAMING):
        try:
            if kind_class.engine_name(name, owner, naming=naming) == engine_name:
                return naming
        except (InvalidSpec, ValueError):
            continue
    return None


# --- entry point ------------------------------------------------------------------------


def scan(instance: SharedInstance, kinds: Iterable[str] | None = None) -> list[Found]:
    """Every resource of `kinds` (default: all the engine's kinds) in one instance.

    Raises the provider's EngineUnavailable when the engine does not answer.
    Declaration names are filled in for resources carrying our marker.
    """
    from providers import registry

    wanted = set(kinds) if kinds is not None else set(registry.kinds(instance.engine))
    found = registry.engine(instance.engine).scan(instance, wanted)
    return sorted(_named(f) for f in found)


def _named(found: Found) -> Found:
    if found.owner is None:
        return found
    name = declaration_name(found.engine, found.kind, found.engine_name, found.owner, [found.name])
    return replace(found, name=name)

