"""Validation of a workspace and its devstack.yaml files: every problem at once.

Each problem names the file, the field path, the line and what to do. The
Workspace component validates everything before it registers any resource,
so a bad declaration anywhere means nothing is created or changed.
"""

from __future__ import annotations

import re
import reprlib
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import yaml
from pydantic import BaseModel, ValidationError

from components import templates
from components.models import ENV_NAME, EnvImport, ProjectFile, ResourceDecl, ServiceDecl, WorkspaceConfig, instance_name
from components.yamlfile import SPECIAL_FILE, FieldPath, YamlFile, format_path, load_yaml, not_a_regular_file
from providers import naming, registry
from providers.description import server_address
from providers.errors import InvalidSpec
from providers.identity import CURRENT_NAMING
from providers.instances import InstanceTls, SharedInstance, join_address

#: A project name: the same as a resource's, mapped per engine wherever it names something.
PROJECT_NAME = naming.NAME
REF = re.compile(r"\$\{ref:([^}]*)\}")
#: `<instance>` or `<instance>/<kind>[/<name>]` (a name may hold dots), then the attribute.
REF_TARGET = re.compile(r"workspace\.shared\.([^.]+(?:/.+)?)\.([^./]+)")
#: A reference mistyped (`${REF:`, `${ ref:`): passed on as text, it would fail only when the service reads it.
REF_LOOKALIKE = re.compile(r"\$\{\s*ref\s*:", re.IGNORECASE)
SECRET_WORDS = ("password", "secret", "token")


@dataclass(frozen=True)
class Problem:
    file: str
    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.path or '<document>'}: {self.message}"


class WorkspaceInvalid(Exception):
    """Every problem found; nothing may be created while any exists."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{len(problems)} problem(s) in the workspace; nothing was created or changed:\n{lines}")


@dataclass
class Validated:
    workspace: WorkspaceConfig
    projects: list[ProjectFile]


@dataclass
class _Report:
    """Problems of one file, located through its line index."""

    file: YamlFile | None
    display: str
    prefix: FieldPath = ()
    problems: list[Problem] = field(default_factory=list)
    #: Shared instances the file's well-formed entries use, whatever else is wrong in it.
    uses: set[str] = field(default_factory=set)

    def add(self, path: FieldPath, message: str) -> None:
        full = self.prefix + path
        line = self.file.line(full) if self.file else None
        self.problems.append(Problem(self.display, format_path(path if not self.prefix else full), line, message))

    def pydantic(self, err: ValidationError, path: FieldPath, model: type[BaseModel]) -> None:
        for error in err.errors():
            loc = path + tuple(error["loc"])
            self.add(loc, _message(error, model))


def _message(error: dict[str, Any], model: type[BaseModel]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        allowed = ", ".join(f.alias or name for name, f in model.model_fields.items())
        return f"unknown field {_shown(loc[-1])} (remove it; allowed fields here: {allowed})" if len(loc) == 1 else f"unknown field {_shown(loc[-1])} (remove it)"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"must be {expected} (got {_shown(error.get('input'))})"
    if kind in ("model_type", "dict_type"):  # pydantic's wording names our model classes
        return f"must be a mapping (got {_shown(error.get('input'))})"
    message = error["msg"].removeprefix("Value error, ")  # pydantic's wording for a validator's own message
    if loc and loc[-1] == "admin_password":
        return message  # never the value: it is a password
    fix = _WRITE_INSTEAD.get(kind)
    if kind == "string_type" and isinstance(error.get("input"), (bool, int, float)):
        fix = "put it in quotes: YAML reads yes, no, on and off as booleans and 007 as a number"
    if kind in ("int_type", "float_type") and isinstance(error.get("input"), str):
        fix = f"{fix}, in plain decimal digits: YAML reads 1e3, 0o10 and a number in quotes as text"
    return f"{message} (got {_shown(error.get('input'))}{'; ' + fix if fix else ''})"


#: What to write instead, by pydantic's error type: values keep the type YAML gives them (no "yes" for true).
_WRITE_INSTEAD = {
    "bool_type": "write true or false, unquoted",
    "int_type": "write a whole number, unquoted",
    "float_type": "write a number, unquoted",
}


#: A repr that stops early: a whole section given the wrong shape would fill the screen, and aliases of
#: aliases in YAML make one value of billions of items out of a few hundred bytes.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxstring, _SHORT.maxother = 3, 4, 4, 40, 40


def _shown(value: Any, limit: int = 60) -> str:
    """The offending value, cut short."""
    return _cut(_SHORT.repr(value), limit)


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def validate(workspace_raw: Any, root: Path, stack_file: YamlFile | None, stack_display: str,
             config_is_set: Callable[[str], bool] | None = None,
             config_is_secret: Callable[[str], bool] | None = None) -> Validated:
    """Validate the workspace and all its projects; raise WorkspaceInvalid listing every problem.

    With `config_is_set` (is `devstack:<key>` set in the stack config?), also check that every
    instance a resource uses has its admin password there: without it, an up would create the
    other instances' resources and fail on these. With `config_is_secret`, also that every admin
    password set there is a secret.
    """
    ws_report = _Report(stack_file, stack_display, prefix=("config", "devstack:workspace"))
    try:
        workspace = WorkspaceConfig.model_validate(workspace_raw)
    except ValidationError as err:
        ws_report.pydantic(err, (), WorkspaceConfig)
        raise WorkspaceInvalid(ws_report.problems) from None
    for name, instance in workspace.shared.items():
        if instance.engine not in registry.engines():
            ws_report.add(("shared", name, "engine"),
                          f"unknown engine {instance.engine!r} (engines: {', '.join(registry.engines())})")

    problems = list(ws_report.problems)
    projects: list[ProjectFile] = []
    claimed: dict[EngineObject, Claim] = _admin_logins(workspace, stack_display)
    owners: dict[str, str] = {}
    mapped_owners: dict[tuple[str, str], str] = {}  # (engine, a project name as it maps there) -> the project
    listed: dict[str, int] = {}
    used: set[str] = set()  # every problem at once: a project with other problems still needs its admin secrets
    located: list[tuple[ProjectFile, str, YamlFile | None]] = []
    for index, relative in enumerate(workspace.projects):
        if relative in listed:
            again = _Report(stack_file, stack_display, prefix=("config", "devstack:workspace"))
            again.add(("projects", index), f"lists {relative} a second time (it is projects[{listed[relative]}] "
                                           f"already; remove one)")
            problems += again.problems
            continue
        listed[relative] = index
        report, project = _check_file(root, relative, workspace, ws_report, index)
        problems += report.problems
        used |= report.uses
        if project is None:
            continue
        if project.name in owners:
            problems.append(Problem(relative, "name", report.file.line(("name",)) if report.file else None,
                                    f"project {project.name!r} is already declared by {owners[project.name]} (project names are unique in a workspace)"))
        elif twins := _mapped_twins(project.name, mapped_owners):
            other, engines = next(iter(twins.items()))
            problems.append(Problem(relative, "name", report.file.line(("name",)) if report.file else None,
                                    f"project {project.name!r} maps to the same {', '.join(engines)} names as project "
                                    f"{other!r} ({owners[other]}): their logins, default resources and prefixes would "
                                    f"be one (rename one of them)"))
        owners.setdefault(project.name, relative)
        for key in _mapped_project_names(project.name):
            mapped_owners.setdefault(key, project.name)
        problems += _collisions(project, relative, report.file, workspace, claimed)
        projects.append(project)
        located.append((project, relative, report.file))
    problems += _reach_clashes(located, workspace)
    if len(located) == len(listed):  # every project's name is known
        problems += _unknown_adoptions(workspace, owners, stack_file, stack_display)
    if workspace.secret_store is not None:
        problems += _secret_store_problems(workspace, projects, stack_file, stack_display)
        problems += _store_variable_clashes(located, workspace)
        used.add(workspace.secret_store.instance)  # every up with a generated credential writes there
    if config_is_set is not None:
        problems += _admin_secret_problems(workspace, used, config_is_set, config_is_secret, stack_file, stack_display)
    if problems:
        raise WorkspaceInvalid(problems)
    return Validated(workspace, projects)


def _unknown_adoptions(workspace: WorkspaceConfig, owners: dict[str, str], stack_file: YamlFile | None,
                       stack_display: str) -> list[Problem]:
    """An `adopt` entry for a project no listed file declares: it would wait, unnoticed, to let a later
    project of that name take over another workspace's resources."""
    report = _Report(stack_file, stack_display, prefix=("config", "devstack:workspace"))
    for project in workspace.adopt:
        if project not in owners:
            listed = ", ".join(sorted(owners)) or "none"
            report.add(("adopt", project), f"no project of this workspace is named {project!r} (its projects: "
                                           f"{listed}); fix the name or remove the entry")
    return report.problems


