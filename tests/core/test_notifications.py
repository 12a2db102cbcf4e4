"""Notification decisions: only news, never twice, never a flood."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from stoker.desktop.notifications import NoteHistory, NotifyPolicy, decide_notifications
from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.fleet.snapshot import AppSnapshot, EngineState

BASE = AppSnapshot(seq=1, state=EngineState.READY, model_path="/m/a.gguf", model_name="a",
                   endpoint="http://127.0.0.1:9")


def incident(at, kind="crash"):
    return IncidentView(at=at, kind=kind, summary=f"{kind} at {at}", evidence=None,
                        advice="", action="restarting")


def test_first_snapshot_is_a_baseline_for_incidents_but_reports_blockers():
    snap = replace(BASE, incidents=(incident(1.0),),
                   blockers=(BlockerView("cudaBlocker", "CUDA build passed over", "update"),))
    notes, _ = decide_notifications(None, snap, NoteHistory(), now=100.0)
    assert [n.key for n in notes] == ["blocker:cudaBlocker"]


def test_a_new_incident_is_told_once():
    prev = BASE
    snap = replace(BASE, seq=2, incidents=(incident(50.0),))
    notes, hist = decide_notifications(prev, snap, NoteHistory(), now=100.0)
    assert len(notes) == 1 and notes[0].level == "critical"
    again, _ = decide_notifications(snap, replace(snap, seq=3), hist, now=101.0)
    assert again == ()


def test_the_same_kind_within_the_dedupe_window_is_a_duplicate():
    policy = NotifyPolicy(dedupe_s=600)
    s1 = replace(BASE, seq=2, incidents=(incident(10.0),))
    _, hist = decide_notifications(BASE, s1, NoteHistory(), now=100.0, policy=policy)
    s2 = replace(s1, seq=3, incidents=s1.incidents + (incident(200.0),))
    notes, hist = decide_notifications(s1, s2, hist, now=300.0, policy=policy)
    assert notes == ()
    s3 = replace(s2, seq=4, incidents=s2.incidents + (incident(800.0),))
    notes, _ = decide_notifications(s2, s3, hist, now=800.0, policy=policy)
    assert len(notes) == 1


def test_rate_limit_counts_what_it_drops():
    policy = NotifyPolicy(window_s=60, max_per_window=2)
    kinds = ("a", "b", "c", "d")
    snap = replace(BASE, seq=2, incidents=tuple(incident(i, k) for i, k in enumerate(kinds)))
    notes, hist = decide_notifications(BASE, snap, NoteHistory(), now=10.0, policy=policy)
    assert len(notes) == 2 and hist.suppressed == 2


def test_ready_after_a_long_load_is_told_and_a_quick_one_is_not():
    policy = NotifyPolicy(long_load_s=20)
    starting = replace(BASE, seq=2, state=EngineState.STARTING)
    _, hist = decide_notifications(BASE, starting, NoteHistory(), now=0.0, policy=policy)
    ready = replace(BASE, seq=3, started_at=30.0)
    notes, hist = decide_notifications(starting, ready, hist, now=30.0, policy=policy)
    assert [n.title for n in notes] == ["a is ready"] and hist.starting_since is None
    _, hist = decide_notifications(ready, starting, hist, now=40.0, policy=policy)
    quick, _ = decide_notifications(starting, replace(ready, started_at=45.0), hist, now=45.0,
                                    policy=policy)
    assert quick == ()


def test_quarantine_and_drafter_left_out_are_told():
    snap = replace(BASE, seq=2, quarantined=(("b11434-cuda", "crashed 3 times starting"),),
                   drafter_status="left-out", drafter_reason="beside it the model needs 13 GiB")
    notes, _ = decide_notifications(BASE, snap, NoteHistory(), now=1.0)
    assert {n.key for n in notes} == {"quarantine:b11434-cuda", "drafter:/m/a.gguf"}
    later, _ = decide_notifications(snap, replace(snap, seq=3), NoteHistory(), now=2.0)
    assert later == ()


@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.floats(0, 5)), max_size=40))
def test_never_more_than_the_window_allows(events):
    policy = NotifyPolicy(window_s=60, max_per_window=3, dedupe_s=0.001)
    prev, hist, now, shown = BASE, NoteHistory(), 0.0, []
    incs: tuple = ()
    for n, (kind, dt) in enumerate(events):
        now += dt
        incs = incs + (incident(now + n * 1e-3, kind),)
        snap = replace(BASE, seq=n + 2, incidents=incs)
        notes, hist = decide_notifications(prev, snap, hist, now, policy)
        shown += [now] * len(notes)
        prev = snap
    for t in shown:
        assert sum(1 for u in shown if t <= u < t + 60) <= 3


def test_a_settings_problem_is_told_once_even_on_the_first_snapshot():
    problem = "Overrides for a.gguf in /c/overrides.json: ctx must be ...; Stoker plans that value itself instead."
    snap = replace(BASE, problems=(problem,))
    notes, history = decide_notifications(None, snap, NoteHistory(), now=100.0)
    assert [(n.title, n.body, n.level) for n in notes] == [("Stoker settings problem", problem, "warning")]
    again, _ = decide_notifications(snap, replace(snap, seq=2), history, now=101.0)
    assert again == ()


# -- RPC workers: one that is back, and this machine's own --------------------------------

def _worker(state, **kw):
    from stoker.fleet.snapshot import WorkerView

    return WorkerView(host="127.0.0.1", port=50052, endpoint="127.0.0.1:50052", state=state, **kw)


def test_a_worker_that_is_back_is_told_once_with_the_offer():
    back = replace(BASE, seq=2, workers_back=("192.168.1.20:50052",))
    notes, hist = decide_notifications(BASE, back, NoteHistory(), now=10.0)
    assert [(n.key, n.title, n.level) for n in notes] == [
        ("worker-back:192.168.1.20:50052", "RPC worker 192.168.1.20:50052 is back", "info")]
    assert "\u201cUse 192.168.1.20:50052 again\u201d" in notes[0].body and "spread a across it" in notes[0].body
    still, _ = decide_notifications(back, replace(back, seq=3), hist, now=11.0)
    assert still == ()
    first, _ = decide_notifications(None, back, NoteHistory(), now=10.0)  # the baseline
    assert not any(n.key.startswith("worker-back") for n in first)


def test_this_machines_worker_tells_an_incident_and_giving_up_but_not_its_ordinary_states():
    starting = replace(BASE, seq=2, worker=_worker(EngineState.STARTING))
    ready = replace(BASE, seq=3, worker=_worker(EngineState.READY, pid=7))
    assert decide_notifications(BASE, starting, NoteHistory(), now=1.0)[0] == ()
    assert decide_notifications(starting, ready, NoteHistory(), now=2.0)[0] == ()
    inc = IncidentView(at=3.0, kind="rpc-worker-exit", summary="The RPC worker on 127.0.0.1:50052 stopped.",
                       evidence=None, advice="", action="restarting in 1 s")
    backoff = replace(BASE, seq=4, worker=_worker(EngineState.BACKOFF, restarts=0, last_incident=inc))
    notes, _ = decide_notifications(ready, backoff, NoteHistory(), now=3.0)
    assert [(n.key, n.level) for n in notes] == [("worker-incident:127.0.0.1:50052:rpc-worker-exit", "warning")]
    assert notes[0].body == "The RPC worker on 127.0.0.1:50052 stopped. restarting in 1 s"
    failed = replace(BASE, seq=5, worker=_worker(EngineState.FAILED, last_error="gave up: 6 failures in 120 s",
                                                 last_incident=replace(inc, at=9.0)))
    notes, _ = decide_notifications(backoff, failed, NoteHistory(), now=9.0)
    assert [(n.title, n.level) for n in notes] == [
        ("This machine's RPC worker 127.0.0.1:50052 gave up", "critical")]
    assert notes[0].body.startswith("gave up: 6 failures in 120 s") and "Start it again" in notes[0].body
    assert decide_notifications(failed, replace(failed, seq=6), NoteHistory(), now=10.0)[0] == ()
