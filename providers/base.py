"""The kind contract: Pulumi's dynamic-provider verbs, implemented once over a few hooks.

A kind is its description (providers.description) plus the hooks that talk to the engine: `observe`,
`create_resource`, `update_resource`, `drop`, optionally `drift`, `refusals`, `login_works`,
`failures_named`. Admin credentials arrive through `configure`, never through inputs.

Every verb that writes outputs writes the entry's lifecycle (providers.lifecycle): a refresh that misses
the resource keeps it, stale, and the next `up` makes it again or adopts it.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import replace
from functools import wraps
from typing import Any, Callable, ContextManager, Mapping

from pulumi.dynamic import (CheckResult, ConfigureRequest, CreateResult, DiffResult, ReadResult, ResourceProvider,
                            UpdateResult)
from pydantic import BaseModel

from providers import lifecycle
from providers.description import POLICY_FIELDS, REACH, REFS, EngineObject, KindDescription
from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import CURRENT_NAMING, NAMING, PREFIXED, Identity, naming_of
from providers.instances import SharedInstance, adoptions_from_config, instances_from_config
from providers.markers import Observed, adopted_elsewhere, gone, marked_elsewhere, moves_from, taken


#: Engine objects this provider process created or adopted, and the declaration that did. Pulumi
#: creates a renamed resource (`shop-x` to `shop_x`, or another instance name for the same server)
#: before it deletes the old one; both name one engine object, which the delete must then leave alone.
_held_this_run: dict[EngineObject, Identity] = {}
_held_lock = threading.Lock()


def _engine_failures_named(verb: Callable[..., Any]) -> Callable[..., Any]:
    """Run a Pulumi verb inside the kind's `engine_errors` for its resource (its last argument)."""
    @wraps(verb)
    def named(self: KindProvider, *args: Any) -> Any:
        with self.engine_errors(args[-1]):
            return verb(self, *args)
    return named


