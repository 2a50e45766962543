"""Garbage collection: engine scans (devstack.scan) reconciled against the ledger.

`reconcile` only reads; `prune` drops the orphans it is given through their
providers, one engine call each, and touches nothing else (not the ledger,
not foreign resources, not other workspaces' resources).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from devstack.errors import DevstackError
from devstack.ledger import Filters, GcError, GcItem, GcReport, Tracked, drop_data
from devstack.scan import Found, naming_mapping, scan
from providers import errors as perr
from providers import registry
from providers.base import server_address
from providers.markers import marked_stack
from providers.s3 import DEFAULT_REGION
from providers.identity import Identity
from providers.instances import SharedInstance, instances_from_config

#: Kinds that live inside (or hold grants on) another kind: dropped first.
DEPENDENT_KINDS = frozenset({"consumer", "lifecycle", "user", "acl", "access_key"})
#: Kinds that hold others (a NATS account, its streams): dropped last.
CONTAINER_KINDS = frozenset({"account"})


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
            except perr.DevstackError as err:
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
    except (KeyError, perr.InvalidSpec):
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
        return (f"marked with the bare stack name {stack!r} (as before markers named their ledger): any clone's "
                f"stack of that name may use it, so gc leaves it; drop it by hand if it is this workspace's")
    return f"marked for another ledger's stack {stack!r} ({marked}; this one marks {mark}): another clone's, say"


def reconcile(
    workspace: str, mark: str, filters: Filters, config: Mapping[str, Any], projects: set[str], tracked: list[Tracked]
) -> GcReport:
    """Sort every scanned resource into managed, orphan, retained, foreign or another workspace's; list stale
    ledger entries. Orphans belong to projects the workspace no longer lists; retained ones, outside the
    ledger, to projects it still lists.

    `mark` is the workspace this stack's markers record (marker_workspace): only a resource marked
    so is ever this workspace's orphan. One marked with the stack's bare name (as markers were before
    they named the ledger) is this workspace's only while its ledger holds it: outside, it may be
    another clone's stack of that name.
    """
    ours = {mark, marked_stack(mark)[0]}
    instances = [i for i in instances_from_config(config).values() if filters.engine in (None, i.engine)]
    servers = {i.name: server for i in instances if (server := _server(i.engine, i.host, i.port, i.region))}
    found, scanned, errors = _scan_all(sorted(instances, key=lambda i: i.name), filters)
    # Two instance names of one server (`localhost` and `127.0.0.1`, an instance renamed before the up
    # that follows) find the same objects: each counts once, under the first name.
    unique: dict[Key, Found] = {}
    for f in found:
        unique.setdefault((servers[f.instance], f.kind, f.engine_name), f)
    scanned_servers = {servers[name] for name in scanned}
    ledger = {key: t for t in tracked
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
            if f.owner in projects:
                managed += 1
            elif elsewhere:
                # Another workspace that lists a project of this name has re-marked it: it uses it now.
                others.append(_item(f, f"{_elsewhere(f.stack or '', mark)}, which lists project {f.owner!r} too"))
            else:
                orphans.append(_item(f, f"owned by project {f.owner!r}, which the workspace no longer lists"))
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
               project=t.ident.owner, stack=t.props.get("stack"), name=t.ident.name,
               reason="in the ledger but missing from the engine (`pulumi refresh` drops it from the ledger)")
        for key, t in sorted(ledger.items(), key=lambda item: item[1].sort_key) if key not in matched
    ]
    return GcReport(workspace=workspace, filters=filters, scanned=scanned, managed=managed, orphans=orphans,
                    retained=retained, stale=stale, foreign=foreign, other_workspaces=others, pruned=[], errors=errors)


def prune(config: Mapping[str, Any], orphans: list[GcItem]) -> tuple[list[str], list[GcError]]:
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
