"""The fleet reducer, edge by edge, and its invariants under random event sequences."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.fleet import fleet_state as f
from stoker.fleet.residency import Resident, eviction_order
from stoker.fleet.snapshot import EngineState as S

MIB = 1024 ** 2
BUDGET = (("CPU", 1000 * MIB),)


def need(mib: int) -> tuple[tuple[str, int], ...]:
    return (("CPU", mib * MIB),)


def usage(*entries) -> tuple[f.Usage, ...]:
    """(key, in_flight, last_used_at, routed) tuples."""
    return tuple(f.Usage(*e) for e in entries)


def run(state, *events, now=100.0):
    effects = []
    for ev in events:
        state, out = f.step(state, ev, now)
        effects += out
    return state, effects


def kinds(effects):
    return [type(e).__name__ for e in effects]


def resident(state, key, mib, phase=S.READY, **member):
    """`state` with `key` resident in `phase`, holding `mib`."""
    m = state.member(key) or f.Member(key=key, model_id=key)
    return f._put(state, replace(m, phase=phase, bytes_by_device=need(mib), **member))


# ---------------------------------------------------------------------------- loads and admission


def test_a_load_takes_the_focus_queues_and_asks_for_its_launch():
    state, effects = run(f.FleetState(), f.LoadAsked("a", "a"))
    assert state.focus == "a" and state.pending == ("a",) and state.deciding == "a"
    assert f.PrepareAdmission("a") in effects


def test_a_launch_that_fits_is_started_and_leaves_the_queue():
    state, _ = run(f.FleetState(), f.LoadAsked("a", "a"))
    state, effects = run(state, f.AdmissionFacts("a", need(100), BUDGET, ()))
    assert effects[0] == f.StartEngine("a") and state.pending == () and state.deciding is None


def test_a_launch_without_a_plan_is_admitted_as_it_is():
    state, _ = run(f.FleetState(), f.LoadAsked("a", "a"))
    _, effects = run(state, f.AdmissionFacts("a", None, None, ()))
    assert effects[0] == f.StartEngine("a")


def test_no_room_unloads_idle_models_least_recently_used_first_and_waits_for_them():
    state = resident(resident(f.FleetState(), "old", 500), "new", 400)
    state, _ = run(state, f.LoadAsked("c", "c"))
    u = usage(("old", 0, 10.0, True), ("new", 0, 50.0, True))
    state, effects = run(state, f.AdmissionFacts("c", need(500), BUDGET, u))
    assert [e.key for e in effects if isinstance(e, f.StopIfIdle)] == ["old"]
    assert state.pending == ("c",) and "unloading idle old" in state.member("c").queued
    assert state.admit_at == 100.0 + f.ADMIT_RETRY_S


def test_a_busy_model_is_never_evicted_the_load_waits():
    state = resident(f.FleetState(), "a", 600)
    state, _ = run(state, f.LoadAsked("b", "b"))
    state, effects = run(state, f.AdmissionFacts("b", need(600), BUDGET, usage(("a", 1, None, True))))
    assert not any(isinstance(e, (f.StopIfIdle, f.StopEngine, f.StartEngine)) for e in effects)
    assert "waits for a" in state.member("b").queued


def test_a_load_that_cannot_fit_beside_the_pinned_starts_refused_with_the_sentence():
    state = resident(f.FleetState(), "a", 600, pinned=True)
    state, _ = run(state, f.LoadAsked("b", "b"))
    _, effects = run(state, f.AdmissionFacts("b", need(600), BUDGET, usage(("a", 0, 1.0, True))))
    start = effects[0]
    assert isinstance(start, f.StartEngine) and "does not fit beside the pinned a" in start.refused


def test_facts_for_a_load_cancelled_meanwhile_change_nothing():
    state, _ = run(f.FleetState(), f.EnsureAsked(1, "a", "a"))
    state, _ = run(state, f.EnsureCancelled(1))
    after, effects = run(state, f.AdmissionFacts("a", need(1), BUDGET, ()))
    assert after == state and effects == []


def test_room_being_made_holds_the_decision_until_the_stop_is_done():
    state = resident(f.FleetState(), "a", 600, phase=S.STOPPING)
    state, effects = run(state, f.LoadAsked("b", "b"))
    assert f.PrepareAdmission("b") not in effects and state.pending == ("b",)
    state, effects = run(state, f.PhaseChanged("a", S.STOPPED), f.Tick(()))
    assert f.PrepareAdmission("b") in effects


def test_a_load_of_a_model_that_is_stopping_starts_it_once_it_is_gone():
    state = resident(f.FleetState(), "a", 100, phase=S.STOPPING)
    _, effects = run(state, f.LoadAsked("a", "a"))
    assert f.StartEngine("a") in effects


def test_a_load_of_a_running_model_changes_nothing_but_the_pin_and_focus():
    state = resident(f.FleetState(), "a", 100)
    state, effects = run(state, f.LoadAsked("a", "a", pin=True))
    assert state.member("a").pinned and not any(isinstance(e, f.StartEngine) for e in effects)


def test_a_request_that_ended_makes_a_waiting_load_decide_again_at_once():
    state = resident(f.FleetState(), "a", 600)
    state, _ = run(state, f.LoadAsked("b", "b"))
    state, _ = run(state, f.AdmissionFacts("b", need(600), BUDGET, usage(("a", 1, None, True))))
    _, effects = run(state, f.Tick(usage(("a", 0, 100.0, True))), now=100.2)
    assert effects == [] or f.PrepareAdmission("b") not in effects  # not yet due
    _, effects = run(state, f.Tick(usage(("a", 0, 100.0, True)), usage_changed=True), now=100.2)
    assert f.PrepareAdmission("b") in effects


def test_switch_unloads_every_other_model():
    state = resident(resident(f.FleetState(), "a", 100), "b", 100, phase=S.STARTING)
    _, effects = run(state, f.LoadAsked("c", "c", switch=True))
    assert f.StopIfIdle("a", "asked to unload") in effects and f.StopEngine("b", "asked to unload") in effects


# ---------------------------------------------------------------------------- waiters


def test_an_ensure_for_a_stopped_model_loads_it_on_demand():
    state, effects = run(f.FleetState(), f.EnsureAsked("t", "a", "a"))
    assert state.member("a").on_demand and f.PrepareAdmission("a") in effects
    assert state.waiters == (("t", "a"),) and state.focus is None


def test_a_routed_model_answers_its_waiters():
    state, _ = run(f.FleetState(), f.EnsureAsked("t", "a", "a"))
    state = resident(state, "a", 100)
    state, effects = run(state, f.Tick(usage(("a", 0, None, True))))
    assert f.Answer("t", "a") in effects and state.waiters == ()


def test_a_failed_model_answers_with_its_sentence_and_is_not_loaded_again():
    state = resident(f.FleetState(), "a", 100, phase=S.FAILED, failure="the model file is broken")
    state, effects = run(state, f.EnsureAsked("t", "a", "a"))
    assert not any(isinstance(e, f.PrepareAdmission) for e in effects)
    _, effects = run(state, f.Tick(()))
    assert f.Answer("t", "a", "the model file is broken") in effects


def test_a_waiter_whose_model_was_unloaded_meanwhile_loads_it_again():
    state = resident(f.FleetState(), "a", 100)
    state, _ = run(state, f.EnsureAsked("t", "a", "a"))
    state, effects = run(state, f.PhaseChanged("a", S.STOPPED), f.Tick(()))
    assert state.pending == ("a",) and state.member("a").on_demand


def test_the_last_waiter_leaving_cancels_a_queued_load():
    state, _ = run(f.FleetState(), f.EnsureAsked(1, "a", "a"), f.EnsureAsked(2, "a", "a"))
    state, effects = run(state, f.EnsureCancelled(1))
    assert state.pending == ("a",) and effects == []  # one waiter is left
    state, effects = run(state, f.EnsureCancelled(2))
    assert state.pending == () and effects == [f.Publish()]


def test_the_last_waiter_leaving_stops_a_starting_load_unless_pinned():
    state, _ = run(f.FleetState(), f.EnsureAsked(1, "a", "a"))
    state = resident(replace(state, pending=(), deciding=None), "a", 100, phase=S.STARTING)
    _, effects = run(state, f.EnsureCancelled(1))
    assert kinds(effects) == ["StopEngine"]
    pinned, _ = run(state, f.PinAsked("a", True))
    _, effects = run(pinned, f.EnsureCancelled(1))
    assert effects == []


def test_a_load_a_person_asked_for_is_not_cancelled_by_waiters_leaving():
    state, _ = run(f.FleetState(), f.EnsureAsked(1, "a", "a"), f.LoadAsked("a", "a"))
    _, effects = run(state, f.EnsureCancelled(1))
    assert effects == []


def test_cancelling_an_unknown_ticket_changes_nothing():
    state = f.FleetState()
    assert f.step(state, f.EnsureCancelled("nobody"), 0.0) == (state, ())


# ---------------------------------------------------------------------------- unloads, pins, idleness


def test_unloading_a_ready_model_closes_its_route_and_stops_it_once_idle():
    state = resident(f.FleetState(), "a", 100)
    state, effects = run(state, f.UnloadAsked("a"))
    assert effects == [f.CloseRoute("a"), f.StopIfIdle("a", "asked to unload")]
    state, effects = run(state, f.Tick(usage(("a", 1, None, False))))
    assert f.StopIfIdle("a", "asked to unload") in effects  # asked again until it goes
    state, _ = run(state, f.PhaseChanged("a", S.STOPPING))
    assert not state.member("a").unload_when_idle


def touches(effects, key):
    """The effects that act on `key`'s route or engine."""
    return [e for e in effects if isinstance(e, (f.CloseRoute, f.StopIfIdle, f.StopEngine)) and e.key == key]


