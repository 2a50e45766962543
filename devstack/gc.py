"""`devstack resource gc`: engine scans (devstack.scan) reconciled against the ledger.

`collect_garbage` scans and reports; with `prune` it drops the orphans it found
through their providers, one engine call each, records them in the ledger's
history (gc.drop) with what its scan saw, and touches nothing else (not the
state, not foreign resources, not other workspaces' resources).
`reconcile` only reads; `prune_orphans` drops the orphans it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto
from pydantic import Field

from components.yamlfile import encryption_salt, unreadable_reason
from devstack import history
from devstack.errors import Confirm, DevstackError, InvalidQuery, require_confirmation
from devstack.locks import LockWait, wait_while_locked
from devstack.models import Filters, Model, validate_filters
from devstack.removal import history_kept
from devstack.scan import Found, naming_mapping, scan
from devstack.stack import short_name
from devstack.state import Tracked, drop_data, instances_config, tracked_resources
from providers import registry
from providers.description import server_address
from providers.errors import InvalidSpec
from providers.lifecycle import LAST_SEEN, is_stale
from providers.markers import marked_stack, marker_workspace
from providers.s3.client import DEFAULT_REGION
from providers.identity import Identity
from providers.instances import WORKSPACE_KEY, SharedInstance, instances_from_config, parse_object

#: Kinds that live inside (or hold grants on) another kind: dropped first.
DEPENDENT_KINDS = frozenset({"consumer", "lifecycle", "user", "acl", "access_key"})
#: Kinds that hold others (a NATS account, its streams): dropped last.
CONTAINER_KINDS = frozenset({"account"})


class GcItem(Model):
    """One resource a scan found (orphan, foreign, other workspace) or the ledger lists (stale)."""

    engine: str
    instance: str
    kind: str
    engine_name: str = Field(description="the name inside the engine")
    project: str | None = Field(description="owner from the ownership marker (ledger owner for stale); null = no marker")
    stack: str | None = Field(description="workspace recorded in the marker, when the engine keeps it")
    name: str | None = Field(description="the declaration name, when it can be derived")
    reason: str

    @property
    def same_object(self) -> tuple[str | None, ...]:
        """What tells one found object from another between two scans (not why it was listed)."""
        return (self.engine, self.instance, self.kind, self.engine_name, self.project, self.stack)


class GcError(Model):
    engine: str
    instance: str
    error: str


class GcReport(Model):
    """`devstack resource gc`: a complete scan reconciled against the ledger."""

    workspace: str
    filters: Filters
    scanned: list[str] = Field(description="instances scanned completely")
    managed: int = Field(description="resources both in the engine and in the ledger")
    orphans: list[GcItem] = Field(description="of projects the workspace no longer lists: --prune drops them")
    retained: list[GcItem] = Field(description="this workspace's, outside the ledger, of projects it still lists "
                                               "(their entry left the devstack.yaml): dropped only with "
                                               "--include-retained")
    stale: list[GcItem]
    foreign: list[GcItem]
    other_workspaces: list[GcItem] = Field(description="marked by devstack for another workspace: never touched")
    pruned: list[str] = Field(description="ids of orphans dropped (only with prune)")
    errors: list[GcError]


def workspace_projects(config: Mapping[str, Any], work_dir: Path) -> set[str]:
    """Names of the projects the workspace lists now; InvalidQuery when a project file cannot be read."""
    workspace = parse_object(config.get(WORKSPACE_KEY)) or {}
    if not workspace.get("shared"):
        # A report of nothing found would read as "all clean" while nothing was scanned.
        raise InvalidQuery("collect garbage in", "this stack",
                           f"its config has no {WORKSPACE_KEY} with shared instances, so there is nothing to scan",
                           "pass the --work-dir holding the stack's Pulumi.<stack>.yaml (the checkout by default)")
    names = set()
    for relative in workspace.get("projects") or []:
        path = Path(work_dir) / relative
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            why = None if isinstance(data, dict) and data.get("name") else "it has no top-level name"
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            data, why = None, unreadable_reason(err)
        if why:
            raise InvalidQuery("collect garbage in", f"workspace {workspace.get('name')!r}",
                               f"project file {relative} cannot be read ({why})",
                               "fix the workspace first: without its projects, gc cannot tell orphans")
        names.add(str(data["name"]))
    return names


def collect_garbage(
    stack: auto.Stack,
    *,
    engine: str | None = None,
    kind: str | None = None,
    project: str | None = None,
    prune: bool = False,
    include_retained: bool = False,
    confirm: Confirm | None = None,
    lock_wait: LockWait | None = None,
) -> GcReport:
    """Scan every instance in scope and reconcile with the ledger.

    Orphans: marked for this workspace but not in the ledger, or owned by a
    project the workspace no longer lists. Stale: in the ledger, missing from
    the engine. Foreign: no marker of ours, never touched. Resources marked
    for another workspace are listed apart and never touched either. With
    `prune` (after `confirm`), each orphan is dropped by its provider: one
    engine call per orphan, nothing else (the state is not changed).
    Retained: marked for this workspace, outside the ledger, of a project it
    still lists (an entry taken out of its devstack.yaml, data retained);
    pruned only with `include_retained` too.

    A prune also writes the ledger's history: a gc.drop tombstone per pruned
    object, and for each instance scanned completely (without `project`,
    which a scan's scope cannot express) its entries found active, the
    others stale. An instance whose scan failed changes nothing.
    """
    filters = validate_filters(engine, kind, project)
    if prune:
        # An up running on this stack makes resources it records only once each is made, and a killed one
        # left its pending creates unrecorded: they would look like this workspace's orphans.
        wait_while_locked(stack, "prune", "orphans", lock_wait or LockWait.default())
    config = instances_config(stack)
    projects = workspace_projects(config, Path(stack.workspace.work_dir))
    # The program knows its stack by the short name (`local` of `organization/local`), as the config file is named.
    short = short_name(stack)
    mark = marker_workspace(short, encryption_salt(Path(stack.workspace.work_dir), short))
    at = history.now()
    report, observed = _reconciled(stack.name, mark, filters, config, projects, lambda: tracked_resources(stack))
    doomed = report.orphans + (report.retained if include_retained else [])
    if not (prune and doomed):
        if prune:
            _record_scan(stack, config, report, observed, at)
        return report
    require_confirmation(confirm, f"drop {len(report.orphans)} orphans"
                         + (f" and {len(report.retained)} retained" if include_retained else "") + ": "
                         + ", ".join(f"{o.engine}/{o.instance}/{o.kind}/{o.engine_name}" for o in doomed))
    # While the question was open, an up may have started (a teammate's, on a shared ledger) or adopted
    # one: wait for any run holding the lock again, then drop only what a fresh scan, against the ledger
    # as it is once the scan is done, still finds so.
    wait_while_locked(stack, "prune", "orphans", lock_wait or LockWait.default())
    at = history.now()
    fresh, observed = _reconciled(stack.name, mark, filters, config, projects, lambda: tracked_resources(stack))
    still = {item.same_object for item in fresh.orphans + (fresh.retained if include_retained else [])}
    left = [GcError(engine=o.engine, instance=o.instance,
                    error=f"{o.engine}/{o.instance}/{o.kind}/{o.engine_name}: "
                          + ("no longer an orphan when confirmed (adopted or re-marked meanwhile)"
                             if o.instance in fresh.scanned else "could not be scanned again once confirmed")
                          + "; left as it is")
            for o in doomed if o.same_object not in still]
    pruned, errors = prune_orphans(config, [o for o in doomed if o.same_object in still])
    _record_scan(stack, config, fresh, observed, at)
    _record_pruned(stack, doomed, pruned)
    return report.model_copy(update={"pruned": pruned, "errors": report.errors + left + errors})


def _record_scan(stack: auto.Stack, config: Mapping[str, Any], report: GcReport,
                 observed: Mapping[tuple[str, str], list[str]], at: datetime) -> None:
    """Each instance the scan read completely, in the history: the entries it found active, last seen `at`
    (when the scan began), the others of its kinds stale. Never an instance whose scan failed."""
    if report.filters.project is not None:
        return  # the scan saw only that project's entries, the history's scope is the whole instance
    configured = instances_from_config(config)
    scans = [history.Scan(i.engine, i.name, frozenset(observed.get((i.engine, i.name), [])),
                          frozenset(_kinds_in_scope(i.engine, report.filters)))
             for i in (configured[name] for name in report.scanned)]
    with history_kept():
        history.reconcile_scans(stack, scans, at)  # one export of the state for every instance


def _record_pruned(stack: auto.Stack, doomed: list[GcItem], pruned: list[str]) -> None:
    """A gc.drop tombstone for each object pruned, named as prune_orphans names it."""
    rows = [history.snapshot_row(o.engine, o.instance, o.kind, o.name, o.project, engineName=o.engine_name,
                                 stack=o.stack) for o in doomed if o.name and o.project]
    done = set(pruned)
    rows = [r for r in rows if r["id"] in done]
    if rows:
        with history_kept():
            history.record_removal(stack, [], "prune", kind="gc.drop", rows=rows)



# --- scanning and reconciling --------------------------------------------------------------


def _kinds_in_scope(engine: str, filters: Filters) -> list[str]:
    """The kinds to scan: those whose objects the engine lists (not a NATS user, a signed credential alone)."""
    return [k for k, provider in registry.kinds(engine).items() if provider.listed and filters.kind in (None, k)]


def _scan_all(instances: list[SharedInstance], filters: Filters) -> tuple[list[Found], list[str], list[GcError]]:
    """Scan each instance in scope, in parallel (each waits on its own engine).

    An instance that fails is reported in the errors and left out of
    `scanned`, so none of its ledger entries can be taken for stale.
    """
    work = [(i, kinds) for i in instances if (kinds := _kinds_in_scope(i.engine, filters))]
    found, scanned, errors = [], [], []
    with ThreadPoolExecutor(max_workers=max(1, len(work))) as pool:
        futures = [(instance, pool.submit(scan, instance, kinds)) for instance, kinds in work]
        for instance, future in futures:
            try:
                found += future.result()
                scanned.append(instance.name)
            except DevstackError as err:
                errors.append(GcError(engine=instance.engine, instance=instance.name, error=str(err)))
            except Exception as err:  # a client library's own failure: this instance is not scanned, the rest are
                errors.append(GcError(engine=instance.engine, instance=instance.name,
                                      error=f"cannot scan: {type(err).__name__}: {err}"))
    return found, scanned, errors


#: Where an engine object lives: (engine, server address, port, AWS region or None), whatever the
#: instance name that reaches it. SQS, SNS, Kinesis and DynamoDB names are per region.
Server = tuple[str, str, int, str | None]
#: What reconciles a found resource with a ledger entry: its server, kind and engine name.
Key = tuple[Server, str, str]


def _server(engine: str, host: Any, port: Any, region: Any = None) -> Server | None:
    try:
        return (engine, server_address(str(host)), int(port), (region or DEFAULT_REGION) if engine == "localstack" else None)
    except (TypeError, ValueError):
        return None


def _ledger_key(t: Tracked, servers: Mapping[str, Server]) -> Key | None:
    """The entry's key. Its instance's server as configured now; an instance renamed away (the ledger
    still says `pg`, the config `pgnew`), by the address the resource recorded when it was made."""
    server = servers.get(t.ident.instance) or _server(t.ident.engine, t.props.get("host"), t.props.get("port"),
                                                      t.props.get("region"))
    try:
        engine_name = registry.provider_class(t.ident.engine, t.ident.kind).engine_name(t.ident.name, t.ident.owner,
                                                                                         naming=t.ident.naming)
    except (KeyError, InvalidSpec):
        return None
    return (server, t.ident.kind, engine_name) if server else None


def _item(f: Found, reason: str) -> GcItem:
    return GcItem(engine=f.engine, instance=f.instance, kind=f.kind, engine_name=f.engine_name,
                  project=f.owner, stack=f.stack, name=f.name, reason=reason)


def _elsewhere(marked: str, mark: str) -> str:
    """Why a marker's workspace `marked` is not this one's (`mark`, see marker_workspace)."""
    stack, digest = marked_stack(marked)
    if stack != marked_stack(mark)[0]:
        return f"marked for workspace {marked!r}"
    if not digest:
        return (f"marked with the bare stack name {stack!r} (no ledger digest in the marker): any clone's "
                f"stack of that name may use it, so gc leaves it; drop it by hand if it is this workspace's")
    return f"marked for another ledger's stack {stack!r} ({marked}; this one marks {mark}): another clone's, say"


def reconcile(
    workspace: str, mark: str, filters: Filters, config: Mapping[str, Any], projects: set[str], tracked: list[Tracked]
) -> GcReport:
    """Sort every scanned resource (see `_reconciled`)."""
    return _reconciled(workspace, mark, filters, config, projects, lambda: tracked)[0]


def _reconciled(
    workspace: str, mark: str, filters: Filters, config: Mapping[str, Any], projects: set[str],
    tracked: Callable[[], list[Tracked]],
) -> tuple[GcReport, dict[tuple[str, str], list[str]]]:
    """Sort every scanned resource into managed, orphan, retained, foreign or another workspace's; list stale
    ledger entries. Orphans belong to projects the workspace no longer lists; retained ones, outside the
    ledger, to projects it still lists.

    `mark` is the workspace this stack's markers record (marker_workspace): only a resource marked
    so is ever this workspace's orphan. One marked with the stack's bare name (as markers were before
    they named the ledger) is this workspace's only while its ledger holds it: outside, it may be
    another clone's stack of that name.

    `tracked` reads the ledger once the scan is done: what a run recorded while it scanned is then held.
    Whatever the ledger holds is never an orphan, listed project or not: a teammate's project this
    checkout has not pulled yet is in a shared ledger, and the next `up` settles a removed one.

    Also returns the ids of the ledger entries the scan found, by their (engine, instance).
    """
    ours = {mark, marked_stack(mark)[0]}
    instances = [i for i in instances_from_config(config).values() if filters.engine in (None, i.engine)]
    servers = {i.name: server for i in instances if (server := _server(i.engine, i.host, i.port, i.region))}
    found, scanned, errors = _scan_all(sorted(instances, key=lambda i: i.name), filters)
    tracked_now = tracked()
    # Two instance names of one server (`localhost` and `127.0.0.1`, an instance renamed before the up
    # that follows) find the same objects: each counts once, under the first name.
    unique: dict[Key, Found] = {}
    for f in found:
        unique.setdefault((servers[f.instance], f.kind, f.engine_name), f)
    scanned_servers = {servers[name] for name in scanned}
    ledger = {key: t for t in tracked_now
              if filters.matches(t.ident) and (key := _ledger_key(t, servers)) is not None and key[0] in scanned_servers
              and registry.provider_class(t.ident.engine, t.ident.kind).listed}
    managed, orphans, retained, foreign, others, matched = 0, [], [], [], [], set()
    for key, f in unique.items():
        if f.owner is None:
            if filters.project is None:
                foreign.append(_item(f, "carries no devstack ownership marker"))
            continue
        if filters.project not in (None, f.owner):
            continue
        entry = ledger.get(key)
        if entry is not None and entry.ident.owner == f.owner:
            # The ledger holds it: this workspace's, bare-named marker included, unless another re-marked it.
            elsewhere = bool(f.stack) and f.stack not in ours
            matched.add(key)
            if elsewhere and f.owner not in projects:
                # Another workspace that lists a project of this name has re-marked it: it uses it now.
                others.append(_item(f, f"{_elsewhere(f.stack or '', mark)}, which lists project {f.owner!r} too"))
            else:
                managed += 1
        elif f.stack == mark and f.doubt:
            others.append(_item(f, f"{f.doubt}: not provably this workspace's, so gc leaves it; drop it by hand "
                                   f"if it is"))
        elif f.stack == mark and f.owner in projects:
            # Its entry left the devstack.yaml of a project still here (retainOnDelete kept the data), or a
            # killed up made it unrecorded: the spec keeps it until asked (--include-retained).
            retained.append(_item(f, f"marked for this workspace, not in the ledger, of project {f.owner!r} which "
                                     f"the workspace still lists (its entry was removed, the data retained)"))
        elif f.stack == mark:
            orphans.append(_item(f, f"marked for this workspace but not in the ledger, of project {f.owner!r} "
                                    f"which the workspace no longer lists"))
        else:
            others.append(_item(f, _elsewhere(f.stack, mark) if f.stack else "its marker records no workspace"))
    stale = [
        GcItem(engine=t.ident.engine, instance=t.ident.instance, kind=t.ident.kind, engine_name=key[2],
               project=t.ident.owner, stack=t.props.get("stack"), name=t.ident.name, reason=_stale_reason(t))
        for key, t in sorted(ledger.items(), key=lambda item: item[1].sort_key) if key not in matched
    ]
    observed: dict[tuple[str, str], list[str]] = {}
    for key in matched:
        ident = ledger[key].ident
        observed.setdefault((ident.engine, ident.instance), []).append(str(ident))
    return GcReport(workspace=workspace, filters=filters, scanned=scanned, managed=managed, orphans=orphans,
                    retained=retained, stale=stale, foreign=foreign, other_workspaces=others, pruned=[],
                    errors=errors), observed


def _stale_reason(t: Tracked) -> str:
    """Why a ledger entry the scan missed is listed, and what makes it active again."""
    if is_stale(t.props):
        seen = f", last seen {t.props[LAST_SEEN]}" if t.props.get(LAST_SEEN) else ""
        return f"in the ledger, marked stale by a refresh{seen}, missing from the engine (`pulumi up` makes it again)"
    return ("in the ledger but missing from the engine (`pulumi refresh` marks it stale, keeping it; `pulumi up` "
            "makes it again)")


def prune_orphans(config: Mapping[str, Any], orphans: list[GcItem]) -> tuple[list[str], list[GcError]]:
    """Drop each orphan through its kind's provider (dependent kinds first): one engine call each.

    Returns the ids dropped and one error per orphan that could not be (no
    derivable declaration name, already gone, conflict, engine failure).
    """
    pruned, errors = [], []
    for orphan in sorted(orphans, key=lambda o: (o.kind not in DEPENDENT_KINDS, o.kind in CONTAINER_KINDS,
                                                         o.engine, o.instance, o.engine_name)):
        if orphan.name is None or orphan.project is None:
            errors.append(GcError(engine=orphan.engine, instance=orphan.instance,
                                  error=f"cannot drop {orphan.kind} {orphan.engine_name!r}: no declaration name maps to it"))
            continue
        ident = Identity(orphan.engine, orphan.instance, orphan.kind, orphan.name, orphan.project,
                         naming_mapping(orphan.engine, orphan.kind, orphan.name, orphan.project, orphan.engine_name))
        try:
            if drop_data(config, ident, {"params": {}, "stack": orphan.stack or ""}):
                pruned.append(str(ident))
            else:
                errors.append(GcError(engine=orphan.engine, instance=orphan.instance, error=f"{ident}: already gone"))
        except DevstackError as err:
            errors.append(GcError(engine=orphan.engine, instance=orphan.instance, error=str(err)))
    return pruned, errors
