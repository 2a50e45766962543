"""Typed errors of the `devstack` command and its Python API.

Every error reads "cannot <verb> <what>: <cause> (<what to do>)", like the
providers' errors, and carries the exit code the command returns for it, so
`devstack` maps an exception to a status without string matching:

| error            | exit | when                                                        |
|------------------|------|-------------------------------------------------------------|
| InvalidQuery     | 2    | bad filter, limit or cursor; bad arguments                  |
| NotFound         | 3    | no stack, no resource, no project or service of that name   |
| Ambiguous        | 4    | a name matches several resources (candidates listed)        |
| IdentityConflict | 5    | the engine holds the name under another owner               |
| ScopeMismatch    | 6    | a cursor or operation used outside the scope it was made in |
| Aborted          | 7    | the user did not confirm a destructive operation            |
| EngineError      | 8    | an engine or the pulumi CLI failed                          |
| AlreadyExists    | 9    | an entry or tombstone the ledger already holds was created  |
| StaleObservation | 10   | an observation older than the one the ledger holds          |
| InvalidTransition| 11   | a lifecycle change the rules forbid (deleted -> stale)      |

ScopeMismatch is a kind of InvalidQuery (`except InvalidQuery` catches it) with its own code.

They derive from the providers' base, `DevstackError` (providers.errors); this
module's `NotFound` is the command's (exit 3), not the providers' of that name.
A verb that drops data asks first (`require_confirmation`); one that stops
part-way says what it had done (`stopped`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.errors import DevstackError

#: Receives a description of the data about to be dropped; True goes ahead.
Confirm = Callable[[str], bool]


class InvalidQuery(DevstackError):
    """A filter, limit, cursor or argument is malformed; nothing was read or changed."""

    exit_code = 2


class NotFound(DevstackError):
    """The stack, resource, project or service does not exist."""

    exit_code = 3


class Ambiguous(DevstackError):
    """A name matches several resources; `candidates` holds their canonical ids."""

    exit_code = 4

    def __init__(self, verb: str, what: str, candidates: list[str]) -> None:
        self.candidates = candidates
        super().__init__(
            verb, what, f"{len(candidates)} resources match: {', '.join(candidates)}",
            "narrow it with --engine, --kind and/or --project, or name it by its id",
        )


class IdentityConflict(DevstackError):
    """The engine-level name belongs to another project or to something we do not manage."""

    exit_code = 5


class ScopeMismatch(InvalidQuery):
    """A cursor or request was made for one scope (filters, stack) and used in another: an invalid query."""

    exit_code = 6


class Aborted(DevstackError):
    """A destructive operation was not confirmed; nothing was changed."""

    exit_code = 7


class EngineError(DevstackError):
    """An engine or the pulumi CLI failed; the cause is chained."""

    exit_code = 8


class AlreadyExists(DevstackError):
    """A create met an entry (or tombstone) of that identity the ledger already holds; nothing changed."""

    exit_code = 9


class StaleObservation(DevstackError):
    """An observation older than the one the ledger holds for the resource; nothing changed."""

    exit_code = 10


class InvalidTransition(DevstackError):
    """A lifecycle change the ledger's rules forbid (a deleted resource cannot become stale); nothing changed."""

    exit_code = 11


def require_confirmation(confirm: Confirm | None, text: str) -> None:
    """Aborted, before anything changes, unless `confirm(text)` says yes (None: nobody to ask)."""
    if confirm is None or not confirm(text):
        raise Aborted("drop", "data", "not confirmed; nothing was changed", "confirm, or pass --yes")


def stopped(err: DevstackError, done: Any) -> DevstackError:
    """`err`, carrying `done`, the report of what was done before it (a model; printed with --json)."""
    err.done = done.model_copy(update={"error": str(err)})
    return err


__all__ = ["Aborted", "AlreadyExists", "Ambiguous", "Confirm", "DevstackError", "EngineError", "IdentityConflict",
           "InvalidQuery", "InvalidTransition", "NotFound", "ScopeMismatch", "StaleObservation", "require_confirmation",
           "stopped"]
