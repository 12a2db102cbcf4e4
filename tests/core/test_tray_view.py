"""The tray's look and words for each kind of snapshot (no display needed)."""

from __future__ import annotations

from stoker.desktop.tray_view import (
    TRAY_STATES,
    engine_line,
    format_bytes,
    format_duration,
    menu_view,
    plan_line,
    resident_keys,
    switch_does_something,
    tooltip_text,
    tray_state,
)
from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView

MIB = 2 ** 20
GIB = 2 ** 30

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
    snap = AppSnapshot(seq=1, state=EngineState.READY, incidents=incs, endpoint="http://x:1",
                       gateway_url="http://x:1")
    view = menu_view(snap)
    assert [i[0] for i in view.incidents] == [30.0, 20.0, 10.0]
    assert (view.can_start, view.can_stop, view.can_restart) == (False, True, True)
    assert view.endpoint == "http://x:1/v1"
    stopped = menu_view(AppSnapshot(seq=2, state=EngineState.STOPPED, gateway_url="http://x:1"))
    # The gateway answers (and loads on demand) with nothing loaded: its URL is still the one.
    assert (stopped.can_start, stopped.can_stop, stopped.endpoint) == (True, False, "http://x:1/v1")
    # An engine's own port is no endpoint: it takes only the gateway's per-launch key.
    alone = menu_view(AppSnapshot(seq=3, state=EngineState.READY, endpoint="http://127.0.0.1:4000"))
    assert alone.endpoint is None


def test_drafter_line_says_why_it_was_left_out():
    snap = AppSnapshot(seq=1, state=EngineState.READY, drafter_status="left-out",
                       drafter_reason="beside it the model needs 13.2 GiB")
    assert menu_view(snap).drafter == "Drafter left-out: beside it the model needs 13.2 GiB"
    assert menu_view(READY).drafter is None


def test_bytes_and_durations_read_as_a_person_would_say_them():
    assert [format_bytes(n) for n in (None, 0, 97 * MIB + 1, 1023 * MIB, GIB, 3 * GIB + GIB // 4,
                                      24 * GIB)] == [
        "?", "0 MiB", "97 MiB", "1,023 MiB", "1.00 GiB", "3.25 GiB", "24.0 GiB"]
    assert [format_duration(s) for s in (0, 59.9, 60, 3599, 3600, 3600 + 5 * 60 + 59)] == [
        "0 s", "59 s", "1 min", "59 min", "1 h 00 min", "1 h 05 min"]


def engine(state=EngineState.READY, **kw):
    base = dict(model_id="smollm2-135m-instruct:q4_1", model_path="/m/smol.gguf", state=state)
    base.update(kw)
    return EngineView(**base)


