"""Ownership markers: what devstack writes into every engine object it makes, and how it reads them back.

A marker names the owning project and the workspace (stack plus a digest of its ledger's salt). Every
kind writes one (a comment, tag, metadata entry or description) and every verb, scan and gc reads it
through these functions only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from providers.errors import Conflict, NotFound
from providers.identity import Identity


@dataclass
class Observed:
    """What `observe` found: `owner` and `workspace` from its marker (owner None: a foreign resource we must
    not touch), and live values `read` merges into the outputs (`attributes`)."""

    owner: str | None
    params: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    workspace: str | None = None


def marker_workspace(stack: str, ledger_salt: str | None) -> str:
    """The workspace an ownership marker records: the stack's name and a digest of its ledger's salt.

    The salt (the passphrase secrets provider's, made once per stack by `pulumi stack init` and kept
    in the stack's config and state) tells apart two stacks of one name using the same engines, the
    default `local` of two clones say, whose garbage collection would otherwise take each other's
    resources for its own orphans; everyone sharing one stack has the same salt. Without one, the
    marker is the stack's name alone, as markers were before. A digest keeps the marker within every
    engine's tag and metadata alphabets.
    """
    if not ledger_salt:
        return stack
    return f"{stack}@{hashlib.sha256(ledger_salt.encode()).hexdigest()[:12]}"


def marked_stack(workspace: str) -> tuple[str, str]:
    """(stack, ledger digest) of a marker's workspace as marker_workspace writes it; "" for a bare name."""
    stack, _, digest = workspace.partition("@")
    return stack, digest


def moves_from(origin: str | None, marked: str | None) -> bool:
    """Whether a marker's workspace `marked` is the one `origin` (an `adopt` entry: stack@digest, or the
    stack name alone for any ledger of that name) says the project moves from."""
    if not origin or not marked:
        return False
    (stack, digest), (marked_name, marked_digest) = marked_stack(origin), marked_stack(marked)
    return stack == marked_name and (not digest or digest == marked_digest)


def marked_elsewhere(marked: str | None, ours: str | None) -> bool:
    """Whether a marker's workspace `marked` is provably not `ours` (both as marker_workspace writes them).

    A marker without a workspace proves nothing; nor does a bare stack name (as markers were before
    they named their ledger) against a ledger of that stack's name, or the other way round.
    """
    if not marked or not ours:
        return False
    (stack, digest), (our_stack, our_digest) = marked_stack(marked), marked_stack(ours)
    return stack != our_stack or bool(digest and our_digest and digest != our_digest)


def ownership_marker(ident: Identity, stack: str) -> str:
    """The marker stored in the engine (comment, tag, metadata) for a managed resource."""
    return json.dumps({"managed-by": "devstack", "owner": ident.owner, "stack": stack}, sort_keys=True)


def marker_owner(marker: str | None) -> str | None:
    """The owner recorded in a marker, or None when it is not one of ours."""
    try:
        data: Mapping[str, Any] = json.loads(marker or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("managed-by") != "devstack":
        return None
    owner = data.get("owner")
    return owner if isinstance(owner, str) else None


def marker_field(marker: str | None, key: str) -> str | None:
    """One field of a marker of ours (`stack`, a role's `kind`), None when absent or not a marker of ours."""
    if marker_owner(marker) is None:
        return None
    value = json.loads(marker or "{}").get(key)
    return value if isinstance(value, str) else None


def gone(verb: str, what: str, engine: str, ident: Identity) -> NotFound:
    """NotFound: the engine no longer has the object a verb acts on."""
    return NotFound(verb, what, f"it no longer exists in {engine} instance {ident.instance!r}",
                    "run `pulumi refresh`, then `pulumi up` creates it again")


def taken(verb: str, what: str, engine: str, ident: Identity, object_name: str, holder: str | None) -> Conflict:
    """Conflict: the engine object a declaration names carries another project's marker (`holder`) or none."""
    held_by = f"project {holder!r}" if holder else "something devstack does not manage"
    if verb == "create":
        hint = "choose another `name` for this resource; nothing was changed"
    else:
        hint = (f"it changed hands outside Pulumi; nothing was {'dropped' if verb == 'drop' else 'changed'} "
                f"(`pulumi refresh` marks the entry stale; give the declaration another `name`, or un-track it "
                f"with `devstack resource rm`, which drops nothing)")
    return Conflict(verb, what, f"{object_name} already exists in {engine} instance {ident.instance!r} and "
                                f"belongs to {held_by}", hint)


def adopted_elsewhere(verb: str, what: str, engine: str, ident: Identity, object_name: str, marked: str,
                      ours: str | None) -> Conflict:
    """Conflict: this project's object carries the marker of another workspace (`marked`) than `ours`."""
    if verb == "create":
        return Conflict(
            verb, what,
            f"{object_name} already exists in {engine} instance {ident.instance!r} and belongs to project "
            f"{ident.owner!r} of workspace {marked!r}, another ledger than this one ({ours!r})",
            "nothing was changed; two workspaces cannot hold one project on the same engines: give this one "
            f"another project name, or, to move project {ident.owner!r} here, un-track it in that workspace "
            f"first (docs/lifecycle.md's moving a project), then add `adopt: {{{ident.owner}: {marked}}}` "
            "under this workspace's devstack:workspace and run `pulumi up` again",
        )
    return Conflict(
        verb, what,
        f"its marker names workspace {marked!r}, not this one ({ours!r}): that workspace's up adopted it, and "
        "it is that workspace's now",
        f"nothing was {'dropped' if verb == 'drop' else 'changed'}; to let this workspace forget it, take it "
        "out of this workspace's ledger alone (`pulumi state delete`, as docs/lifecycle.md's moving a project says)",
    )
