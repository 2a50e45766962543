"""A ledger entry's lifecycle (CON-8): active or stale, and when it was first and last seen.

Every tenant resource's outputs carry `lifecycle` ("active" or "stale"), `firstSeen` and `lastSeen`
(ISO-8601 UTC, to the second). create, update and a read that finds the resource this project's make
it active and advance `lastSeen`; a read that misses it makes it stale and keeps `lastSeen`. Outputs
without these fields read as active: the next write sets them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping

LIFECYCLE, FIRST_SEEN, LAST_SEEN = "lifecycle", "firstSeen", "lastSeen"
ACTIVE, STALE = "active", "stale"
#: The outputs that change with every observation of an unchanged resource.
CLOCKS = (FIRST_SEEN, LAST_SEEN)
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def now() -> datetime:
    """The observation time: UTC, to the second (as the outputs record it)."""
    return datetime.now(timezone.utc).replace(microsecond=0)


def stamp(moment: datetime) -> str:
    """`moment` as the outputs record it: `2026-12-06T14:55:02Z`."""
    return moment.astimezone(timezone.utc).strftime(_FORMAT)


def parsed(value: Any) -> datetime | None:
    """A recorded time, or None when there is none (or it is not one the outputs would record)."""
    try:
        return datetime.strptime(str(value), _FORMAT).replace(tzinfo=timezone.utc) if value else None
    except ValueError:
        return None


def later(recorded: Any, observed: datetime, at: datetime) -> str:
    """The last-seen time after an observation at `observed`: never before `recorded` (an older
    observation does not overwrite a newer one), never after `at` (the clock now)."""
    known = parsed(recorded)
    return stamp(min(max(known, observed) if known else observed, at))


def is_stale(props: Mapping[str, Any] | None) -> bool:
    """Whether outputs say a refresh missed the resource (and no up has made it again since)."""
    return bool(props) and props.get(LIFECYCLE) == STALE


def active(olds: Mapping[str, Any] | None, observed: datetime | None = None) -> dict[str, Any]:
    """The lifecycle outputs of a resource seen at `observed` (now by default): active, its first-seen
    time kept from `olds` (established when they have none), its last-seen time advanced."""
    at, olds = now(), olds or {}
    seen = min(observed or at, at)
    # Never after the last-seen time: what a clock ahead of this one recorded is taken back to now.
    first = min(t for t in (parsed(olds.get(FIRST_SEEN)), parsed(olds.get(LAST_SEEN)), seen) if t)
    return {LIFECYCLE: ACTIVE, FIRST_SEEN: stamp(first), LAST_SEEN: later(olds.get(LAST_SEEN), seen, at)}


def stale(olds: Mapping[str, Any]) -> dict[str, Any]:
    """The lifecycle outputs of a resource a complete observation missed: stale, its clocks as they were
    (none established for outputs that have none: it was not seen)."""
    return {LIFECYCLE: STALE, **{key: olds[key] for key in CLOCKS if olds.get(key)}}


def without_clocks(props: Mapping[str, Any]) -> dict[str, Any]:
    """Outputs apart from their observation times: what two observations of an unchanged resource share."""
    return {key: value for key, value in props.items() if key not in CLOCKS}
