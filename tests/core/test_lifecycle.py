"""Every edge of the lifecycle reducer, table-driven, and a check that the table is complete.

The table names, for each (phase, event) pair, the phase that must follow and the effects
that must be asked for. `test_table_covers_every_state_and_event` fails when a new phase or
event is added without deciding its edges here.
"""

from __future__ import annotations

import itertools

import pytest

from stoker.engines.engine_exit import EngineExit
from stoker.fleet.lifecycle import (
    EVENT_TYPES,
    THEN_BACKOFF,
    THEN_FAIL,
    THEN_IDLE,
    THEN_SHUTDOWN,
    THEN_START,
    BecameReady,
    Exited,
    Finish,
    Kill,
    LifecycleState,
    Publish,
    RecordIncident,
    RestartRequested,
    RetryDue,
    ScheduleRetry,
    ShutdownRequested,
    Spawn,
    Spawned,
    SpawnFailed,
    StartRequested,
    StartupTimedOut,
    StoppedClean,
    StopRequested,
    Unresponsive,
    step,
)
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.snapshot import EngineState as S

NOW = 1000.0
MODEL = "/m/a.gguf"
OTHER = "/m/b.gguf"


def crash(phase="ready", ready_for=5.0, by_us=False):
    return EngineExit(pid=42, exit_code=None, signal=9, signalled_by_us=by_us, phase=phase,
                      uptime_s=7.0, ready_for_s=ready_for if phase == "ready" else None)


STATES = {
    "stopped": LifecycleState(),
    "starting": LifecycleState(phase=S.STARTING, model_path=MODEL, pid=42, spawned_at=NOW - 1),
    "ready": LifecycleState(phase=S.READY, model_path=MODEL, pid=42, spawned_at=NOW - 10,
                            ready_at=NOW - 5),
    "backoff": LifecycleState(phase=S.BACKOFF, model_path=MODEL, retry_at=NOW - 0.1,
                              failures=(NOW - 2,)),
    "failed": LifecycleState(phase=S.FAILED, model_path=MODEL, last_error="gave up"),
    "stopping-idle": LifecycleState(phase=S.STOPPING, model_path=MODEL, pid=42, then=THEN_IDLE),
    "stopping-start": LifecycleState(phase=S.STOPPING, model_path=OTHER, pid=42, then=THEN_START),
    "stopping-shutdown": LifecycleState(phase=S.STOPPING, model_path=MODEL, pid=42,
                                        then=THEN_SHUTDOWN),
    "stopping-backoff": LifecycleState(phase=S.STOPPING, model_path=MODEL, pid=42,
                                       then=THEN_BACKOFF, retry_at=NOW + 1),
    "stopping-fail": LifecycleState(phase=S.STOPPING, model_path=MODEL, pid=42, then=THEN_FAIL),
}

EVENTS = {
    StartRequested: StartRequested(OTHER),
    RestartRequested: RestartRequested(),
    Spawned: Spawned(77),
    SpawnFailed: SpawnFailed("the plan was refused"),
    BecameReady: BecameReady(),
    StartupTimedOut: StartupTimedOut(180.0),
    Unresponsive: Unresponsive(15.0),
    Exited: Exited(crash()),
    StopRequested: StopRequested(),
    StoppedClean: StoppedClean(),
    RetryDue: RetryDue(),
    ShutdownRequested: ShutdownRequested(),
}