def test_unloading_one_of_two_models_never_touches_the_other_or_its_waiters():
    """Issue 25's race, at the reducer: a request for b that arrives while a is unloading (0.1 s
    after `stoker unload a` returned) is answered with b's route at once, and nothing the
    unload does closes or stops b, whatever the usage says meanwhile."""
    state = resident(resident(f.FleetState(), "a", 100), "b", 100)
    state, effects = run(state, f.UnloadAsked("a"))
    assert touches(effects, "b") == [] and touches(effects, "a") == [f.CloseRoute("a"),
                                                                       f.StopIfIdle("a", "asked to unload")]
    state, effects = run(state, f.EnsureAsked("t", "b", "b"),
                         f.Tick(usage(("a", 1, None, False), ("b", 0, 90.0, True))))
    assert f.Answer("t", "b") in effects and touches(effects, "b") == []
    state, effects = run(state, f.PhaseChanged("a", S.STOPPING), f.PhaseChanged("a", S.STOPPED),
                         f.Tick(usage(("b", 1, 90.0, True))))
    assert touches(effects, "b") == [] and state.member("b").phase is S.READY


def test_a_request_for_a_model_being_unloaded_waits_for_its_next_load_not_its_closing_route():
    state = resident(f.FleetState(), "a", 100)
    state, _ = run(state, f.UnloadAsked("a"))
    # a's route is closed while its last request drains: the waiter is not answered with it
    state, effects = run(state, f.EnsureAsked("t", "a", "a"), f.Tick(usage(("a", 1, None, False))))
    assert not [e for e in effects if isinstance(e, f.Answer)]
    state, effects = run(state, f.PhaseChanged("a", S.STOPPING), f.PhaseChanged("a", S.STOPPED), f.Tick(()))
    assert state.pending == ("a",) and not [e for e in effects if isinstance(e, f.Answer)]