def _secret_store_problems(workspace: WorkspaceConfig, projects: list[ProjectFile], stack_file: YamlFile | None,
                           stack_display: str) -> list[Problem]:
    """`secretStore` names a localstack instance of the workspace, and the store takes every entry's name."""
    from components.secret_store import entries

    report = _Report(stack_file, stack_display, prefix=("config", "devstack:workspace", "secretStore"))
    store = workspace.secret_store
    instance = workspace.shared.get(store.instance)
    serving = sorted(name for name, shared in workspace.shared.items() if shared.engine == "localstack")
    fix = f"name one of {', '.join(serving)}" if serving else "declare a localstack instance under shared and name it"
    if instance is None:
        report.add(("instance",), f"the workspace has no shared instance {store.instance!r} ({fix})")
    elif instance.engine != "localstack":
        report.add(("instance",), f"{store.instance!r} is a {instance.engine} instance; {store.kind} is served by a "
                                  f"localstack instance (AWS APIs) ({fix})")
    else:
        from providers.localstack.stored_secret import STORES

        for project in projects:
            problem = next(filter(None, (STORES[store.kind].name_problem(e.name) for e in entries(project, workspace))),
                           None)
            if problem:
                report.add(("prefix",) if store.prefix else ("kind",),
                           f"{problem}: an entry of project {project.name!r} (set a prefix the store takes)")
                break
    return report.problems


