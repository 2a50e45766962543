"""The one shared base every kind builds on.

`KindProvider` implements Pulumi's dynamic-provider verbs (check, diff,
create, read, update, delete) once, on top of a few hooks a kind fills in:
`observe`, `create_resource`, `update_resource`, `drop`, and optionally
`drift`. Resource inputs carry only the identity, the params, the credential
policy and the purge flag; admin credentials arrive through `configure` from
the stack config and never through inputs.
"""

from __future__ import annotations

import json
import socket
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from functools import lru_cache, wraps
from typing import Any, Callable, ClassVar, ContextManager, Iterable, Mapping

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from providers import naming as naming_rules
from providers.errors import Conflict, InvalidSpec, NotFound, Unsupported
from providers.identity import CURRENT_NAMING, NAMING, PREFIXED, Identity, naming_of
from providers.instances import SharedInstance, adoptions_from_config, instances_from_config
from providers.markers import marked_elsewhere, moves_from

#: Inputs that are not identity and not params, compared by diff as updates.
POLICY_FIELDS = ("credentials", "purge", "stack")
#: The input that records which revision of a kind's access rules made or last updated a resource.
ACCESS_RULES = "accessRules"
CREDENTIAL_POLICIES = ("predictable", "generated")
#: The input the program fills, per reference param, with the engine name the referenced resource records
#: (its naming may not be the referencing one's).
REFS = "refs"
#: The input the program fills, for a kind whose grants cover the project's resources of `reach_kind`,
#: with the engine names of those on the instance: grants reach by exact name what no prefix covers.
REACH = "reach"


def referenced_name(props: Mapping[str, Any], param: str) -> str | None:
    """The engine name of the resource `param` references, as the program passed it; None when it did not."""
    value = (props.get(REFS) or {}).get(param)
    return str(value) if value else None


@dataclass
class Observed:
    """What `observe` found in the engine.

    `owner` is read from the ownership marker: None means the resource exists
    but carries no marker of ours (a foreign resource we must not touch).
    `attributes` are live values that `read` merges into the outputs.
    `workspace` is the workspace the marker records (as marker_workspace
    writes it), None when the engine keeps none for it.
    """

    owner: str | None
    params: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    workspace: str | None = None


#: Engine objects this provider process created or adopted, (engine, host, port, kind, engine
#: name), and the declaration that did. One process serves one deployment, in which Pulumi
#: creates a resource whose name changed (`name: shop-x` to `shop_x`, or the same server under
#: another instance name) before it deletes the old one; both name the same engine object,
#: and that delete must leave it to the new declaration, which adopted it, instead of dropping
#: it (with purge) from under it.
_held_this_run: dict[tuple[str, str, int, str, str], Identity] = {}
_held_lock = threading.Lock()


