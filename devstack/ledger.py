"""The ledger (the Pulumi stack state) as a typed Python API: the entry points of the modules below,
in one namespace. Functions return pydantic models (devstack.models) and raise the typed errors of
`devstack.errors`.

- `open_stack(workspace="local", backend_url=None, work_dir=ROOT, *, env=None, create=False) -> auto.Stack`
  (devstack.stack, with `run_cli`, `short_stack_name`, `file_backend_root`)
- `tracked_resources(stack, show_secrets=False) -> list[Tracked]`: every tenant resource of the state;
  `stack_config(stack)`, `drop_data(config, ident, props)` (devstack.state)
- `list_resources(stack, *, project, engine, kind, limit, cursor) -> ResourcePage` (devstack.listing)
- `show_resource(stack, name, *, engine, project, kind, show_secrets) -> ResourceDetail` (devstack.listing)
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
    Ambiguous,
    DevstackError,
    EngineError,
    IdentityConflict,
    InvalidQuery,
    NotFound,
    ScopeMismatch,
)
from devstack.gc import GcReport, collect_garbage
from devstack.listing import list_resources, show_resource
from devstack.models import Destruction, Filters, Recovery, Removal, Resource, ResourceDetail, ResourcePage, ServiceEnv
from devstack.recovery import recover
from devstack.removal import destroy_stack, remove_resource
from devstack.stack import PROGRAM_PROJECT, file_backend_root, open_stack, run_cli, short_stack_name
from devstack.state import Tracked, drop_data, stack_config, tracked_resources

__all__ = [
    "PROGRAM_PROJECT",
    "Aborted",
    "Ambiguous",
    "Destruction",
    "DevstackError",
    "EngineError",
    "Filters",
    "GcReport",
    "IdentityConflict",
    "InvalidQuery",
    "NotFound",
    "Recovery",
    "Removal",
    "Resource",
    "ResourceDetail",
    "ResourcePage",
    "ScopeMismatch",
    "ServiceEnv",
    "Tracked",
    "collect_garbage",
    "destroy_stack",
    "drop_data",
    "file_backend_root",
    "list_resources",
    "open_stack",
    "recover",
    "remove_resource",
    "run_cli",
    "service_env",
    "short_stack_name",
    "show_resource",
    "stack_config",
    "tracked_resources",
]
