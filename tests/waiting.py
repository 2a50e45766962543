"""The one way a test waits: `eventually(predicate, timeout, what)`."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import pytest

T = TypeVar("T")


def eventually(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Call `predicate` until it returns something truthy and return that; fail the test naming `what`
    (and the last falsy answer or exception) when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer, last = predicate(), None
        except Exception as err:  # an engine mid-change may refuse a read; retried until the deadline
            answer, last = None, err
        if answer:
            return answer
        if time.monotonic() >= deadline:
            detail = f"{type(last).__name__}: {last}" if last is not None else f"last answer {answer!r}"
            pytest.fail(f"timed out after {timeout:g}s waiting for {what} ({detail})", pytrace=False)
        time.sleep(interval)
