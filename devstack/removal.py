"""`resource rm` and `destroy`: un-track resources, and with purge_data drop their data first.

`confirm` is a callable that receives a description of the data about to be
dropped and returns True to go ahead; None (or False) aborts with `Aborted`
before anything changes. It is asked only when data would be dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pulumi import automation as auto

from devstack import history
from devstack.errors import (
    Confirm,
    DevstackError,
    EngineError,
    IdentityConflict,
    InvalidQuery,
    require_confirmation,
    stopped,
)
from devstack.locks import LockWait, wait_while_locked, waiting_for_lock
from devstack.models import Destruction, Removal, Resource, validate_filters
from devstack.listing import find_resource
from devstack.stack import cli_error, gracefully
from devstack.state import Tracked, configured_provider, drop_data, instances_config, tracked_resources

log = logging.getLogger("devstack")


@contextmanager
def history_kept() -> Iterator[None]:
    """Around a history write of a verb that already changed (or is about to change) the state: a store
    that cannot be written is logged, not raised; the next read derives the tombstones, cause `state`."""
    try:
        yield
    except DevstackError as err:
        log.warning("warning: %s", err)


def _state_delete(stack: auto.Stack, urns: list[str], wait: LockWait) -> None:
    """Un-track resources: `pulumi state delete` (one CLI call, again once a lock it meets is released),
    never an engine call."""
    if not urns:
        return
    workspace, args = stack.workspace, ["state", "delete", *urns, "--yes", "--stack", stack.name, "--non-interactive"]

    try:
        # Each try cancels gracefully on Ctrl-C; a Ctrl-C while waiting between tries stops at once.
        waiting_for_lock(stack, "un-track", f"{len(urns)} resource(s)", wait, lambda: gracefully(
            lambda: workspace.pulumi_command.run(args, workspace.work_dir, dict(workspace.env_vars))))
    except auto.errors.CommandError as err:
        raise EngineError("run `pulumi state delete` on", f"stack {stack.name!r}", cli_error(err)) from err


def _dependents(tracked: Iterable[Tracked], urns: set[str]) -> list[Tracked]:
    return [t for t in tracked if t.urn not in urns and urns & set(t.dependencies)]


def _ordered_after(dependent: Tracked, target: Tracked) -> bool:
    """Whether `dependent` depends on `target` only by its kind's order (an acl after the project's
    topics, an access key after its buckets), not by naming it."""
    from providers import registry

    try:
        kind = registry.provider_class(dependent.ident.engine, dependent.ident.kind)
    except KeyError:
        return False
    return dependent.ident.instance == target.ident.instance and target.ident.kind in kind.after_kinds


def remove_resource(
    stack: auto.Stack,
    name: str,
    *,
    engine: str | None = None,
    project: str | None = None,
    kind: str | None = None,
    purge_data: bool = False,
    confirm: Confirm | None = None,
    before: Callable[[Resource], None] | None = None,
    lock_wait: LockWait | None = None,
) -> Removal:
    """Un-track one resource; with `purge_data`, drop its data first (after `confirm`).

    `before(resource)` runs once the resource is found, before anything changes,
    and may raise to change nothing (the command line checks its file edit there).

    Without purge_data only the ledger changes (`pulumi state delete`): the
    data stays and a later `pulumi up` that still declares it adopts it again.
    Refuses (InvalidQuery, nothing changed) a resource others depend on.
    Another run's lock on the stack is waited for (`lock_wait`, LockWait.default() when None), on every
    backend whose locks can be seen; a killed run's lock, or operations it left pending, refuse at once.
    """
    wait = lock_wait or LockWait.default()
    validate_filters(engine, kind, project)
    tracked = tracked_resources(stack)
    target = find_resource(tracked, name, engine=engine, project=project, kind=kind, verb="remove")
    dependents = _dependents(tracked, {target.urn})
    if dependents:
        hint = "remove those first"
        if all(_ordered_after(t, target) for t in dependents):
            hint = ("they do not use it, they are only made after it: to stop declaring it, take its entry out of "
                    "the devstack.yaml and run `pulumi up` (or `devstack topic rm` / `devstack s3 rb`), which moves "
                    "that order; to un-track the project's resources, remove those first")
        raise InvalidQuery("remove", str(target.ident), "other resources depend on it: "
                           + ", ".join(str(t.ident) for t in dependents), hint)
    if before is not None:
        before(Resource.of(target))
    wait_while_locked(stack, "drop the data of" if purge_data else "remove", str(target.ident), wait)
    dropped = gone = False
    if purge_data:
        require_confirmation(confirm, f"drop the data of {target.ident} in {target.ident.engine} "
                                      f"instance {target.ident.instance!r}")
        dropped = drop_data(instances_config(stack), target.ident, target.props)
        gone = not dropped
    done = Removal(workspace=stack.name, resource=Resource.of(target), untracked=False,
                   data_dropped=dropped, already_gone=gone)
    with history_kept():
        history.sync_history(stack)  # the history holds the entry before it leaves the state
    try:
        _state_delete(stack, [target.urn], wait)
    except EngineError as err:
        if not dropped:
            raise
        raise stopped(EngineError(err.verb, err.what, err.cause,
                                  "its data was dropped, and the ledger and its devstack.yaml still list it: "
                                  "once the stack is free, run this again (it finds the data gone and finishes)"),
                      done) from err
    with history_kept():
        history.record_removal(stack, [str(target.ident)], "rm --purge-data" if dropped else "rm")
    return done.model_copy(update={"untracked": True})


def _refuse_other_workspaces(config: Mapping[str, Any], tracked: list[Tracked]) -> None:
    """IdentityConflict, before anything is dropped, naming every resource another workspace adopted."""
    from providers import errors as perr

    refused = []
    for t in tracked:
        provider = configured_provider(config, t.ident.engine, t.ident.kind)
        try:
            provider.refuse_another_workspaces(t.ident, t.props)
        except perr.Conflict as err:
            refused.append(f"{t.ident}: {err.cause}")
        except perr.DevstackError:
            continue  # its own drop reports it
    if refused:
        raise IdentityConflict("drop the data of", f"{len(refused)} resource(s)", "; ".join(refused),
                               "nothing was dropped; take each out of this workspace's ledger alone first "
                               "(`pulumi state delete <its urn>`, as docs/lifecycle.md's moving a project says), then "
                               "destroy again")


def drop_order(tracked: list[Tracked]) -> list[Tracked]:
    """Dependents before what they depend on (a consumer before its stream, an ACL before its topics)."""
    remaining, ordered = list(tracked), []
    while remaining:
        needed = {dep for t in remaining for dep in t.dependencies}
        ready = [t for t in remaining if t.urn not in needed] or remaining[:1]  # a cycle cannot happen; never hang
        ordered += ready
        remaining = [t for t in remaining if t not in ready]
    return ordered


def _record_destroyed(stack: auto.Stack, ids: list[str], dropped: set[str]) -> None:
    """Tombstones for what a destroy took out of the ledger: cause `destroy --purge-data` for those whose
    data it dropped, `destroy` for the others (kept, or already gone)."""
    for cause, chosen in (("destroy --purge-data", [i for i in ids if i in dropped]),
                          ("destroy", [i for i in ids if i not in dropped])):
        if chosen:
            with history_kept():
                history.record_removal(stack, chosen, cause)


def destroy_stack(stack: auto.Stack, *, purge_data: bool = False, confirm: Confirm | None = None,
                  lock_wait: LockWait | None = None, project: str | None = None) -> Destruction:
    """Empty the stack, or with `project` take that project's tenant resources out of it. Without
    purge_data every tenant resource is only un-tracked: data stays.

    With purge_data (after `confirm`) each tenant resource's data is dropped
    through its provider first, dependents first, one engine call each. Then
    the tenant resources leave the ledger (`pulumi state delete`, so no
    provider delete can run whatever `purge` says) and `pulumi destroy`
    removes what is left (components, outputs); with `project`, there is no
    `pulumi destroy`: the other projects stay, and so does the project's
    component (the next `up` declares the project again while the workspace
    lists it, and deletes the component once it does not). A drop that fails
    raises before the ledger changes: what was dropped is "already gone" on
    a rerun. Another run's lock on the stack is waited for (`lock_wait`); a killed run's, or operations it
    left pending, refuse at once, nothing changed.
    """
    wait = lock_wait or LockWait.default()
    tracked = [t for t in tracked_resources(stack) if project in (None, t.ident.owner)]
    scope = f"project {project!r} of workspace {stack.name!r}" if project else f"workspace {stack.name!r}"
    dropped, gone = [], []

    def done(untracked: bool = False) -> Destruction:
        return Destruction(workspace=stack.name, project=project, dropped=dropped, already_gone=gone,
                           untracked=[str(t.ident) for t in tracked] if untracked else [])

    wait_while_locked(stack, "drop the data of" if purge_data and tracked else "destroy", scope, wait)
    if purge_data and tracked:
        require_confirmation(confirm, f"drop the data of {len(tracked)} resources of {scope}: "
                                      + ", ".join(str(t.ident) for t in tracked))
        config = instances_config(stack)
        _refuse_other_workspaces(config, tracked)
        for t in drop_order(tracked):
            try:
                (dropped if drop_data(config, t.ident, t.props) else gone).append(str(t.ident))
            except (IdentityConflict, EngineError) as err:
                if not dropped:
                    raise
                # Say what already happened: a rerun finds those gone, and stops here again until refreshed.
                raise stopped(type(err)(err.verb, err.what, err.cause,
                                        f"{err.hint}; {len(dropped)} resource(s) before it were dropped, the "
                                        "ledger is unchanged: `pulumi refresh`, then destroy again"),
                              done()) from err
    if tracked:
        with history_kept():
            history.sync_history(stack)
    try:
        _state_delete(stack, [t.urn for t in tracked], wait)
    except EngineError as err:
        if not dropped:
            raise
        raise stopped(EngineError(err.verb, err.what, err.cause,
                                  f"the data of {len(dropped)} resource(s) was dropped, and the ledger still "
                                  "lists them: once the stack is free, `pulumi refresh`, then destroy again"),
                      done()) from err
    _record_destroyed(stack, [str(t.ident) for t in tracked], set(dropped))
    if project is not None:
        return done(untracked=True)
    try:
        waiting_for_lock(stack, "destroy", f"stack {stack.name!r}", wait, lambda: gracefully(stack.destroy))
    except auto.errors.CommandError as err:
        raise stopped(EngineError("destroy", f"stack {stack.name!r}", cli_error(err)), done(untracked=True)) from err
    except EngineError as err:  # locked past the wait: the tenant resources are out of the ledger already
        raise stopped(EngineError(err.verb, err.what, err.cause, "its tenant resources left the ledger; once the "
                                  "stack is free, destroy again to remove the rest"), done(untracked=True)) from err
    return done(untracked=True)
