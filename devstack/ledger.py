"""The ledger (the Pulumi stack state) as a typed Python API: the entry points of the modules below,
in one namespace. Functions return pydantic models (devstack.models) and raise the typed errors of
`devstack.errors`. devstack.api opens a workspace as a whole (up, preview, env, create, doctor ...) over them.

- `open_stack(workspace="local", backend_url=None, work_dir=ROOT, *, env=None, create=False) -> auto.Stack`
  (devstack.stack, with `run_cli`, `short_stack_name`, `file_backend_root`)
- `tracked_resources(stack, show_secrets=False) -> list[Tracked]`: every tenant resource of the state;
  `stack_config(stack)`, `drop_data(config, ident, props)` (devstack.state)
- `list_resources(stack, *, project, engine, kind, instance, name, lifecycle, limit, cursor) -> ResourcePage`
  (devstack.listing); `lifecycle="deleted"` lists tombstones
- `show_resource(stack, name, *, engine, project, kind, show_secrets) -> ResourceDetail` (devstack.listing)
- `resource_history(stack, name, *, engine, project, kind) -> ResourceHistory` (devstack.listing)
- `record_removal(stack, ids, cause, *, kind, rows, at)`, `sync_history(stack)`, `observe(stack, id, at)`,
  `mark_stale(stack, id, at)`, `reconcile(stack, engine, instance, observed, at)`: the ledger's own
  lifecycle writes (devstack.history)
- `remove_resource(stack, name, *, engine, project, kind, purge_data, confirm) -> Removal` (devstack.removal)
- `destroy_stack(stack, *, purge_data, confirm) -> Destruction` (devstack.removal)
- `recover(workspace, backend_url, work_dir, *, env) -> Recovery` (devstack.recovery)
- `collect_garbage(stack, *, engine, kind, project, prune, confirm) -> GcReport` (devstack.gc)
- `service_env(stack, project, service, *, show_secrets) -> ServiceEnv` (devstack.environment)

`confirm` (devstack.errors.Confirm) is asked only when data would be dropped; None aborts with `Aborted`
before anything changes.
"""

from __future__ import annotations

from devstack.environment import service_env
from devstack.errors import (
    Aborted,
    AlreadyExists,
    Ambiguous,
    DevstackError,
    EngineError,
    IdentityConflict,
    InvalidQuery,
    InvalidTransition,
    NotFound,
    ScopeMismatch,
    StaleObservation,
)
from devstack.gc import GcReport, collect_garbage
from devstack.history import mark_stale, observe, reconcile, record_removal, sync_history
from devstack.listing import list_resources, resource_history, show_resource
from devstack.models import (
    Destruction,
    Event,
    Filters,
    ListFilters,
    Recovery,
    Removal,
    Resource,
    ResourceDetail,
    ResourceHistory,
    ResourcePage,
    ServiceEnv,
)
from devstack.recovery import recover
from devstack.removal import destroy_stack, remove_resource
from devstack.stack import PROGRAM_PROJECT, file_backend_root, open_stack, run_cli, short_stack_name
from devstack.state import Tracked, drop_data, stack_config, tracked_resources

__all__ = [
    "PROGRAM_PROJECT",
    "Aborted",
    "AlreadyExists",
    "Ambiguous",
    "Destruction",
    "DevstackError",
    "EngineError",
    "Event",
    "Filters",
    "GcReport",
    "IdentityConflict",
    "InvalidQuery",
    "InvalidTransition",
    "ListFilters",
    "NotFound",
    "Recovery",
    "Removal",
    "Resource",
    "ResourceDetail",
    "ResourceHistory",
    "ResourcePage",
    "ScopeMismatch",
    "ServiceEnv",
    "StaleObservation",
    "Tracked",
    "collect_garbage",
    "destroy_stack",
    "drop_data",
    "file_backend_root",
    "list_resources",
    "mark_stale",
    "observe",
    "open_stack",
    "reconcile",
    "record_removal",
    "recover",
    "remove_resource",
    "resource_history",
    "run_cli",
    "service_env",
    "short_stack_name",
    "show_resource",
    "stack_config",
    "sync_history",
    "tracked_resources",
]
