"""`stoker run`'s StatePrinter: only incidents of this run are printed, not the ledger's past."""

from __future__ import annotations

import io

from stoker.commands.run import StatePrinter
from stoker.core.snapshot import AppSnapshot, EngineState, IncidentView


def _incident(kind: str) -> IncidentView:
    return IncidentView(1.0, kind, f"{kind} summary", None, "advice", "retried")


def test_incidents_of_an_earlier_session_are_not_printed_at_start():
    out = io.StringIO()
    printer = StatePrinter(out)
    old = (_incident("host-oom"), _incident("illegal-instruction"))
    printer(AppSnapshot(seq=1, state=EngineState.STOPPED, incidents=old))
    printer(AppSnapshot(seq=2, state=EngineState.STARTING, incidents=old))
    assert "incident:" not in out.getvalue()
    printer(AppSnapshot(seq=3, state=EngineState.BACKOFF, incidents=old + (_incident("port-in-use"),)))
    lines = [x for x in out.getvalue().splitlines() if x.startswith("incident:")]
    assert lines == ["incident: port-in-use summary (port-in-use); retried"]