# (state name, event type) -> (next phase, effect types that must be present; None = no change)
SAME = None
TABLE = {
    ("stopped", StartRequested): (S.STARTING, {Spawn, Publish}),
    ("stopped", RestartRequested): SAME,
    ("stopped", Spawned): SAME,
    ("stopped", SpawnFailed): SAME,
    ("stopped", BecameReady): SAME,
    ("stopped", Unresponsive): SAME,
    ("stopped", StartupTimedOut): SAME,
    ("stopped", Exited): SAME,
    ("stopped", StopRequested): SAME,
    ("stopped", StoppedClean): SAME,
    ("stopped", RetryDue): SAME,
    ("stopped", ShutdownRequested): (S.STOPPED, {Finish}),

    ("starting", StartRequested): (S.STOPPING, {Kill, Publish}),  # another model: switch
    ("starting", RestartRequested): (S.STOPPING, {Kill, Publish}),
    ("starting", Spawned): (S.STARTING, {Publish}),  # the pid changes
    ("starting", SpawnFailed): (S.FAILED, {RecordIncident, Publish}),
    ("starting", BecameReady): (S.READY, {Publish}),
    ("starting", Unresponsive): SAME,
    ("starting", StartupTimedOut): (S.STOPPING, {Kill, RecordIncident, Publish}),
    ("starting", Exited): (S.BACKOFF, {RecordIncident, ScheduleRetry, Publish}),
    ("starting", StopRequested): (S.STOPPING, {Kill, Publish}),
    ("starting", StoppedClean): SAME,
    ("starting", RetryDue): SAME,
    ("starting", ShutdownRequested): (S.STOPPING, {Kill, Publish}),

    ("ready", StartRequested): (S.STOPPING, {Kill, Publish}),
    ("ready", RestartRequested): (S.STOPPING, {Kill, Publish}),
    ("ready", Spawned): SAME,
    ("ready", SpawnFailed): SAME,
    ("ready", BecameReady): SAME,
    ("ready", StartupTimedOut): SAME,
    ("ready", Unresponsive): (S.STOPPING, {Kill, RecordIncident, Publish}),
    ("ready", Exited): (S.BACKOFF, {RecordIncident, ScheduleRetry, Publish}),
    ("ready", StopRequested): (S.STOPPING, {Kill, Publish}),
    ("ready", StoppedClean): SAME,
    ("ready", RetryDue): SAME,
    ("ready", ShutdownRequested): (S.STOPPING, {Kill, Publish}),

    ("backoff", StartRequested): (S.STARTING, {Spawn, Publish}),
    ("backoff", RestartRequested): (S.STARTING, {Spawn, Publish}),
    ("backoff", Spawned): SAME,
    ("backoff", SpawnFailed): SAME,
    ("backoff", BecameReady): SAME,
    ("backoff", Unresponsive): SAME,
    ("backoff", StartupTimedOut): SAME,
    ("backoff", Exited): SAME,
    ("backoff", StopRequested): (S.STOPPED, {Publish}),
    ("backoff", StoppedClean): SAME,
    ("backoff", RetryDue): (S.STARTING, {Spawn, Publish}),
    ("backoff", ShutdownRequested): (S.STOPPED, {Finish, Publish}),

    ("failed", StartRequested): (S.STARTING, {Spawn, Publish}),
    ("failed", RestartRequested): (S.STARTING, {Spawn, Publish}),
    ("failed", Spawned): SAME,
    ("failed", SpawnFailed): SAME,
    ("failed", BecameReady): SAME,
    ("failed", Unresponsive): SAME,
    ("failed", StartupTimedOut): SAME,
    ("failed", Exited): SAME,
    ("failed", StopRequested): (S.STOPPED, {Publish}),
    ("failed", StoppedClean): SAME,
    ("failed", RetryDue): SAME,
    ("failed", ShutdownRequested): (S.STOPPED, {Finish, Publish}),
}
for then, after, effects in (("idle", S.STOPPED, {Publish}), ("start", S.STARTING, {Spawn, Publish}),
                             ("shutdown", S.STOPPED, {Finish, Publish}),
                             ("backoff", S.BACKOFF, {ScheduleRetry, Publish}),
                             ("fail", S.FAILED, {Publish})):
    name = f"stopping-{then}"
    for ev in EVENT_TYPES:
        TABLE[(name, ev)] = SAME
    TABLE[(name, StoppedClean)] = (after, effects)
    TABLE[(name, Exited)] = (after, effects)  # the exit we caused
    # Requests while stopping only change what follows; the phase stays STOPPING.
    TABLE[(name, StopRequested)] = (S.STOPPING, set())
    TABLE[(name, ShutdownRequested)] = (S.STOPPING, set())
    TABLE[(name, StartRequested)] = (S.STOPPING, set())
    TABLE[(name, RestartRequested)] = (S.STOPPING, set())


