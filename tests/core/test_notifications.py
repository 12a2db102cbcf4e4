"""Notification decisions: only news, never twice, never a flood."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, strategies as st

from stoker.core.notifications import NoteHistory, NotifyPolicy, decide_notifications
from stoker.core.snapshot import AppSnapshot, BlockerView, EngineState, IncidentView

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