def test_unloading_a_starting_or_failed_model_stops_it_and_a_queued_one_leaves_the_queue():
    for phase in (S.STARTING, S.BACKOFF, S.FAILED):
        _, effects = run(resident(f.FleetState(), "a", 100, phase=phase), f.UnloadAsked("a"))
        assert effects == [f.StopEngine("a", "asked to unload")]
    state, _ = run(f.FleetState(), f.LoadAsked("a", "a"))
    state, _ = run(state, f.UnloadAsked(None))  # None: the focused one
    assert state.pending == ()


def test_idle_models_expire_after_their_timeout_but_pinned_and_busy_ones_never():
    state = replace(resident(f.FleetState(), "a", 100, idle_timeout_s=60.0), focus="a")
    _, effects = run(state, f.Tick(usage(("a", 0, 30.0, True))), now=89.0)
    assert effects == []
    _, effects = run(state, f.Tick(usage(("a", 0, 30.0, True))), now=90.0)
    assert f.StopIfIdle("a", "idle for its timeout") in effects
    _, effects = run(state, f.Tick(usage(("a", 1, 30.0, True))), now=500.0)
    assert effects == []
    pinned, _ = run(state, f.PinAsked("a", True))
    _, effects = run(pinned, f.Tick(usage(("a", 0, 30.0, True))), now=500.0)
    assert effects == []
    assert f.expiry_deadline(state, usage(("a", 0, 30.0, True))) == 90.0
    assert f.expiry_deadline(pinned, usage(("a", 0, 30.0, True))) is None