def _store_variable_clashes(located: list[tuple[ProjectFile, str, YamlFile | None]],
                            workspace: WorkspaceConfig) -> list[Problem]:
    """A variable the store serves becomes `<VAR>_SECRET_ID`, which the service must not set otherwise."""
    from components.secret_store import SECRET_ID_SUFFIX, stored_attributes

    problems = []
    for project, relative, file in located:
        report = _Report(file, relative)
        for name, service in project.services.items():
            taken = set(service.env.plain()) | {var for item in service.env.imports for var in item.vars}
            for j, item in enumerate(service.env.imports):
                decl = resolve_source(item.source, project.resources, project.name)
                if decl is None or decl.credentials != "generated" or decl.uses not in workspace.shared:
                    continue
                stored = stored_attributes(workspace.shared[decl.uses].engine, decl.kind)
                for var, attribute in item.vars.items():
                    if attribute in stored and var + SECRET_ID_SUFFIX in taken:
                        report.add(("services", name, "env", "import", j, "vars"),
                                   f"{var} comes from the workspace's secret store, so the service gets "
                                   f"{var}{SECRET_ID_SUFFIX} (the entry's name), which it sets otherwise too (rename one)")
        problems += report.problems
    return problems


def _admin_secret_problems(workspace: WorkspaceConfig, used: set[str], config_is_set: Callable[[str], bool],
                           config_is_secret: Callable[[str], bool] | None, stack_file: YamlFile | None,
                           stack_display: str) -> list[Problem]:
    """A used instance without its admin password; an admin password in plaintext (`pulumi config set`
    without --secret, or the automation API's ConfigValue without secret=True): it would sit unencrypted
    in the stack config and in the provider's state."""
    report = _Report(stack_file, stack_display, prefix=("config", "devstack:workspace"))
    # The file is Pulumi.<stack>.yaml: name the stack, or the command would set the selected one's.
    stack = Path(stack_display).name.removeprefix("Pulumi.").removesuffix(".yaml")
    for name, instance in workspace.shared.items():
        if instance.tls is not None and name in used:
            _tls_secret_problems(report, name, instance.tls, config_is_set, config_is_secret, stack)
        key = instance.admin_secret
        store = f"pulumi config set --secret devstack:{key} --stack {stack}, the value on stdin"
        if not config_is_set(key):
            if name in used:
                report.add(("shared", name, "adminSecret"),
                           f"config key devstack:{key} is not set (store the {instance.engine} admin "
                           f"password there: {store})")
        elif config_is_secret is not None and not config_is_secret(key):
            report.add(("shared", name, "adminSecret"),
                       f"config key devstack:{key} holds the {instance.engine} admin password in plaintext, which "
                       f"would be kept unencrypted in the stack config and the state (set it again as a secret: "
                       f"{store}; from Python, ConfigValue(..., secret=True))")
    return report.problems


def _tls_secret_problems(report: _Report, name: str, tls: InstanceTls, config_is_set: Callable[[str], bool],
                         config_is_secret: Callable[[str], bool] | None, stack: str) -> None:
    """A `tls` caSecret or keySecret naming an unset key; a client key in plaintext."""
    for name_of, key, what in (("caSecret", tls.ca_secret, "the CA bundle (PEM)"),
                             ("keySecret", tls.key_secret, "the client certificate's key (PEM)")):
        store = f"pulumi config set --secret devstack:{key} --stack {stack} < file.pem"
        if key is None:
            continue
        if not config_is_set(key):
            report.add(("shared", name, "tls", name_of), f"config key devstack:{key} is not set (store {what} "
                                                       f"there: {store})")
        elif name_of == "keySecret" and config_is_secret is not None and not config_is_secret(key):
            report.add(("shared", name, "tls", name_of), f"config key devstack:{key} holds a private key in "
                                                       f"plaintext (set it again as a secret: {store})")


def _check_file(root: Path, relative: str, workspace: WorkspaceConfig, ws_report: _Report, index: int):
    path = root / relative
    if not path.is_file():
        report = _Report(None, relative)
        listed = f"listed in devstack:workspace.projects[{index}]"
        if path.is_dir():
            report.add((), f"the path is a directory ({listed}; name the devstack.yaml in it)")
        elif not_a_regular_file(path):
            report.add((), f"the path is {SPECIAL_FILE} ({listed}; name the devstack.yaml)")
        else:
            report.add((), f"the file does not exist ({listed}; fix the path or create it)")
        return report, None
    try:
        file = load_yaml(path, relative)
    except UnicodeDecodeError as err:
        report = _Report(None, relative)
        report.add((), f"not UTF-8 text: byte {err.object[err.start]:#04x} at offset {err.start} (save the file as UTF-8)")
        return report, None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        report = _Report(None, relative)
        report.problems.append(Problem(relative, "", mark.line + 1 if mark else None, _yaml_message(err, path)))
        return report, None
    report = _Report(file, relative)
    for field_path, message in file.repeated:
        report.add(field_path, message)
    project = check_project(file.data, workspace, report)
    flagged = {problem.path for problem in report.problems}
    for field_path, message in file.misread:
        if format_path(field_path) not in flagged:  # a field wrong either way (`name: 007`) says so itself
            report.add(field_path, message)
    return report, project


def _yaml_message(err: yaml.YAMLError, path: Path) -> str:
    """The parser's problem with what it was doing and where it began (an unclosed `{` two lines up)."""
    problem, context = getattr(err, "problem", None) or str(err), getattr(err, "context", None)
    began = getattr(err, "context_mark", None)
    if context and began is not None:
        problem = f"{problem}, {context} begun on line {began.line + 1}"
    mark = getattr(err, "problem_mark", None)
    lines = path.read_text(encoding="utf-8").splitlines()
    if mark is not None and mark.line < len(lines) and "\t" in lines[mark.line][: mark.column + 1]:
        problem += " (a tab: YAML indents with spaces only)"
    return f"not valid YAML: {problem}"