class KindProvider(KindDescription, ResourceProvider):
    """One kind of one engine: its description plus the engine hooks."""

    # Admin credentials arrive through configure, never pickled: the provider need not be a secret.
    serialize_as_secret_always = False

    def __init__(self) -> None:
        super().__init__()
        self._instances: dict[str, SharedInstance] = {}
        self._adoptions: dict[str, str] = {}

    def __reduce__(self) -> tuple[type, tuple[()]]:
        # Pickled as its class alone: no admin password reaches the state, and no state dict (the SDK's
        # pickler grows per pickle, and a dict per resource overflowed the stack in large programs).
        return (type(self), ())

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Providers pickled with an (empty) state dict.
        self._instances, self._adoptions = {}, {}

    # --- hooks -----------------------------------------------------------

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        """The live resource, or None when it does not exist."""
        raise NotImplementedError

    def create_resource(self, instance: SharedInstance, ident: Identity, spec: BaseModel,
                        props: dict[str, Any]) -> dict[str, Any]:
        """Create (or, for an adopted resource, converge) and return output attributes."""
        raise NotImplementedError

    def update_resource(self, instance: SharedInstance, ident: Identity, old: dict[str, Any],
                        new: dict[str, Any]) -> dict[str, Any]:
        """Apply in-place changes from old outputs to new inputs; return attributes."""
        raise NotImplementedError

    def drop(self, instance: SharedInstance, ident: Identity, observed: Observed | None,
             props: dict[str, Any]) -> None:
        """Drop the resource and its data. `observed`: what the verb found under the identity, once, before
        any drop (None: nothing). Raise NotFound when it is already gone."""
        raise NotImplementedError

    def drift(self, olds: dict[str, Any]) -> list[str]:
        """Output attributes (refreshed by read) that differ from what the inputs imply."""
        return []

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        """(param, problem, fix) for each value the engine would refuse, asked by check only for values
        `may_be_refused`: a replacement must not drop the old resource for one that cannot be made."""
        return []

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool | None:
        """Whether `user` still logs in with the stored `password`; None where the kind has no such login."""
        return None

    def failures_named(self, instance: SharedInstance) -> ContextManager[None]:
        """Around a verb's engine calls: the client's errors for an engine that does not answer become
        EngineUnavailable naming the instance and its fix (for clients that do not already do that)."""
        return nullcontext()

    def engine_errors(self, props: Mapping[str, Any]) -> ContextManager[None]:
        """`failures_named` for the resource's instance (none known: the verb reports the missing entry)."""
        instance = self._instances.get(str(props.get("instance")))
        return self.failures_named(instance) if instance else nullcontext()

    # --- Pulumi verbs ----------------------------------------------------

    def configure(self, req: ConfigureRequest) -> None:
        self._instances = instances_from_config(req.config)
        self._adoptions = adoptions_from_config(req.config)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        result, old_params = self.static_check(olds, news), self.params_as_now(olds)
        # Offline validation checks with a provider Pulumi never configured: no engine to ask.
        if result.failures or not self._instances or not (
                asked := self.may_be_refused(old_params, result.inputs["params"], news)):
            return result
        ident = Identity.from_props(news)
        with self.engine_errors(news):
            spec = self.Spec.model_validate(result.inputs["params"])
            refused = self.refusals(self._instance(ident, "check"), ident, spec)
        result.failures.extend(self.refused_failures(refused, asked, creating=old_params is None))
        return result

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Pure: compares stored outputs with new inputs, calls no engine."""
        replaces = [name for name in Identity.field_names() if olds.get(name) != news.get(name)]
        old_params, new_params = self.params_as_now(olds) or {}, news.get("params") or {}
        changed = sorted(key for key in set(old_params) | set(new_params) if old_params.get(key) != new_params.get(key))
        live = {**olds, "params": old_params}
        replaces += [f"params.{key}" for key in changed
                     if key in self.create_only and not self.holds(key, new_params.get(key), live)]
        if replaces and olds.get("purge") and not news.get("purge"):
            # Pulumi deletes the old one with its old settings: the data would go, `purge: false` or not.
            raise Unsupported(
                "replace", f"{self.kind} {Identity.from_props(news)}",
                f"{', '.join(replaces)} replaces it in the same up that sets purge: false, and Pulumi deletes the "
                f"old one with its old purge: true, so its data would be dropped",
                "set purge: false alone and run `pulumi up` first, then make the change")
        changes = [f"params.{key}" for key in changed if f"params.{key}" not in replaces]
        changes += [name for name in (*POLICY_FIELDS, *self.revision_inputs()) if olds.get(name) != news.get(name)]
        changes += [REACH] if self.reach_kind and self.exact_reach(olds) != self.exact_reach(news) else []
        # Outputs any kind may report: a login that no longer works, settings beyond the params.
        changes += self.drift(olds) + [name for name in ("passwordInSync", "configInSync") if olds.get(name) is False]
        # A refresh missed it: the update makes it again (or adopts it), and the preview says so.
        changes += [lifecycle.LIFECYCLE] if lifecycle.is_stale(olds) else []
        # The server moved, or its host is spelled anew: an update gives every importing service the new address.
        instance = self._instances.get(str(news.get("instance")))
        if instance is not None and "host" in olds:
            changes += [name for name, now in self.address_outputs(instance).items() if olds.get(name) != now]
        return DiffResult(changes=bool(replaces or changes), replaces=replaces,
                          stables=[name for name in Identity.field_names() if name not in replaces],
                          # Engine names are fixed: the old resource must go before the new one can exist.
                          delete_before_replace=True)

    @_engine_failures_named
    def create(self, props: dict[str, Any]) -> CreateResult:
        ident = replace(Identity.from_props(props), naming=naming_of(props, CURRENT_NAMING))
        instance = self._instance(ident, "create")
        spec = self.Spec.model_validate(props.get("params") or {})
        ident, observed = self._adopted_naming(instance, ident)
        props = {**props, NAMING: ident.naming}
        return CreateResult(str(ident), {**self._make(instance, ident, spec, props, observed),
                                         **lifecycle.active(None)})

    @_engine_failures_named
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        ident = Identity.from_props(props)
        instance = self._instance(ident, "read")
        observed = self.observe(instance, ident)
        if observed is None or observed.owner != ident.owner:
            # Gone, or what has the name is someone else's: kept, stale, as it was last seen (recording the
            # other owner would make the next diff replace it, and a purge drop another project's data).
            # The stale mark goes into the inputs too, where the preview shows it.
            return ReadResult(id_, {**props, **lifecycle.stale(props)},
                              {**self._inputs_of(props), lifecycle.LIFECYCLE: lifecycle.STALE})
        # The address as configured now: after the instance moves, a refresh points every export at it.
        live = {**props, **self.address_outputs(instance), **observed.attributes, **lifecycle.active(props)}
        live["params"] = {**(props.get("params") or {}), **observed.params}
        if props.get("password") and props.get("user"):
            works = self.login_works(instance, str(props["user"]), str(props["password"]))
            if works is not None:
                live["passwordInSync"] = works  # false: drift, and the next update sets the password again
        # Back (made again by this project): the stale mark leaves the inputs with it.
        return ReadResult(id_, live, self._inputs_of(props) if lifecycle.is_stale(props) else None)

    @_engine_failures_named
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ident = Identity.from_props(news)
        instance = self._instance(ident, "update")
        ident = replace(ident, naming=naming_of(olds))  # made under these rules, it stays where they put it
        news = {**news, NAMING: ident.naming}
        if lifecycle.is_stale(olds):
            # A refresh missed it: made again, or adopted as create adopts (another project's: a Conflict).
            spec = self.Spec.model_validate(news.get("params") or {})
            made = self._make(instance, ident, spec, news, self.observe(instance, ident))
            return UpdateResult({**made, **lifecycle.active(olds)})
        # Dropped, re-made by someone else, or adopted by another workspace since the last refresh:
        # converging it would hand it (and its data) to this project.
        self._refuse_elsewhere("update", ident, self._owned(instance, ident, "update"), olds.get("stack"))
        return UpdateResult({**news, **self.update_resource(instance, ident, olds, news), **lifecycle.active(olds)})

    @_engine_failures_named
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # Pulumi skips delete for retained resources; this guard keeps data safe when it does not.
        if not props.get("purge"):
            return
        ident = Identity.from_props(props)
        instance = self._instance(ident, "delete")
        with _held_lock:
            holder = _held_this_run.get(self.object_of(instance, ident), ident)
        if holder != ident and holder.owner == ident.owner:
            return  # another declaration of the project holds it now
        observed = self._not_elsewhere(instance, ident, props)
        try:
            self.drop(instance, ident, observed, props)
        except NotFound:
            pass

    # --- outside a Pulumi run (the ledger's rm and destroy) ------------------

    def purge(self, ident: Identity, props: Mapping[str, Any]) -> None:
        """Drop one resource and its data: Conflict, nothing dropped, when another workspace's marker is on
        it; NotFound when it is already gone."""
        instance = self._instance(ident, "drop")
        with self.engine_errors(ident.as_props()):
            observed = self._not_elsewhere(instance, ident, props)
            self.drop(instance, ident, observed, {**props, **ident.as_props(), "purge": True})

    def refuse_another_workspaces(self, ident: Identity, props: Mapping[str, Any]) -> None:
        """Conflict when the resource's marker names another workspace than the one this ledger last marked
        it for (`props["stack"]`): checked for every resource before a purge drops any."""
        instance = self._instance(ident, "drop")
        with self.engine_errors(ident.as_props()):
            self._not_elsewhere(instance, ident, props)

    # --- helpers ---------------------------------------------------------

    def _make(self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any],
              observed: Observed | None) -> dict[str, Any]:
        """Create the resource, or adopt `observed` (what the engine has under `ident`) when it is this
        project's; a Conflict, touching nothing, when it is another's. Returns its outputs."""
        if observed is not None and observed.owner != ident.owner:
            raise self._conflict("create", ident, observed)
        if observed is not None:
            self._refuse_elsewhere("create", ident, observed, props.get("stack"))
            # Ours already (a killed run's, or retained by a replace): adopted as it is where it cannot change.
            wanted, live = spec.model_dump(mode="json"), {**observed.attributes, "params": observed.params}
            fixed = frozenset(key for key in self.create_only if not self.holds(key, wanted.get(key), live))
            self.require_same("create", ident, observed.params, wanted, fixed)
        attributes = self.create_resource(instance, ident, spec, props)
        with _held_lock:
            _held_this_run[self.object_of(instance, ident)] = ident
        return {**props, **attributes}

    def _inputs_of(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """The inputs outputs `props` were made from (create and update return those with the attributes),
        params as this release normalizes them."""
        keys = (*Identity.field_names(), "params", *POLICY_FIELDS, *self.revision_inputs(), REFS, REACH)
        inputs = {key: props[key] for key in keys if key in props}
        params = self.params_as_now(props)
        return {**inputs, "params": params} if params is not None else inputs

    def _instance(self, ident: Identity, verb: str) -> SharedInstance:
        try:
            return self._instances[ident.instance]
        except KeyError:
            hint = "add it under devstack:workspace.shared in the stack config"
            if verb == "delete":
                # Renamed instance: the new name may have adopted this very resource, which a purge would drop.
                hint += (f", or, if another instance name now declares it, un-track this one instead: "
                         f"`devstack resource rm {ident}` (the data stays)")
            raise InvalidSpec(verb, f"{self.kind} {ident}", f"the workspace has no shared instance {ident.instance!r}",
                              hint) from None

    def _adopted_naming(self, instance: SharedInstance, ident: Identity) -> tuple[Identity, Observed | None]:
        """`ident` and what the engine has under it; or, when that is nothing and older naming rules put this
        project's object elsewhere (an entry removed and declared again), that object, to adopt where it is."""
        observed = self.observe(instance, ident)
        if observed is not None or ident.naming == PREFIXED:
            return ident, observed
        try:
            if self.engine_name(ident.name, ident.owner, naming=PREFIXED) == self.engine_name(
                    ident.name, ident.owner, naming=ident.naming):
                return ident, None
        except InvalidSpec:
            return ident, None  # older rules could not name it: nothing can exist there
        legacy = replace(ident, naming=PREFIXED)
        found = self.observe(instance, legacy)
        return (legacy, found) if found is not None and found.owner == ident.owner else (ident, None)

    def _owned(self, instance: SharedInstance, ident: Identity, verb: str) -> Observed:
        """What the engine has under this identity, if it exists and carries this project's marker."""
        return self._ours(verb, ident, self.observe(instance, ident))

    def _ours(self, verb: str, ident: Identity, observed: Observed | None) -> Observed:
        """`observed`, when it exists and carries this project's marker; NotFound or Conflict otherwise."""
        if observed is None:
            raise gone(verb, f"{self.kind} {ident}", self.engine, ident)
        if observed.owner != ident.owner:
            raise self._conflict(verb, ident, observed)
        return observed

    def _not_elsewhere(self, instance: SharedInstance, ident: Identity, props: Mapping[str, Any]) -> Observed | None:
        """What the engine has under the identity, unless it is this project's and another workspace's marker
        is on it (Conflict): observed once for the whole drop."""
        observed = self.observe(instance, ident)
        if observed is not None and observed.owner == ident.owner:
            self._refuse_elsewhere("drop", ident, observed, props.get("stack"))
        return observed

    def _refuse_elsewhere(self, verb: str, ident: Identity, observed: Observed, ours: str | None,
                          held: str | None = None) -> None:
        """Conflict when `observed`'s marker names another workspace than `ours`, unless a create takes it over
        from the workspace `devstack:workspace.adopt` names. `held`: what exists, when not the resource itself."""
        if marked_elsewhere(observed.workspace, ours) and not (
                verb == "create" and moves_from(self._adoptions.get(ident.owner), observed.workspace)):
            raise adopted_elsewhere(verb, f"{self.kind} {ident}", self.engine, ident,
                                    held or self.object_label(ident), str(observed.workspace), ours)

    def _conflict(self, verb: str, ident: Identity, observed: Observed) -> Conflict:
        return taken(verb, f"{self.kind} {ident}", self.engine, ident, self.object_label(ident), observed.owner)
