"""`devstack recover`: the documented recovery after a killed `pulumi up`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pulumi import automation as auto

from devstack.errors import EngineError, stopped
from devstack.locks import backend_locks, locks_visible, release_lock
from devstack.models import Recovery
from devstack.stack import (
    PROGRAM_PROJECT,
    cli_error,
    open_stack,
    require_stack_name,
    run_cli,
    short_stack_name,
    stack_env,
    torn_metadata,
)
from devstack.state import export_deployment
from tools.pulumi_env import ROOT, cancelled_gracefully_on_interrupt


def recover(
    workspace: str = "local", backend_url: str | None = None, work_dir: Path = ROOT, *, env: Mapping[str, str] | None = None
) -> Recovery:
    """The documented recovery after a killed `pulumi up`: repair, unlock, resolve pending operations.

    On a file, postgres:// or s3:// backend it removes only the locks of runs killed on this machine, and
    refuses, changing nothing, while one runs here or another machine's run holds the lock (whether
    that one still runs cannot be seen from here: `pulumi cancel` once it is known not to). Elsewhere
    (gs://, ...), where locks cannot be seen, `pulumi cancel` removes any lock: run it once nothing
    else works on the stack.

    Creates that were in flight leave the ledger, made or not, and the rest is
    refreshed with the current stack config (`refresh --clear-pending-creates
    --run-program`). The next `pulumi up` adopts what the killed run made
    (setting the credentials the ledger records) and creates the rest; until
    then gc sees those as orphans. Nothing is created or dropped in an engine.
    """
    require_stack_name(workspace)  # before any file is touched
    variables = stack_env(backend_url, env)
    stale = backend_locks(variables, Path(work_dir), PROGRAM_PROJECT, short_stack_name(workspace))
    for lock in stale:
        # Its lock broken and its pending operations cleared, a running run would lose what it records.
        if lock.running_here:
            raise EngineError("recover", f"stack {workspace!r}", f"a pulumi run that holds its lock is still "
                              f"running on this machine ({lock.holder})", "recover is for a run that was killed: "
                              "wait for this one to end; nothing was changed")
        if lock.elsewhere:
            raise EngineError("recover", f"stack {workspace!r}", f"its lock is held by {lock.holder}, on another "
                              f"machine, where whether that run still runs cannot be seen from here",
                              f"nothing was changed; wait for it to end, or once it is known not to run, `pulumi "
                              f"cancel --stack {workspace}` removes its lock; then recover again")
    repaired = torn_metadata(variables["PULUMI_BACKEND_URL"], short_stack_name(workspace), Path(work_dir))
    for path in repaired:
        path.unlink()
    stack = open_stack(workspace, backend_url, work_dir, env=env)
    pending = len(export_deployment(stack).get("pending_operations") or [])
    if not locks_visible(variables["PULUMI_BACKEND_URL"]):
        run_cli(stack, "cancel", "--yes")  # another backend's lock cannot be seen: whichever it holds goes
    for lock in stale:
        # Only the killed runs', as checked above: `pulumi cancel` would also take the lock of a run
        # started since, which the refresh below then waits for (or fails on) instead.
        release_lock(variables, lock)
    done = Recovery(workspace=workspace, repaired=[str(p) for p in repaired], pending_cleared=0)
    try:
        with cancelled_gracefully_on_interrupt():
            stack.refresh(clear_pending_creates=True, run_program=True)
    except auto.errors.CommandError as err:
        raise stopped(EngineError("refresh", f"stack {workspace!r}", cli_error(err),
                                  "the stack is unlocked and its metadata repaired; once the cause is fixed, "
                                  "run `devstack recover` again"), done) from err
    return done.model_copy(update={"pending_cleared": pending})