def check_project(data: Any, workspace: WorkspaceConfig, report: _Report) -> ProjectFile | None:
    """Check one parsed devstack.yaml; problems go to `report`; the model when it is clean."""
    if not isinstance(data, dict):
        report.add((), "a devstack.yaml must be a mapping with apiVersion, kind, name and resources")
        return None
    top = {key: value for key, value in data.items() if key not in ("resources", "services")}
    try:
        header = ProjectFile.model_validate(top)
    except ValidationError as err:
        report.pydantic(err, (), ProjectFile)
        header = None
    owner = data.get("name") if isinstance(data.get("name"), str) else ""
    if header is not None and not PROJECT_NAME.fullmatch(owner):
        report.add(("name",), f"{_shown(owner)} is not a project name: {naming.NAME_RULE}")
    resources = _list(data, "resources", report)
    decls: list[tuple[int, ResourceDecl]] = []
    broken: list[Any] = []
    for i, raw in enumerate(resources):
        try:
            decls.append((i, ResourceDecl.model_validate(raw)))
        except ValidationError as err:
            report.pydantic(err, ("resources", i), ResourceDecl)
            broken.append(raw)
    report.uses = {decl.uses for _, decl in decls}
    for i, decl in decls:
        _check_resource(i, decl, owner, decls, workspace, report)
    _check_shared_logins(decls, owner, workspace, report)
    if not report.problems:  # clashes compare valid declarations only
        _check_clashes(decls, owner, workspace, report)
    services = _services(data, decls, broken, owner, workspace, report)
    if report.problems or header is None:
        return None
    for _, decl in decls:
        decl.name = decl.name or owner
    return header.model_copy(update={"resources": [d for _, d in decls], "services": services})


def _list(data: dict, key: str, report: _Report) -> list:
    value = data.get(key) or []
    if not isinstance(value, list):
        report.add((key,), f"must be a list of {key} entries")
        return []
    return value


def _check_resource(i: int, decl: ResourceDecl, owner: str, decls, workspace: WorkspaceConfig, report: _Report) -> None:
    at = ("resources", i)
    found_before = len(report.problems)
    instance = workspace.shared.get(decl.uses)
    if instance is None:
        report.add(at + ("uses",), f"names no shared instance of workspace {workspace.name!r} "
                                   f"(shared instances: {', '.join(workspace.shared) or 'none'})")
        return
    if instance.engine not in registry.engines():
        return  # reported once, on the workspace
    kinds = registry.kinds(instance.engine)
    provider = kinds.get(decl.kind)
    if provider is None:
        report.add(at + ("kind",), f"{_shown(decl.kind)} is not a kind of engine {instance.engine} "
                                   f"(kinds: {', '.join(kinds)})")
        return
    if decl.credentials == "generated" and not provider.secret_outputs:
        report.add(at + ("credentials",), f"a {instance.engine} {decl.kind} has no credentials of its own, so "
                                          f"nothing would be generated (remove `credentials`)")
    if decl.name is not None and not naming.NAME.fullmatch(decl.name):
        # Each engine's rules are met by mapping it (providers.naming, docs/devstack-yaml.md's Names).
        report.add(at + ("name",), f"{_shown(decl.name)} is not a resource name: {naming.NAME_RULE}")
        return
    try:
        if PROJECT_NAME.fullmatch(owner):  # engine names derive from it: a bad one is reported once, on `name`
            provider.engine_name(decl.name or owner, owner, naming=CURRENT_NAMING)
    except InvalidSpec as err:
        report.add(at + ("name",), f"{err.cause} (name {_shown(decl.name or owner)}"
                                   f"{'' if decl.name else ', the project name'} cannot be a {instance.engine} {decl.kind} name)")
    try:
        spec = provider.Spec.model_validate(decl.params, strict=True)
    except ValidationError as err:
        for error in err.errors():
            loc = at + ("params",) + tuple(error["loc"])
            if error["type"] == "extra_forbidden":
                accepted = ", ".join(f.alias or n for n, f in provider.Spec.model_fields.items())
                report.add(loc, f"{instance.engine} {decl.kind} does not accept param {_shown(error['loc'][-1])} "
                                f"(params: {accepted or 'none'})")
            else:
                report.add(loc, _message(error, provider.Spec))
        return
    # As the provider gets them (a Kafka config value travels as text, whatever its size).
    for path, value in _beyond_exact_floats(spec.model_dump(mode="json", by_alias=True)):
        report.add(at + ("params", *path), f"{value} is too large: Pulumi carries numbers as 64-bit floats, exact "
                                           f"only up to {LARGEST_EXACT_INT} (use a smaller value)")
    for param, target in provider.referenced(spec.model_dump(), owner, decl.name or owner).items():
        target_kind, defaulted = provider.references[param], not getattr(spec, param, None)
        found = next((d for _, d in decls if d.kind == target_kind and d.uses == decl.uses
                      and (d.name or owner) == target), None)
        if found is not None:
            misfit = provider.misfit(param, decl.params, target, found.params, owner)
            if misfit is not None:
                report.add(at + tuple(misfit[0].split(".")), misfit[1])
        else:
            default = f"the project's {target_kind}" if target == owner else f"the {target_kind} of its own name"
            unset = f"unset, so {default}, " if defaulted else ""
            report.add(at + ("params", param), f"{unset}names no {target_kind} {target!r} on instance {decl.uses!r} "
                                               f"in this project (declare it under resources"
                                               f"{f', or set params.{param}' if defaulted else ''})")
    # The kind's own check holds the rules across fields (a NATS subject outside the project's,
    # PROVISIONED without capacities ...): run it here too, so a breach stops the whole workspace
    # before anything is created, instead of failing one resource in the middle of an up.
    if len(report.problems) > found_before or not PROJECT_NAME.fullmatch(owner):
        return  # its rules assume a valid identity and params
    inputs = {"engine": instance.engine, "instance": decl.uses, "kind": decl.kind, "name": decl.name or owner,
              "owner": owner, "params": decl.params, "credentials": decl.credentials}
    for failure in provider.static_check({}, inputs).failures or []:
        report.add(at + tuple(failure.property.split(".")), failure.reason)


