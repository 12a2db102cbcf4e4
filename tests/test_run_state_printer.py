"""`stoker run`'s StatePrinter: only incidents of this run are printed, not the ledger's past."""

from __future__ import annotations

import io

from stoker.cli.commands.run import StatePrinter
from stoker.diagnosis.views import IncidentView
from stoker.fleet.snapshot import AppSnapshot, EngineState


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


def test_incidents_are_printed_by_identity_once_the_window_is_full():
    """The snapshot keeps the last 5 incidents: a count stops growing at 5, identity does not."""
    out, err = io.StringIO(), io.StringIO()
    printer = StatePrinter(out, err)
    window: tuple = tuple(IncidentView(float(i), "crash", f"crash {i}", None, "", "retried")
                          for i in range(5))
    printer(AppSnapshot(seq=1, state=EngineState.READY, incidents=window))
    for i in range(5, 9):
        window = window[1:] + (IncidentView(float(i), "crash", f"crash {i}", None, "", "retried"),)
        printer(AppSnapshot(seq=i, state=EngineState.BACKOFF, incidents=window))
    lines = [x for x in err.getvalue().splitlines() if x.startswith("incident:")]
    assert lines == [f"incident: crash {i} (crash); retried" for i in range(5, 9)]
    assert "incident:" not in out.getvalue()  # failures and incidents go to stderr
    assert "backoff:" in err.getvalue()
