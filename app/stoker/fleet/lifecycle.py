"""The engine's lifecycle as a pure reducer: `step(state, event, now) -> (state, effects)`.

STOPPED → STARTING → READY; a failure goes → BACKOFF → STARTING, or → FAILED when the
restart budget (stoker/fleet/restart.py) is spent; any stop goes → STOPPING → STOPPED. The
supervisor thread (stoker/fleet/supervisor.py) feeds events and carries out the effects; it
never decides a transition itself, so every edge lives here and is tested edge by edge.
Nothing here spawns, kills, sleeps or reads the clock: `now` is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from stoker.engines.engine_exit import EngineExit
from stoker.fleet.restart import RestartPolicy, next_retry
from stoker.fleet.snapshot import EngineState

# ---------------------------------------------------------------------------- events


@dataclass(frozen=True)
class StartRequested:
    model_path: str | None  # None: the preparer picks (last used, else the demo model)


@dataclass(frozen=True)
class RestartRequested:
    reason: str = "asked by the user"


@dataclass(frozen=True)
class Spawned:
    pid: int


@dataclass(frozen=True)
class SpawnFailed:
    reason: str  # one sentence: the plan was refused, the binary is missing …
    kind: str = "start-refused"  # the incident kind it is recorded as (a taken port: port-in-use)


@dataclass(frozen=True)
class BecameReady:
    pass


@dataclass(frozen=True)
class StartupTimedOut:
    waited_s: float


@dataclass(frozen=True)
class Unresponsive:
    """A READY engine stopped answering /health (the shell counts the failed probes)."""

    silent_s: float


@dataclass(frozen=True)
class Exited:
    exit: EngineExit


@dataclass(frozen=True)
class StopRequested:
    pass


@dataclass(frozen=True)
class StoppedClean:
    """The process we asked to stop is gone."""


@dataclass(frozen=True)
class RetryDue:
    pass


@dataclass(frozen=True)
class ShutdownRequested:
    pass


Event = (StartRequested | RestartRequested | Spawned | SpawnFailed | BecameReady | StartupTimedOut
         | Unresponsive | Exited | StopRequested | StoppedClean | RetryDue | ShutdownRequested)
EVENT_TYPES = (StartRequested, RestartRequested, Spawned, SpawnFailed, BecameReady, StartupTimedOut,
               Unresponsive, Exited, StopRequested, StoppedClean, RetryDue, ShutdownRequested)

# ---------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class Spawn:
    model_path: str | None


@dataclass(frozen=True)
class Kill:
    """Stop the running process (SIGTERM, then kill after a grace period); report StoppedClean."""

    hung: bool = False  # it stopped answering: a short grace, it cannot act on SIGTERM anyway


@dataclass(frozen=True)
class ScheduleRetry:
    at: float


@dataclass(frozen=True)
class RecordIncident:
    exit: EngineExit | None
    summary: str  # used when there is no exit to classify (start-up timeout, refusal)
    action: str  # what Stoker did next, a sentence fragment for the incident view
    kind: str | None = None  # the incident kind when there is no exit to classify


@dataclass(frozen=True)
class Publish:
    pass


@dataclass(frozen=True)
class Finish:
    """The supervisor thread may end: the engine is stopped and shutdown was asked."""


Effect = Spawn | Kill | ScheduleRetry | RecordIncident | Publish | Finish

# ---------------------------------------------------------------------------- state

# What to do once a process we are stopping is gone.
THEN_IDLE, THEN_START, THEN_SHUTDOWN, THEN_BACKOFF, THEN_FAIL = (
    "idle", "start", "shutdown", "backoff", "fail")


@dataclass(frozen=True)
class LifecycleState:
    phase: EngineState = EngineState.STOPPED
    model_path: str | None = None  # the model we want running
    pid: int | None = None
    spawned_at: float | None = None
    ready_at: float | None = None
    retry_at: float | None = None
    failures: tuple[float, ...] = ()  # failure times of the current streak
    restarts: int = 0  # automatic restarts after failures
    then: str | None = None  # while STOPPING: what comes next
    last_error: str | None = None
    finished: bool = False
    policy: RestartPolicy = field(default_factory=RestartPolicy)


S = EngineState


def step(state: LifecycleState, event: Event, now: float) -> tuple[LifecycleState, tuple[Effect, ...]]:
    """The next state and the effects to carry out; unknown or stale events change nothing."""
    new, effects = _step(state, event, now)
    if new != state and (new.phase != state.phase or new.pid != state.pid
                         or new.last_error != state.last_error or new.restarts != state.restarts):
        effects = effects + (Publish(),)
    return new, effects


def _step(st: LifecycleState, ev: Event, now: float) -> tuple[LifecycleState, tuple[Effect, ...]]:
    p = st.phase
    if st.finished:
        return st, ()

    if isinstance(ev, ShutdownRequested):
        if p in (S.STARTING, S.READY):
            return _stopping(st, THEN_SHUTDOWN), (Kill(),)
        if p is S.STOPPING:
            return replace(st, then=THEN_SHUTDOWN), ()
        return replace(st, phase=S.STOPPED, retry_at=None, finished=True), (Finish(),)

    if isinstance(ev, StopRequested):
        if p in (S.STARTING, S.READY):
            return _stopping(st, THEN_IDLE), (Kill(),)
        if p is S.STOPPING:
            return (replace(st, then=THEN_IDLE) if st.then != THEN_SHUTDOWN else st), ()
        if p in (S.BACKOFF, S.FAILED):
            return replace(st, phase=S.STOPPED, retry_at=None), ()
        return st, ()

    if isinstance(ev, StartRequested):
        fresh = replace(st, model_path=ev.model_path, failures=(), last_error=None)
        if p in (S.STOPPED, S.BACKOFF, S.FAILED):
            return _starting(fresh, now), (Spawn(ev.model_path),)
        if p in (S.STARTING, S.READY):
            if ev.model_path is None or ev.model_path == st.model_path:
                return st, ()  # already running what was asked for
            return _stopping(fresh, THEN_START), (Kill(),)
        # STOPPING: start the asked model once the old process is gone, unless shutting down.
        if st.then == THEN_SHUTDOWN:
            return st, ()
        return replace(fresh, then=THEN_START), ()

    if isinstance(ev, RestartRequested):
        fresh = replace(st, failures=(), last_error=None)
        if p in (S.STARTING, S.READY):
            return _stopping(fresh, THEN_START), (Kill(),)
        if p in (S.BACKOFF, S.FAILED):
            return _starting(fresh, now), (Spawn(st.model_path),)
        if p is S.STOPPING and st.then != THEN_SHUTDOWN:
            return replace(fresh, then=THEN_START), ()
        return st, ()  # STOPPED: nothing to restart

    if isinstance(ev, Spawned):
        if p is S.STARTING:
            return replace(st, pid=ev.pid, spawned_at=now), ()
        return st, ()

    if isinstance(ev, SpawnFailed):
        if p is S.STARTING:
            # A refused plan or a missing binary will not fix itself: no retry loop.
            return (replace(st, phase=S.FAILED, pid=None, last_error=ev.reason),
                    (RecordIncident(None, ev.reason, "stopped; nothing was started", ev.kind),))
        return st, ()

    if isinstance(ev, BecameReady):
        if p is S.STARTING:
            return replace(st, phase=S.READY, ready_at=now, last_error=None), ()
        return st, ()

    if isinstance(ev, StartupTimedOut):
        if p is S.STARTING:
            summary = f"the engine did not become ready within {ev.waited_s:.0f} s"
            decision = next_retry(st.failures, now, st.policy)
            then = THEN_BACKOFF if decision.retry else THEN_FAIL
            action = f"stopped it; {decision.reason}"
            nxt = replace(_stopping(st, then), failures=decision.history, retry_at=decision.at,
                          last_error=summary if decision.retry else decision.reason)
            return nxt, (Kill(hung=True), RecordIncident(None, summary, action, "startup-timeout"))
        return st, ()

    if isinstance(ev, Unresponsive):
        if p is S.READY:
            summary = f"the engine stopped answering for {ev.silent_s:.0f} s"
            ready_for = None if st.ready_at is None else now - st.ready_at
            decision = next_retry(st.failures, now, st.policy, ready_for_s=ready_for)
            then = THEN_BACKOFF if decision.retry else THEN_FAIL
            nxt = replace(_stopping(st, then), failures=decision.history, retry_at=decision.at,
                          last_error=summary if decision.retry else decision.reason)
            return nxt, (Kill(hung=True), RecordIncident(None, summary, f"stopped it; {decision.reason}",
                                                "unresponsive"))
        return st, ()

    if isinstance(ev, Exited):
        if p in (S.STARTING, S.READY):
            ex = ev.exit
            if ex.signalled_by_us:  # only when a stop raced this report: treat as stopped
                return replace(st, phase=S.STOPPED, pid=None, ready_at=None), ()
            if ex.hopeless and ex.phase == "starting":
                nxt = replace(st, phase=S.FAILED, pid=None, ready_at=None, retry_at=None,
                              last_error=ex.hopeless)
                return nxt, (RecordIncident(ex, ex.describe(),
                                            "stopped: starting it again would fail the same way"),)
            decision = next_retry(st.failures, now, st.policy, ready_for_s=ex.ready_for_s)
            if decision.retry and decision.at is not None:  # a retry always has its time
                nxt = replace(st, phase=S.BACKOFF, pid=None, ready_at=None, retry_at=decision.at,
                              failures=decision.history, last_error=ex.describe())
                return nxt, (RecordIncident(ex, ex.describe(), decision.reason),
                             ScheduleRetry(decision.at))
            nxt = replace(st, phase=S.FAILED, pid=None, ready_at=None, retry_at=None,
                          failures=decision.history, last_error=decision.reason)
            return nxt, (RecordIncident(ex, ex.describe(), "gave up: " + decision.reason),)
        if p is S.STOPPING:
            return _after_stop(st, now)
        return st, ()  # a stale report of a process already dealt with

    if isinstance(ev, StoppedClean):
        if p is S.STOPPING:
            return _after_stop(st, now)
        return st, ()

    if isinstance(ev, RetryDue):
        if p is S.BACKOFF and st.retry_at is not None and now >= st.retry_at:
            nxt = replace(_starting(st, now), restarts=st.restarts + 1)
            return nxt, (Spawn(st.model_path),)
        return st, ()

    return st, ()


def _starting(st: LifecycleState, now: float) -> LifecycleState:
    return replace(st, phase=S.STARTING, pid=None, spawned_at=now, ready_at=None, retry_at=None,
                   then=None)


def _stopping(st: LifecycleState, then: str) -> LifecycleState:
    return replace(st, phase=S.STOPPING, then=then, ready_at=None)


def _after_stop(st: LifecycleState, now: float) -> tuple[LifecycleState, tuple[Effect, ...]]:
    gone = replace(st, pid=None, ready_at=None, then=None)
    if st.then == THEN_SHUTDOWN:
        return replace(gone, phase=S.STOPPED, retry_at=None, finished=True), (Finish(),)
    if st.then == THEN_START:
        return _starting(gone, now), (Spawn(st.model_path),)
    if st.then == THEN_BACKOFF and st.retry_at is not None:
        return replace(gone, phase=S.BACKOFF), (ScheduleRetry(st.retry_at),)
    if st.then == THEN_FAIL:
        return replace(gone, phase=S.FAILED, retry_at=None), ()
    return replace(gone, phase=S.STOPPED, retry_at=None), ()