#: The largest integer a param keeps on its way through Pulumi (a JSON number, a float64).
LARGEST_EXACT_INT = 2**53 - 1


def _beyond_exact_floats(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, int]]:
    """(path, number) of every integer in `value` that Pulumi would round on its way to the provider."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _beyond_exact_floats(item, path + (str(key),))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _beyond_exact_floats(item, path + (index,))
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST_EXACT_INT:
        yield path, value


def _check_shared_logins(decls, owner: str, workspace: WorkspaceConfig, report: _Report) -> None:
    """Declarations that log in as one principal share its password: a generated one would replace the others'."""
    sharing: dict[tuple[str, str], list[tuple[int, ResourceDecl]]] = {}
    for i, decl in decls:
        instance = workspace.shared.get(decl.uses)
        if instance is None or instance.engine not in registry.engines():
            continue  # reported on the entry or on the workspace
        provider = registry.kinds(instance.engine).get(decl.kind)
        if provider is not None and provider.login_per_owner:
            sharing.setdefault((decl.uses, decl.kind), []).append((i, decl))
    for (uses, kind), group in sharing.items():
        if len(group) < 2:
            continue
        rotations = {_rotation(decl) for _, decl in group}
        for i, decl in group:
            if len(rotations) > 1 and _rotation(decl) != _rotation(group[0][1]):
                report.add(("resources", i, "params", "rotation"),
                           f"the {len(group)} {kind} declarations of project {owner!r} on instance {uses!r} all log in as "
                           f"the project's one role, whose password follows `rotation`: one differing would change it "
                           f"back and forth at every up (give each the same rotation, "
                           f"{_shown(_rotation(group[0][1]))} as {format_path(('resources', group[0][0]))} has)")
            if decl.credentials == "generated":
                report.add(("resources", i, "credentials"),
                           f"the {len(group)} {kind} declarations of project {owner!r} on instance {uses!r} all log in as "
                           f"the project's one role, so a generated password would replace the others' (use "
                           f"`credentials: predictable` on each, or declare a `user` for a login with its own password)")


def _rotation(decl: ResourceDecl) -> Any:
    """A declaration's `rotation` param as its login's password reads it (absent and null alike)."""
    value = decl.params.get("rotation") if isinstance(decl.params, dict) else None
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _check_clashes(decls, owner: str, workspace: WorkspaceConfig, report: _Report) -> None:
    """Pairs of one kind on one instance that the engine cannot hold side by side (each kind's `clash`)."""
    declared: dict[str, dict[tuple[str, str], dict]] = {}
    for _, decl in decls:
        declared.setdefault(decl.uses, {})[(decl.kind, decl.name or owner)] = decl.params
    for n, (i, decl) in enumerate(decls):
        engine = workspace.shared[decl.uses].engine
        if engine not in registry.engines():
            continue  # reported on the workspace
        provider = registry.kinds(engine)[decl.kind]
        for _, other in decls[:n]:
            if (other.uses, other.kind) == (decl.uses, decl.kind):
                clash = provider.clash(decl.name or owner, decl.params, other.name or owner, other.params, owner,
                                       declared[decl.uses])
                if clash is not None:
                    report.add(("resources", i, *clash[0].split(".")), clash[1])
                    break