def test_a_pin_for_no_model_means_the_focused_one():
    state, _ = run(resident(f.FleetState(), "a", 100), f.LoadAsked("a", "a"))
    state, effects = run(state, f.PinAsked(None, True))
    assert state.member("a").pinned and effects == [f.Publish()]
    assert run(state, f.PinAsked("nobody", True))[1] == []


def test_stop_without_a_model_stops_every_one_and_empties_the_queue():
    state = resident(resident(f.FleetState(), "a", 100), "b", 100)
    state, _ = run(state, f.LoadAsked("c", "c"))
    state, effects = run(state, f.StopAsked(None))
    assert {e.key for e in effects if isinstance(e, f.StopEngine)} == {"a", "b", "c"}
    assert state.pending == ()


# ---------------------------------------------------------------------------- focus, forgetting, shutdown


def test_stopped_models_nobody_asks_for_are_forgotten_and_the_focus_moves_to_one_that_serves():
    state = resident(resident(f.FleetState(), "a", 100, phase=S.STOPPED), "b", 100)
    state = replace(state, focus="a")
    state, effects = run(state, f.Tick(()))
    assert state.focus == "b" and f.Forget("a") in effects and state.member("a") is None


def test_the_focused_stopped_model_is_kept_for_the_tray():
    state = replace(resident(f.FleetState(), "a", 100, phase=S.STOPPED), focus="a")
    after, effects = run(state, f.Tick(()))
    assert after.member("a") is not None and effects == []


def test_shutdown_stops_everything_and_refuses_what_comes_after():
    state, _ = run(f.FleetState(), f.LoadAsked("a", "a"), f.EnsureAsked(1, "b", "b"))
    state, effects = run(state, f.ShutdownAsked())
    assert effects == [f.ShutdownEngines(), f.Publish()] and state.pending == ()
    _, effects = run(state, f.EnsureAsked(2, "a", "a"))
    assert effects == [f.Answer(2, "a", "Stoker is shutting down")]
    after, effects = run(state, f.LoadAsked("a", "a"), f.UnloadAsked("a"), f.ShutdownAsked())
    assert after == state and effects == []
    _, effects = run(state, f.Tick(()))
    assert not any(isinstance(e, (f.Forget, f.PrepareAdmission)) for e in effects)