def test_table_covers_every_state_and_event():
    phases = {st.phase for st in STATES.values()}
    assert phases == set(S), "a lifecycle phase has no row in the table"
    missing = [(s, e.__name__) for s, e in itertools.product(STATES, EVENT_TYPES)
               if (s, e) not in TABLE]
    assert missing == []


@pytest.mark.parametrize("key", sorted(TABLE, key=lambda k: (k[0], k[1].__name__)),
                         ids=lambda k: f"{k[0]}-{k[1].__name__}")
def test_edge(key):
    state_name, event_type = key
    state = STATES[state_name]
    new, effects = step(state, EVENTS[event_type], NOW)
    expected = TABLE[key]
    if expected is SAME:
        assert new == state and effects == ()
        return
    phase, effect_types = expected
    assert new.phase is phase
    assert effect_types <= {type(e) for e in effects}


def test_start_from_stopped_spawns_the_asked_model():
    new, effects = step(STATES["stopped"], StartRequested(MODEL), NOW)
    assert Spawn(MODEL) in effects and new.model_path == MODEL and new.spawned_at == NOW


def test_start_of_the_running_model_is_a_no_op():
    for name in ("starting", "ready"):
        assert step(STATES[name], StartRequested(MODEL), NOW) == (STATES[name], ())
        assert step(STATES[name], StartRequested(None), NOW) == (STATES[name], ())


def test_switch_stops_then_starts_the_new_model():
    st, eff = step(STATES["ready"], StartRequested(OTHER), NOW)
    assert st.then == THEN_START and Kill() in eff
    st, eff = step(st, StoppedClean(), NOW + 1)
    assert st.phase is S.STARTING and Spawn(OTHER) in eff


def test_crash_of_a_ready_engine_backs_off_then_restarts_counted_once():
    st, eff = step(STATES["ready"], Exited(crash()), NOW)
    retry = [e for e in eff if isinstance(e, ScheduleRetry)][0]
    assert retry.at == NOW + 1.0  # the first delay of the default policy
    incident = [e for e in eff if isinstance(e, RecordIncident)][0]
    assert incident.exit.signal == 9 and "restarting in 1 s" in incident.action
    early, eff = step(st, RetryDue(), NOW + 0.5)
    assert early == st and eff == ()  # not due yet
    st, eff = step(st, RetryDue(), NOW + 1.0)
    assert st.phase is S.STARTING and st.restarts == 1 and Spawn(MODEL) in eff


def test_crash_loop_ends_in_failed_with_a_sentence():
    policy = RestartPolicy(budget_failures=3, budget_window_s=100)
    st = LifecycleState(phase=S.STARTING, model_path=MODEL, policy=policy)
    t = NOW
    for _ in range(2):
        st, _ = step(st, Exited(crash(phase="starting")), t)
        assert st.phase is S.BACKOFF
        t = st.retry_at
        st, _ = step(st, RetryDue(), t)
    st, eff = step(st, Exited(crash(phase="starting")), t + 0.1)
    assert st.phase is S.FAILED and "failed 3 times" in st.last_error
    assert not any(isinstance(e, ScheduleRetry) for e in eff)


def test_a_long_ready_run_resets_the_streak():
    policy = RestartPolicy(budget_failures=2, stable_after_s=60)
    st = LifecycleState(phase=S.READY, model_path=MODEL, failures=(NOW - 5,), policy=policy)
    st, _ = step(st, Exited(crash(ready_for=61.0)), NOW)
    assert st.phase is S.BACKOFF and st.failures == (NOW,)