@lru_cache(maxsize=None)
def server_address(host: str) -> str:
    """The IPv4 address `host` names (`localhost` and `127.0.0.1` are one server), or `host` itself."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def _engine_failures_named(verb: Callable[..., Any]) -> Callable[..., Any]:
    """Run a Pulumi verb inside the kind's `engine_errors` for its resource (the verb's last argument:
    its props, the new ones for an update)."""
    @wraps(verb)
    def named(self: KindProvider, *args: Any) -> Any:
        with self.engine_errors(args[-1]):
            return verb(self, *args)
    return named


class KindProvider(ResourceProvider):
    """One kind of one engine. Subclasses set the class attributes and hooks."""

    engine: ClassVar[str]
    kind: ClassVar[str]
    Spec: ClassVar[type[BaseModel]]
    #: Params that the engine cannot change after creation: a change replaces.
    create_only: ClassVar[frozenset[str]] = frozenset()
    #: Params the engine may refuse to change in place (`refusals` is asked for them too).
    refusable_in_place: ClassVar[frozenset[str]] = frozenset()
    #: Whether a replacement over a create-only change moves a retained resource instead of meeting it.
    retained_replacement_moves: ClassVar[bool] = False
    #: Output attributes a resource of this kind exports (connection details).
    attributes: ClassVar[tuple[str, ...]] = ()
    #: Attributes that must be stored encrypted in the state.
    secret_outputs: ClassVar[tuple[str, ...]] = ()
    #: Params naming another declaration of the project: param -> kind (same instance).
    references: ClassVar[dict[str, str]] = {}
    #: The output attribute holding this kind's engine name, for declarations that reference it (`refs`).
    name_attribute: ClassVar[str | None] = None
    #: The kind of the project's resources (on the same instance) this kind's grants reach (`reach`: their
    #: engine names), or several kinds (`reach`: `<kind>:<engine name>` each).
    reach_kind: ClassVar[str | tuple[str, ...] | None] = None
    #: Those of `references` that, left out, name the declaration called after the project.
    default_references: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def referenced(cls, params: Mapping[str, Any], owner: str, name: str | None = None) -> dict[str, str]:
        """param -> the name of the declaration it references (a default one left out: the project's).
        `name`: the referencing declaration's, for a kind whose default follows it (a lifecycle's bucket)."""
        return {param: params.get(param) or owner for param in cls.references
                if params.get(param) or param in cls.default_references}
    #: Kinds on the same instance this one is created after and deleted before.
    after_kinds: ClassVar[tuple[str, ...]] = ()
    #: Whether every project with a declaration on the instance gets one of this kind, named after it,
    #: unless it declares one itself (a NATS account).
    implied: ClassVar[bool] = False
    #: Whether the engine lists this kind's objects, for gc to find (a NATS user is a signed credential the
    #: server never stores: only its account is listed).
    listed: ClassVar[bool] = True
    #: Every declaration of this kind by one project on one instance logs in as the
    #: same principal, so they can only agree on a password if none is generated.
    login_per_owner: ClassVar[bool] = False
    #: The revision of the access rules create and update give a tenant beyond its params (a MinIO
    #: key's policy): a release that tightens them raises it. It is an input (`accessRules`), so the
    #: first `pulumi up` after such an upgrade updates what older rules made, with no refresh first
    #: (a refresh alone would not find rules that were never drift). None: never changed.
    access_rules: ClassVar[int | None] = None

    # The provider holds no secret when pickled into the state (admin
    # credentials arrive later through configure), so it need not be one.
    serialize_as_secret_always = False

    def __init__(self) -> None:
        super().__init__()
        self._instances: dict[str, SharedInstance] = {}
        self._adoptions: dict[str, str] = {}

    def __reduce__(self) -> tuple[type, tuple[()]]:
        # Pickled as its class alone, so configured instances (admin passwords) never
        # reach the state, and unpickling builds a fresh, unconfigured provider. No
        # state dict either: the SDK's pickler wraps its dict writer once more on every
        # resource it pickles, so writing a dict costs O(resources so far) and, past
        # about 900 resources in one program, overflows the stack.
        return (type(self), ())

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Only for providers pickled by earlier versions (class plus an empty state).
        self._instances, self._adoptions = {}, {}

    @classmethod
    def revision_inputs(cls) -> dict[str, int]:
        """The inputs that say which release's rules a resource was made or last updated under."""
        return {} if cls.access_rules is None else {ACCESS_RULES: cls.access_rules}

    @classmethod
    def normalized_params(cls, params: dict[str, Any] | None, name: str, owner: str) -> dict[str, Any]:
        """`params` as check stores them: validated, defaults filled in, JSON types.

        The program registers params in this form too. Pulumi shows a refresh's
        input diff against the program's inputs, so raw ones would flag `~params`
        on every unchanged resource.
        """
        return cls.Spec.model_validate(params or {}).model_dump(mode="json")

    # --- hooks -----------------------------------------------------------

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        """The engine-level identifier of a declaration under `naming` (providers.identity): pure and
        stable across runs.

        Raise InvalidSpec naming the rule when `name` cannot be mapped. Two
        declarations on one instance with the same engine name collide.
        """
        raise NotImplementedError

    #: Where the engine keeps this kind's objects, when kinds share it (PostgreSQL roles and users are
    #: one namespace); None: the kind's own.
    namespace: ClassVar[str | None] = None
    #: Whether this kind's objects are logins, in the namespace where the instance's admin user is one too.
    logins: ClassVar[bool] = False

    @classmethod
    def engine_object(cls, host: str, port: int, name: str, owner: str, *,
                      naming: int = CURRENT_NAMING) -> tuple[str, str, int, str, str]:
        """What declaration `name` names in the engine at host:port, the same for every spelling of one
        server (`localhost`, `127.0.0.1`) and of one engine name (`shop-x`, `shop_x`)."""
        return cls.object_named(host, port, cls.engine_name(name, owner, naming=naming))

    @classmethod
    def object_named(cls, host: str, port: int, engine_name: str) -> tuple[str, str, int, str, str]:
        """The engine object of this kind called `engine_name` at host:port (see engine_object)."""
        return (cls.engine, server_address(host), port, cls.namespace or cls.kind, engine_name)

    @classmethod
    def owner_objects(cls, host: str, port: int, owner: str) -> tuple[tuple[str, str, int, str, str], ...]:
        """Engine objects besides its own that every declaration of this kind in project `owner` makes and
        shares (a PostgreSQL database's login role): no other declaration may name one."""
        return ()

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        """(field, why) when declaration `name` cannot exist beside `other`, of the same kind on the same
        instance, for a reason beyond their engine names (NATS streams sharing a subject); else None.
        `declared`: the params of the project's declarations on that instance by (kind, name), for a
        clash that depends on what both reference (two consumers of one work-queue stream)."""
        return None

    @classmethod
    def misfit(cls, param: str, params: dict[str, Any], target: str, target_params: dict[str, Any],
               owner: str) -> tuple[str, str] | None:
        """(field, why) when a declaration with `params` cannot live on the declaration `target` that its
        `param` references (a NATS consumer filtering outside its stream's subjects); else None."""
        return None

    @classmethod
    def reached_by(cls, name: str, owner: str,
                   holders: Mapping[str, Iterable[str]]) -> tuple[str, str, str] | None:
        """(kind, owner, pattern) of another project's declaration on the same server whose credential
        would reach this one by the name pattern (a MinIO key reaches every `<owner>-*` bucket); else
        None. `holders` maps each kind declared on that server to the projects declaring it."""
        return None

    def observe(self, instance: SharedInstance, ident: Identity) -> Observed | None:
        """Return the live resource, or None when it does not exist."""
        raise NotImplementedError

    def create_resource(
        self, instance: SharedInstance, ident: Identity, spec: BaseModel, props: dict[str, Any]
    ) -> dict[str, Any]:
        """Create (or, for an adopted resource, converge) and return output attributes."""
        raise NotImplementedError

    def update_resource(
        self,
        instance: SharedInstance,
        ident: Identity,
        old: dict[str, Any],
        new: dict[str, Any],
    ) -> dict[str, Any]:
        """Apply in-place changes from old outputs to new inputs; return attributes."""
        raise NotImplementedError

    def drop(self, instance: SharedInstance, ident: Identity, props: dict[str, Any]) -> None:
        """Drop the resource and its data. Raise NotFound when it is already gone."""
        raise NotImplementedError

    def drift(self, olds: dict[str, Any]) -> list[str]:
        """Output attributes (refreshed by read) that differ from what the inputs imply."""
        return []

    @classmethod
    def exact_reach(cls, props: Mapping[str, Any]) -> list[str]:
        """Of the `reach` in `props`, the names this kind's grants must list one by one (no prefix covers them)."""
        return []

    def holds(self, param: str, value: Any, live: dict[str, Any]) -> bool:
        """Whether a resource whose outputs are `live` already is what create-only `param` = `value` asks
        for, so that it stays (an update at most) instead of being made anew. Pure.

        A param missing from `live` was made with its default: Pulumi drops null outputs, so an
        unset range key or pin is stored as nothing, and setting one must still replace."""
        params = live.get("params") or {}
        return params.get(param, self._default(param)) == value

    def defaults(self, params: Mapping[str, Any], name: str, owner: str) -> dict[str, Any]:
        """What each of `params` is for a declaration that leaves it out (the kind may derive one
        from the resource's name and owner, as a stream's subjects)."""
        return {key: self._default(key) for key in params}

    def _default(self, param: str) -> Any:
        field = self.Spec.model_fields.get(param)
        if field is None or field.is_required():
            return None
        return to_jsonable_python(field.get_default(call_default_factory=True))

    def refusals(self, instance: SharedInstance, ident: Identity, spec: BaseModel) -> list[tuple[str, str, str]]:
        """(param, problem, fix) for each value the engine would refuse. Asked by check only when a
        create-only value (or one of `refusable_in_place`) changes, or a create sets one away from its
        default: a replacement drops the old resource first, and must not drop it for one that cannot be
        made; a create or update refused half-way through an up stops it after others changed."""
        return []

    def failures_named(self, instance: SharedInstance) -> ContextManager[None]:
        """Around a verb's engine calls: the client's own errors for an engine that does not answer (or
        stops answering) become EngineUnavailable naming the instance and its fix. For kinds whose
        clients do not already do that where they are made."""
        return nullcontext()

    def engine_errors(self, props: Mapping[str, Any]) -> ContextManager[None]:
        """`failures_named` for the resource's instance (also for callers of `drop`: `devstack`)."""
        instance = self._instances.get(str(props.get("instance")))
        # No such instance: the verb reports the missing workspace entry.
        return self.failures_named(instance) if instance else nullcontext()

    def login_works(self, instance: SharedInstance, user: str, password: str) -> bool | None:
        """Whether `user` still logs in with the stored `password` (a reset outside Pulumi breaks it);
        None where the kind has no such login to try."""
        return None

    # --- Pulumi verbs ----------------------------------------------------

    def configure(self, req: ConfigureRequest) -> None:
        self._instances = instances_from_config(req.config)
        self._adoptions = adoptions_from_config(req.config)

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        failures = [
            CheckFailure(name, "is required")
            for name in Identity.field_names()
            if not news.get(name)
        ]
        if news.get("engine") != self.engine or news.get("kind") != self.kind:
            failures.append(CheckFailure("kind", f"this provider serves {self.engine}/{self.kind} only"))
        inputs = {**news, **self.revision_inputs()}
        if news.get("name") and not naming_rules.NAME.fullmatch(str(news["name"])):
            failures.append(CheckFailure("name", f"{news['name']!r} is not a resource name: {naming_rules.NAME_RULE}"))
        elif news.get("name") and news.get("owner") and not self._same_identity(_olds, news):
            # A resource that exists keeps the name its naming gave it (kept in its outputs, not here).
            try:
                self.engine_name(str(news["name"]), str(news["owner"]), naming=naming_of(news, CURRENT_NAMING))
            except InvalidSpec as err:
                failures.append(CheckFailure("name", err.cause))
            except NotImplementedError:
                pass
        failures += self._reference_failures(news.get("params") or {})
        if news.get("credentials", "predictable") not in CREDENTIAL_POLICIES:
            failures.append(CheckFailure("credentials", f"must be one of {', '.join(CREDENTIAL_POLICIES)}"))
        try:
            inputs["params"] = self.normalized_params(news.get("params"), str(news.get("name") or ""),
                                                      str(news.get("owner") or ""))
        except ValidationError as err:
            failures.extend(
                CheckFailure("params." + ".".join(str(p) for p in e["loc"]), e["msg"])
                for e in err.errors()
            )
        old_params = self._params_as_now(_olds)
        if not failures:
            failures += self.check_params(str(news["name"]), str(news["owner"]), inputs["params"],
                                          _olds.get("params") or {})
        if not failures:
            failures += self._retained_replacements(_olds, old_params, inputs)
        # Offline validation (`devstack validate`, the program) checks with a provider Pulumi never
        # configured: no instances, so no engine to ask.
        if not failures and self._instances and (asked := self._may_be_refused(old_params, inputs["params"], news)):
            ident = Identity.from_props(news)
            spec = self.Spec.model_validate(inputs["params"])
            with self.engine_errors(news):
                refused = self.refusals(self._instance(ident, "check"), ident, spec)
            # A change is refused only for what it sets: a value kept as it is (a replication factor
            # a broker down cannot hold now) is no reason to refuse a change of another.
            creating = old_params is None
            failures.extend(CheckFailure(f"params.{self._spelled(param)}",
                                         f"{problem}; {self._not_done(param, creating)} ({fix})")
                            for param, problem, fix in refused if creating or param in asked)
        return CheckResult(inputs, failures)

    def _reference_failures(self, params: Mapping[str, Any]) -> list[CheckFailure]:
        """A reference param that cannot name a declaration: it is a declaration's name, not an engine's."""
        return [CheckFailure(f"params.{self._spelled(param)}", f"{value!r} names no declaration: {naming_rules.NAME_RULE}")
                for param in self.references
                if isinstance(value := params.get(param), str) and not naming_rules.NAME.fullmatch(value)]

    @staticmethod
    def _same_identity(olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
        return bool(olds) and all(olds.get(name) == news.get(name) for name in Identity.field_names())

    def check_params(self, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        """The kind's own checks of valid (normalized) params: those that need the owner or the
        previous inputs (`old_params`, as stored). Pure; run before anything asks the engine."""
        return []

    def _not_done(self, param: str, creating: bool) -> str:
        if creating:
            return f"the {self.kind} was not made"
        return f"the {self.kind} was not {'changed' if param in self.refusable_in_place else 'replaced'}"

    def _retained_replacements(self, olds: dict[str, Any], old_params: dict[str, Any] | None,
                               inputs: dict[str, Any]) -> list[CheckFailure]:
        """A create-only value changed on a resource Pulumi will delete with `purge: false` (its settings
        as they were): the delete keeps it, and the replacement's create finds it with the old value and
        refuses to adopt it, part-way through the up. Said here, so the preview fails instead.

        Only a value that was set: an unset one (a Redis index's pin) may already hold what is asked.
        `old_params`: those of `olds` as `_params_as_now` reads them."""
        if (self.retained_replacement_moves or old_params is None or olds.get("purge")
                or any(olds.get(name) != inputs.get(name) for name in Identity.field_names())):
            return []
        failures = []
        live = {**olds, "params": old_params}
        for key in sorted(self.create_only):
            value = inputs["params"].get(key)
            # One it holds already (a Redis index unpinned keeps its index) is an update, not a replacement.
            if old_params.get(key) is not None and old_params.get(key) != value and not self.holds(key, value, live):
                param, value = self._spelled(key), json.dumps(_whole(old_params[key]))
                failures.append(CheckFailure(
                    f"params.{param}", f"cannot change from {value} while the {self.kind} is retained (purge: false): "
                    f"its replacement would find it as it is and refuse it (to make it anew with another value, "
                    f"its data dropped, first set `purge: true` keeping {param}: {value} and run `pulumi up`)"))
        return failures

    def _spelled(self, param: str) -> str:
        """A param as devstack.yaml spells it (`replicationFactor` for `replication_factor`)."""
        field = self.Spec.model_fields.get(param)
        return (field.alias if field else None) or param

    def _may_be_refused(self, old_params: dict[str, Any] | None, params: dict[str, Any],
                        news: Mapping[str, Any]) -> frozenset[str]:
        """The params that set a value the engine may refuse (a create-only one or one of
        `refusable_in_place`): changed on an existing resource (`old_params`: its inputs' params as
        `_params_as_now` reads them), or away from its default on a new one. A default the engine
        always takes, so most checks of a create call no engine."""
        before = old_params if old_params is not None else self.defaults(params, str(news["name"]), str(news["owner"]))
        return frozenset(key for key in self.create_only | self.refusable_in_place
                         if before.get(key) != params.get(key))

    def _params_as_now(self, props: dict[str, Any] | None) -> dict[str, Any] | None:
        """Stored params as this release normalizes them: an older one kept `utf-8` where this one keeps
        `UTF8`, and comparing them raw would replace an unchanged database (dropping it, with purge).
        As stored when they no longer validate; None when there are none (a create)."""
        params = props.get("params") if props else None
        if not isinstance(params, dict):
            return None
        try:
            return self.normalized_params(params, str(props.get("name") or ""), str(props.get("owner") or ""))
        except (ValidationError, InvalidSpec):
            return params

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Pure: compares stored outputs with new inputs, calls no engine."""
        replaces = [name for name in Identity.field_names() if olds.get(name) != news.get(name)]
        old_params, new_params = self._params_as_now(olds) or {}, news.get("params") or {}
        changed_params = sorted(
            key for key in set(old_params) | set(new_params) if old_params.get(key) != new_params.get(key)
        )
        replaces += [f"params.{key}" for key in changed_params
                     if key in self.create_only and not self.holds(key, new_params.get(key), {**olds, "params": old_params})]
        if replaces and olds.get("purge") and not news.get("purge"):
            # Pulumi deletes the old one with its old settings: the data would go, `purge: false` or not.
            raise Unsupported(
                "replace", f"{self.kind} {Identity.from_props(news)}",
                f"{', '.join(replaces)} replaces it in the same up that sets purge: false, and Pulumi deletes the "
                f"old one with its old purge: true, so its data would be dropped",
                "set purge: false alone and run `pulumi up` first, then make the change",
            )
        changes = [f"params.{key}" for key in changed_params if f"params.{key}" not in replaces]
        changes += [name for name in (*POLICY_FIELDS, *self.revision_inputs()) if olds.get(name) != news.get(name)]
        changes += [REACH] if self.reach_kind and self.exact_reach(olds) != self.exact_reach(news) else []
        # Outputs any kind may report: a login that no longer works, settings beyond the params.
        changes += self.drift(olds) + [name for name in ("passwordInSync", "configInSync") if olds.get(name) is False]
        changes += self._moved(olds, news)
        return DiffResult(
            changes=bool(replaces or changes),
            replaces=replaces,
            stables=[name for name in Identity.field_names() if name not in replaces],
            # Engine names are fixed: the old resource must go before the new one can exist.
            delete_before_replace=True,
        )

    def _moved(self, olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
        """The address outputs that no longer match the instance's config (the server moved, or its host
        is spelled anew): an update gives them, and every service importing them, the new one. Before,
        only a refresh did, and a plain up left a service with the old address beside the new."""
        instance = self._instances.get(str(news.get("instance")))
        if instance is None or "host" not in olds:
            return []
        return [name for name, now in self._address(instance).items() if olds.get(name) != now]

    def _address(self, instance: SharedInstance) -> dict[str, Any]:
        """The `host` and `port` outputs of this kind (those it reports), as the instance's config has them now."""
        return {key: value for key, value in (("host", instance.host), ("port", instance.port)) if key in self.attributes}

    @_engine_failures_named
    def create(self, props: dict[str, Any]) -> CreateResult:
        # Named by today's rules unless the inputs ask otherwise (tests of older ones); recorded in the outputs.
        ident = replace(Identity.from_props(props), naming=naming_of(props, CURRENT_NAMING))
        instance = self._instance(ident, "create")
        spec = self.Spec.model_validate(props.get("params") or {})
        ident, observed = self._adopted_naming(instance, ident)
        props = {**props, NAMING: ident.naming}
        if observed is not None and observed.owner != ident.owner:
            raise self._conflict("create", ident, observed)
        if observed is not None:
            self._refuse_elsewhere("create", ident, observed, props.get("stack"))
            # Ours already (a killed run's, or retained by a replace): adopted as it is where it cannot change.
            wanted, live = spec.model_dump(mode="json"), {**observed.attributes, "params": observed.params}
            fixed = frozenset(key for key in self.create_only if not self.holds(key, wanted.get(key), live))
            require_same("create", f"{self.kind} {ident}", observed.params, wanted, fixed, self.Spec)
        attributes = self.create_resource(instance, ident, spec, props)
        with _held_lock:
            _held_this_run[self._held_key(instance, ident)] = ident
        return CreateResult(str(ident), {**props, **attributes})

    def _adopted_naming(self, instance: SharedInstance, ident: Identity) -> tuple[Identity, Observed | None]:
        """`ident` and what the engine has under it; or, when that is nothing and older naming rules put
        this project's object of this declaration elsewhere (an entry removed and declared again, a
        retained replacement), that object, to adopt where it is rather than make an empty twin."""
        observed = self.observe(instance, ident)
        if observed is not None or ident.naming == PREFIXED:
            return ident, observed
        legacy = replace(ident, naming=PREFIXED)
        try:
            if self.engine_name(ident.name, ident.owner, naming=PREFIXED) == self.engine_name(
                    ident.name, ident.owner, naming=ident.naming):
                return ident, None
        except InvalidSpec:
            return ident, None  # older rules could not name it: nothing can exist there
        found = self.observe(instance, legacy)
        return (legacy, found) if found is not None and found.owner == ident.owner else (ident, None)

    def _held_key(self, instance: SharedInstance, ident: Identity) -> tuple[str, str, int, str, str]:
        return self.engine_object(instance.host, instance.port, ident.name, ident.owner, naming=ident.naming)

    @_engine_failures_named
    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        ident = Identity.from_props(props)
        instance = self._instance(ident, "read")
        observed = self.observe(instance, ident)
        if observed is None or observed.owner != ident.owner:
            # A blank id tells Pulumi the resource is gone: dropped out of band, or what
            # has the name now belongs to another project or to nobody we know. The
            # ledger forgets it, and the next up's create refuses that one with a
            # Conflict. Recording the other owner instead would make the next diff
            # replace, and a purge then drop the other project's resource.
            return ReadResult("", {})
        # The address is the instance's, as configured now: after the instance moves, a
        # refresh (with --run-program) points every resource and its exports at the new one.
        live = {**props, **self._address(instance), **observed.attributes}
        live["params"] = {**(props.get("params") or {}), **observed.params}
        if props.get("password") and props.get("user"):
            # The login the resource made (the live owner of a database may have drifted to another role).
            works = self.login_works(instance, str(props["user"]), str(props["password"]))
            if works is not None:
                live["passwordInSync"] = works  # false: drift, and the next update sets the password again
        return ReadResult(id_, live)

    @_engine_failures_named
    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        ident = Identity.from_props(news)
        instance = self._instance(ident, "update")
        ident = replace(ident, naming=naming_of(olds))  # made under these rules, it stays where they put it
        news = {**news, NAMING: ident.naming}
        # Since the last refresh it may have been dropped, or re-created by someone else:
        # converging that one would hand it (and its data) to this project. Or another workspace
        # adopted it: converging would mark it this one's again, for this one's purge to drop.
        self._refuse_elsewhere("update", ident, self._owned(instance, ident, "update"), olds.get("stack"))
        attributes = self.update_resource(instance, ident, olds, news)
        return UpdateResult({**news, **attributes})

    @_engine_failures_named
    def delete(self, _id: str, props: dict[str, Any]) -> None:
        # Pulumi skips delete for retained resources; this guard keeps data safe
        # even when it does not (an old state, a provider called by hand).
        if not props.get("purge"):
            return
        ident = Identity.from_props(props)
        instance = self._instance(ident, "delete")
        with _held_lock:
            holder = _held_this_run.get(self._held_key(instance, ident), ident)
        if holder != ident and holder.owner == ident.owner:
            return  # another declaration of the project holds it now
        self._refuse_another_workspaces(instance, ident, props)
        try:
            self.drop(instance, ident, props)
        except NotFound:
            pass

    # --- helpers ---------------------------------------------------------

    def _instance(self, ident: Identity, verb: str) -> SharedInstance:
        try:
            return self._instances[ident.instance]
        except KeyError:
            hint = "add it under devstack:workspace.shared in the stack config"
            if verb == "delete":
                # Renamed instance: the new name may declare (and have adopted) this very resource,
                # which the old declaration's purge would drop once its instance is back.
                hint += (f", or, if another instance name now declares it, un-track this one instead: "
                         f"`devstack resource rm {ident}` (the data stays)")
            raise InvalidSpec(verb, f"{self.kind} {ident}", f"the workspace has no shared instance {ident.instance!r}",
                              hint) from None

    def purge(self, ident: Identity, props: Mapping[str, Any]) -> None:
        """Drop one resource and its data outside a Pulumi run (the ledger's rm and destroy): Conflict, and
        nothing dropped, when another workspace's marker is on it; NotFound when it is already gone."""
        instance = self._instance(ident, "drop")
        with self.engine_errors(ident.as_props()):
            self._refuse_another_workspaces(instance, ident, props)
            self.drop(instance, ident, {**props, **ident.as_props(), "purge": True})

    def refuse_another_workspaces(self, ident: Identity, props: Mapping[str, Any]) -> None:
        """Conflict when the resource's own marker names another workspace than the one this ledger last
        marked it for (`props["stack"]`): checked for every resource before a purge drops any."""
        instance = self._instance(ident, "drop")
        with self.engine_errors(ident.as_props()):
            self._refuse_another_workspaces(instance, ident, props)

    def _refuse_another_workspaces(self, instance: SharedInstance, ident: Identity, props: Mapping[str, Any]) -> None:
        observed = self.observe(instance, ident)
        if observed is not None and observed.owner == ident.owner:
            self._refuse_elsewhere("drop", ident, observed, props.get("stack"))

    def _refuse_elsewhere(self, verb: str, ident: Identity, observed: Observed, ours: str | None,
                          held: str | None = None) -> None:
        """Conflict when `observed`'s marker names another workspace than `ours`: that workspace's up adopted
        it (its project moved there, say), and it and its data are that workspace's now.

        A create takes it over only from the workspace `devstack:workspace.adopt` says the project
        moves here from: otherwise two workspaces listing one project would take each other's
        resources (and reset their generated passwords) at every up. `held`: what exists, when it is not
        the resource itself (a database's project login role)."""
        if not marked_elsewhere(observed.workspace, ours):
            return
        if verb == "create":
            if moves_from(self._adoptions.get(ident.owner), observed.workspace):
                return
            raise Conflict(
                "create", f"{self.kind} {ident}",
                f"{held or self._engine_object_name(ident)} already exists in {self.engine} instance "
                f"{ident.instance!r} and belongs to project {ident.owner!r} of workspace {observed.workspace!r}, "
                f"another ledger than this one ({ours!r})",
                "nothing was changed; two workspaces cannot hold one project on the same engines: give this one "
                f"another project name, or, to move project {ident.owner!r} here, un-track it in that workspace "
                f"first (docs/lifecycle.md's moving a project), then add `adopt: {{{ident.owner}: {observed.workspace}}}` "
                "under this workspace's devstack:workspace and run `pulumi up` again",
            )
        raise Conflict(
            verb, f"{self.kind} {ident}",
            f"its marker names workspace {observed.workspace!r}, not this one ({ours!r}): that workspace's up "
            f"adopted it, and it is that workspace's now",
            f"nothing was {'dropped' if verb == 'drop' else 'changed'}; to let this workspace forget it, take it "
            "out of this workspace's ledger alone (`pulumi state delete`, as docs/lifecycle.md's moving a project says)",
        )

    def _owned(self, instance: SharedInstance, ident: Identity, verb: str) -> Observed:
        """What the engine has under this identity, if it exists and carries this project's marker."""
        observed = self.observe(instance, ident)
        if observed is None:
            raise NotFound(verb, f"{self.kind} {ident}", f"it no longer exists in {self.engine} instance {ident.instance!r}",
                           "run `pulumi refresh`, then `pulumi up` creates it again")
        if observed.owner != ident.owner:
            raise self._conflict(verb, ident, observed)
        return observed

    def _engine_object_name(self, ident: Identity) -> str:
        """The name in the engine, and the declaration's when that differs (`'shop_x' (declared 'x')`)."""
        name = self.engine_name(ident.name, ident.owner, naming=ident.naming)
        return repr(name) if name == ident.name else f"{name!r} (declared {ident.name!r})"

    def _conflict(self, verb: str, ident: Identity, observed: Observed) -> Conflict:
        holder = f"project {observed.owner!r}" if observed.owner else "something devstack does not manage"
        if verb == "create":
            hint = "choose another `name` for this resource; nothing was changed"
        else:
            hint = (f"it changed hands outside Pulumi; nothing was {'dropped' if verb == 'drop' else 'changed'} "
                    f"(`pulumi refresh` makes the ledger forget it)")
        return Conflict(
            verb,
            f"{self.kind} {ident}",
            f"{self._engine_object_name(ident)} already exists in {self.engine} instance {ident.instance!r} and "
            f"belongs to {holder}",
            hint,
        )


def _whole(value: Any) -> Any:
    """A number as declared: Pulumi hands every number back as a float (`3` as 3.0)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def require_same(verb: str, what: str, live: dict[str, Any], wanted: dict[str, Any], fixed: frozenset[str],
                 spec: type[BaseModel] | None = None) -> None:
    """Refuse to adopt a resource whose create-only params differ (the engine cannot change them).

    `spec` gives the names as devstack.yaml spells them (its aliases)."""
    for key in sorted(fixed):
        if key in live and live[key] != wanted.get(key):
            field = spec.model_fields.get(key) if spec else None
            param, value = (field.alias if field else None) or key, json.dumps(live[key])  # JSON reads as YAML
            raise Unsupported(
                verb, what,
                f"it exists with params.{param} {value} and params.{param} cannot change in place",
                f"declare {param}: {value}; to make it anew with another value (its data is dropped), first "
                f"set `purge: true` keeping {param}: {value} and run `pulumi up`, then change {param}",
            )


