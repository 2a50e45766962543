"""The strict identity envelope shared by every resource of every engine."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

#: The input and output that record which naming rules mapped a resource's name into its engine.
NAMING = "naming"
#: Owner-prefixed names (`<owner>-<name>`, `acme-uploads` for `uploads`, `acme-acme-uploads` for
#: `acme-uploads`), refused where an engine's rule does not fit. A resource that records no naming has these.
PREFIXED = 1
#: An explicit name is the engine identifier itself (`acme-uploads` is bucket `acme-uploads`, `uploads`
#: bucket `uploads`), sanitized for the engine (providers.naming) rather than refused; the default name,
#: the project's, derives from the project.
SANITIZED = 2
#: What a resource created now is named by.
CURRENT_NAMING = SANITIZED


@dataclass(frozen=True)
class Identity:
    """(engine, instance, kind, name, owner): never changes in place.

    A change to any field is a replacement. `str(identity)` is the canonical
    form used as the Pulumi resource id and in every message. `naming` says how
    `name` maps into the engine; it is recorded at create and kept for the
    resource's life, so it takes no part in equality.
    """

    engine: str
    instance: str
    kind: str
    name: str
    owner: str
    naming: int = field(default=PREFIXED, compare=False)

    def __str__(self) -> str:
        return f"{self.engine}/{self.instance}/{self.kind}/{self.name}@{self.owner}"

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The five identity fields (not `naming`)."""
        return tuple(f.name for f in fields(cls) if f.name != NAMING)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> "Identity":
        return cls(**{name: str(props[name]) for name in cls.field_names()}, naming=naming_of(props))

    def as_props(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in self.field_names()}, NAMING: self.naming}


def naming_of(props: Mapping[str, Any], default: int = PREFIXED) -> int:
    """The naming `props` record, else `default`: PREFIXED for outputs (a resource whose outputs record
    none was named by those rules), today's for inputs (which hold none: what a create would use)."""
    value = props.get(NAMING)
    return int(value) if value else default