def test_startup_timeout_kills_then_backs_off():
    st, eff = step(STATES["starting"], StartupTimedOut(180), NOW)
    assert Kill(hung=True) in eff and st.then == THEN_BACKOFF and "180 s" in st.last_error
    st, eff = step(st, StoppedClean(), NOW + 1)
    assert st.phase is S.BACKOFF and ScheduleRetry(st.retry_at) in eff


def test_incidents_without_an_exit_carry_their_kind():
    _, eff = step(STATES["starting"], StartupTimedOut(180), NOW)
    assert [e.kind for e in eff if type(e).__name__ == "RecordIncident"] == ["startup-timeout"]


def test_shutdown_wins_over_a_later_start_while_stopping():
    st, _ = step(STATES["ready"], ShutdownRequested(), NOW)
    st, eff = step(st, StartRequested(OTHER), NOW)
    assert st.then == THEN_SHUTDOWN and eff == ()
    st, eff = step(st, StoppedClean(), NOW)
    assert st.finished and Finish() in eff
    assert step(st, StartRequested(MODEL), NOW) == (st, ())  # finished ignores everything


def test_exit_we_caused_reads_as_stopped_not_as_a_crash():
    st, eff = step(STATES["ready"], Exited(crash(by_us=True)), NOW)
    assert st.phase is S.STOPPED and not any(isinstance(e, RecordIncident) for e in eff)


def test_user_start_clears_the_failure_streak():
    st, _ = step(STATES["failed"], StartRequested(MODEL), NOW)
    assert st.failures == () and st.last_error is None


def test_hopeless_start_failure_does_not_loop():
    ex = EngineExit(pid=1, exit_code=1, signal=None, signalled_by_us=False, phase="starting",
                    uptime_s=0.2, ready_for_s=None, hopeless="llama-server rejected an argument")
    st, eff = step(STATES["starting"], Exited(ex), NOW)
    assert st.phase is S.FAILED and st.last_error == "llama-server rejected an argument"
    assert not any(isinstance(e, ScheduleRetry) for e in eff)
    # The same kind of exit after READY is a crash of a working launch: it is retried.
    ready_exit = EngineExit(**{**ex.__dict__, "phase": "ready", "ready_for_s": 3.0})
    st, _ = step(STATES["ready"], Exited(ready_exit), NOW)
    assert st.phase is S.BACKOFF


def test_unresponsive_ready_engine_is_killed_and_restarted():
    st, eff = step(STATES["ready"], Unresponsive(15), NOW)
    assert Kill(hung=True) in eff and st.then == THEN_BACKOFF and "15 s" in st.last_error
    st, eff = step(st, StoppedClean(), NOW + 1)
    assert st.phase is S.BACKOFF
    st, eff = step(st, RetryDue(), st.retry_at)
    assert st.phase is S.STARTING and st.restarts == 1


def test_a_crash_after_an_hour_of_serving_is_retried_at_once():
    st = LifecycleState(phase=S.READY, model_path=MODEL, pid=42, spawned_at=NOW - 3700,
                        ready_at=NOW - 3600, failures=(NOW - 4000,))
    st, eff = step(st, Exited(crash(ready_for=3600.0)), NOW)
    assert st.phase is S.BACKOFF and st.retry_at == NOW and ScheduleRetry(NOW) in eff
    st, _ = step(st, RetryDue(), NOW)
    assert st.phase is S.STARTING
    st, _ = step(st, Exited(crash(phase="starting")), NOW + 1)
    assert st.phase is S.BACKOFF and st.retry_at == NOW + 1 + 2  # the backoff starts here


def test_a_hang_after_a_healthy_run_is_replaced_at_once():
    st = LifecycleState(phase=S.READY, model_path=MODEL, pid=42, spawned_at=NOW - 100,
                        ready_at=NOW - 90)
    st, eff = step(st, Unresponsive(6.0), NOW)
    assert Kill(hung=True) in eff
    st, eff = step(st, StoppedClean(), NOW + 0.5)
    assert st.phase is S.BACKOFF and st.retry_at == NOW
