"""The few typed errors every provider raises, on the one base every devstack error derives from.

Messages read "cannot <verb> <what>: <cause> (<what to do>)" so a failed
`pulumi up` tells the user which resource, why, and the next step. The
`devstack` command's own errors (devstack.errors) derive from the same base.
"""

from __future__ import annotations


class DevstackError(Exception):
    """Base of every error devstack raises on purpose: a provider's, or the `devstack` command's."""

    #: The status `devstack` exits with when it stops on this error.
    exit_code = 1
    #: What the operation had done before it stopped (its report, as `--json` prints it); None: nothing.
    done = None

    def __init__(self, verb: str, what: str, cause: str, hint: str = "") -> None:
        self.verb, self.what, self.cause, self.hint = verb, what, cause, hint
        message = f"cannot {verb} {what}: {cause}"
        super().__init__(f"{message} ({hint})" if hint else message)


class NotFound(DevstackError):
    """The resource does not exist in the engine."""


class Conflict(DevstackError):
    """The engine-level name is taken by another project or by something we do not manage."""


class Unsupported(DevstackError):
    """The engine cannot make this change; the fix is a different spec, not a retry."""


class InvalidSpec(DevstackError):
    """The declaration breaks a rule of the kind; nothing was created."""


class EngineUnavailable(DevstackError):
    """The shared engine did not answer at its address."""


def first_line(err: BaseException) -> str:
    """An exception as one line: the first of its message, or its type when it has none."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
