"""What an engine package gives devstack: its kinds, a scanner and a doctor probe.

Each `providers/<engine>/` package exposes one `ENGINE`; `providers.registry`
imports the package on first use and hands it to validation, the program,
`devstack doctor` and garbage collection, which only loop over engines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from providers.instances import SharedInstance

if TYPE_CHECKING:
    from providers.base import KindProvider

#: Seconds a probe waits for an engine's first answer.
PROBE_TIMEOUT = 3.0


@dataclass(frozen=True, order=True)
class Found:
    """One resource in an engine, as a scan sees it.

    `owner` is read from the ownership marker (None = no marker of ours: foreign), `stack` is the
    workspace the marker records when the engine keeps it, `name` the declaration name when the
    marker records it.
    """

    engine: str
    instance: str
    kind: str
    engine_name: str
    owner: str | None
    stack: str | None = None
    name: str | None = None
    #: Why its marker may not be ours, when the scan cannot prove it is: a marker kept apart from the
    #: object that no longer fits it (one made anew by hand under the name), or one inferred. Ours in
    #: the ledger, never provably so outside it. None: the marker is the object's own.
    doubt: str | None = None


@dataclass(frozen=True)
class Probed:
    """A probe's answer: the server's version, and notes that leave the instance usable."""

    version: str
    notes: tuple[str, ...] = ()
    #: How the admin may act where an engine has more than one way (PostgreSQL: superuser, or CREATEDB+CREATEROLE).
    mode: str = ""


class Rejected(Exception):
    """The instance answered but refused the admin credential."""


class NoAnswer(Exception):
    """The instance accepts connections but does not answer the admin check."""


class Unfit(Exception):
    """The admin logs in, but the instance is not fit for devstack (its admin lacks a power devstack
    uses, or anyone may log in); the message says what, `fix` how."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.fix = fix


@dataclass(frozen=True)
class Engine:
    """One engine's entry in the registry."""

    #: Kind name -> its provider class.
    kinds: Mapping[str, type[KindProvider]]
    #: `scan(instance, kinds)`: every resource of those kinds in the instance, ours or not; raises the
    #: provider's EngineUnavailable when the engine does not answer.
    scan: Callable[[SharedInstance, set[str]], list[Found]]
    #: `probe(instance)`: logs in as the admin and returns what it found; raises Rejected, NoAnswer or Unfit.
    probe: Callable[[SharedInstance], Probed]