def _services(data: dict, decls, broken: list[Any], owner: str, workspace: WorkspaceConfig,
              report: _Report) -> dict[str, ServiceDecl]:
    raw_services = data.get("services") or {}
    if not isinstance(raw_services, dict):
        report.add(("services",), "must be a mapping of service name to its uses and env")
        return {}
    services = {}
    for name, raw in raw_services.items():
        if not isinstance(name, str) or not name:
            # `~:` or `1:` as a key: YAML reads it as null or a number, which would become a service "None".
            report.add(("services",), f"key {_shown(name)} is not a service name; give a name (quote it if YAML "
                                      "reads it as another value)")
            continue
        at = ("services", name)
        try:
            service = ServiceDecl.model_validate(raw or {})
        except ValidationError as err:
            report.pydantic(err, at, ServiceDecl)
            continue
        for j, uses in enumerate(service.uses):
            if uses not in workspace.shared:
                report.add(at + ("uses", j), f"names no shared instance of workspace {workspace.name!r}")
        set_by: dict[str, FieldPath] = {var: at + ("env", var) for var in service.env.plain()}
        for j, item in enumerate(service.env.imports):
            listed = isinstance(item.vars, list)
            wheres = {var: at + ("env", "import", j, "vars", index if listed else var)
                      for index, var in enumerate(item.vars)}
            _check_import(at + ("env", "import", j), item, decls, broken, owner, workspace, report)
            for var, where in wheres.items():
                if var in set_by:
                    # One would silently replace the other (a secret DSN by a plain user name, say).
                    report.add(where, f"{var} is set twice in this service's env (also at "
                                      f"{format_path(set_by[var])}; keep one)")
                set_by.setdefault(var, where)
        for var, value in service.env.plain().items():
            _check_plain(at + ("env", var), var, value, [d for _, d in decls], owner, workspace, report)
        services[str(name)] = service
    return services


def resolve_source(source: str, decls: list[ResourceDecl], owner: str) -> ResourceDecl | None:
    """The one declaration a `from:` names, or None."""
    candidates = source_candidates(source, decls, owner)
    return candidates[0] if len(candidates) == 1 else None


def source_candidates(source: str, decls: list[ResourceDecl], owner: str) -> list[ResourceDecl]:
    """The project's declarations a `from:` names: `workspace.shared.<instance>` alone names every one
    on that instance; `/<kind>[/<name>]` picks one (the name defaults to the project)."""
    instance, *rest = source.split("/")
    if len(rest) > 2:
        return []
    kind = rest[0] if rest else None
    name = (rest[1] if len(rest) == 2 else owner) if rest else None
    return [d for d in decls if d.uses == instance_name(instance)
            and kind in (None, d.kind) and name in (None, d.name or owner)]


def _kind_template(decl: ResourceDecl, workspace: WorkspaceConfig) -> templates.KindTemplate | None:
    instance = workspace.shared.get(decl.uses)
    if instance is None or instance.engine not in registry.engines() or decl.kind not in registry.kinds(instance.engine):
        return None  # the resource entry itself is reported
    return templates.engine_template(instance.engine).kinds[decl.kind]


def _supplies(template: templates.KindTemplate | None, wanted: dict[str, str] | list[str]) -> bool:
    """Whether a kind has every variable (a list) or attribute (a mapping) an import asks for."""
    if template is None:
        return False
    if isinstance(wanted, list):
        return all(var in template.vars for var in wanted)
    return all(attribute in template.names() for attribute in wanted.values())


def _choices(decls: list[ResourceDecl], owner: str) -> str:
    return ", ".join(f"workspace.shared.{d.key(owner)}" for d in decls)


def _check_import(at: FieldPath, item: EnvImport, decls, broken: list[Any], owner: str, workspace: WorkspaceConfig,
                  report: _Report) -> None:
    """Check one `env.import` item and, when it is sound, rewrite it to the form the Project reads: `from:`
    the resource's key, `vars:` a mapping of variable to attribute."""
    mine = [d for _, d in decls]
    candidates = source_candidates(item.source, mine, owner)
    if not candidates and _names_a_broken_entry(item.source, broken, owner):
        return  # the entry is there but invalid, and reported as such
    if not candidates:
        report.add(at + ("from",), f"{item.source!r} names no resource of this project (use workspace.shared."
                                   f"<instance> or <instance>/<kind>[/<name>] of an entry under resources)")
        return
    if len(candidates) > 1:
        fitting = [d for d in candidates if _supplies(_kind_template(d, workspace), item.vars)]
        if len(fitting) != 1:
            among = fitting or candidates
            report.add(at + ("from",), f"{item.source!r} could be any of {len(among)} resources of this project "
                                       f"({_choices(among, owner)}); name one of them")
            return
        candidates = fitting
    decl, template = candidates[0], _kind_template(candidates[0], workspace)
    if template is None:
        return
    engine = workspace.shared[decl.uses].engine
    if isinstance(item.vars, list):
        for index, var in enumerate(item.vars):
            if var not in template.vars:
                report.add(at + ("vars", index), f"{var} is not a variable devstack knows for a {engine} {decl.kind} "
                                                 f"(known: {', '.join(sorted(template.vars)) or 'none'}; or map it to an "
                                                 f"attribute: {{{var}: <attribute>}})")
        mapping = {var: template.vars.get(var, "") for var in item.vars}
    else:
        mapping = item.vars
        for var, attribute in mapping.items():
            if attribute not in template.names():
                report.add(at + ("vars", var), f"{engine} {decl.kind} has no attribute {attribute!r} "
                                               f"(attributes: {', '.join(template.names())})")
    item.source, item.vars = decl.key(owner), mapping


def _names_a_broken_entry(source: str, broken: list[Any], owner: str) -> bool:
    """Whether `from:` names an entry that is there but invalid (and reported as such)."""
    instance, *rest = source.split("/")
    if len(rest) > 2:
        return False
    wanted = (instance_name(instance), *rest, owner)[: len(rest) + 1 if not rest else 3]
    for raw in broken:
        if isinstance(raw, dict) and isinstance(raw.get("uses"), str):
            have = (instance_name(raw["uses"]), raw.get("kind"), raw.get("name") or owner)
            if have[: len(wanted)] == wanted:
                return True
    return False


