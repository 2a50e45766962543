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
"""

from __future__ import annotations


class DevstackError(Exception):
    """Base of every error the `devstack` API raises on purpose."""

    exit_code = 1
    #: What the operation had done before it stopped (its report, as `--json` prints it); None: nothing.
    done = None

    def __init__(self, verb: str, what: str, cause: str, hint: str = "") -> None:
        self.verb, self.what, self.cause, self.hint = verb, what, cause, hint
        message = f"cannot {verb} {what}: {cause}"
        super().__init__(f"{message} ({hint})" if hint else message)


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


class ScopeMismatch(DevstackError):
    """A cursor or request was made for one scope (filters, stack) and used in another."""

    exit_code = 6


class Aborted(DevstackError):
    """A destructive operation was not confirmed; nothing was changed."""

    exit_code = 7


class EngineError(DevstackError):
    """An engine or the pulumi CLI failed; the cause is chained."""

    exit_code = 8
