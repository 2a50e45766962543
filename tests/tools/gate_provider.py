"""A dynamic provider for tests/tools/test_provider_server.py: its creates wait for each other.

Imported by the provider server process (pickled by reference), so the
barrier below is that process's: a create returns once GATE_SIZE creates are
inside it at the same time, or after a timeout if the server never lets that
many in.
"""

from __future__ import annotations

import threading

from pulumi.dynamic import CreateResult, ResourceProvider

GATE_SIZE = 8
_gate = threading.Barrier(GATE_SIZE, timeout=5)


class Gate(ResourceProvider):
    def create(self, props):
        try:
            _gate.wait()
            together = GATE_SIZE
        except threading.BrokenBarrierError:
            together = 0  # fewer than GATE_SIZE calls ever ran at once
        return CreateResult(props["name"], {"together": together})


class Failing(ResourceProvider):
    """Fails every create: on purpose (a providers.errors type) when asked, otherwise as a bug would."""

    def create(self, props):
        from providers.errors import Conflict

        if props["name"] == "taken":
            raise Conflict("create", "database postgres/pg/database/taken@a", "'taken' belongs to another project")
        raise KeyError("a bug")
