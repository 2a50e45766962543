"""What devstack knows of a kind without a provider: its spec, names, references and rules.

`KindDescription` holds the static rules validation, the program, gc and
`check` read (the spec model, create-only params, references, clash and reach
rules, logins); every method is a classmethod, so none needs an instance or an
engine. `providers.base.KindProvider` adds the Pulumi verbs on top.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from functools import lru_cache
from typing import Any, ClassVar, Iterable, Mapping

from pulumi.dynamic import CheckFailure, CheckResult
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from providers import naming as naming_rules
from providers.errors import InvalidSpec, Unsupported
from providers.identity import CURRENT_NAMING, Identity, naming_of
from providers.instances import SharedInstance, canonical_host

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

EngineObject = tuple[str, str, int, str, str]


def referenced_name(props: Mapping[str, Any], param: str) -> str | None:
    """The engine name of the resource `param` references, as the program passed it; None when it did not."""
    value = (props.get(REFS) or {}).get(param)
    return str(value) if value else None


@lru_cache(maxsize=None)
def server_address(host: str) -> str:
    """The address `host` names, one text per server: `localhost`, `127.0.0.1`, `::1` and `[::1]` are one
    (loopback is this machine's engine whichever family reaches it); an unresolvable name is itself."""
    try:
        text = canonical_host(host)
    except ValueError:
        return host
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        try:
            address = ipaddress.ip_address(socket.gethostbyname(text))
        except OSError:
            try:
                address = ipaddress.ip_address(socket.getaddrinfo(text, None, socket.AF_INET6)[0][4][0])
            except (OSError, IndexError, ValueError):
                return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return "127.0.0.1" if address in _LOOPBACK else address.compressed


_LOOPBACK = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))


