"""The one thread that owns engine state: it takes commands, runs the engines, publishes snapshots.

UI, CLI, the control channel and the gateway call `submit(command)` and `subscribe(callback)`;
only the supervisor thread starts, watches and stops engine processes. It holds one
lifecycle per resident model (`_Engine`), each driven by the pure reducer in
stoker/fleet/lifecycle.py: this module feeds it events (a command arrived, /health said 200, the
process exited, a retry is due) and carries out the effects it asks for. Which models may
be resident together is decided by stoker/fleet/residency.py from the plans' bytes: a load that
does not fit unloads idle models (least recently used first) or waits, FIFO, for busy ones;
idle models are unloaded after their idle timeout. What to launch is decided by ONE
injected collaborator, the `LaunchPreparer` (stoker/fleet/launcher.py has the real one: plan +
argv + engine build), so tests can hand it a LaunchSpec built by hand.

The gateway reaches a READY engine without a round trip through this thread: `routes`
(stoker/fleet/routes.py, a small lock-protected table; in an Instance the gateway process holds
the leases and this side is its RemoteRoutes mirror) hands out leases on READY engines,
counts the requests in flight and when each model was last used; an engine is only ever
stopped for room or for idleness after its route is closed with nothing in flight
(`close_if_idle`), so a request can never be routed to an engine that is being stopped for it. `EnsureModel` asks for a
model to be made resident and is answered through its callback once it is READY (a
route) or cannot be (a sentence); when every waiter for an on-demand load has gone, the
load is cancelled unless the model is pinned.

Failure and memory truth go through the same preparer, by optional hooks a hand-made
preparer need not have: `after_exit(launch, incident, exit)` hears every diagnosed exit
(strikes, quarantine, broken drafters, the OOM recovery ladder live in the preparer, which
owns the engine choice and the plan) and answers with an `ExitDecision`; `after_ready(launch,
log_lines)` gets the engine's start-up log (measured memory lines); `engine_health()` gives
the blockers and quarantined builds for the snapshot; `lift_quarantine(build_id)`;
`choose_model(name)` turns "the last used model" into a path.
Incidents go to ONE ledger, `<data>/incidents.jsonl` (stoker/diagnosis/incidents.py), and the latest of
them are in every snapshot, also after Stoker restarts.

RPC workers: the preparer's `workers_back` (in EngineHealth) says which dropped workers are
reachable again, and `readmit_worker(endpoint)` (for UseWorkerAgain) lets one back in and
names the models planned without it, which are then restarted. This machine's own worker
(ShareWorker / StopWorker) is a shell/rpc_worker.SharedWorker on a thread of its own; its
view is part of every snapshot, and its changes wake this thread to publish.

Subscribers are called ON THE SUPERVISOR THREAD for every snapshot: they must not block
(the Qt bridge re-emits through a queued signal; the CLI prints a line; the gateway hands
it to its own loop). A subscriber that raises is logged and kept.
"""

from __future__ import annotations

