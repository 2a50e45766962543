"""Per-engine templates: what an engine provides and what each kind exports.

templates/<engine>.yaml lists, per kind, exports composed with Jinja2 from
the provider's attributes (a DSN, an endpoint URL, a bootstrap string), the
conventional variable names of the engine's clients and what each holds
(PGPASSWORD: password), and the attributes `${ref:workspace.shared.<instance>.<attr>}` may read of an
instance. An export that uses a secret attribute is secret itself. Adding an
export is a template change; adding an engine is a template plus a provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
import urllib.parse
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import yaml

from providers import registry
from providers.instances import join_address

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
#: Attribute names that always hold secrets, whatever the engine.
SECRET_ATTRIBUTES = frozenset({"password", "secretKey", "secret", "token"})

_JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
# A URL's user or password: every reserved character percent-encoded. Jinja's own urlencode keeps '/',
# which would end the authority part early.
_JINJA.filters["urlpart"] = lambda value: urllib.parse.quote(str(value), safe="")
# host:port as URLs and bootstrap lists write it: an IPv6 literal in brackets (`{{ host | hostport(port) }}`).
_JINJA.filters["hostport"] = lambda host, port: join_address(str(host), _plain(port))
# Each of comma-joined host:port as a URL of `scheme` (`{{ servers | urls("nats") }}`).
_JINJA.filters["urls"] = lambda servers, scheme: ",".join(f"{scheme}://{s}" for s in str(servers).split(","))


@dataclass(frozen=True)
class Export:
    """One composed export: its Jinja2 source and the attributes it reads."""

    name: str
    source: str
    uses: frozenset[str]

    def render(self, attributes: dict[str, Any]) -> str:
        return _compiled(self.source).render(**{k: _plain(v) for k, v in attributes.items()})


@cache
def _compiled(source: str) -> jinja2.Template:
    # Compiling is most of a render's cost, and each export renders once per resource.
    return _JINJA.from_string(source)


@dataclass(frozen=True)
class KindTemplate:
    engine: str
    kind: str
    attributes: tuple[str, ...]
    secret_attributes: frozenset[str]
    exports: dict[str, Export]
    #: Conventional client variable -> the attribute or export it holds (`vars: [PGPASSWORD]`).
    vars: dict[str, str]

    def names(self) -> tuple[str, ...]:
        """Everything a service may import: provider attributes, then exports."""
        return self.attributes + tuple(name for name in self.exports if name not in self.attributes)

    def is_secret(self, name: str) -> bool:
        if name in self.exports:
            return bool(self.exports[name].uses & self.secret_attributes) or name in SECRET_ATTRIBUTES
        return name in self.secret_attributes or name in SECRET_ATTRIBUTES


@dataclass(frozen=True)
class EngineTemplate:
    engine: str
    provides: str
    instance: dict[str, Export]
    kinds: dict[str, KindTemplate]


def _plain(value: Any) -> Any:
    """Pulumi hands every number back as a float; a port must render as 29000, not 29000.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _export(name: str, source: Any) -> Export:
    text = str(source)
    used = jinja2.meta.find_undeclared_variables(_JINJA.parse(text))
    return Export(name=name, source=text, uses=frozenset(used))


@cache
def engine_template(engine: str) -> EngineTemplate:
    """Load templates/<engine>.yaml, joined with the provider's kinds and attributes."""
    raw = yaml.safe_load((TEMPLATES_DIR / f"{engine}.yaml").read_text(encoding="utf-8"))
    kinds = {}
    for kind, provider in registry.kinds(engine).items():
        raw_kind = raw.get("kinds", {}).get(kind) or {}
        kinds[kind] = KindTemplate(
            engine=engine,
            kind=kind,
            attributes=tuple(provider.attributes),
            secret_attributes=frozenset(provider.secret_outputs) | (SECRET_ATTRIBUTES & set(provider.attributes)),
            exports={name: _export(name, source) for name, source in (raw_kind.get("exports") or {}).items()},
            vars=dict(raw_kind.get("vars") or {}),
        )
        unknown = {var: name for var, name in kinds[kind].vars.items() if name not in kinds[kind].names()}
        if unknown:
            raise ValueError(f"templates/{engine}.yaml: kinds.{kind}.vars names no attribute or export: {unknown}")
    instance = {name: _export(name, source) for name, source in (raw.get("instance") or {}).items()}
    return EngineTemplate(engine=engine, provides=raw.get("provides", ""), instance=instance, kinds=kinds)


def instance_attributes(engine: str, instance: Any) -> dict[str, str]:
    """The non-secret attributes of a shared instance that `${ref}` may read."""
    values = {"host": instance.host, "port": instance.port, "servers": instance.several,
              "version": instance.version or "", "name": instance.name, **instance.template_values()}
    return {name: export.render(values) for name, export in engine_template(engine).instance.items()}