def test_next_deadline_is_the_queued_loads_next_decision():
    assert f.next_deadline(f.FleetState()) is None
    state = resident(f.FleetState(), "a", 600)
    state, _ = run(state, f.LoadAsked("b", "b"))
    assert f.next_deadline(state) is None  # its launch is being prepared: the answer wakes us
    state, _ = run(state, f.AdmissionFacts("b", need(600), BUDGET, usage(("a", 1, None, True))))
    assert f.next_deadline(state) == 100.0 + f.ADMIT_RETRY_S


def test_the_eviction_order_is_idle_unpinned_least_recently_used_never_used_first():
    rs = [Resident("a", "a", need(1), busy=False, last_used_at=50.0),
          Resident("b", "b", need(1), busy=True, last_used_at=1.0),
          Resident("c", "c", need(1), busy=False, pinned=True, last_used_at=1.0),
          Resident("d", "d", need(1), busy=False, last_used_at=None),
          Resident("e", "e", need(1), busy=False, last_used_at=10.0)]
    assert [r.key for r in eviction_order(rs)] == ["d", "e", "a"]


# ---------------------------------------------------------------------------- invariants

KEYS = ("a", "b", "c")
PHASES = (S.STOPPED, S.STARTING, S.READY, S.BACKOFF, S.STOPPING, S.FAILED)
events = st.one_of(
    st.builds(lambda k: f.LoadAsked(k, k), st.sampled_from(KEYS)),
    st.builds(lambda t, k: f.EnsureAsked(t, k, k), st.integers(0, 3), st.sampled_from(KEYS)),
    st.builds(f.EnsureCancelled, st.integers(0, 3)),
    st.builds(f.PinAsked, st.sampled_from(KEYS), st.booleans()),
    st.builds(f.UnloadAsked, st.sampled_from(KEYS)),
    st.builds(lambda k, p, mib: f.PhaseChanged(k, p, need(mib)), st.sampled_from(KEYS),
              st.sampled_from(PHASES), st.integers(1, 900)),
    st.builds(lambda mib: ("facts", mib), st.integers(1, 1200)),
    st.builds(lambda busy: ("tick", busy), st.frozensets(st.sampled_from(KEYS))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(events, max_size=40), st.frozensets(st.sampled_from(KEYS)))
def test_admission_never_evicts_a_busy_or_pinned_model_nor_admits_past_the_budget(seq, busy):
    state, now = f.FleetState(), 0.0
    for ev in seq:
        now += 1.0
        u = tuple(f.Usage(m.key, 1 if m.key in busy else 0, now - 5, m.phase is S.READY)
                  for m in state.members)
        if isinstance(ev, tuple) and ev[0] == "facts":
            if state.deciding is None:
                continue
            ev = f.AdmissionFacts(state.deciding, need(ev[1]), BUDGET, u)
        elif isinstance(ev, tuple):
            busy = ev[1]
            ev = f.Tick(u)
        before = state
        state, effects = f.step(state, ev, now)
        if isinstance(ev, f.AdmissionFacts):
            protected = {m.key for m in before.members
                         if m.pinned or m.key in busy or m.phase is not S.READY}
            stopped = {e.key for e in effects if isinstance(e, (f.StopIfIdle, f.StopEngine))}
            assert not stopped & protected
            for e in effects:
                if isinstance(e, f.StartEngine) and e.refused is None and e.key == ev.key:
                    held = sum(b for m in before.members if m.key != ev.key and m.resident
                               for _, b in m.bytes_by_device)
                    assert held + dict(ev.need)["CPU"] <= dict(BUDGET)["CPU"]
        # What the fleet says about itself holds after every step.
        assert len(set(state.pending)) == len(state.pending)
        assert all(state.member(k) is not None for k in state.pending)
        assert all(state.member(k) is not None for _, k in state.waiters)
        assert state.deciding is None or state.deciding == state.pending[0]