import logging
import os
import queue
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import httpx

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths, storage_sentence
from stoker.diagnosis import classify as diagnosis
from stoker.diagnosis.blockers import blocker_from_incident, gpu_unused_blocker
from stoker.diagnosis.classify import Incident, drafter_dropped_from_log, gpu_unused_from_log
from stoker.diagnosis.incidents import IncidentLog
from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.engines.drivers import driver_for
from stoker.engines.ds4_launch import Ds4Plan, ds4_summary_line
from stoker.engines.engine_exit import EngineExit
from stoker.engines.health import probe_health
from stoker.engines.kind import describe
from stoker.engines.launch import AttemptContext, PreparationRefused, PreparedLaunch
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.process import EngineProcess, free_loopback_port, host_os
from stoker.engines.sd_server import ImagePlan
from stoker.fleet import commands as cmd
from stoker.fleet.commands import EnsureResult, Route
from stoker.fleet.lifecycle import (
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
from stoker.fleet.residency import AdmissionKind, Resident, admit, expired, next_expiry
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.routes import Routes
from stoker.fleet.rpc_worker import SharedWorker
from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView
from stoker.planning.plan import plan_summary_line

log = logging.getLogger(__name__)

MAX_INCIDENTS = 5  # the latest incidents every snapshot carries (oldest first, newest last)
STARTING_POLL_S = 0.02  # /health poll while starting: it adds directly to time-to-READY
READY_POLL_S = 0.1  # how quickly a crash of a running engine is noticed
IDLE_POLL_S = 0.5
# A READY engine is asked /health this often (off this thread), and again 1 s after a probe
# that got no answer; this many failures in a row mean it hangs. llama-server answers /health
# from its HTTP thread in milliseconds even while it generates, so 1 s without an answer is
# already unusual: a hung engine is noticed within about 7 s of its last answer.
HEALTH_INTERVAL_S = 2.0
HEALTH_RETRY_S = 1.0
HEALTH_FAILURES = 3
HEALTH_TIMEOUT_S = 1.0
# A hung engine (no /health answer, or no READY in time) does not get the polite grace: it
# cannot act on SIGTERM anyway, and every second it holds is a second the model is away.
HUNG_GRACE_S = 1.0
ADMIT_RETRY_S = 1.0  # a load waiting for room is decided again at least this often
WORKER_CHECK_S = 5.0  # a dropped RPC worker is looked for this often (the preparer's hook)
PROGRESS_PUBLISH_S = 0.25  # a working ds4 / sd-server's progress line is published at most this often


@dataclass(frozen=True)
class ExitDecision:
    """What the preparer made of a failed attempt (its `after_exit` hook)."""

    action: str | None = None  # what Stoker did about it, e.g. "retrying with context 16,384: …"
    # True: the next attempt differs or counts toward quarantine, so retry even a failure
    # that would repeat as it is; False: trying again cannot help; None: the restart policy.
    retry: bool | None = None


@dataclass(frozen=True)
class EngineHealth:
    """Facts about the engine builds for the snapshot (the preparer's `engine_health`)."""

    blockers: tuple[BlockerView, ...] = ()
    quarantined: tuple[tuple[str, str], ...] = ()  # (build id, why)
    problems: tuple[str, ...] = ()  # settings files moved aside, bad hand-written values
    workers_back: tuple[str, ...] = ()  # dropped RPC workers (HOST:PORT) reachable again


@dataclass(frozen=True)
class _WorkerChanged:
    """Internal: this machine's RPC worker changed (queued from its thread, so only this
    thread publishes)."""


class LaunchPreparer(Protocol):
    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused: ...


Subscriber = Callable[[AppSnapshot], None]


# ---------------------------------------------------------------------- one model's engine


class _Engine:
    """One model's lifecycle, process and facts; touched only by the supervisor thread."""

    def __init__(self, key: str, policy: RestartPolicy) -> None:
        self.key = key
        self.state = LifecycleState(policy=policy, model_path=key or None)
        self.proc: EngineProcess | None = None
        self.launch: PreparedLaunch | None = None
        self.prepared: PreparedLaunch | PreparationRefused | None = None  # admitted, not spawned
        self.events: list = []
        self.next_health_at: float | None = None
        self.silent_since: float | None = None
        self.failed_probes = 0
        self.probe: Future | None = None
        self.stopper: threading.Thread | None = None  # a stop in progress, off this thread
        self.diagnosed: tuple[EngineExit, object, ExitDecision] | None = None
        self.last_exit: EngineExit | None = None
        self.incident_blockers: tuple[BlockerView, ...] = ()  # until a person starts again
        self.ready_blockers: tuple[BlockerView, ...] = ()  # about the build running now
        self.drafter_note: tuple[str, str] | None = None  # the engine dropped the drafter
        self.after_failure = False
        self.pinned = False
        self.on_demand = False  # loaded for waiting requests: cancelled when they all leave
        self.unload_when_idle = False  # asked to unload: stop once nothing is in flight
        self.queued_reason: str | None = None  # waiting for room, and why
        self.cancelling = False  # stopped to cancel its work: a short grace, no incident
        self.progress: str | None = None  # what a working ds4 / sd-server says it is doing
        self.progress_at = 0.0

    @property
    def phase(self) -> EngineState:
        return self.state.phase

    @property
    def resident(self) -> bool:
        """Holds (or is about to hold) memory: counted against the budget."""
        return self.phase in (EngineState.STARTING, EngineState.READY, EngineState.STOPPING,
                              EngineState.BACKOFF)

    def bytes_by_device(self) -> tuple[tuple[str, int], ...]:
        plan = self.launch.plan if self.launch is not None else None
        if plan is None:
            return ()
        return tuple((d.name, d.total_bytes) for d in plan.devices)


class Supervisor:
    def __init__(self, preparer: LaunchPreparer, *, clock: Callable[[], float] = time.time,
                 policy: RestartPolicy | None = None, stop_grace_s: float = 10.0,
                 log_dir: Path | None = None, run_dir: Path | None = None,
                 on_launch: Callable[[PreparedLaunch], None] | None = None,
                 health_interval_s: float = HEALTH_INTERVAL_S,
                 health_failures: int = HEALTH_FAILURES,
                 incident_log: IncidentLog | None = None,
                 gateway_url: str | None = None,
                 name_model: Callable[[str], str | None] | None = None,
                 routes: Routes | None = None,
                 on_overrides: Callable[[str], None] | None = None):

        paths = stoker_paths()
        self._preparer = preparer
        self._clock = clock
        self._policy = policy or RestartPolicy()
        self._stop_grace_s = stop_grace_s
        self._log_dir = Path(log_dir or paths.logs)
        self._run_dir = Path(run_dir or paths.run)
        self._on_launch = on_launch
        self._health_interval_s = health_interval_s
        self._health_failures = health_failures
        self._gateway_url = gateway_url
        self._name_model = name_model
        self._on_overrides = on_overrides  # told (on this thread; must not block) of new overrides
        self._queue: queue.Queue = queue.Queue()
        self._subscribers: list[Subscriber] = []
        self._sub_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.routes = routes or Routes(clock)  # the gateway process's mirror, in an Instance
        # Owned by the supervisor thread only:
        self._engines: dict[str, _Engine] = {}
        self._focus: str | None = None  # the model the top-level snapshot fields describe
        self._pending: list[str] = []  # loads waiting for admission, FIFO
        self._next_admit_at = 0.0
        self._waiters: dict[object, tuple[str, Callable[[EnsureResult], None]]] = {}
        self._shutting_down = False
        self._finished = False
        self._incident_log = incident_log or IncidentLog.in_data_dir(paths.data)
        try:  # what happened before this Stoker started stays visible
            self._incidents = tuple(reversed(self._incident_log.latest(MAX_INCIDENTS)))
        except OSError:
            self._incidents = ()
        self._health = EngineHealth()
        self._next_worker_check = 0.0
        self._shared_worker = None  # shell.rpc_worker.SharedWorker, made by the first ShareWorker
        self._overrides: dict[str, ModelOverrides] = {}
        self._http: httpx.Client | None = None
        self._probes = ThreadPoolExecutor(max_workers=4, thread_name_prefix="stoker-health")
        # Shared, replaced atomically:
        self._seq = 0
        self._snapshot = AppSnapshot(seq=0, state=EngineState.STOPPED, gateway_url=gateway_url,
                                     endpoint=gateway_url)

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
        with self._sub_lock:
            self._subscribers.append(callback)
            current = self._snapshot
        if current.seq:
            self._deliver(callback, current)

        def unsubscribe() -> None:
            with self._sub_lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def snapshot(self) -> AppSnapshot:
        return self._snapshot

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (after Shutdown); True when it has."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def wait_for(self, predicate: Callable[[AppSnapshot], bool], timeout: float) -> AppSnapshot | None:
        """Block until a snapshot satisfies `predicate` (checked on every publish), or time out."""
        hit = threading.Event()
        found: list[AppSnapshot] = []

        def check(snap: AppSnapshot) -> None:
            if not hit.is_set() and predicate(snap):
                found.append(snap)
                hit.set()

        unsubscribe = self.subscribe(check)
        try:
            check(self._snapshot)
            hit.wait(timeout)
        finally:
            unsubscribe()
        return found[0] if found else None

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        try:
            self._publish()
            while not self._finished:
                try:
                    command = self._queue.get(timeout=self._wait_time())
                except queue.Empty:
                    command = None
                if command is not None:
                    self._on_command(command)
                for engine in list(self._engines.values()):
                    self._observe(engine)
                self._admit_pending()
                self._unload_idle()
                self._answer_waiters()
                self._drop_stopped()
                self._watch_workers()
                if self._shutting_down and all(e.state.finished for e in self._engines.values()):
                    self._finished = True
        except Exception:
            log.exception("the supervisor thread failed; stopping the engines")
            raise
        finally:
            for engine in self._engines.values():
                if engine.stopper is not None:
                    engine.stopper.join(self._stop_grace_s + 15)
                if engine.proc is not None:
                    engine.proc.stop(grace_s=self._stop_grace_s)
                    engine.proc = None
                self.routes.forget(engine.key)
            if self._shared_worker is not None:
                self._shared_worker.stop()
                self._shared_worker.join(15)
            for _, answer in list(self._waiters.values()):
                self._call(answer, EnsureResult(error="Stoker is shutting down"))
            self._waiters.clear()
            self._probes.shutdown(wait=False, cancel_futures=True)
            if self._http is not None:
                self._http.close()

    def _wait_time(self) -> float:
        wait = IDLE_POLL_S
        now = self._clock()
        for e in self._engines.values():
            if e.phase is EngineState.STARTING:
                wait = min(wait, STARTING_POLL_S)
            elif e.phase in (EngineState.READY, EngineState.STOPPING):
                wait = min(wait, READY_POLL_S)
            elif e.phase is EngineState.BACKOFF and e.state.retry_at is not None:
                wait = min(wait, max(0.0, e.state.retry_at - now))
        if self._pending or self.routes.changed.is_set():
            wait = min(wait, READY_POLL_S)
        expiry = next_expiry([r for r in self._residents(exclude=None) if not r.busy])
        if expiry is not None:  # wake for the next idle unload, not only at the next poll
            wait = min(wait, max(0.0, expiry - now))
        return wait

    def _engine(self, key: str) -> _Engine:
        engine = self._engines.get(key)
        if engine is None:
            engine = self._engines[key] = _Engine(key, self._policy)
        return engine

    def _key_for(self, model_path: str | None) -> str:
        """The engine key for a model: its real path (the preparer resolves "last used")."""
        choose = getattr(self._preparer, "choose_model", None)
        path = model_path
        if choose is not None:
            try:
                path = str(choose(model_path))
            except Exception:
                path = model_path
        if path and os.path.exists(path):
            return os.path.realpath(path)
        return path or ""

    def _target(self, model_path: str | None) -> _Engine | None:
        """The engine a command without a model means: the focused one."""
        if model_path is not None:
            return self._engines.get(self._key_for(model_path))
        return self._engines.get(self._focus) if self._focus is not None else None

    def _on_command(self, command) -> None:
        if self._shutting_down and not isinstance(command, cmd.Shutdown):
            if isinstance(command, cmd.EnsureModel):
                self._call(command.answer, EnsureResult(error="Stoker is shutting down"))
            return
        if isinstance(command, (cmd.StartModel, cmd.SwitchModel, cmd.LoadModel)):
            key = self._key_for(command.model_path)
            self._focus = key
            if isinstance(command, cmd.SwitchModel):
                for other in self._engines.values():
                    if other.key != key:
                        self._unload(other)
            engine = self._engine(key)
            engine.after_failure = False
            engine.incident_blockers = ()
            engine.on_demand = False
            if isinstance(command, cmd.LoadModel) and command.pin is not None:
                engine.pinned = command.pin
            self._request_load(engine)
        elif isinstance(command, cmd.EnsureModel):
            key = self._key_for(command.model_path)
            engine = self._engine(key)
            self._waiters[command.ticket] = (key, command.answer)
            if engine.phase in (EngineState.STOPPED, EngineState.FAILED) and key not in self._pending:
                if engine.phase is EngineState.FAILED and engine.state.last_error:
                    return  # answered with its sentence by _answer_waiters
                engine.on_demand = True
                self._request_load(engine)
        elif isinstance(command, cmd.CancelEnsure):
            self._cancel_waiter(command.ticket)
        elif isinstance(command, cmd.CancelRender):
            self._cancel_work(self._engines.get(self._key_for(command.model_path)), command.reason)
        elif isinstance(command, cmd.PinModel):
            engine = self._target(command.model_path)
            if engine is not None:
                engine.pinned = command.pinned
                self._publish()
        elif isinstance(command, cmd.UnloadModel):
            engine = self._target(command.model_path)
            if engine is not None:
                self._unload(engine)
        elif isinstance(command, cmd.Stop):
            engines = [self._target(command.model_path)] if command.model_path else \
                list(self._engines.values())
            for engine in engines:
                if engine is not None:
                    self._remove_pending(engine)
                    self._stop(engine)
        elif isinstance(command, cmd.Restart):
            engine = self._target(command.model_path)
            if engine is not None:
                engine.after_failure = False
                engine.incident_blockers = ()
                if engine.phase in (EngineState.STOPPED,) and engine.key in self._pending:
                    return
                self.routes.close(engine.key)
                self._feed(engine, RestartRequested(command.reason))
        elif isinstance(command, cmd.ApplyOverrides):
            key = self._key_for(command.model_path)
            self._overrides[key] = command.overrides
            engine = self._engines.get(key)
            if self._on_overrides is not None:  # aliases name (or stop naming) the model at once
                self._on_overrides(key)
            idle_for = getattr(self._preparer, "idle_timeout_for", None)
            if idle_for is not None and engine is not None and engine.launch is not None:
                engine.launch = replace(engine.launch, idle_timeout_s=idle_for(command.overrides))
                self._publish()
            if command.restart and engine is not None and engine.phase in (
                    EngineState.STARTING, EngineState.READY, EngineState.BACKOFF):
                engine.after_failure = False
                engine.incident_blockers = ()
                self.routes.close(engine.key)
                self._feed(engine, RestartRequested("new settings for this model"))
        elif isinstance(command, cmd.LiftQuarantine):
            lift = getattr(self._preparer, "lift_quarantine", None)
            if lift is not None:  # the quarantine ledger belongs to the preparer's engine choice
                lift(command.build_id)
            self._refresh_health()
            self._publish()
        elif isinstance(command, cmd.UseWorkerAgain):
            self._use_worker_again(command.endpoint)
        elif isinstance(command, cmd.ShareWorker):
            if self._shared_worker is None:

                self._shared_worker = SharedWorker(lambda: self._queue.put(_WorkerChanged()),
                                                   clock=self._clock)
            self._shared_worker.start(command.host, command.port, command.cache,
                                      allow_remote=command.allow_remote)
        elif isinstance(command, cmd.StartWorker):
            if self._shared_worker is not None:
                self._shared_worker.start_again()
        elif isinstance(command, cmd.StopWorker):
            if self._shared_worker is not None:
                self._shared_worker.stop()
                self._publish()
        elif isinstance(command, _WorkerChanged):
            self._publish()
        elif isinstance(command, cmd.Shutdown):
            self._shutting_down = True
            self._pending.clear()
            if self._shared_worker is not None:
                self._shared_worker.stop()
            for engine in list(self._engines.values()):
                self.routes.close(engine.key)
                self._feed(engine, ShutdownRequested())
            self._publish()
        else:
            log.warning("ignoring unknown command %r", command)

    # ------------------------------------------------------------------ residency

    def _request_load(self, engine: _Engine) -> None:
        """Make this model resident: at once when it fits, else when room is made."""
        engine.unload_when_idle = False
        if engine.phase in (EngineState.STARTING, EngineState.READY, EngineState.BACKOFF):
            return
        if engine.phase is EngineState.STOPPING:
            # Started again once the old process is gone (the reducer remembers it).
            self._feed(engine, StartRequested(engine.key or None))
            return
        if engine.key not in self._pending:
            self._pending.append(engine.key)
        self._next_admit_at = 0.0
        self._admit_pending()

    def _remove_pending(self, engine: _Engine) -> None:
        if engine.key in self._pending:
            self._pending.remove(engine.key)
            engine.queued_reason = None
            engine.prepared = None

    def _held_by_others(self, key: str) -> tuple[tuple[str, int], ...]:
        held: dict[str, int] = {}
        for e in self._engines.values():
            if e.key != key and e.resident:
                for dev, b in e.bytes_by_device():
                    held[dev] = held.get(dev, 0) + b
        return tuple(held.items())

    def _residents(self, exclude: str | None) -> list[Resident]:
        out = []
        for e in self._engines.values():
            if (exclude is not None and e.key == exclude) or not e.resident:
                continue
            in_flight, last_used = self.routes.usage(e.key)
            busy = in_flight > 0 or e.phase is not EngineState.READY
            out.append(Resident(key=e.key, model_id=self._model_id(e.key), busy=busy,
                                bytes_by_device=e.bytes_by_device(), pinned=e.pinned,
                                last_used_at=last_used,
                                idle_timeout_s=e.launch.idle_timeout_s if e.launch else None))
        return out

    def _admit_pending(self) -> None:
        """Decide the first waiting load (FIFO): load it, make room for it, or keep waiting."""
        now = self._clock()
        changed = self.routes.changed.is_set()
        if not self._pending or (now < self._next_admit_at and not changed):
            return
        self.routes.changed.clear()
        key = self._pending[0]
        engine = self._engine(key)
        if any(e.phase is EngineState.STOPPING for e in self._engines.values() if e.key != key):
            self._next_admit_at = now + READY_POLL_S  # room is being made: decide once it is
            return
        prepared = self._prepare(engine, attempt=0)
        engine.prepared = prepared
        if isinstance(prepared, PreparedLaunch) and prepared.plan is not None:
            need = {d.name: d.total_bytes for d in prepared.plan.devices}
            budget = {d.name: d.budget_bytes for d in prepared.plan.devices}
            decision = admit(self._model_id(key), need, budget, self._residents(exclude=key))
            if decision.kind is AdmissionKind.REFUSE:
                engine.prepared = PreparationRefused(key, decision.reason)
            elif decision.kind is not AdmissionKind.FITS:
                if decision.kind is AdmissionKind.EVICT:
                    for victim_key in decision.evict:
                        victim = self._engines.get(victim_key)
                        if victim is not None and self.routes.close_if_idle(victim_key):
                            log.info("%s", decision.reason)
                            self._stop(victim)
                if engine.queued_reason != decision.reason:
                    engine.queued_reason = decision.reason
                    self._publish()
                engine.prepared = None
                self._next_admit_at = now + ADMIT_RETRY_S
                return
        self._pending.pop(0)
        engine.queued_reason = None
        self._feed(engine, StartRequested(key or None))
        if self._pending:
            self._next_admit_at = 0.0

    def _unload_idle(self) -> None:
        now = self._clock()
        for e in list(self._engines.values()):
            if e.unload_when_idle and e.phase is EngineState.READY and self.routes.close_if_idle(e.key):
                e.unload_when_idle = False
                self._stop(e)
        residents = [r for r in self._residents(exclude=None) if not r.busy]
        for key in expired(residents, now):
            engine = self._engines.get(key)
            if engine is not None and engine.phase is EngineState.READY and self.routes.close_if_idle(key):
                log.info("unloading %s: idle for its timeout", self._model_id(key))
                self._stop(engine)

    def _unload(self, engine: _Engine) -> None:
        """A person asked: stop taking requests for it and stop it once none is in flight."""
        self._remove_pending(engine)
        self.routes.close(engine.key)
        if engine.phase is EngineState.READY:
            engine.unload_when_idle = True
            self._unload_idle()
        elif engine.phase in (EngineState.STARTING, EngineState.BACKOFF, EngineState.FAILED):
            self._stop(engine)

    def _stop(self, engine: _Engine) -> None:
        self.routes.close(engine.key)
        self._feed(engine, StopRequested())

    def _cancel_waiter(self, ticket) -> None:
        entry = self._waiters.pop(ticket, None)
        if entry is None:
            return
        key = entry[0]
        if any(k == key for k, _ in self._waiters.values()):
            return
        engine = self._engines.get(key)
        if engine is None or engine.pinned or not engine.on_demand:
            return
        if key in self._pending:
            log.info("every request waiting for %s has gone; its load is cancelled", self._model_id(key))
            self._remove_pending(engine)
            self._publish()
        elif engine.phase is EngineState.STARTING:
            log.info("every request waiting for %s has gone; its load is cancelled", self._model_id(key))
            self._stop(engine)

    def _cancel_work(self, engine: _Engine | None, reason: str) -> None:
        """An engine that cannot cancel a request it started (stoker/engines/kind.py) is stopped,
        at once and as an expected exit; the next request starts it again. One that can
        cancel is left alone: closing the request's connection already cancels it there."""
        if engine is None or engine.launch is None or engine.phase not in (EngineState.READY,
                                                                            EngineState.STARTING):
            return
        if describe(engine.launch.kind).cancellable_in_engine:
            return
        log.info("stopping %s: %s (it cannot cancel a request it has started)", self._model_id(engine.key),
                 reason)
        engine.cancelling = True
        self._stop(engine)

    def _answer_waiters(self) -> None:
        for ticket, (key, answer) in list(self._waiters.items()):
            engine = self._engines.get(key)
            route = self.routes.route(key)
            if route is not None:
                result = EnsureResult(route=route)
            elif engine is not None and engine.phase is EngineState.FAILED:
                result = EnsureResult(error=self._failure_sentence(engine))
            elif engine is not None and engine.phase is EngineState.STOPPED \
                    and key not in self._pending and not self._shutting_down:
                engine.on_demand = True  # unloaded meanwhile (idle, or for room): load it again
                self._request_load(engine)
                continue
            else:
                continue
            del self._waiters[ticket]
            self._call(answer, result)

    def _failure_sentence(self, engine: _Engine) -> str:
        for inc in reversed(self._incidents):
            if inc.model_path == engine.key or inc.model_path is None:
                return f"{inc.summary}: {inc.advice}" if inc.advice else inc.summary
        return engine.state.last_error or "the model could not be loaded"

    @staticmethod
    def _call(answer: Callable[[EnsureResult], None], result: EnsureResult) -> None:
        try:
            answer(result)
        except Exception:
            log.exception("an EnsureModel callback failed")

    def _drop_stopped(self) -> None:
        """Forget engines that are gone and not asked for. The focused one stays (the tray
        shows the last model) unless another one runs, which then takes the focus."""
        if self._shutting_down:
            return
        rank = {EngineState.READY: 0, EngineState.STARTING: 1, EngineState.BACKOFF: 2,
                EngineState.STOPPING: 3, EngineState.FAILED: 4}
        alive = sorted((e for e in self._engines.values() if e.phase is not EngineState.STOPPED),
                       key=lambda e: rank[e.phase])
        focus = self._engines.get(self._focus) if self._focus is not None else None
        if alive and (focus is None or focus.phase is EngineState.STOPPED) \
                and (focus is None or focus.key not in self._pending):
            self._focus = alive[0].key  # the one that serves, when one does
            self._publish()
        waited = {k for k, _ in self._waiters.values()}
        gone = [k for k, e in self._engines.items() if e.phase is EngineState.STOPPED
                and k != self._focus and k not in self._pending and k not in waited
                and e.stopper is None]
        for key in gone:
            del self._engines[key]
            self.routes.forget(key)
        if gone:
            self._publish()

    def _model_id(self, key: str) -> str:
        if self._name_model is not None and key:
            try:
                ident = self._name_model(key)
            except Exception:
                ident = None
            if ident:
                return ident
        return Path(key).name.removesuffix(".gguf") if key else "model"

    # ------------------------------------------------------------------ observing

    def _observe(self, e: _Engine) -> None:
        """Turn what the process and /health say now into events."""
        st, proc, now = e.state, e.proc, self._clock()
        if e.stopper is not None:
            if not e.stopper.is_alive():
                e.stopper = None
                self._feed(e, StoppedClean())
            return
        if proc is not None and st.phase in (EngineState.STARTING, EngineState.READY):
            if proc.poll() is not None:
                self.routes.close(e.key)
                e.proc = None
                e.next_health_at, e.probe = None, None
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
                self._refresh_health()
                e.after_failure = not report.signalled_by_us
                self._feed(e, Exited(report))
                return
        if proc is not None and e.launch is not None:
            self._follow_progress(e, proc, now)
        if st.phase is EngineState.STARTING and proc is not None and e.launch is not None:
            if self._http is None:
                # Made after the first spawn (it costs tens of ms), so it overlaps the model load.
                self._http = httpx.Client()
            kind = e.launch.kind
            status = probe_health(e.launch.spec.endpoint, client=self._http, timeout_s=0.5,
                                  path=describe(kind).readiness_path)
            now = self._clock()
            if driver_for(kind).is_ready(status):
                proc.mark_ready(now)
                self._on_ready(e, proc)
                self._feed(e, BecameReady())
            elif st.spawned_at is not None and now - st.spawned_at > e.launch.startup_deadline_s:
                self._feed(e, StartupTimedOut(now - st.spawned_at))
        elif st.phase is EngineState.BACKOFF and st.retry_at is not None and now >= st.retry_at:
            e.after_failure = True
            self._feed(e, RetryDue())
        elif st.phase is EngineState.READY and e.launch is not None:
            self._watch_health(e, now)

    def _follow_progress(self, e: _Engine, proc: EngineProcess, now: float) -> None:
        """Publish what an engine says it is doing (its driver reads its progress lines), while it
        starts or serves a request, at most every PROGRESS_PUBLISH_S."""
        if now - e.progress_at < PROGRESS_PUBLISH_S:
            return
        e.progress_at = now
        working = e.phase is EngineState.STARTING or self.routes.usage(e.key)[0] > 0
        text = driver_for(e.launch.kind).progress(proc.tail(8)) if working else None
        if text != e.progress:
            e.progress = text
            self._publish()

    def _watch_health(self, e: _Engine, now: float) -> None:
        """Probe a READY engine now and then, off this thread; several failures in a row mean
        it hangs. An engine that takes one request at a time is not asked while it works on
        one: ds4 and sd-server may not answer then, and that is no hang."""
        if describe(e.launch.kind).concurrency == 1 and self.routes.usage(e.key)[0] > 0:
            e.probe, e.next_health_at, e.failed_probes, e.silent_since = None, None, 0, None
            return
        if e.probe is not None:
            if not e.probe.done():
                return
            try:
                status = e.probe.result()
            except Exception:
                status = None
            e.probe = None
            if driver_for(e.launch.kind).is_ready(status):
                e.failed_probes, e.silent_since = 0, None
            else:
                e.failed_probes += 1
                if e.failed_probes >= self._health_failures:
                    silent = self._clock() - (e.silent_since or now)
                    e.next_health_at = None
                    self.routes.close(e.key)
                    self._feed(e, Unresponsive(silent))
                    return
                e.next_health_at = min(e.next_health_at or now, now + HEALTH_RETRY_S)
        if e.next_health_at is None:
            e.next_health_at = now + self._health_interval_s
            e.failed_probes, e.silent_since = 0, None
            return
        if now < e.next_health_at:
            return
        e.next_health_at = now + self._health_interval_s
        if e.failed_probes == 0:
            e.silent_since = now
        timeout = min(HEALTH_TIMEOUT_S, max(0.5, self._health_interval_s / 2))
        if self._http is None:
            self._http = httpx.Client()
        e.probe = self._probes.submit(probe_health, e.launch.spec.endpoint, client=self._http,
                                      timeout_s=timeout, path=describe(e.launch.kind).readiness_path)

    def _feed(self, e: _Engine, event) -> None:
        e.events.append(event)
        if len(e.events) > 1:
            return  # an effect fed this; the outer loop below picks it up in order
        while e.events:
            ev = e.events[0]
            e.state, effects = step(e.state, ev, self._clock())
            for effect in effects:
                self._carry_out(e, effect)
            e.events.pop(0)
        self._sync_route(e)

    def _sync_route(self, e: _Engine) -> None:
        if e.phase is EngineState.READY and e.proc is not None and e.launch is not None \
                and not e.unload_when_idle:
            if self.routes.route(e.key) is None:
                self.routes.open(Route(key=e.key, endpoint=e.launch.spec.endpoint,
                                       engine_key=e.launch.engine_key, pid=e.proc.pid,
                                       kind=e.launch.kind),
                                 self._clock())
        else:
            self.routes.close(e.key)

    def _carry_out(self, e: _Engine, effect) -> None:
        if isinstance(effect, Spawn):
            self._spawn(e)
        elif isinstance(effect, Kill):
            self._kill(e, effect)
        elif isinstance(effect, RecordIncident):
            self._record_incident(e, effect)
        elif isinstance(effect, Publish):
            self._publish()
        elif isinstance(effect, (ScheduleRetry, Finish)):
            pass  # the state carries retry_at / finished; the loop acts on them
        else:
            log.warning("unknown effect %r", effect)

    # ------------------------------------------------------------------ effects

    def _prepare(self, e: _Engine, attempt: int) -> PreparedLaunch | PreparationRefused:
        context = AttemptContext(
            attempt=attempt, port=free_loopback_port(), log_dir=self._log_dir,
            overrides=self._overrides.get(e.key) if e.key else None,
            last_exit=e.last_exit, after_failure=e.after_failure,
            held_bytes=self._held_by_others(e.key),
            model_id=self._model_id(e.key) if e.key and self._name_model is not None else None)
        try:
            prepared = self._preparer(e.key or None, context)
        except Exception as exc:
            log.exception("preparing the launch failed")
            prepared = PreparationRefused(e.key or None, f"preparing the launch failed: {exc}")
        self._refresh_health()
        return prepared

    def _spawn(self, e: _Engine) -> None:
        e.ready_blockers = ()
        e.drafter_note = None
        e.cancelling, e.progress = False, None
        prepared, e.prepared = e.prepared, None
        if prepared is None:  # a restart or a retry: planned afresh
            prepared = self._prepare(e, attempt=e.state.restarts)
        if isinstance(prepared, PreparationRefused):
            e.events.append(SpawnFailed(prepared.reason))
            return
        e.launch = prepared
        if self._on_launch is not None:
            self._on_launch(prepared)
        try:
            e.proc = EngineProcess.start(prepared.spec, secrets=dict(prepared.secrets),
                                         log_dir=self._log_dir, run_dir=self._run_dir)
        except OSError as exc:
            e.events.append(SpawnFailed(str(exc)))
            return
        e.events.append(Spawned(e.proc.pid))

    def _kill(self, e: _Engine, effect: Kill) -> None:
        """Stop the process off this thread; StoppedClean follows when it is gone."""
        e.next_health_at, e.probe = None, None
        self.routes.close(e.key)
        proc, e.proc = e.proc, None
        if proc is None:
            e.events.append(StoppedClean())
            return
        # A hung engine cannot act on SIGTERM anyway; a cancelled one must let go at once.
        grace = HUNG_GRACE_S if effect.hung or e.cancelling else self._stop_grace_s

        def stop() -> None:
            try:
                proc.stop(grace_s=grace)
                e.last_exit = proc.exit_report(self._clock())
            except Exception:
                log.exception("stopping the engine (pid %s) failed", proc.pid)

        e.stopper = threading.Thread(target=stop, name=f"stoker-stop-{proc.pid}", daemon=True)
        e.stopper.start()

    def _record_incident(self, e: _Engine, effect: RecordIncident) -> None:
        now, launch = self._clock(), e.launch
        incident, decision = None, ExitDecision()
        if effect.exit is not None and e.diagnosed is not None and e.diagnosed[0] is effect.exit:
            _, incident, decision = e.diagnosed
        elif effect.exit is not None:
            incident = diagnose_exit(effect.exit, launch)
        action = effect.action
        if decision.action:
            action = f"{decision.action}; {action}"
        if incident is None:
            incident = plain_incident(effect)
        model = e.key or (launch.model_path if launch is not None else None)
        view = IncidentView(at=now, kind=incident.kind, summary=incident.title,
                            evidence=incident.evidence or None, advice=incident.advice, action=action,
                            model_path=e.key or None, model_id=self._model_id(e.key) if e.key else None)
        self._incidents = (self._incidents + (view,))[-MAX_INCIDENTS:]
        if effect.exit is not None:
            blocker = _blocker_for(incident, effect.exit, launch, model)
            if blocker is not None:
                e.incident_blockers = tuple(
                    b for b in e.incident_blockers if b.kind != blocker.kind) + (blocker,)
        try:
            self._incident_log.append(incident, at=now, model=model,
                                      build=launch.build_id if launch else None, action=action)
        except OSError as exc:  # a read-only or full data folder: one sentence, the engine goes on
            log.warning("could not append to the incident log: %s", storage_sentence(exc))
        self._publish()

    # ------------------------------------------------------------------ preparer hooks

    def _after_exit(self, e: _Engine, incident, report: EngineExit) -> ExitDecision:
        hook = getattr(self._preparer, "after_exit", None)
        if hook is None or incident is None or e.launch is None or report.signalled_by_us:
            return ExitDecision()
        try:
            return hook(e.launch, incident, report) or ExitDecision()
        except Exception:
            log.exception("the preparer's after_exit failed")
            return ExitDecision()

    def _on_ready(self, e: _Engine, proc: EngineProcess) -> None:
        launch = e.launch
        if launch is None:
            return
        lines = proc.tail()
        e.ready_blockers = gpu_unused_blockers(lines, launch)
        e.drafter_note = drafter_left_out_by_engine(lines, launch)
        hook = getattr(self._preparer, "after_ready", None)
        if hook is not None:
            try:
                hook(launch, lines)
            except Exception:
                log.exception("the preparer's after_ready failed")

    def _use_worker_again(self, endpoint: str) -> None:
        """A person chose "Use HOST:PORT again": the preparer lets the worker back in and
        names the models planned without it; those that are resident restart (a person's
        restart: planned afresh with every worker that answers)."""
        hook = getattr(self._preparer, "readmit_worker", None)
        keys: tuple[str, ...] = ()
        if hook is not None:
            try:
                keys = tuple(hook(endpoint) or ())
            except Exception:
                log.exception("the preparer's readmit_worker failed")
        for path in keys:
            engine = self._engines.get(self._key_for(path))  # the preparer's path, resolved as keys are
            if engine is None or engine.phase not in (EngineState.STARTING, EngineState.READY,
                                                      EngineState.BACKOFF):
                continue  # not resident: its next start plans with the worker anyway
            engine.after_failure = False
            engine.incident_blockers = ()
            self.routes.close(engine.key)
            self._feed(engine, RestartRequested(f"the RPC worker {endpoint} is back"))
        self._refresh_health()
        self._publish()

    def _watch_workers(self) -> None:
        """While the preparer has dropped an RPC worker, refresh the health (which says when
        it is back) every WORKER_CHECK_S and publish when that changed."""
        watching = getattr(self._preparer, "watching_workers", None)
        now = self._clock()
        if watching is None or now < self._next_worker_check or not watching():
            return
        self._next_worker_check = now + WORKER_CHECK_S
        before = self._health
        self._refresh_health()
        if self._health != before:
            self._publish()

    def _refresh_health(self) -> None:
        hook = getattr(self._preparer, "engine_health", None)
        if hook is None:
            return
        try:
            self._health = hook() or EngineHealth()
        except Exception:
            log.exception("the preparer's engine_health failed")

    def _publish(self) -> None:
        self._seq += 1
        blockers: list[BlockerView] = []
        focus = self._engines.get(self._focus) if self._focus is not None else None
        engine_blockers = (focus.incident_blockers + focus.ready_blockers) if focus else ()
        for b in self._health.blockers + engine_blockers:
            if b not in blockers:
                blockers.append(b)
        views = tuple(self._engine_view(e) for e in self._engines.values()
                      if e.phase is not EngineState.STOPPED or e.key in self._pending)
        if focus is not None:
            snap = build_snapshot(self._seq, focus.state, focus.launch, self._incidents, focus.proc,
                                  blockers=tuple(blockers), quarantined=self._health.quarantined,
                                  drafter_note=focus.drafter_note)
        else:
            snap = AppSnapshot(seq=self._seq, state=EngineState.STOPPED, incidents=self._incidents,
                               blockers=tuple(blockers), quarantined=self._health.quarantined)
        snap = replace(snap, engines=views, gateway_url=self._gateway_url, problems=self._health.problems,
                       model_id=self._model_id(focus.key) if focus is not None and focus.key else None,
                       workers_back=self._health.workers_back,
                       worker=self._shared_worker.view() if self._shared_worker is not None else None)
        if self._gateway_url:
            snap = replace(snap, endpoint=self._gateway_url)
        self._snapshot = snap
        with self._sub_lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            self._deliver(callback, snap)

    def _engine_view(self, e: _Engine) -> EngineView:
        in_flight, last_used = self.routes.usage(e.key)
        launch = e.launch
        facts = launch_facts(launch) if launch is not None else {}
        running = e.phase in (EngineState.STARTING, EngineState.READY, EngineState.STOPPING)
        return EngineView(
            model_id=self._model_id(e.key), model_path=e.key or (launch.model_path if launch else None),
            state=e.phase, pid=e.state.pid if running else None,
            endpoint=launch.spec.endpoint if launch is not None and running else None,
            plan_summary=plan_summary(launch) if launch is not None else None,
            bytes_by_device=e.bytes_by_device(), in_flight=in_flight,
            last_used_at=last_used if e.phase is EngineState.READY else None,
            ready_at=e.state.ready_at, pinned=e.pinned, restarts=e.state.restarts,
            last_error=e.state.last_error, queued=e.queued_reason,
            idle_timeout_s=launch.idle_timeout_s if launch is not None else None,
            engine_build=launch.build_id if launch else None,
            backend=launch.backend if launch else None, ctx=facts.get("ctx"),
            engine_kind=launch.kind.value if launch else None,
            progress=e.progress if e.phase in (EngineState.STARTING, EngineState.READY) else None,
            can_cancel=bool(launch is not None and e.phase is EngineState.READY and in_flight
                            and not describe(launch.kind).cancellable_in_engine))

    @staticmethod
    def _deliver(callback: Subscriber, snap: AppSnapshot) -> None:
        try:
            callback(snap)
        except Exception:
            log.exception("a snapshot subscriber failed")


# ---------------------------------------------------------------------- snapshot assembly


def _argv_value(argv: tuple[str, ...], *names: str) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg in names:
            return argv[i + 1]
    return None


def launch_facts(launch: PreparedLaunch) -> dict:
    """ctx, slots and KV types of a launch: from its plan when there is one, else from its argv."""
    plan = launch.plan
    if isinstance(plan, (Ds4Plan, ImagePlan)):
        return {"ctx": plan.ctx if isinstance(plan, Ds4Plan) else None,
                "slots": describe(launch.kind).concurrency, "kv_type_k": None, "kv_type_v": None,
                "drafter_status": None, "drafter_reason": None,
                "plan_decisions": tuple((d.what, d.why) for d in plan.decisions)}
    if plan is not None:
        facts = {"ctx": plan.ctx, "slots": plan.slots, "kv_type_k": plan.kv_type_k,
                 "kv_type_v": plan.kv_type_v}
        drafter = getattr(plan, "drafter", None)
        facts["drafter_status"] = getattr(drafter, "status", None)
        facts["drafter_reason"] = getattr(drafter, "reason", None)
        facts["plan_decisions"] = tuple((d.what, d.why) for d in getattr(plan, "decisions", ()))
        return facts
    argv = launch.spec.argv
    ctx = _argv_value(argv, "-c", "--ctx-size")
    slots = _argv_value(argv, "-np", "--parallel")
    return {
        "ctx": int(ctx) if ctx and ctx.isdigit() and int(ctx) > 0 else None,
        "slots": int(slots) if slots and slots.lstrip("-").isdigit() and int(slots) > 0 else None,
        # f16 is the engine's own default when the argv names no cache type.
        "kv_type_k": _argv_value(argv, "-ctk", "--cache-type-k") or "f16",
        "kv_type_v": _argv_value(argv, "-ctv", "--cache-type-v") or "f16",
        "drafter_status": "none" if _argv_value(argv, "--spec-type") in (None, "none") else "in",
        "drafter_reason": None,
        "plan_decisions": (),
    }


def plan_summary(launch: PreparedLaunch) -> str:
    """"context 8,192, 1 slot, KV f16/f16, ~18 tok/s decode, cpu": the plan line the tray and
    the CLI show (core's line for a planned launch; the argv's facts for a hand-made one)."""
    if isinstance(launch.plan, Ds4Plan):
        return ds4_summary_line(launch.plan)
    if isinstance(launch.plan, ImagePlan):
        return launch.plan.summary_line(launch.backend)
    if launch.plan is not None:
        return plan_summary_line(launch.plan, launch.backend)
    facts = launch_facts(launch)
    ctx, slots = facts["ctx"], facts["slots"]
    parts = [f"context {ctx:,}" if ctx else "context from the model"]
    if slots:
        parts.append(f"{slots} slot{'s' if slots != 1 else ''}")
    parts.append(f"KV {facts['kv_type_k']}/{facts['kv_type_v']}")
    if launch.backend:
        parts.append(launch.backend)
    return ", ".join(parts)


def build_snapshot(seq: int, st: LifecycleState, launch: PreparedLaunch | None,
                   incidents: tuple[IncidentView, ...], proc: EngineProcess | None, *,
                   blockers: tuple[BlockerView, ...] = (),
                   quarantined: tuple[tuple[str, str], ...] = (),
                   drafter_note: tuple[str, str] | None = None) -> AppSnapshot:
    running = st.phase in (EngineState.STARTING, EngineState.READY, EngineState.STOPPING)
    model_path = launch.model_path if launch is not None else st.model_path
    fields: dict = {}
    if launch is not None:
        fields.update(launch_facts(launch))
        fields["plan_summary"] = plan_summary(launch)
        if drafter_note is not None:  # what the engine really did beats what the plan asked
            fields["drafter_status"], fields["drafter_reason"] = drafter_note
        fields["argv"] = launch.spec.argv
        fields["engine_build"] = launch.build_id
        fields["backend"] = launch.backend
    return AppSnapshot(
        seq=seq,
        state=st.phase,
        model_path=model_path,
        model_name=Path(model_path).name.removesuffix(".gguf") if model_path else None,
        endpoint=launch.spec.endpoint if launch is not None and running else None,
        pid=st.pid if running else None,
        started_at=st.ready_at if st.phase is EngineState.READY else None,
        restarts=st.restarts,
        next_retry_at=st.retry_at if st.phase is EngineState.BACKOFF else None,
        last_error=st.last_error,
        incidents=incidents,
        blockers=blockers,
        quarantined=quarantined,
        **fields,
    )


# Diagnosis kinds that a second identical launch would hit again: no retry loop for these.
HOPELESS_KINDS = frozenset({"bad-argument", "bad-model", "missing-library", "illegal-instruction",
                            "cuda-driver-too-old", "no-kernel-image", "stale-library",
                            "system-too-old"})


def drafter_left_out_by_engine(lines, launch: PreparedLaunch | None) -> tuple[str, str] | None:
    """("left-out", sentence) when the engine dropped the planned drafter while starting."""

    has_drafter, _ = _drafter_facts(launch)
    why = drafter_dropped_from_log(lines) if has_drafter else None
    if why is None:
        return None
    name = Path(launch.plan.drafter.draft_path or "the drafter").name
    return "left-out", f"the engine started without {name}: {why}"


def _drafter_facts(launch: PreparedLaunch | None) -> tuple[bool, bool]:
    """(a drafter file or head was loaded, the user forced it) for this launch's plan."""
    drafter = getattr(getattr(launch, "plan", None), "drafter", None)
    status = getattr(drafter, "status", None)
    return status in ("in", "forced"), status == "forced"


def _plan_wanted_gpu(launch: PreparedLaunch | None) -> bool:
    layers = getattr(getattr(launch, "plan", None), "gpu_layers", None)
    return bool(launch and launch.backend not in (None, "cpu") and layers not in (None, 0, "0"))


def diagnose_exit(ex: EngineExit, launch: PreparedLaunch | None):
    """core.diagnosis.Incident for an exit (drafter, GPU and OOM-killer facts included), or None."""

    has_drafter, forced = _drafter_facts(launch)
    try:
        report = diagnosis.report_from_engine_exit(
            ex, backend=launch.backend if launch else None, plan_wanted_gpu=_plan_wanted_gpu(launch),
            has_drafter=has_drafter, drafter_forced=forced,
            os=host_os(), oom_killed=ex.oom_killed)
        if launch is not None:
            # ds4 and sd-server name their failures in lines of their own (their drivers);
            # llama-server's lines are classify_exit's, its driver names none.
            driver = driver_for(launch.kind)
            for line in reversed(ex.log_tail):
                kind = driver.failure_of_line(line)
                if kind is not None:
                    return diagnosis.incident_of_kind(kind, report, line)
        return diagnosis.classify_exit(report)
    except Exception:
        log.warning("classify_exit failed; recording a plain incident", exc_info=True)
        return None


def hopeless_reason(ex: EngineExit, launch: PreparedLaunch | None, incident=None) -> str | None:
    """A sentence when retrying this start-up failure cannot help, else None."""
    if ex.phase != "starting" or ex.signalled_by_us:
        return None
    inc = incident if incident is not None else diagnose_exit(ex, launch)
    if inc is None:
        return None  # without diagnosis, fall back to the retry budget
    return inc.title if inc.kind in HOPELESS_KINDS else None


def plain_incident(effect: RecordIncident):
    """An Incident for a failure with no process exit: a start-up timeout or a refused start."""

    return Incident(kind=effect.kind or "unknown", title=effect.summary, evidence="",
                    advice="see the engine log, or start it again with a smaller context",
                    counts_as_strike=False, recoverable_by=None, exit_description=None)


def _blocker_for(incident, ex: EngineExit, launch: PreparedLaunch | None,
                 model_path: str | None) -> BlockerView | None:

    name = Path(model_path).name.removesuffix(".gguf") if model_path else None
    try:
        return blocker_from_incident(incident, name, ex.phase, launch.backend if launch else None)
    except Exception:
        log.warning("could not turn an incident into a blocker", exc_info=True)
        return None


def gpu_unused_blockers(lines, launch: PreparedLaunch) -> tuple[BlockerView, ...]:
    """gpuUnused for the build that just became READY, from its own start-up log."""

    evidence = gpu_unused_from_log(lines, launch.backend, _plan_wanted_gpu(launch))
    blocker = gpu_unused_blocker(evidence, launch.backend)
    return (blocker,) if blocker is not None else ()


def hand_made_preparer(spec_for: Callable[[str | None, int], LaunchSpec], *,
                       backend: str | None = None, build_id: str | None = None,
                       startup_deadline_s: float = 180.0,
                       secrets: Mapping[str, str] | None = None) -> LaunchPreparer:
    """A preparer from a function (model, port) -> LaunchSpec: for tests and bare launches."""

    def prepare(model_path: str | None, attempt: AttemptContext):
        spec = spec_for(model_path, attempt.port)
        model = _argv_value(spec.argv, "-m", "--model") or model_path or ""
        return PreparedLaunch(spec=spec, model_path=model, backend=backend, build_id=build_id,
                              secrets=tuple((secrets or {}).items()),
                              startup_deadline_s=startup_deadline_s)

    return prepare


def argv_line(argv: tuple[str, ...]) -> str:
    return shlex.join(argv)
