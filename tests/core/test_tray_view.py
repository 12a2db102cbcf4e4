"""The tray's look and words for each kind of snapshot (no display needed)."""

from __future__ import annotations

from stoker.core.snapshot import AppSnapshot, BlockerView, EngineState, IncidentView
from stoker.core.tray_view import TRAY_STATES, menu_view, plan_line, tooltip_text, tray_state

READY = AppSnapshot(seq=3, state=EngineState.READY, model_path="/m/SmolLM2-135M.gguf",
                    backend="cpu", ctx=2048, kv_type_k="f16", kv_type_v="f16",
                    endpoint="http://127.0.0.1:8080", drafter_status="none")


def test_each_engine_state_has_a_look():
    looks = {s: tray_state(AppSnapshot(seq=1, state=s)) for s in EngineState}
    assert looks == {EngineState.STOPPED: "stopped", EngineState.STARTING: "loading",
                     EngineState.READY: "ready", EngineState.BACKOFF: "loading",
                     EngineState.STOPPING: "loading", EngineState.FAILED: "failed"}
    assert set(looks.values()) | {"degraded"} == set(TRAY_STATES)
    assert tray_state(None) == "stopped"


def test_ready_with_a_blocker_or_a_left_out_drafter_is_degraded():
    blocked = AppSnapshot(seq=1, state=EngineState.READY,
                          blockers=(BlockerView("gpuUnused", "GPU unused", "update driver"),))
    assert tray_state(blocked) == "degraded"
    for status in ("left-out", "broken"):
        snap = AppSnapshot(seq=1, state=EngineState.READY, drafter_status=status)
        assert tray_state(snap) == "degraded"
    assert tray_state(AppSnapshot(seq=1, state=EngineState.READY, drafter_status="in")) == "ready"
    # A blocker on a stopped engine does not make it look running.
    assert tray_state(AppSnapshot(seq=1, state=EngineState.STOPPED,
                                  blockers=blocked.blockers)) == "stopped"


def test_tooltip_says_model_backend_context_and_kv():
    text = tooltip_text(READY)
    assert text.splitlines() == ["Stoker: ready", "SmolLM2-135M · cpu · ctx 2,048 · KV f16"]
    mixed = AppSnapshot(seq=1, state=EngineState.STARTING, model_name="M", ctx=512,
                        kv_type_k="q8_0", kv_type_v="f16")
    assert plan_line(mixed) == "M · ctx 512 · KV q8_0/f16"
    failed = AppSnapshot(seq=1, state=EngineState.FAILED, last_error="gave up after 5 crashes")
    assert tooltip_text(failed).splitlines() == ["Stoker: failed", "gave up after 5 crashes"]


def test_menu_view_orders_incidents_newest_first_and_gates_actions():
    incs = tuple(IncidentView(at=t, kind=f"k{t}", summary="s", evidence=None, advice="a",
                              action="restarted") for t in (10.0, 30.0, 20.0, 5.0))
    snap = AppSnapshot(seq=1, state=EngineState.READY, incidents=incs, endpoint="http://x:1")
    view = menu_view(snap)
    assert [i[0] for i in view.incidents] == [30.0, 20.0, 10.0]
    assert (view.can_start, view.can_stop, view.can_restart) == (False, True, True)
    assert view.endpoint == "http://x:1"
    stopped = menu_view(AppSnapshot(seq=2, state=EngineState.STOPPED, endpoint="http://x:1"))
    assert (stopped.can_start, stopped.can_stop, stopped.endpoint) == (True, False, None)


def test_drafter_line_says_why_it_was_left_out():
    snap = AppSnapshot(seq=1, state=EngineState.READY, drafter_status="left-out",
                       drafter_reason="beside it the model needs 13.2 GiB")
    assert menu_view(snap).drafter == "Drafter left-out: beside it the model needs 13.2 GiB"
    assert menu_view(READY).drafter is None
