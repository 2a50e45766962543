"""The Project component: one dynamic resource per `resources:` entry, plus outputs.

Children are named `<project>/<instance>/<kind>/<name>`: independent of list
order and of where the file lives, so reordering or moving replaces nothing.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pulumi
from pulumi.dynamic import Resource

from components import templates
from components.secret_store import SECRET_ID_SUFFIX, STORE_OUTPUT, declare_entries, served, store_reach
from components.models import ProjectFile, ResourceDecl, WorkspaceConfig, instance_name
from components.validation import REF, REF_TARGET, ref_resource, resolve_source
from providers import registry
from providers.base import KindProvider
from providers.description import REACH, REFS


@cache
def resource_class(engine: str, kind: str) -> type[Resource]:
    """The Pulumi resource type of a kind, e.g. `pulumi-python:dynamic/postgres:database`."""

    class TenantResource(Resource, module=engine, name=kind):
        pass

    TenantResource.__name__ = f"{engine.title()}{kind.title().replace('_', '')}"
    return TenantResource


class Project(pulumi.ComponentResource):
    """All tenant resources a project declares; `outputs` holds resources and services."""

    outputs: dict[str, Any]

    def __init__(
        self, project: ProjectFile, workspace: WorkspaceConfig, stack: str, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("devstack:index:Project", project.name, None, opts)
        self._file, self._ws = project, workspace
        self._purged = {decl.key(project.name) for decl in project.resources if decl.purge}
        created: dict[str, Resource] = {}
        resources: dict[str, Any] = {}
        # Declarations others depend on first, so each dependent can name them.
        for decl in sorted([*project.resources, *self._implied()], key=self._rank):
            resource = self._declare(decl, stack, created)
            created[decl.key(project.name)] = resource
            resources[decl.key(project.name)] = self._resource_outputs(decl, resource)
        # Generated credentials pushed to the workspace's secret store, if it has one (components.secret_store).
        self._stored = declare_entries(project, workspace, stack, resources, self)
        services = {name: self._service_outputs(service, created) for name, service in project.services.items()}
        self.outputs = {"resources": resources, "services": services}
        self.register_outputs({})

    def _implied(self) -> list[ResourceDecl]:
        """The declarations every project on an instance has unless it writes its own (a NATS account)."""
        declared = {(decl.uses, decl.kind) for decl in self._file.resources}
        # Purged with the project's declarations there when each of them is: nothing is left behind.
        purged = {uses: all(d.purge for d in self._file.resources if d.uses == uses)
                  for uses in dict.fromkeys(decl.uses for decl in self._file.resources)}
        return [ResourceDecl(uses=uses, kind=kind, name=self._file.name, purge=purge)
                for uses, purge in purged.items()
                for kind, provider in registry.kinds(self._ws.shared[uses].engine).items()
                if provider.implied and (uses, kind) not in declared]

    def _kind_class(self, decl: ResourceDecl) -> type[KindProvider]:
        return registry.provider_class(self._ws.shared[decl.uses].engine, decl.kind)

    def _rank(self, decl: ResourceDecl) -> int:
        """0: depends on nothing; 1: comes after kinds (a NATS stream after the account); 2: references
        another declaration, which ranks lower (a consumer its stream)."""
        kind = self._kind_class(decl)
        return 2 if kind.references else 1 if kind.after_kinds else 0

    def _referenced(self, decl: ResourceDecl, provider: KindProvider,
                    created: dict[str, Resource]) -> dict[str, tuple[str, Resource]]:
        """The declarations `decl`'s params name, by key, with the param: a consumer's stream, a rule's
        bucket, a user's database."""
        named = provider.referenced(decl.params, self._file.name, decl.name or self._file.name)
        keys = {f"{decl.uses}/{provider.references[param]}/{name}": param for param, name in named.items()}
        return {key: (param, created[key]) for key, param in keys.items() if key in created}

    def _refs(self, decl: ResourceDecl, referenced: dict[str, tuple[str, Resource]]) -> dict[str, Any]:
        """param -> the engine name its referenced resource records: its naming may not be this one's."""
        engine = self._ws.shared[decl.uses].engine
        refs = {}
        for key, (param, resource) in referenced.items():
            attribute = registry.provider_class(engine, key.split("/")[1]).name_attribute
            if attribute:
                refs[param] = getattr(resource, attribute)
        return refs

    def _reach(self, decl: ResourceDecl, provider: KindProvider, created: dict[str, Resource]) -> list[Any]:
        """The engine names of the project's resources on `decl`'s instance that its grants reach; for a kind
        reaching several kinds, each as `<kind>:<engine name>`, and the project's secret-store entries when the
        instance serves the store (components.secret_store)."""
        several = not isinstance(provider.reach_kind, str)
        reached = []
        for kind in provider.reach_kind if several else (provider.reach_kind,):
            attribute = registry.provider_class(self._ws.shared[decl.uses].engine, kind).name_attribute
            names = [getattr(resource, attribute) for key, resource in created.items()
                     if key.split("/")[:2] == [decl.uses, kind]]
            reached += [pulumi.Output.concat(f"{kind}:", name) for name in names] if several else names
        return reached + store_reach(self._ws, self._file.name, decl)

    def _dependencies(self, decl: ResourceDecl, provider: KindProvider, referenced: dict[str, tuple[str, Resource]],
                      created: dict[str, Resource]) -> list[Resource]:
        """What must exist before `decl` and be deleted after it: referenced declarations and after_kinds."""
        after = [resource for key, resource in created.items()
                 if key.split("/")[0] == decl.uses and key.split("/")[1] in provider.after_kinds]
        return list(dict.fromkeys([*(resource for _, resource in referenced.values()), *after]))

    def _declare(self, decl: ResourceDecl, stack: str, created: dict[str, Resource]) -> Resource:
        instance = self._ws.shared[decl.uses]
        provider = self._kind_class(decl)()
        referenced = self._referenced(decl, provider, created)
        depends_on = self._dependencies(decl, provider, referenced, created)
        # Replacing what it lives in or on with purge (a dropped stream takes its consumers, a
        # database its owner role's grants) must replace it too, or the ledger would keep a
        # resource the engine no longer has. A retained one keeps them: they stay as they are.
        replace_with = [resource for key, (_, resource) in referenced.items() if key in self._purged]
        name, owner = decl.name or self._file.name, self._file.name
        props = {
            "engine": instance.engine,
            "instance": decl.uses,
            "kind": decl.kind,
            "name": name,
            "owner": owner,
            "params": provider.normalized_params(decl.params, name, owner),
            "credentials": decl.credentials,
            "purge": decl.purge,
            "stack": stack,
            **provider.revision_inputs(),
            **({REFS: refs} if (refs := self._refs(decl, referenced)) else {}),
            **({REACH: self._reach(decl, provider, created)} if provider.reach_kind else {}),
            # Declared as None so Pulumi exposes them as output properties.
            **{key: None for key in provider.attributes},
        }
        return resource_class(instance.engine, decl.kind)(
            provider,
            f"{self._file.name}/{decl.key(self._file.name)}",
            props,
            pulumi.ResourceOptions(
                parent=self,
                depends_on=depends_on,
                replace_with=replace_with or None,
                # Engine names are fixed: the old one must go first. Pulumi decides a replace_with
                # replacement without asking the provider's diff (which always says so), and would
                # otherwise create first, then drop what the new one had just adopted.
                delete_before_replace=True,
                # Tenant data outlives its declaration unless purge is asked for.
                retain_on_delete=not decl.purge,
                additional_secret_outputs=list(provider.secret_outputs),
            ),
        )

    def _resource_outputs(self, decl: ResourceDecl, resource: Resource) -> dict[str, Any]:
        """Provider attributes plus template exports; secret ones stay secret."""
        instance = self._ws.shared[decl.uses]
        template = templates.engine_template(instance.engine).kinds[decl.kind]
        # TLS is the instance's, known here: exports read it without a provider attribute for it.
        known = instance.template_values()
        # The engine already encrypts secret attributes (additional_secret_outputs);
        # marking them here too keeps the exported outputs secret whatever runs us.
        outputs: dict[str, Any] = {
            name: pulumi.Output.secret(getattr(resource, name)) if template.is_secret(name) else getattr(resource, name)
            for name in template.attributes
        }
        for name, export in template.exports.items():
            used = sorted(export.uses - known.keys())
            given = {key: known[key] for key in export.uses & known.keys()}
            value = pulumi.Output.all(*(getattr(resource, n) for n in used)).apply(
                lambda values, export=export, used=used, given=given: export.render({**given, **dict(zip(used, values))})
            )
            outputs[name] = pulumi.Output.secret(value) if template.is_secret(name) else value
        return outputs

    def _service_outputs(self, service, created: dict[str, Resource]) -> dict[str, Any]:
        """`env`, and `secretStore` (variable -> its entry) for the secrets a service reads from the store:
        for those the env holds `<VAR>_SECRET_ID`, the entry's name, and never the value."""
        env: dict[str, Any] = {var: self._resolve_refs(value, created) for var, value in service.env.plain().items()}
        from_store: dict[str, Any] = {}
        for item in service.env.imports:
            decl = resolve_source(item.source, self._file.resources, self._file.name)
            outputs = self._resource_outputs(decl, created[decl.key(self._file.name)])
            for var, attribute in item.vars.items():
                entry = served(decl, attribute, self._stored, self._file.name)
                if entry is None:
                    env[var] = outputs[attribute]
                    continue
                env[var + SECRET_ID_SUFFIX] = entry.secretId
                store = self._ws.secret_store
                from_store[var] = {"kind": store.kind, "instance": store.instance, "id": entry.secretId}
        return {"env": env, **({STORE_OUTPUT: from_store} if from_store else {})}

    def _resolve_refs(self, value: Any, created: dict[str, Resource]) -> Any:
        """`value` with each `${ref:workspace.shared.<source>.<attr>}` replaced: an instance's attribute as
        text, a resource's (the project's own, non-secret) as the output it is."""
        pieces: list[Any] = []
        position, text = 0, str(value)
        for match in REF.finditer(text):
            pieces += [text[position:match.start()], self._ref_value(match.group(1), created)]
            position = match.end()
        pieces.append(text[position:])
        if all(isinstance(piece, str) for piece in pieces):
            return "".join(pieces)
        return pulumi.Output.concat(*pieces)

    def _ref_value(self, ref: str, created: dict[str, Resource]) -> Any:
        source, attribute = REF_TARGET.fullmatch(ref).groups()
        instance = self._ws.shared[instance_name(source.split("/")[0])]
        known = templates.instance_attributes(instance.engine, instance)
        if attribute in known and "/" not in source:
            return known[attribute]
        decl, _ = ref_resource(source, attribute, self._file.resources, self._file.name, self._ws)
        return self._resource_outputs(decl, created[decl.key(self._file.name)])[attribute]