def test_a_ready_model_line_has_state_bytes_per_device_and_idle_time():
    e = engine(bytes_by_device=(("CUDA0", 5 * GIB // 2), ("CPU", 180 * MIB)), last_used_at=1000.0,
               idle_timeout_s=600.0, plan_summary="ctx 8,192 · 1 slot · KV f16")
    line = engine_line(e, now=1000.0 + 125)
    assert line.title == "smollm2-135m-instruct:q4_1: ready · CUDA0 2.50 GiB · CPU 180 MiB · idle 2 min"
    assert line.details == ("ctx 8,192 · 1 slot · KV f16", "Unloads after 10 min without requests")
    assert (line.can_load, line.can_unload, line.pinned) == (False, True, False)
    # Without a clock (or while a request runs) there is no idle time to show.
    assert "idle" not in engine_line(e, now=None).title
    busy = engine_line(engine(in_flight=2, last_used_at=1000.0), now=2000.0)
    assert busy.title.endswith("ready · 2 requests in flight")
    assert engine_line(engine(in_flight=1), now=0).title.endswith("1 request in flight")


def test_pinned_queued_and_failed_models_say_so_and_offer_what_helps():
    pinned = engine_line(engine(pinned=True, idle_timeout_s=60.0, last_used_at=0.0), now=30.0)
    assert pinned.title.endswith("idle 30 s · pinned") and pinned.pinned
    assert pinned.details[-1] == "Pinned: never unloaded for idleness or for room"
    never = engine_line(engine(idle_timeout_s=None), now=None)
    assert never.details[-1] == "Never unloaded for idleness"
    queued = engine_line(engine(EngineState.STOPPED, queued="it waits for b's stream to end"), now=0)
    assert "waiting for room" in queued.title and "it waits for b's stream to end" in queued.details
    assert (queued.can_load, queued.can_unload) == (False, True)  # Unload takes it off the queue
    failed = engine_line(engine(EngineState.FAILED, last_error="gave up after 5 crashes"), now=0)
    assert "failed" in failed.title and "gave up after 5 crashes" in failed.details
    assert (failed.can_load, failed.can_unload) == (True, True)
    loading = engine_line(engine(EngineState.STARTING), now=0)
    assert "loading" in loading.title and (loading.can_load, loading.can_unload) == (False, True)
    stopping = engine_line(engine(EngineState.STOPPING), now=0)
    assert (stopping.can_load, stopping.can_unload) == (True, False)


def test_switch_is_sent_only_when_it_would_change_something():
    a, b = engine(model_path="/m/a.gguf"), engine(model_path="/m/b.gguf", state=EngineState.STARTING)
    both = AppSnapshot(seq=1, state=EngineState.READY, model_path="/m/a.gguf", engines=(a, b))
    assert resident_keys(both) == {"/m/a.gguf", "/m/b.gguf"}
    assert switch_does_something(both, "/m/a.gguf")  # b would unload
    alone = AppSnapshot(seq=2, state=EngineState.READY, model_path="/m/a.gguf", engines=(a,))
    assert not switch_does_something(alone, "/m/a.gguf")
    assert switch_does_something(alone, "/m/b.gguf")
    failed = AppSnapshot(seq=3, state=EngineState.FAILED, model_path="/m/a.gguf",
                         engines=(engine(EngineState.FAILED, model_path="/m/a.gguf"),))
    assert switch_does_something(failed, "/m/a.gguf")  # a failed model is loaded again
    assert switch_does_something(None, "/m/a.gguf")


def test_menu_lists_every_resident_model_and_the_tooltip_counts_them():
    snap = AppSnapshot(seq=1, state=EngineState.READY, model_path="/m/a.gguf", backend="cpu",
                       gateway_url="http://127.0.0.1:7857",
                       engines=(engine(model_path="/m/a.gguf", model_id="a"),
                                engine(EngineState.STARTING, model_path="/m/b.gguf", model_id="b")))
    view = menu_view(snap, now=0.0)
    assert [e.model_id for e in view.engines] == ["a", "b"]
    assert view.endpoint == "http://127.0.0.1:7857/v1"
    assert tooltip_text(snap).splitlines()[-1] == "2 models loaded"
    # Stop stops every engine: it is offered while any model is resident, focused or not.
    unfocused = AppSnapshot(seq=2, state=EngineState.STOPPED, engines=snap.engines)
    assert menu_view(unfocused).can_stop


# -- this machine's RPC worker and workers that came back ---------------------------------

def _worker(state, **kw):
    from stoker.engines.rpc import WorkerDeviceView
    from stoker.fleet.snapshot import WorkerView

    base = dict(host="127.0.0.1", port=50052, endpoint="127.0.0.1:50052", state=state,
                devices=(WorkerDeviceView("CPU", "AMD EPYC", 24105 * 2 ** 20, 20000 * 2 ** 20),))
    base.update(kw)
    return WorkerView(**base)


def test_the_worker_line_for_every_state():
    from stoker.desktop.tray_view import worker_line

    ready = worker_line(_worker(EngineState.READY, pid=9, restarts=2), now=0.0)
    assert ready.title == "RPC worker 127.0.0.1:50052: ready · CPU 19.5 GiB free · 2 restarts"
    assert ready.details[0] == "Other machines use it with --rpc 127.0.0.1:50052"
    assert "Lends CPU (AMD EPYC): 23.5 GiB, 19.5 GiB free when it started" in ready.details
    assert "Bound to loopback: other machines reach it through an SSH tunnel" in ready.details
    assert (ready.can_start, ready.can_stop) == (False, True)

    starting = worker_line(_worker(EngineState.STARTING, devices=()), now=0.0)
    assert starting.title == "RPC worker 127.0.0.1:50052: starting"
    assert (starting.can_start, starting.can_stop) == (False, True)
    unlisted = worker_line(_worker(EngineState.READY, devices=()), now=0.0)
    assert "Its devices are not listed yet (rpc-server had not written them)" in unlisted.details

    backoff = worker_line(_worker(EngineState.BACKOFF, restarts=1, next_retry_at=104.2,
                                  last_error="rpc-server was ended by signal 9 while ready"), now=100.0)
    assert backoff.title == "RPC worker 127.0.0.1:50052: restarting in 4 s · 1 restart"  # no devices while down
    assert "rpc-server was ended by signal 9 while ready" in backoff.details
    assert (backoff.can_start, backoff.can_stop) == (False, True)
    assert worker_line(_worker(EngineState.BACKOFF), now=None).title.endswith(": restarting")

    failed = worker_line(_worker(EngineState.FAILED, last_error="rpc-server is not installed; run "
                                 "`stoker setup --rpc` first."), now=0.0)
    assert failed.title == "RPC worker 127.0.0.1:50052: failed"
    assert "Start tries again; the worker log (Open logs folder) says why it stopped" in failed.details
    assert "rpc-server is not installed; run `stoker setup --rpc` first." in failed.details
    assert (failed.can_start, failed.can_stop) == (True, False)

    stopping = worker_line(_worker(EngineState.STOPPING), now=0.0)
    assert stopping.title == "RPC worker 127.0.0.1:50052: stopping"
    assert (stopping.can_start, stopping.can_stop) == (False, False)
    stopped = worker_line(_worker(EngineState.STOPPED, devices=(), cache=True), now=0.0)
    assert stopped.title == "RPC worker 127.0.0.1:50052: stopped"
    assert stopped.details == ("Keeps received tensors in a local file cache",)
    assert (stopped.can_start, stopped.can_stop) == (True, False)


def test_a_worker_on_a_lan_address_says_it_has_no_authentication_and_its_last_incident():
    from stoker.desktop.tray_view import worker_line

    inc = IncidentView(at=50.0, kind="rpc-worker-exit", summary="The RPC worker on 192.168.1.20:50052 "
                       "stopped.", evidence=None, advice="", action="restarting in 1 s")
    line = worker_line(_worker(EngineState.READY, host="192.168.1.20", endpoint="192.168.1.20:50052",
                               loopback=False, last_incident=inc), now=60.0)
    assert any("no authentication or encryption" in d for d in line.details)
    assert not any("loopback" in d for d in line.details)
    assert line.last_incident == (50.0, "The RPC worker on 192.168.1.20:50052 stopped. restarting in 1 s")


def test_the_menu_offers_each_worker_that_is_back_and_the_worker_line():
    snap = AppSnapshot(seq=3, state=EngineState.READY, model_name="a", backend="cpu",
                       workers_back=("192.168.1.20:50052", "192.168.1.21:50052"),
                       worker=_worker(EngineState.READY))
    view = menu_view(snap, now=0.0)
    assert [(o.endpoint, o.label) for o in view.offers] == [
        ("192.168.1.20:50052", "Use 192.168.1.20:50052 again"),
        ("192.168.1.21:50052", "Use 192.168.1.21:50052 again")]
    assert view.offers[0].detail == ("The RPC worker 192.168.1.20:50052 is reachable again; using it "
                                     "restarts a across the workers")
    assert view.worker is not None and view.worker.title.startswith("RPC worker 127.0.0.1:50052: ready")
    assert tray_state(snap) == "ready"  # a worker that is back is an offer, not a fault
    assert "RPC worker 127.0.0.1:50052: ready" in tooltip_text(snap)
    none = menu_view(AppSnapshot(seq=1, state=EngineState.READY), now=0.0)
    assert none.offers == () and none.worker is None


def test_a_worker_that_gave_up_degrades_a_ready_machine():
    from dataclasses import replace as _replace

    snap = AppSnapshot(seq=3, state=EngineState.READY, model_name="a", worker=_worker(EngineState.FAILED))
    assert tray_state(snap) == "degraded"
    assert tray_state(_replace(snap, worker=_worker(EngineState.STOPPED))) == "ready"
    assert "RPC worker" not in tooltip_text(_replace(snap, worker=_worker(EngineState.STOPPED)))