def _check_plain(at: FieldPath, var: str, value: Any, decls: list[ResourceDecl], owner: str,
                 workspace: WorkspaceConfig, report: _Report) -> None:
    if not ENV_NAME.fullmatch(var):
        report.add(at, "env var names must match [A-Za-z_][A-Za-z0-9_]*")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        report.add(at, "env values must be strings or numbers (use env.import for resource attributes)")
        return
    rest = REF.sub("", str(value))
    if "${ref:" in rest:
        report.add(at, "a ${ref:...} is not closed with '}' (write ${ref:workspace.shared.<instance>.<attribute>})")
    elif match := REF_LOOKALIKE.search(rest):
        report.add(at, f"{_shown(match.group())} is not a reference, and would reach the service as text (write "
                       "${ref:workspace.shared.<instance>.<attribute>}: lowercase, no spaces)")
    for ref in REF.findall(str(value)):
        problem = _ref_problem(ref, decls, owner, workspace)
        if problem:
            report.add(at, problem)


def _ref_problem(ref: str, decls: list[ResourceDecl], owner: str, workspace: WorkspaceConfig) -> str | None:
    """What is wrong with `${ref:<ref>}`, if anything."""
    match, shown = REF_TARGET.fullmatch(ref), _cut(ref)
    if not match:
        return f"${{ref:{shown}}} must read workspace.shared.<instance>.<attribute>"
    source, attribute = match.groups()
    if any(word in attribute.lower() for word in SECRET_WORDS) or attribute in templates.SECRET_ATTRIBUTES:
        return (f"${{ref:{shown}}} reads a secret attribute; secrets reach services only through env.import of a "
                f"resource, never inline")
    name = instance_name(source.split("/")[0])
    instance = workspace.shared.get(name)
    if instance is None:
        return f"${{ref:{shown}}} names no shared instance of workspace {workspace.name!r}"
    if instance.engine not in registry.engines():
        return None  # reported on the workspace
    known = templates.engine_template(instance.engine).instance
    if attribute in known and "/" not in source:
        if templates.instance_attributes(instance.engine, instance)[attribute] == "":
            # The TLS attributes come from its `tls:` block, which a plaintext instance has not.
            field = f"tls.{attribute}" if attribute in instance.template_values() else attribute
            return (f"${{ref:{shown}}}: instance {name!r} sets no {attribute} (set shared.{name}.{field} in the "
                    f"stack config, or drop this variable)")
        return None
    found, readable = ref_resource(source, attribute, decls, owner, workspace)
    if found is not None:
        return None
    if readable:
        return (f"${{ref:{shown}}} could be any of {len(readable)} resources of this project "
                f"({_choices(readable, owner)}); name one: ${{ref:workspace.shared.<instance>/<kind>/<name>.{attribute}}}")
    secret = [d for d in source_candidates(source, decls, owner)
              if (t := _kind_template(d, workspace)) is not None and attribute in t.names() and t.is_secret(attribute)]
    if secret:
        return (f"${{ref:{shown}}} reads a secret attribute of {_choices(secret, owner)}; secrets reach services only "
                f"through env.import, never inline")
    return (f"${{ref:{shown}}}: instance {name!r} has no attribute {attribute!r}, nor does a resource this project "
            f"declares there (instance attributes: {', '.join(known)})")


def ref_resource(source: str, attribute: str, decls: list[ResourceDecl], owner: str,
                 workspace: WorkspaceConfig) -> tuple[ResourceDecl | None, list[ResourceDecl]]:
    """The project's one declaration whose non-secret `attribute` a `${ref:workspace.shared.<source>.<attribute>}`
    reads, and every one it could read (several: ambiguous, none: no such attribute)."""
    readable = []
    for decl in source_candidates(source, decls, owner):
        template = _kind_template(decl, workspace)
        if template is not None and attribute in template.names() and not template.is_secret(attribute):
            readable.append(decl)
    return (readable[0] if len(readable) == 1 else None), readable


#: How each engine maps a project's name where it names something (a login, a prefix, a default resource).
PROJECT_NAME_MAPPINGS = {"PostgreSQL": naming.postgres_role, "bucket": naming.bucket, "NATS": naming.nats,
                         "Kafka": naming.kafka_project, "Redis": naming.redis}


def _mapped_project_names(name: str) -> list[tuple[str, str]]:
    """(engine, `name` as it maps there) for each engine that can map it (the others report it on the
    resources that need it)."""
    mapped = []
    for engine, mapping in PROJECT_NAME_MAPPINGS.items():
        with suppress(InvalidSpec):
            mapped.append((engine, mapping(name)))
    return mapped


def _mapped_twins(name: str, mapped_owners: Mapping[tuple[str, str], str]) -> dict[str, list[str]]:
    """The other projects whose names map to `name`'s somewhere, each with those engines."""
    twins: dict[str, list[str]] = {}
    for engine, mapped in _mapped_project_names(name):
        other = mapped_owners.get((engine, mapped))
        if other is not None and other != name:
            twins.setdefault(other, []).append(engine)
    return twins


