"""The one thread that owns engine state: a thin executor of the fleet's and the lifecycles' decisions.

UI, CLI, the control channel and the gateway call `submit(command)` and `subscribe(callback)`;
only the supervisor thread starts, watches and stops engine processes. Every decision is a
pure reducer's: stoker/fleet/fleet_state.py decides for the models as a group (admission by
planned bytes through stoker/fleet/residency.py, loads waiting for room, requests waiting
for a model, pins, on-demand loads, asked unloads, idle expiry, the focus) and
stoker/fleet/lifecycle.py for one model's engine (STARTING → READY, retries, stops). This
module feeds them events; their effects are carried out by one runner each, both called on
this thread only: stoker/fleet/fleet_runner.py's FleetRunner for the fleet's, EngineRunner
(below) for a lifecycle's. What is kept per model (stoker/fleet/engine_record.py) is the
lifecycle state and the handles of the process and its launch.
What to launch is decided by ONE injected collaborator, the `LaunchPreparer` (every hook it
has is declared below; stoker/fleet/launcher.py has the real one: plan + argv + engine
build), so tests can hand it a LaunchSpec built by hand (PlainPreparer, FunctionPreparer).

The thread wakes on events and deadlines, never on a fixed tick: a command, a process that
ended (a thread waits on it), a stop that finished, a health probe that answered, a retry or
an idle expiry that is due. What stays periodic is cheap: the READY engine's /health every
2 s, which notices a hang (stoker/fleet/health_watch.py), the readiness poll while an
engine starts, and, while a load waits for busy models or an unload waits for requests in
flight, a look at the route table every 0.1 s. STOKER_SUPERVISOR_TICK_S (seconds) wakes it at
least that often, as the fixed tick of old did: `stoker bench idle` measures both side by side.

The gateway reaches a READY engine without a round trip through this thread: `routes`
(stoker/gateway/routes.py, a small lock-protected table; in an Instance the gateway process
holds the leases and this side is its RemoteRoutes mirror) hands out leases on READY
engines, counts the requests in flight and when each model was last used; an engine is only
ever stopped for room or for idleness after its route is closed with nothing in flight
(`close_if_idle`), so a request can never be routed to an engine that is being stopped for
it. `EnsureModel` asks for a model to be made resident and is answered through its callback
once it is READY (a route) or cannot be (a sentence).

A llama-server's conversations outlive its process: the stop thread saves its used slots
before it signals the engine, and a start restores them on a thread of its own before READY
is published (stoker/fleet/kv_keeper.py; the lifecycle reducer knows nothing of it).

Failures go through the preparer's `after_exit` (strikes, quarantine, broken drafters, the
OOM recovery ladder) and incidents to ONE ledger (stoker/fleet/exit_diagnosis.py
IncidentRecorder); the RPC worker part is stoker/fleet/worker_tray.py; the snapshot's fields
come from stoker/fleet/snapshot_assembly.py.

Subscribers are called ON THE SUPERVISOR THREAD for every snapshot: they must not block
(the Qt bridge re-emits through a queued signal; the CLI prints a line; the gateway hands
it to its own loop). A subscriber that raises is logged and kept.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shlex
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, assert_never, runtime_checkable

from stoker.base.heap import return_freed_heap
from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths, storage_sentence
from stoker.diagnosis.exit_report import Incident
from stoker.diagnosis.incidents import IncidentLog
from stoker.engines.drivers import driver_for
from stoker.engines.engine_exit import EngineExit
from stoker.engines.kind import describe
from stoker.engines.launch import (
    AttemptContext,
    EngineHealth,
    ExitDecision,
    PreparationRefused,
    PreparedLaunch,
)
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.load_times import record_load
from stoker.engines.process import EngineProcess, free_loopback_port
from stoker.fleet import commands as cmd
from stoker.fleet import fleet_state as fleet
from stoker.fleet import kv_keeper as conversations
from stoker.fleet import lifecycle as life
from stoker.fleet.commands import EnsureResult, Route
from stoker.fleet.engine_record import EngineRecord
from stoker.fleet.exit_diagnosis import (
    IncidentRecorder,
    diagnose_exit,
    drafter_left_out_by_engine,
    gpu_unused_blockers,
    hopeless_reason,
)
from stoker.fleet.fleet_runner import FleetRunner, call_answer
from stoker.fleet.health_watch import HEALTH_FAILURES, HEALTH_INTERVAL_S, HealthProber
from stoker.fleet.memory_watch import WATCH_INTERVAL_S, MemoryWatch
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.routes import Routes, RouteTable
from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView
from stoker.fleet.snapshot_assembly import (
    EngineFacts,
    argv_value,
    build_snapshot,
    ctx_per_slot,
    engine_view,
    launch_facts,
    merged_blockers,
)
from stoker.fleet.snapshot_hub import SnapshotHub, Subscriber
from stoker.fleet.worker_tray import WorkerTray
from stoker.planning.plan import LaunchPlan

log = logging.getLogger(__name__)

STARTING_POLL_S = 0.02  # /health poll while starting: it adds directly to time-to-READY
# How often the route table is looked at while a decision waits on it (a load waiting for
# busy models, an unload waiting for requests in flight), and how quickly a crash is noticed
# where no thread can wait on the process (no os.waitid: Windows).
READY_POLL_S = 0.1
LONGEST_SLEEP_S = 30.0  # with nothing due the thread still looks around this often
# A hung engine (no /health answer, or no READY in time) does not get the polite grace: it
# cannot act on SIGTERM anyway, and every second it holds is a second the model is away.
HUNG_GRACE_S = 1.0
# A stop waits (on its own thread) this long at most for the gateway process to confirm that
# the engine's route is closed, so no request is leased on an engine that is being stopped.
ROUTE_CLOSE_WAIT_S = 1.0
PROGRESS_PUBLISH_S = 0.25  # a working ds4 / sd-server's progress line is published at most this often


@dataclass(frozen=True)
class _WorkerChanged:
    """Internal: this machine's RPC worker changed (queued from its thread, so only this
    thread publishes)."""


@dataclass(frozen=True)
class _Wake:
    """Internal: something this thread waits on happened (a process ended, a stop finished,
    a health probe answered); the next pass looks at everything."""


@runtime_checkable
class LaunchPreparer(Protocol):
    """What the supervisor asks of whoever decides launches: every hook it calls, declared.

    RealPreparer (stoker/fleet/launcher.py) is the real one; a launch made by hand (tests,
    bare launches) subclasses PlainPreparer, whose hooks learn nothing."""

    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused:
        """The launch for this attempt, or the sentence why there is none."""
        ...

    def choose_model(self, model_path: str | None) -> Path | None:
        """The file a model path means ("the last used model" for None); raises when none."""
        ...

    def idle_timeout_for(self, overrides: ModelOverrides, current: float | None) -> float | None:
        """The idle timeout new overrides give a model already running (`current` is its
        launch's), applied at once with no restart."""
        ...

    def after_exit(self, launch: PreparedLaunch, incident: Incident, exit: EngineExit) -> ExitDecision:
        """What a diagnosed failed exit teaches: strikes, quarantine, the recovery ladder."""
        ...

    def after_ready(self, launch: PreparedLaunch, lines: Sequence[str]) -> None:
        """The start-up log of a launch that became READY (measured memory lines)."""
        ...

    def engine_health(self) -> EngineHealth:
        """Blockers, quarantined builds, settings problems, RPC workers back: for the snapshot."""
        ...

    def lift_quarantine(self, build_id: str) -> None: ...

    def watching_workers(self) -> bool:
        """Whether an RPC worker was dropped, so its coming back is worth looking for."""
        ...

    def readmit_worker(self, endpoint: str) -> tuple[str, ...]:
        """Let a dropped RPC worker back in; the model paths planned without it."""
        ...


class PlainPreparer(ABC):
    """The hooks of a preparer that learns nothing from failures and knows no library:
    subclasses give `__call__`. For launches made by hand (tests, bench tools)."""

    @abstractmethod
    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused: ...

    def choose_model(self, model_path: str | None) -> Path | None:
        return Path(model_path) if model_path else None

    def idle_timeout_for(self, overrides: ModelOverrides, current: float | None) -> float | None:
        return current

    def after_exit(self, launch: PreparedLaunch, incident: Incident, exit: EngineExit) -> ExitDecision:
        return ExitDecision()

    def after_ready(self, launch: PreparedLaunch, lines: Sequence[str]) -> None:
        return None

    def engine_health(self) -> EngineHealth:
        return EngineHealth()

    def lift_quarantine(self, build_id: str) -> None:
        return None

    def watching_workers(self) -> bool:
        return False

    def readmit_worker(self, endpoint: str) -> tuple[str, ...]:
        return ()


class FunctionPreparer(PlainPreparer):
    """A preparer from a function `(model_path, attempt) -> PreparedLaunch | PreparationRefused`."""

    def __init__(self, prepare: Callable[[str | None, AttemptContext], PreparedLaunch | PreparationRefused],
                 *, idle_timeout_for: Callable[[ModelOverrides], float | None] | None = None) -> None:
        self._prepare = prepare
        self._idle_timeout_for = idle_timeout_for

    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused:
        return self._prepare(model_path, attempt)

    def idle_timeout_for(self, overrides: ModelOverrides, current: float | None) -> float | None:
        return self._idle_timeout_for(overrides) if self._idle_timeout_for is not None else current




def _fixed_tick() -> float | None:
    """STOKER_SUPERVISOR_TICK_S: wake at least this often (the old fixed tick, for benches)."""
    raw = os.environ.get("STOKER_SUPERVISOR_TICK_S")
    if not raw:
        return None
    try:
        tick = float(raw)
    except ValueError:
        tick = 0.0
    if not tick > 0:
        log.warning("STOKER_SUPERVISOR_TICK_S=%r is not a positive number of seconds; ignored", raw)
        return None
    return tick


@dataclass(frozen=True)
class SupervisorHooks:
    """Who else hears of the supervisor's work (each called on its thread; none may block)."""

    on_launch: Callable[[PreparedLaunch], None] | None = None  # just before an engine is spawned
    on_overrides: Callable[[str], None] | None = None  # a model's overrides were saved
    name_model: Callable[[str], str | None] | None = None  # a model path's gateway id


@dataclass(frozen=True)
class EngineHost:
    """What the engine runner needs of the supervisor it works for (called on its thread)."""

    publish: Callable[[], None]
    engine_changed: Callable[[EngineRecord], None]  # its phase or launch changed: the fleet hears of it
    refresh_health: Callable[[], None]
    model_id: Callable[[str], str]
    held_by_others: Callable[[str], tuple[tuple[str, int], ...]]  # bytes per device the others hold
    unloading: Callable[[str], bool]  # asked to unload: its route stays closed


class EngineRunner:
    """Runs each model's engine for the supervisor: turns what the process and /health say
    into lifecycle events, feeds the lifecycle reducer and carries out its effects (prepare,
    spawn, stop off the thread, record an incident), and hears the preparer's hooks. It
    decides no transition (stoker/fleet/lifecycle.py does) and nothing about the fleet."""

    def __init__(self, host: EngineHost, preparer: LaunchPreparer, routes: RouteTable, prober: HealthProber,
                 incidents: IncidentRecorder, *, clock: Callable[[], float], stop_grace_s: float,
                 log_dir: Path, run_dir: Path, on_launch: Callable[[PreparedLaunch], None] | None,
                 name_model: Callable[[str], str | None] | None, wake: Callable[[], None],
                 keeper: conversations.KvKeeper | None = None) -> None:
        self._host = host
        # Conversations kept across a stop: saved on the stop thread, restored before READY.
        self._kv = keeper or conversations.KvKeeper()
        self._restores = conversations.Restores(self._kv)
        self._preparer = preparer
        self.routes = routes
        # Stops waiting for the gateway process to confirm the route is closed: key -> (engine, deadline).
        self.stops_after_close: dict[str, tuple[EngineRecord, float]] = {}
        self._prober = prober
        self._incidents = incidents
        self._clock = clock
        self._stop_grace_s = stop_grace_s
        self._log_dir = log_dir
        self._run_dir = run_dir
        self._on_launch = on_launch
        self._names_models = name_model is not None
        self._wake = wake
        self.overrides: dict[str, ModelOverrides] = {}  # sent with ApplyOverrides, per key

    def next_due(self, e: EngineRecord, now: float) -> float | None:
        """When this engine next needs a look without any event (None: an event will come)."""
        due: list[float] = []
        if e.phase is EngineState.STARTING:
            due.append(now + STARTING_POLL_S)
        elif e.phase is EngineState.READY:
            probe = self._prober.next_due(e.key)
            if probe is not None:
                due.append(probe)
            if not hasattr(os, "waitid"):
                due.append(now + READY_POLL_S)
        elif e.phase is EngineState.STOPPING and e.stopper is None:
            due.append(now + READY_POLL_S)
        elif e.phase is EngineState.BACKOFF and e.state.retry_at is not None:
            due.append(e.state.retry_at)
        if e.launch is not None and e.proc is not None \
                and (e.phase is EngineState.STARTING or self.routes.usage(e.key)[0] > 0):
            due.append(e.progress_at + PROGRESS_PUBLISH_S)
        return min(due) if due else None

    def view(self, e: EngineRecord, *, pinned: bool, queued: str | None) -> EngineView:
        """The engine's line in the snapshot."""
        in_flight, last_used = self.routes.usage(e.key)
        facts = EngineFacts(model_id=self._host.model_id(e.key), model_path=e.key or None, state=e.state,
                            pinned=pinned, queued=queued, in_flight=in_flight, last_used_at=last_used,
                            progress=e.progress, context_asked=e.context_asked)
        return replace(engine_view(facts, e.launch), reload_s=e.reload_s)

    def close(self, e: EngineRecord) -> None:
        """The supervisor is ending: the engine goes, whatever it was doing."""
        if e.stopper is not None:
            e.stopper.join(self._stop_grace_s + 15)
        if e.proc is not None:
            e.proc.stop(grace_s=self._stop_grace_s)
            e.proc = None
        self.routes.forget(e.key)

    def stop(self, engine: EngineRecord) -> None:
        """Close its route, and stop it once the gateway process has confirmed the close (a
        message, not a wait here): until then it stays READY in the snapshot, so a request
        sent after the snapshot says STOPPING can never be leased on the dying engine."""
        self.routes.close(engine.key)
        if self.routes.wait_closed(engine.key, 0.0):
            self.feed(engine, life.StopRequested())
        else:
            self.stops_after_close.setdefault(engine.key, (engine, self._clock() + ROUTE_CLOSE_WAIT_S))

    def stop_closed(self) -> None:
        """Carry out the stops whose close is confirmed (or went unconfirmed too long)."""
        now = self._clock()
        for key, (engine, deadline) in list(self.stops_after_close.items()):
            if not self.routes.wait_closed(key, 0.0) and now < deadline:
                continue
            del self.stops_after_close[key]
            if engine.phase is not EngineState.STOPPED:
                self.feed(engine, life.StopRequested())

    def cancel_work(self, engine: EngineRecord | None, reason: str) -> None:
        """An engine that cannot cancel a request it started (stoker/engines/kind.py) is stopped,
        at once and as an expected exit; the next request starts it again. One that can
        cancel is left alone: closing the request's connection already cancels it there."""
        if engine is None or engine.launch is None or engine.phase not in (EngineState.READY,
                                                                            EngineState.STARTING):
            return
        if describe(engine.launch.kind).cancellable_in_engine:
            return
        log.info("stopping %s: %s (it cannot cancel a request it has started)", self._host.model_id(engine.key),
                 reason)
        engine.cancelling = True
        self.stop(engine)

    def observe(self, e: EngineRecord) -> None:
        """Turn what the process and /health say now into events."""
        st, proc, now = e.state, e.proc, self._clock()
        if e.stopper is not None:
            if e.stop_done.is_set():
                e.stopper.join()
                e.stopper = None
                self.feed(e, life.StoppedClean())
                return_freed_heap()  # the save of its conversation and its log are freed (issue 25)
            return
        if proc is not None and st.phase in (EngineState.STARTING, EngineState.READY) \
                and proc.poll() is not None:
            self._exited(e, proc, now)
            return
        if proc is not None and e.launch is not None:
            self._follow_progress(e, proc, now)
        if st.phase is EngineState.STARTING and proc is not None and e.launch is not None:
            kind = e.launch.kind
            if self._restores.under_way(e.key, proc.pid):
                return  # READY waits for the saved conversation (bounded; it wakes us)
            status = self._prober.ready_status(e.launch.spec.endpoint, kind)
            now = self._clock()
            if driver_for(kind).is_ready(status):
                if not self._restores.finished(e.key, proc.pid, e.launch, self._host.model_id(e.key), self._wake):
                    return  # its saved conversation is restored first, on a thread of its own
                now = self._clock()
                proc.mark_ready(now)
                self._on_ready(e, proc)
                self.feed(e, life.BecameReady())
            elif st.spawned_at is not None and now - st.spawned_at > e.launch.startup_deadline_s:
                self.feed(e, life.StartupTimedOut(now - st.spawned_at))
        elif st.phase is EngineState.BACKOFF and st.retry_at is not None and now >= st.retry_at:
            e.after_failure = True
            self.feed(e, life.RetryDue())
        elif st.phase is EngineState.READY and e.launch is not None:
            silent = self._prober.check(e.key, e.launch.spec.endpoint, e.launch.kind,
                                        working=self.routes.usage(e.key)[0] > 0, now=now)
            if silent is not None:
                self.routes.close(e.key)
                self.feed(e, life.Unresponsive(silent))

    def _exited(self, e: EngineRecord, proc: EngineProcess, now: float) -> None:
        """The process ended by itself: diagnose it, hear the preparer, tell the lifecycle."""
        self.routes.close(e.key)
        e.proc = None
        self._prober.forget(e.key)
        report = proc.exit_report(now)
        incident = diagnose_exit(report, e.launch)
        decision = self._after_exit(e, incident, report)
        hopeless = hopeless_reason(report, e.launch, incident)
        if decision.retry is True:
            hopeless = None
        elif decision.retry is False and report.phase == "starting" and incident is not None:
            hopeless = hopeless or incident.title
        if hopeless:
            report = replace(report, hopeless=hopeless)
        e.diagnosed = (report, incident, decision)
        e.last_exit = report
        self._host.refresh_health()
        e.after_failure = not report.signalled_by_us
        self.feed(e, life.Exited(report))
        return_freed_heap()  # the exit's diagnosis and log are freed: give the pages back (issue 25)

    def _follow_progress(self, e: EngineRecord, proc: EngineProcess, now: float) -> None:
        """Publish what a ds4 / sd-server says it is doing (its progress lines), while it
        starts or serves a request, at most every PROGRESS_PUBLISH_S."""
        if now - e.progress_at < PROGRESS_PUBLISH_S or e.launch is None:
            return
        e.progress_at = now
        working = e.phase is EngineState.STARTING or self.routes.usage(e.key)[0] > 0
        text = driver_for(e.launch.kind).progress(proc.tail(8)) if working else None
        if text != e.progress:
            e.progress = text
            self._host.publish()

    def feed(self, e: EngineRecord, event: life.Event) -> None:
        e.events.append(event)
        if len(e.events) > 1:
            return  # an effect fed this; the outer loop below picks it up in order
        while e.events:
            ev = e.events[0]
            e.state, effects = life.step(e.state, ev, self._clock())
            for effect in effects:
                self._carry_out(e, effect)
            e.events.pop(0)
        self._host.engine_changed(e)
        self._sync_route(e)

    def _sync_route(self, e: EngineRecord) -> None:
        unloading = self._host.unloading(e.key)
        if e.phase is EngineState.READY and e.proc is not None and e.launch is not None and not unloading:
            if self.routes.route(e.key) is None:
                self.routes.open(Route(key=e.key, endpoint=e.launch.spec.endpoint,
                                       engine_key=e.launch.engine_key, pid=e.proc.pid,
                                       kind=e.launch.kind),
                                 self._clock())
        else:
            self.routes.close(e.key)

    def _carry_out(self, e: EngineRecord, effect: life.Effect) -> None:
        match effect:
            case life.Spawn():
                self._spawn(e)
            case life.Kill():
                self._kill(e, effect)
            case life.RecordIncident():
                self._record_incident(e, effect)
            case life.Publish():
                self._host.publish()
            case life.ScheduleRetry() | life.Finish():
                pass  # the state carries retry_at / finished; the loop's deadlines act on them
            case _:
                assert_never(effect)

    def prepare(self, e: EngineRecord, attempt: int) -> PreparedLaunch | PreparationRefused:
        context = AttemptContext(
            attempt=attempt, port=free_loopback_port(), log_dir=self._log_dir,
            overrides=self.overrides.get(e.key) if e.key else None,
            last_exit=e.last_exit, after_failure=e.after_failure,
            held_bytes=self._host.held_by_others(e.key),
            model_id=self._host.model_id(e.key) if e.key and self._names_models else None,
            ctx_per_slot_at_least=e.ctx_at_least)
        try:
            prepared = self._preparer(e.key or None, context)
        except Exception as exc:
            log.exception("preparing the launch failed")
            prepared = PreparationRefused(e.key or None, f"preparing the launch failed: {exc}")
        self._host.refresh_health()
        return prepared

    def _spawn(self, e: EngineRecord) -> None:
        e.ready_blockers = ()
        e.drafter_note = None
        e.cancelling, e.progress = False, None
        prepared, e.prepared = e.prepared, None
        if prepared is None:  # a restart or a retry: planned afresh
            prepared = self.prepare(e, attempt=e.state.restarts)
        if isinstance(prepared, PreparationRefused):
            e.events.append(life.SpawnFailed(prepared.reason))
            return
        e.launch = prepared = self._kv.with_slot_folder(prepared)
        if self._on_launch is not None:
            self._on_launch(prepared)
        try:
            e.proc = EngineProcess.start(prepared.spec, secrets=dict(prepared.secrets),
                                         log_dir=self._log_dir, run_dir=self._run_dir)
        except OSError as exc:
            e.events.append(life.SpawnFailed(str(exc)))
            return
        self._wait_on_exit(e.proc.pid)
        e.events.append(life.Spawned(e.proc.pid))

    def _wait_on_exit(self, pid: int) -> None:
        """A thread that wakes this one when the process ends (it does not reap it: poll()
        here does), so a crash is noticed at once without polling."""
        if not hasattr(os, "waitid"):
            return  # no such wait here (Windows): READY_POLL_S polling notices the exit

        def wait() -> None:
            with contextlib.suppress(OSError):  # already reaped (a stop), or not our child
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            self._wake()

        threading.Thread(target=wait, name=f"stoker-exit-{pid}", daemon=True).start()

    def _kill(self, e: EngineRecord, effect: life.Kill) -> None:
        """Stop the process off this thread; StoppedClean follows when it is gone."""
        self._prober.forget(e.key)
        self.routes.close(e.key)
        proc, e.proc = e.proc, None
        if proc is None:
            e.events.append(life.StoppedClean())
            return
        # A hung engine cannot act on SIGTERM anyway; a cancelled one must let go at once.
        grace = HUNG_GRACE_S if effect.hung or e.cancelling else self._stop_grace_s
        key, model_id = e.key, self._host.model_id(e.key)
        # A hung, cancelled or never-ready engine has no conversation worth keeping.
        keep = e.launch if not (effect.hung or e.cancelling) and proc.ready_at is not None else None

        def stop() -> None:
            try:
                closed = self.routes.wait_closed(key, ROUTE_CLOSE_WAIT_S)
                if not closed:
                    log.warning("the gateway process did not confirm that %s is closed", model_id)
                if keep is not None and closed and self.routes.usage(key)[0] == 0 and proc.poll() is None:
                    try:  # bounded (kv_keeper.SAVE_DEADLINE_S); a failed save must not stop the stop
                        self._kv.save(keep, model_id)
                    except Exception:
                        log.exception("saving %s's conversation failed", model_id)
                proc.stop(grace_s=grace)
                e.last_exit = proc.exit_report(self._clock())
            except Exception:
                log.exception("stopping the engine (pid %s) failed", proc.pid)
            done.set()
            self._wake()

        done = e.stop_done = threading.Event()
        e.stopper = threading.Thread(target=stop, name=f"stoker-stop-{proc.pid}", daemon=True)
        e.stopper.start()

    def _record_incident(self, e: EngineRecord, effect: life.RecordIncident) -> None:
        _, blocker = self._incidents.record(
            effect, now=self._clock(), key=e.key, model_id=self._host.model_id(e.key) if e.key else None,
            launch=e.launch, diagnosed=e.diagnosed)
        if blocker is not None:
            e.incident_blockers = tuple(b for b in e.incident_blockers if b.kind != blocker.kind) + (blocker,)
        self._host.publish()

    def _after_exit(self, e: EngineRecord, incident: Incident | None, report: EngineExit) -> ExitDecision:
        if incident is None or e.launch is None or report.signalled_by_us:
            return ExitDecision()
        try:
            return self._preparer.after_exit(e.launch, incident, report)
        except Exception:
            log.exception("the preparer's after_exit failed")
            return ExitDecision()

    def _on_ready(self, e: EngineRecord, proc: EngineProcess) -> None:
        launch = e.launch
        if launch is None:
            return
        if e.state.spawned_at is not None:
            e.reload_s = record_load_time(launch, self._clock() - e.state.spawned_at)
        lines = proc.tail()
        e.ready_blockers = gpu_unused_blockers(lines, launch)
        e.drafter_note = drafter_left_out_by_engine(lines, launch)
        try:
            self._preparer.after_ready(launch, lines)
        except Exception:
            log.exception("the preparer's after_ready failed")
        return_freed_heap()  # the launch's planning and start-up log are freed (issue 25)


@dataclass(frozen=True)
class SupervisorOptions:
    """How the supervisor runs: its clock, restart policy, stop grace, folders, health probe."""

    clock: Callable[[], float] = time.time
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    stop_grace_s: float = 10.0
    kv_keeper: conversations.KvKeeper | None = None  # None: conversations kept in Stoker's cache, per Settings
    log_dir: Path | None = None  # None: Stoker's log folder
    run_dir: Path | None = None  # None: Stoker's run folder (pid files)
    health_interval_s: float = HEALTH_INTERVAL_S
    health_failures: int = HEALTH_FAILURES
    gateway_url: str | None = None  # the endpoint the snapshot names, in an Instance
    endpoint_problems: tuple[str, ...] = ()  # the endpoint's own, one sentence each (an extra port)
    memory_watch_s: float = WATCH_INTERVAL_S  # how often free memory is read while models are resident


class Supervisor:
    def __init__(self, preparer: LaunchPreparer, options: SupervisorOptions | None = None,
                 hooks: SupervisorHooks | None = None, *, routes: RouteTable | None = None,
                 incident_log: IncidentLog | None = None):
        paths = stoker_paths()
        if not isinstance(preparer, LaunchPreparer):  # a bare function would lose every hook quietly
            raise TypeError(f"{preparer!r} is not a LaunchPreparer; wrap a function in FunctionPreparer")
        opts = options or SupervisorOptions()
        self._preparer = preparer
        self._clock = clock = opts.clock
        self._log_dir = Path(opts.log_dir or paths.logs)
        self._run_dir = Path(opts.run_dir or paths.run)
        self._hooks = hooks or SupervisorHooks()
        self._gateway_url = opts.gateway_url
        self._endpoint_problems = opts.endpoint_problems
        self._queue: queue.Queue[cmd.Command | _Wake | _WorkerChanged] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.routes: RouteTable = routes or Routes(clock)  # the gateway process's mirror, in an Instance
        # Owned by the supervisor thread only:
        self._finished = False
        self._incidents = IncidentRecorder(incident_log or IncidentLog.in_data_dir(paths.data))
        self._prober = HealthProber(self._wake, interval_s=opts.health_interval_s, failures=opts.health_failures)
        self._memory = MemoryWatch(self._wake, interval_s=opts.memory_watch_s)
        self._workers = WorkerTray(lambda: self._queue.put(_WorkerChanged()),
                                   lambda: self._preparer.watching_workers(), clock)
        self._health = EngineHealth()
        # The two runners, one per reducer: the fleet's decisions reach an engine through
        # its runner, and the runner asks the fleet (late: it is made second) what it needs.
        self._runner = EngineRunner(
            EngineHost(self._publish, lambda e: self._fleet.phase_changed(e), self._refresh_health,
                       self._model_id, lambda key: self._fleet.held_by_others(key),
                       lambda key: self._fleet.unloading(key)),
            preparer, self.routes, self._prober, self._incidents, clock=clock, stop_grace_s=opts.stop_grace_s,
            log_dir=self._log_dir, run_dir=self._run_dir, on_launch=self._hooks.on_launch,
            name_model=self._hooks.name_model, wake=self._wake, keeper=opts.kv_keeper)
        self._fleet = FleetRunner(self._runner, self.routes, self._prober, self._incidents, policy=opts.policy,
                                  clock=clock, model_id=self._model_id, publish=self._publish)
        self._tick_s = _fixed_tick()
        self._seq = 0
        self._hub = SnapshotHub(AppSnapshot(seq=0, state=EngineState.STOPPED, gateway_url=opts.gateway_url,
                                            endpoint=opts.gateway_url))

    # ------------------------------------------------------------------ public API

    def start(self) -> Supervisor:
        if self._thread is not None:
            raise RuntimeError("the supervisor is already running")
        self._thread = threading.Thread(target=self._run, name="stoker-supervisor", daemon=True)
        self._thread.start()
        return self

    def submit(self, command: cmd.Command) -> None:
        """Queue a command; it is acted on by the supervisor thread, in order."""
        self._queue.put(command)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(snapshot)` for every new snapshot (on the supervisor thread; do not block).

        The latest snapshot is delivered at once. Returns a function that unsubscribes.
        """
        return self._hub.subscribe(callback)

    def snapshot(self) -> AppSnapshot:
        return self._hub.current

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (after Shutdown); True when it has."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_for(self, predicate: Callable[[AppSnapshot], bool], timeout: float) -> AppSnapshot | None:
        """Block until a snapshot satisfies `predicate` (checked on every publish), or time out."""
        return self._hub.wait_for(predicate, timeout)

    # ------------------------------------------------------------------ the thread

    def _wake(self) -> None:
        self._queue.put(_Wake())

    def _run(self) -> None:
        try:
            self._publish()
            while not self._finished:
                try:
                    item = self._queue.get(timeout=self._wait_time())
                except queue.Empty:
                    item = _Wake()
                if isinstance(item, _WorkerChanged):
                    self._publish()
                elif not isinstance(item, _Wake):
                    self._on_command(item)
                for engine in list(self._fleet.engines.values()):
                    self._runner.observe(engine)
                self._fleet.tick()
                self._watch_memory()
                self._watch_workers()
                self._runner.stop_closed()
                self.routes.settle()
                if self._fleet.state.shutting_down and all(e.state.finished for e in self._fleet.engines.values()):
                    self._finished = True
        except Exception:
            log.exception("the supervisor thread failed; stopping the engines")
            raise
        finally:
            self._close()

    def _close(self) -> None:
        for engine in self._fleet.engines.values():
            self._runner.close(engine)
        self._workers.close()
        self._fleet.refuse_waiters("Stoker is shutting down")
        self._prober.close()
        self._memory.close()

    def _wait_time(self) -> float:
        """Until the next thing due: a readiness poll, a health probe, a retry, a queued
        load's next decision, an idle expiry, a look for a dropped worker."""
        now = self._clock()
        due = [now + (self._tick_s or LONGEST_SLEEP_S)]
        for e in self._fleet.engines.values():
            engine_due = self._runner.next_due(e, now)
            if engine_due is not None:
                due.append(engine_due)
        state = self._fleet.state
        for deadline in (fleet.next_deadline(state), fleet.expiry_deadline(state, self._fleet.usage()),
                         self._workers.next_check(), self._memory.next_due(self._fleet.watched_memory()[0], now)):
            if deadline is not None:
                due.append(deadline)
        # The route table has no wake of its own: look at it while a decision waits on it.
        if (state.pending or any(m.unload_when_idle for m in state.members)
                or self._runner.stops_after_close):
            due.append(now + READY_POLL_S)
        return max(0.0, min(due) - now)

    def _key_for(self, model_path: str | None) -> str:
        return engine_key(self._preparer, model_path)

    def _key_or_focus(self, model_path: str | None) -> str | None:
        """The key a command means: its model's, else (None) the focused model's."""
        return self._key_for(model_path) if model_path is not None else self._fleet.state.focus

    def _target(self, model_path: str | None) -> EngineRecord | None:
        key = self._key_or_focus(model_path)
        return self._fleet.engines.get(key) if key is not None else None

    def _on_command(self, command: cmd.Command) -> None:
        if self._fleet.state.shutting_down and not isinstance(command, cmd.Shutdown):
            if isinstance(command, cmd.EnsureModel):
                call_answer(command.answer, EnsureResult(error="Stoker is shutting down"))
            return
        match command:
            case cmd.StartModel() | cmd.SwitchModel() | cmd.LoadModel():
                key = self._key_for(command.model_path)
                engine = self._fleet.engine(key)
                engine.after_failure = False  # a person's start ends any recovery
                engine.incident_blockers = ()
                pin = command.pin if isinstance(command, cmd.LoadModel) else None
                self._fleet.do(fleet.LoadAsked(key, self._model_id(key), pin=pin,
                                               switch=isinstance(command, cmd.SwitchModel)))
            case cmd.EnsureModel():
                self._fleet.ensure(command.ticket, self._key_for(command.model_path), command.answer)
            case cmd.CancelEnsure():
                self._fleet.cancel_ensure(command.ticket)
            case cmd.CancelRender():
                self._runner.cancel_work(self._fleet.engines.get(self._key_for(command.model_path)), command.reason)
            case cmd.PinModel():
                self._fleet.do(fleet.PinAsked(self._key_or_focus(command.model_path), command.pinned))
            case cmd.UnloadModel():
                self._fleet.do(fleet.UnloadAsked(self._key_or_focus(command.model_path)))
            case cmd.Stop():
                stop_key = self._key_for(command.model_path) if command.model_path else None
                self._fleet.do(fleet.StopAsked(stop_key))
            case cmd.Restart():
                self._restart(self._target(command.model_path), command.reason)
            case cmd.ApplyOverrides():
                self._apply_overrides(command)
            case cmd.KeepAlive():
                self._keep_alive(command)
            case cmd.WidenContext():
                self._widen_context(command)
            case cmd.RouteAnswered():
                pass  # the gateway process answered a close: the pass that follows decides anew
            case cmd.LiftQuarantine():
                # the quarantine ledger belongs to the preparer's engine choice
                self._preparer.lift_quarantine(command.build_id)
                self._refresh_health()
                self._publish()
            case cmd.UseWorkerAgain():
                self._use_worker_again(command.endpoint)
            case cmd.ShareWorker():
                self._workers.share(command)
            case cmd.StartWorker():
                self._workers.start_again()
            case cmd.StopWorker():
                if self._workers.stop():
                    self._publish()
            case cmd.Shutdown():
                self._workers.stop()
                self._fleet.do(fleet.ShutdownAsked())
            case _:
                assert_never(command)

    def _restart(self, engine: EngineRecord | None, reason: str) -> None:
        if engine is None:
            return
        engine.after_failure = False
        engine.incident_blockers = ()
        if engine.phase is EngineState.STOPPED and engine.key in self._fleet.state.pending:
            return
        self.routes.close(engine.key)
        self._runner.feed(engine, life.RestartRequested(reason))

    def _apply_overrides(self, command: cmd.ApplyOverrides) -> None:
        key = self._key_for(command.model_path)
        self._runner.overrides[key] = command.overrides
        engine = self._fleet.engines.get(key)
        if engine is not None:  # the user's own context now, not one a request asked for
            engine.ctx_at_least = engine.context_asked = None
        if self._hooks.on_overrides is not None:  # aliases name (or stop naming) the model at once
            self._hooks.on_overrides(key)
        if engine is not None and engine.launch is not None:
            idle = self._preparer.idle_timeout_for(command.overrides, engine.launch.idle_timeout_s)
            if idle != engine.launch.idle_timeout_s:
                engine.launch = replace(engine.launch, idle_timeout_s=idle)
                self._fleet.phase_changed(engine)
                self._publish()
        if command.restart and engine is not None and engine.phase in (
                EngineState.STARTING, EngineState.READY, EngineState.BACKOFF):
            self._restart(engine, "new settings for this model")

    def _keep_alive(self, command: cmd.KeepAlive) -> None:
        """A request's keep_alive / ttl: the model's idle time from now on."""
        engine = self._fleet.engines.get(self._key_for(command.model_path))
        if engine is not None and engine.launch is not None:
            engine.launch = replace(engine.launch, idle_timeout_s=command.idle_timeout_s)
            self._fleet.phase_changed(engine)
            self._publish()

    def _widen_context(self, command: cmd.WidenContext) -> None:
        """Plan the model again with the context a request asked for: reload when that plan
        gives it, else keep the running plan; `context_asked` says which, in words."""
        engine = self._fleet.engines.get(self._key_for(command.model_path))
        if engine is None:
            return
        want = command.ctx_per_slot
        if engine.launch is None or engine.phase is not EngineState.READY:
            # Stopped or restarting meanwhile: the asking request runs on whatever comes up.
            engine.context_asked = (want, "the model was not running, so its context was not changed")
            self._publish()
            return
        now_ctx = ctx_per_slot(engine.launch)
        if now_ctx is not None and now_ctx >= want:
            engine.context_asked = (want, f"the plan already gives {now_ctx:,} tokens per slot")
        elif not isinstance(engine.launch.plan, LaunchPlan):
            fixed = launch_facts(engine.launch).get("ctx") or 0
            engine.context_asked = (want, f"this engine's context is fixed at {fixed:,} tokens; it was not changed")
        else:
            before, engine.ctx_at_least = engine.ctx_at_least, want
            trial = self._runner.prepare(engine, attempt=0)
            got = ctx_per_slot(trial) if isinstance(trial, PreparedLaunch) else None
            if got is not None and now_ctx is not None and got > now_ctx:
                engine.context_asked = (want, f"re-planned for {got:,} tokens per slot and reloaded")
                engine.prepared = None
                self._restart(engine, f"a request asked for {want:,} tokens of context")
            else:
                engine.ctx_at_least = before  # a context asked earlier, and given, stays
                why = trial.reason if isinstance(trial, PreparationRefused) else "it does not fit"
                engine.context_asked = (want, f"clamped to {now_ctx or 0:,} tokens per slot: a plan with "
                                              f"{want:,} does not fit ({why.rstrip('.')})")
        self._publish()

    def _model_id(self, key: str) -> str:
        return model_id_of(self._hooks.name_model, key)

    def _use_worker_again(self, endpoint: str) -> None:
        """A person chose "Use HOST:PORT again": the preparer lets the worker back in and
        names the models planned without it; those that are resident restart (a person's
        restart: planned afresh with every worker that answers)."""
        keys: tuple[str, ...] = ()
        try:
            keys = tuple(self._preparer.readmit_worker(endpoint))
        except Exception:
            log.exception("the preparer's readmit_worker failed")
        for path in keys:
            engine = self._fleet.engines.get(self._key_for(path))  # the preparer's path, resolved as keys are
            if engine is None or engine.phase not in (EngineState.STARTING, EngineState.READY,
                                                      EngineState.BACKOFF):
                continue  # not resident: its next start plans with the worker anyway
            self._restart(engine, f"the RPC worker {endpoint} is back")
        self._refresh_health()
        self._publish()

    def _watch_memory(self) -> None:
        """While models are resident, hand the fleet each reading of the free memory: it
        unloads idle models when other applications leave less than the reserve."""
        watching, gpu_binary = self._fleet.watched_memory()
        reading = self._memory.poll(watching, gpu_binary, self._clock())
        if reading is not None and watching and not self._fleet.state.shutting_down:
            self._fleet.do(fleet.MemoryRead(reading, self._fleet.usage()))

    def _watch_workers(self) -> None:
        """While the preparer has dropped an RPC worker, refresh the health (which says when
        it is back) every WORKER_CHECK_S and publish when that changed."""
        if not self._workers.check_due(self._clock()):
            return
        before = self._health
        self._refresh_health()
        if self._health != before:
            self._publish()

    def _refresh_health(self) -> None:
        try:
            self._health = self._preparer.engine_health()
        except Exception:
            log.exception("the preparer's engine_health failed")

    # ------------------------------------------------------------------ snapshots

    def _publish(self) -> None:
        self._seq += 1
        focus_key = self._fleet.state.focus
        focus = self._fleet.engines.get(focus_key) if focus_key is not None else None
        engine_blockers = (focus.incident_blockers + focus.ready_blockers) if focus else ()
        blockers = merged_blockers(self._health.blockers, engine_blockers)
        views = tuple(self._engine_view(e) for e in self._fleet.engines.values()
                      if e.phase is not EngineState.STOPPED or e.key in self._fleet.state.pending)
        incidents = self._incidents.latest
        if focus is not None:
            snap = build_snapshot(self._seq, focus.state, focus.launch, incidents, focus.proc,
                                  blockers=blockers, quarantined=self._health.quarantined,
                                  drafter_note=focus.drafter_note)
        else:
            snap = AppSnapshot(seq=self._seq, state=EngineState.STOPPED, incidents=incidents,
                               blockers=blockers, quarantined=self._health.quarantined)
        snap = replace(snap, engines=views, gateway_url=self._gateway_url,
                       problems=self._health.problems + self._endpoint_problems,
                       model_id=self._model_id(focus.key) if focus is not None and focus.key else None,
                       workers_back=self._health.workers_back, worker=self._workers.view(),
                       yielded=self._fleet.yielded)
        if self._gateway_url:
            snap = replace(snap, endpoint=self._gateway_url)
        self._hub.publish(snap)

    def _engine_view(self, e: EngineRecord) -> EngineView:
        member = self._fleet.state.member(e.key)
        if member is None:
            return self._runner.view(e, pinned=False, queued=None)
        return self._runner.view(e, pinned=member.pinned, queued=member.queued)


def record_load_time(launch: PreparedLaunch, seconds: float) -> float | None:
    """Keep this load's spawn → READY time for the model and build (stoker/engines/load_times.py);
    what eviction prices its reload at from now on (None: not identifiable). A data folder
    that cannot be written costs the memory of it, never the launch."""
    try:
        return record_load(launch.model_path, launch.spec.binary, seconds)
    except OSError as exc:
        log.warning("could not save the measured load time: %s", storage_sentence(exc))
        return None


def model_id_of(name_model: Callable[[str], str | None] | None, key: str) -> str:
    """A model's gateway id (the catalog's, when the supervisor has one), else its file's stem."""
    if name_model is not None and key:
        try:
            ident = name_model(key)
        except Exception:
            ident = None
        if ident:
            return ident
    return Path(key).name.removesuffix(".gguf") if key else "model"


def engine_key(preparer: LaunchPreparer, model_path: str | None) -> str:
    """The engine key for a model: its real path (the preparer resolves "last used")."""
    path = model_path
    try:
        chosen = preparer.choose_model(model_path)
        path = str(chosen) if chosen is not None else model_path
    except Exception:
        path = model_path
    if path and os.path.exists(path):
        return os.path.realpath(path)
    return path or ""


def hand_made_preparer(spec_for: Callable[[str | None, int], LaunchSpec], *,
                       backend: str | None = None, build_id: str | None = None,
                       startup_deadline_s: float = 180.0,
                       secrets: Mapping[str, str] | None = None) -> LaunchPreparer:
    """A preparer from a function (model, port) -> LaunchSpec: for tests and bare launches."""

    def prepare(model_path: str | None, attempt: AttemptContext) -> PreparedLaunch:
        spec = spec_for(model_path, attempt.port)
        model = argv_value(spec.argv, "-m", "--model") or model_path or ""
        return PreparedLaunch(spec=spec, model_path=model, backend=backend, build_id=build_id,
                              secrets=tuple((secrets or {}).items()),
                              startup_deadline_s=startup_deadline_s)

    return FunctionPreparer(prepare)


def argv_line(argv: tuple[str, ...]) -> str:
    return shlex.join(argv)
