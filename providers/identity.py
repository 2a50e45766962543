"""The strict identity envelope shared by every resource of every engine."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping


@dataclass(frozen=True)
class Identity:
    """(engine, instance, kind, name, owner): never changes in place.

    A change to any field is a replacement. `str(identity)` is the canonical
    form used as the Pulumi resource id and in every message.
    """

    engine: str
    instance: str
    kind: str
    name: str
    owner: str

    def __str__(self) -> str:
        return f"{self.engine}/{self.instance}/{self.kind}/{self.name}@{self.owner}"

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> "Identity":
        return cls(**{name: str(props[name]) for name in cls.field_names()})

    def as_props(self) -> dict[str, str]:
        return asdict(self)