def _reach_clashes(located: list[tuple[ProjectFile, str, YamlFile | None]], workspace: WorkspaceConfig) -> list[Problem]:
    """Declarations another project's credential on the same server would reach by a name pattern
    (each kind's `reached_by`): refused here, before either is created, instead of by whichever
    provider call comes second."""
    holders: dict[tuple[str, int], dict[str, dict[str, str]]] = {}  # server -> kind -> owner -> its file
    for project, relative, _file in located:
        for decl in project.resources:
            instance = workspace.shared[decl.uses]
            server = holders.setdefault((server_address(instance.host), instance.port), {})
            server.setdefault(decl.kind, {}).setdefault(project.name, relative)
    problems = []
    for project, relative, file in located:
        for i, decl in enumerate(project.resources):
            instance = workspace.shared[decl.uses]
            if instance.engine not in registry.engines():
                continue  # reported on the workspace
            on_server = holders[(server_address(instance.host), instance.port)]
            provider = registry.kinds(instance.engine)[decl.kind]
            reached = provider.reached_by(decl.name or project.name, project.name, on_server)
            if reached is not None:
                kind, owner, pattern = reached
                engine_name = provider.engine_name(decl.name or project.name, project.name, naming=CURRENT_NAMING)
                problems.append(Problem(
                    relative, f"resources[{i}].name", file.line(("resources", i, "name")) if file else None,
                    f"{instance.engine} {decl.kind} {engine_name!r} would be within reach of the {kind} of project "
                    f"{owner!r} ({on_server[kind][owner]}), which reaches every {decl.kind} named {pattern} on this "
                    f"server (rename it, or move this {decl.kind} to another instance; one that exists already: "
                    f"`devstack resource rm` it first, which keeps its data)"))
    return problems


def _server(uses: str, other_uses: str, instance: SharedInstance) -> str:
    if uses == other_uses:
        return f"instance {uses!r}"
    return (f"one server: instances {other_uses!r} and {uses!r} both reach "
            f"{join_address(server_address(instance.host), instance.port)}")


#: (engine, server, port, namespace, engine name): see KindProvider.object_named.
EngineObject = tuple[str, str, int, str, str]
#: Who claimed an engine object: file, resource path, instance, and (project, kind) when that project's
#: declarations of that kind all make it (owner_objects).
Claim = tuple[str, str, str, tuple[str, str] | None]


def _admin_logins(workspace: WorkspaceConfig, stack_display: str) -> dict[EngineObject, Claim]:
    """Each instance's admin user, claimed where the kinds that make logins put theirs: a project's
    login of that name would be refused mid-up (it exists, unmarked) or, worse, be the admin."""
    claims: dict[EngineObject, Claim] = {}
    for name, instance in workspace.shared.items():
        if instance.engine not in registry.engines():
            continue
        for kind in registry.kinds(instance.engine).values():
            if kind.logins:
                claims.setdefault(kind.object_named(instance.host, instance.port, instance.admin_user),
                                  (stack_display, f"devstack:workspace.shared.{name}.adminUser", name, None))
    return claims


def _collisions(project: ProjectFile, relative: str, file: YamlFile | None, workspace: WorkspaceConfig,
                claimed: dict[EngineObject, Claim]) -> list[Problem]:
    """Declarations naming one engine object: each its own (engine_object), and those a kind makes for its
    whole project (owner_objects, which that project's declarations of the kind share)."""
    problems = []
    for i, decl in enumerate(project.resources):
        instance = workspace.shared[decl.uses]
        if instance.engine not in registry.engines():
            continue  # reported on the workspace
        provider = registry.kinds(instance.engine)[decl.kind]
        here = (relative, f"resources[{i}]")
        # By server, not instance name: two names for one server (`localhost`, `127.0.0.1`) reach one object.
        objects = [(provider.engine_object(instance.host, instance.port, decl.name or project.name, project.name), None)]
        objects += [(key, (project.name, decl.kind))
                    for key in provider.owner_objects(instance.host, instance.port, project.name)]
        for key, sharer in objects:
            other = claimed.setdefault(key, (*here, decl.uses, sharer))
            if sharer is not None and other[3] == sharer and other[2] != decl.uses:
                # A generated password follows the declaration, and a legacy hashed one the
                # instance name: each up would set it for one name and break the other's login, for ever.
                problems.append(Problem(
                    relative, f"resources[{i}].uses", file.line(("resources", i, "uses")) if file else None,
                    f"every {decl.kind} of project {project.name!r} logs in as its one {instance.engine} {key[3]} "
                    f"{key[-1]!r}, and {other[1]} reaches it through instance {other[2]!r}: "
                    f"{_server(decl.uses, other[2], instance)}, and the two names would give it two passwords "
                    f"(declare them on one instance name; to move them, move them all in one edit)"))
                break
            if other[:2] == here or (sharer is not None and other[3] == sharer):
                continue  # its own claim, or one more declaration making the project's shared object
            shared_by = sharer or other[3]
            made = f" (every {shared_by[1]} of project {shared_by[0]!r} makes it)" if shared_by else ""
            problems.append(Problem(relative, f"resources[{i}].name", file.line(("resources", i, "name")) if file else None,
                                    f"collides with {other[0]} {other[1]}: both are {instance.engine} "
                                    f"{key[3]} {key[-1]!r} on {_server(decl.uses, other[2], instance)}{made} "
                                    f"(give one another name)"))
            break  # one collision per declaration is enough to act on
    return problems