class KindDescription:
    """One kind of one engine, as declarations see it. Subclasses set the class attributes and rules."""

    engine: ClassVar[str]
    kind: ClassVar[str]
    Spec: ClassVar[type[BaseModel]]
    #: Params that the engine cannot change after creation: a change replaces.
    create_only: ClassVar[frozenset[str]] = frozenset()
    #: Params the engine may refuse to change in place (the provider's `refusals` is asked for them too).
    refusable_in_place: ClassVar[frozenset[str]] = frozenset()
    #: Whether a replacement over a create-only change moves a retained resource instead of meeting it.
    retained_replacement_moves: ClassVar[bool] = False
    #: Output attributes a resource of this kind exports (connection details).
    attributes: ClassVar[tuple[str, ...]] = ()
    #: Attributes that must be stored encrypted in the state.
    secret_outputs: ClassVar[tuple[str, ...]] = ()
    #: Params naming another declaration of the project: param -> kind (same instance).
    references: ClassVar[dict[str, str]] = {}
    #: Those of `references` that, left out, name the declaration called after the project.
    default_references: ClassVar[frozenset[str]] = frozenset()
    #: The output attribute holding this kind's engine name, for declarations that reference it (`refs`).
    name_attribute: ClassVar[str | None] = None
    #: The kind of the project's resources (on the same instance) this kind's grants reach (`reach`: their
    #: engine names), or several kinds (`reach`: `<kind>:<engine name>` each).
    reach_kind: ClassVar[str | tuple[str, ...] | None] = None
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
    #: key's policy): raising it makes the next `pulumi up` update what older rules made (it is an
    #: input, `accessRules`). None: never changed.
    access_rules: ClassVar[int | None] = None
    #: Where the engine keeps this kind's objects, when kinds share it (PostgreSQL roles and users are
    #: one namespace); None: the kind's own.
    namespace: ClassVar[str | None] = None
    #: Whether this kind's objects are logins, in the namespace where the instance's admin user is one too.
    logins: ClassVar[bool] = False

    # --- names ------------------------------------------------------------

    @classmethod
    def engine_name(cls, name: str, owner: str, *, naming: int) -> str:
        """The engine-level identifier of a declaration under `naming` (providers.identity): pure and
        stable across runs. Raises InvalidSpec naming the rule when `name` cannot be mapped."""
        raise NotImplementedError

    @classmethod
    def engine_object(cls, host: str, port: int, name: str, owner: str, *,
                      naming: int = CURRENT_NAMING) -> EngineObject:
        """What declaration `name` names in the engine at host:port, the same for every spelling of one
        server (`localhost`, `127.0.0.1`) and of one engine name (`shop-x`, `shop_x`)."""
        return cls.object_named(host, port, cls.engine_name(name, owner, naming=naming))

    @classmethod
    def object_named(cls, host: str, port: int, engine_name: str) -> EngineObject:
        """The engine object of this kind called `engine_name` at host:port (see engine_object)."""
        return (cls.engine, server_address(host), port, cls.namespace or cls.kind, engine_name)

    @classmethod
    def object_of(cls, instance: SharedInstance, ident: Identity) -> EngineObject:
        """The engine object `ident` names on `instance`."""
        return cls.engine_object(instance.host, instance.port, ident.name, ident.owner, naming=ident.naming)

    @classmethod
    def object_label(cls, ident: Identity) -> str:
        """The name in the engine, and the declaration's when that differs (`'shop_x' (declared 'x')`)."""
        name = cls.engine_name(ident.name, ident.owner, naming=ident.naming)
        return repr(name) if name == ident.name else f"{name!r} (declared {ident.name!r})"

    @classmethod
    def address_outputs(cls, instance: SharedInstance) -> dict[str, Any]:
        """The address outputs of this kind (those it reports), as the instance's config has them now: `host`
        and `port`, the first address; `servers`, every bootstrap address comma-joined when the instance lists
        several (Kafka, NATS), else None."""
        return {key: value for key, value in (("host", instance.host), ("port", instance.port),
                                              ("servers", instance.several))
                if key in cls.attributes}

    @classmethod
    def owner_objects(cls, host: str, port: int, owner: str) -> tuple[EngineObject, ...]:
        """Engine objects besides its own that every declaration of this kind in project `owner` makes and
        shares (a PostgreSQL database's login role): no other declaration may name one."""
        return ()

    # --- params -----------------------------------------------------------

    @classmethod
    def normalized_params(cls, params: dict[str, Any] | None, name: str, owner: str) -> dict[str, Any]:
        """`params` as check stores them and the program registers them: validated, defaults filled in,
        JSON types (a refresh's input diff against raw ones would flag every resource)."""
        return cls.Spec.model_validate(params or {}).model_dump(mode="json")

    @classmethod
    def params_as_now(cls, props: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Stored params as this release normalizes them (comparing them raw could replace, and with purge
        drop, an unchanged resource). As stored when they no longer validate; None when there are none."""
        params = props.get("params") if props else None
        if not isinstance(params, dict):
            return None
        try:
            return cls.normalized_params(params, str(props.get("name") or ""), str(props.get("owner") or ""))
        except (ValidationError, InvalidSpec):
            return params

    @classmethod
    def revision_inputs(cls) -> dict[str, int]:
        """The inputs that say which release's rules a resource was made or last updated under."""
        return {} if cls.access_rules is None else {ACCESS_RULES: cls.access_rules}

    @classmethod
    def default(cls, param: str) -> Any:
        field = cls.Spec.model_fields.get(param)
        if field is None or field.is_required():
            return None
        return to_jsonable_python(field.get_default(call_default_factory=True))

    @classmethod
    def defaults(cls, params: Mapping[str, Any], name: str, owner: str) -> dict[str, Any]:
        """What each of `params` is for a declaration that leaves it out (a kind may derive one from the
        resource's name and owner, as a stream's subjects)."""
        return {key: cls.default(key) for key in params}

    @classmethod
    def holds(cls, param: str, value: Any, live: dict[str, Any]) -> bool:
        """Whether a resource whose outputs are `live` already is what create-only `param` = `value` asks
        for, so that it stays (an update at most) instead of being made anew. A param missing from `live`
        was made with its default (Pulumi drops null outputs)."""
        return (live.get("params") or {}).get(param, cls.default(param)) == value

    @classmethod
    def spelled(cls, param: str) -> str:
        """A param as devstack.yaml spells it (`replicationFactor` for `replication_factor`)."""
        field = cls.Spec.model_fields.get(param)
        return (field.alias if field else None) or param

    # --- references and neighbours ------------------------------------------

    @classmethod
    def referenced(cls, params: Mapping[str, Any], owner: str, name: str | None = None) -> dict[str, str]:
        """param -> the name of the declaration it references (a default one left out: the project's).
        `name`: the referencing declaration's, for a kind whose default follows it (a lifecycle's bucket)."""
        return {param: params.get(param) or owner for param in cls.references
                if params.get(param) or param in cls.default_references}

    @classmethod
    def clash(cls, name: str, params: dict[str, Any], other: str, other_params: dict[str, Any],
              owner: str, declared: Mapping[tuple[str, str], dict[str, Any]]) -> tuple[str, str] | None:
        """(field, why) when declaration `name` cannot exist beside `other`, of the same kind on the same
        instance, for a reason beyond their engine names (NATS streams sharing a subject); else None.
        `declared`: the params of the project's declarations on that instance by (kind, name)."""
        return None

    @classmethod
    def misfit(cls, param: str, params: dict[str, Any], target: str, target_params: dict[str, Any],
               owner: str) -> tuple[str, str] | None:
        """(field, why) when a declaration with `params` cannot live on the declaration `target` that its
        `param` references (a NATS consumer filtering outside its stream's subjects); else None."""
        return None

    @classmethod
    def reached_by(cls, name: str, owner: str, holders: Mapping[str, Iterable[str]]) -> tuple[str, str, str] | None:
        """(kind, owner, pattern) of another project's declaration on the same server whose credential
        would reach this one by the name pattern (a MinIO key reaches every `<owner>-*` bucket); else
        None. `holders` maps each kind declared on that server to the projects declaring it."""
        return None

    @classmethod
    def exact_reach(cls, props: Mapping[str, Any]) -> list[str]:
        """Of the `reach` in `props`, the names this kind's grants must list one by one (no prefix covers them)."""
        return []

    # --- check's rules ------------------------------------------------------

    @classmethod
    def check_params(cls, name: str, owner: str, params: dict[str, Any],
                     old_params: Mapping[str, Any]) -> list[CheckFailure]:
        """The kind's own checks of valid (normalized) params: those that need the owner or the
        previous inputs (`old_params`, as stored). Pure; run before anything asks the engine."""
        return []

    @classmethod
    def static_check(cls, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        """Pulumi's `check` without the engine: the inputs as stored and every failure the declaration
        alone shows (identity, name rules, references, credentials, params, retained replacements, spec rules)."""
        failures = [CheckFailure(name, "is required") for name in Identity.field_names() if not news.get(name)]
        if news.get("engine") != cls.engine or news.get("kind") != cls.kind:
            failures.append(CheckFailure("kind", f"this provider serves {cls.engine}/{cls.kind} only"))
        inputs = {**news, **cls.revision_inputs()}
        if news.get("name") and not naming_rules.NAME.fullmatch(str(news["name"])):
            failures.append(CheckFailure("name", f"{news['name']!r} is not a resource name: {naming_rules.NAME_RULE}"))
        elif news.get("name") and news.get("owner") and not _same_identity(olds, news):
            # A resource that exists keeps the name its naming gave it (kept in its outputs, not here).
            try:
                cls.engine_name(str(news["name"]), str(news["owner"]), naming=naming_of(news, CURRENT_NAMING))
            except InvalidSpec as err:
                failures.append(CheckFailure("name", err.cause))
            except NotImplementedError:
                pass
        params = news.get("params") or {}
        failures += [CheckFailure(f"params.{cls.spelled(param)}",
                                  f"{value!r} names no declaration: {naming_rules.NAME_RULE}")
                     for param in cls.references
                     if isinstance(value := params.get(param), str) and not naming_rules.NAME.fullmatch(value)]
        if news.get("credentials", "predictable") not in CREDENTIAL_POLICIES:
            failures.append(CheckFailure("credentials", f"must be one of {', '.join(CREDENTIAL_POLICIES)}"))
        try:
            inputs["params"] = cls.normalized_params(params, str(news.get("name") or ""), str(news.get("owner") or ""))
        except ValidationError as err:
            failures += [CheckFailure("params." + ".".join(str(p) for p in e["loc"]), e["msg"]) for e in err.errors()]
        if not failures:
            failures += cls.check_params(str(news["name"]), str(news["owner"]), inputs["params"],
                                         olds.get("params") or {})
        if not failures:
            failures += cls._retained_replacements(olds, cls.params_as_now(olds), inputs)
        if not failures:
            spec = cls.Spec.model_validate(inputs["params"])
            rules = cls.spec_rules(str(news["name"]), str(news["owner"]), spec, naming=naming_of(news, CURRENT_NAMING))
            failures += [CheckFailure(field, message) for field, message in rules]
        return CheckResult(inputs, failures)

    @classmethod
    def spec_rules(cls, name: str, owner: str, spec: BaseModel, *, naming: int) -> list[tuple[str, str]]:
        """(field, message) for each rule across fields (or name and params) the spec breaks, for a resource
        named by `naming`."""
        return []

    @classmethod
    def enforce(cls, verb: str, ident: Identity, spec: BaseModel) -> None:
        """Raise InvalidSpec for the first broken `spec_rules` rule (for callers that skipped check)."""
        broken = cls.spec_rules(ident.name, ident.owner, spec, naming=ident.naming)
        if broken:
            field, message = broken[0]
            raise InvalidSpec(verb, f"{cls.kind} {ident}", f"{field}: {message}")

    @classmethod
    def _retained_replacements(cls, olds: dict[str, Any], old_params: dict[str, Any] | None,
                               inputs: dict[str, Any]) -> list[CheckFailure]:
        """A create-only value changed on a resource Pulumi will delete with `purge: false`: the delete
        keeps it, and the replacement's create finds it with the old value and refuses to adopt it,
        part-way through the up. Said here, so the preview fails instead. Only a value that was set: an
        unset one (a Redis index's pin) may already hold what is asked."""
        if (cls.retained_replacement_moves or old_params is None or olds.get("purge")
                or any(olds.get(name) != inputs.get(name) for name in Identity.field_names())):
            return []
        failures, live = [], {**olds, "params": old_params}
        for key in sorted(cls.create_only):
            value = inputs["params"].get(key)
            if old_params.get(key) is not None and old_params.get(key) != value and not cls.holds(key, value, live):
                param, value = cls.spelled(key), json.dumps(_whole(old_params[key]))
                failures.append(CheckFailure(
                    f"params.{param}", f"cannot change from {value} while the {cls.kind} is retained (purge: false): "
                    f"its replacement would find it as it is and refuse it (to make it anew with another value, "
                    f"its data dropped, first set `purge: true` keeping {param}: {value} and run `pulumi up`)"))
        return failures

    @classmethod
    def may_be_refused(cls, old_params: dict[str, Any] | None, params: dict[str, Any],
                       news: Mapping[str, Any]) -> frozenset[str]:
        """The params that set a value the engine may refuse (a create-only one or one of
        `refusable_in_place`): changed on an existing resource, or away from its default on a new one
        (a default the engine always takes, so most checks of a create call no engine)."""
        before = old_params if old_params is not None else cls.defaults(params, str(news["name"]), str(news["owner"]))
        return frozenset(key for key in cls.create_only | cls.refusable_in_place if before.get(key) != params.get(key))

    @classmethod
    def refused_failures(cls, refused: list[tuple[str, str, str]], asked: frozenset[str],
                         creating: bool) -> list[CheckFailure]:
        """Check failures for the engine's refusals (param, problem, fix), of what the change sets only: a
        value kept as it is is no reason to refuse another."""
        return [CheckFailure(f"params.{cls.spelled(param)}", f"{problem}; {cls.not_done(param, creating)} ({fix})")
                for param, problem, fix in refused if creating or param in asked]

    @classmethod
    def not_done(cls, param: str, creating: bool) -> str:
        if creating:
            return f"the {cls.kind} was not made"
        return f"the {cls.kind} was not {'changed' if param in cls.refusable_in_place else 'replaced'}"

    @classmethod
    def require_same(cls, verb: str, ident: Identity, live: dict[str, Any], wanted: dict[str, Any],
                     fixed: frozenset[str]) -> None:
        """Refuse to adopt a resource whose create-only params in `fixed` differ (the engine cannot change them)."""
        require_same(verb, f"{cls.kind} {ident}", live, wanted, fixed, cls.Spec)


def _same_identity(olds: Mapping[str, Any], news: Mapping[str, Any]) -> bool:
    return bool(olds) and all(olds.get(name) == news.get(name) for name in Identity.field_names())


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
