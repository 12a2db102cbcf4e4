"""The one thread that owns engine state: it takes commands, runs the engine, publishes snapshots.

UI, CLI and the control channel call `submit(command)` and `subscribe(callback)`; only the
supervisor thread starts, watches and stops engine processes. Every transition is decided
by the pure reducer in core/lifecycle.py; this module feeds it events (a command arrived,
/health said 200, the process exited, a retry is due) and carries out the effects it asks
for. What to launch is decided by ONE injected collaborator, the `LaunchPreparer`
(shell/launcher.py has the real one: plan + argv + engine build), so tests can hand it a
LaunchSpec built by hand.

Failure and memory truth go through the same preparer, by optional hooks a hand-made
preparer need not have: `after_exit(launch, incident, exit)` hears every diagnosed exit
(strikes, quarantine, broken drafters, the OOM recovery ladder live in the preparer, which
owns the engine choice and the plan) and answers with an `ExitDecision`; `after_ready(launch,
log_lines)` gets the engine's start-up log (measured memory lines); `engine_health()` gives
the blockers and quarantined builds for the snapshot; `lift_quarantine(build_id)`.
Incidents go to ONE ledger, `<data>/incidents.jsonl` (shell/incidents.py), and the latest of
them are in every snapshot, also after Stoker restarts.

Subscribers are called ON THE SUPERVISOR THREAD for every snapshot: they must not block
(the Qt bridge re-emits through a queued signal; the CLI prints a line). A subscriber that
raises is logged and kept.
"""

from __future__ import annotations

import logging
import os
import queue
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import httpx

from stoker.core import commands as cmd
from stoker.core.launch_spec import LaunchSpec
from stoker.core.lifecycle import (
    BecameReady, EngineExit, Exited, Finish, Kill, LifecycleState, Publish, RecordIncident,
    RestartRequested, RetryDue, ScheduleRetry, ShutdownRequested, Spawn, Spawned, SpawnFailed,
    StartRequested, StartupTimedOut, StopRequested, StoppedClean, Unresponsive, step)
from stoker.core.overrides import ModelOverrides
from stoker.core.restart import RestartPolicy
from stoker.core.snapshot import AppSnapshot, BlockerView, EngineState, IncidentView
from stoker.shell.health import probe_health
from stoker.shell.incidents import IncidentLog
from stoker.shell.process import EngineProcess, free_loopback_port

log = logging.getLogger(__name__)

MAX_INCIDENTS = 5  # the latest incidents every snapshot carries (oldest first, newest last)
STARTING_POLL_S = 0.02  # /health poll while starting: it adds directly to time-to-READY
READY_POLL_S = 0.1  # how quickly a crash of a running engine is noticed
IDLE_POLL_S = 0.5
# A READY engine is asked /health this often; this many failures in a row mean it hangs.
HEALTH_INTERVAL_S = 5.0
HEALTH_FAILURES = 3
HEALTH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class AttemptContext:
    """What the preparer may need to know about this attempt."""

    attempt: int  # 0 for a user start, n for the n-th automatic restart
    port: int  # a free loopback port picked for this attempt
    log_dir: Path
    overrides: ModelOverrides | None  # overrides sent with ApplyOverrides; None: use the store
    last_exit: EngineExit | None  # how the previous attempt ended, for recovery decisions
    # True when this attempt is an automatic retry after a failure; False when a person (or a
    # command) asked for it, which ends any recovery the preparer was walking through.
    after_failure: bool = False


@dataclass(frozen=True)
class PreparedLaunch:
    spec: LaunchSpec
    model_path: str
    plan: object | None = None  # core.plan.LaunchPlan when a planner made it
    build_id: str | None = None  # e.g. "b11434-cpu"
    backend: str | None = None  # cpu | cuda | rocm | vulkan | metal
    secrets: tuple[tuple[str, str], ...] = ()  # env name -> value, read at spawn time, never logged
    startup_deadline_s: float = 180.0


@dataclass(frozen=True)
class PreparationRefused:
    model_path: str | None
    reason: str  # one sentence: what is wrong and what to do


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


class LaunchPreparer(Protocol):
    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused: ...


Subscriber = Callable[[AppSnapshot], None]


class Supervisor:
    def __init__(self, preparer: LaunchPreparer, *, clock: Callable[[], float] = time.time,
                 policy: RestartPolicy | None = None, stop_grace_s: float = 10.0,
                 log_dir: Path | None = None, run_dir: Path | None = None,
                 on_launch: Callable[[PreparedLaunch], None] | None = None,
                 health_interval_s: float = HEALTH_INTERVAL_S,
                 health_failures: int = HEALTH_FAILURES,
                 incident_log: IncidentLog | None = None):
        from stoker.shell.paths import stoker_paths

        paths = stoker_paths()
        self._preparer = preparer
        self._clock = clock
        self._stop_grace_s = stop_grace_s
        self._log_dir = Path(log_dir or paths.logs)
        self._run_dir = Path(run_dir or paths.run)
        self._on_launch = on_launch
        self._health_interval_s = health_interval_s
        self._health_failures = health_failures
        self._next_health_at: float | None = None
        self._silent_since: float | None = None
        self._failed_probes = 0
        self._queue: queue.Queue = queue.Queue()
        self._subscribers: list[Subscriber] = []
        self._sub_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Owned by the supervisor thread only:
        self._state = LifecycleState(policy=policy or RestartPolicy())
        self._proc: EngineProcess | None = None
        self._launch: PreparedLaunch | None = None
        self._incident_log = incident_log or IncidentLog.in_data_dir(paths.data)
        try:  # what happened before this Stoker started stays visible
            self._incidents = tuple(reversed(self._incident_log.latest(MAX_INCIDENTS)))
        except OSError:
            self._incidents = ()
        self._diagnosed: tuple[EngineExit, object, ExitDecision] | None = None
        self._incident_blockers: tuple[BlockerView, ...] = ()  # until a person starts again
        self._ready_blockers: tuple[BlockerView, ...] = ()  # about the build running now
        self._drafter_note: tuple[str, str] | None = None  # the engine dropped the drafter
        self._health = EngineHealth()
        self._after_failure = False
        self._overrides: dict[str, ModelOverrides] = {}
        self._last_exit: EngineExit | None = None
        self._events: list = []
        self._http: httpx.Client | None = None
        # Shared, replaced atomically:
        self._seq = 0
        self._snapshot = AppSnapshot(seq=0, state=EngineState.STOPPED)

    # ------------------------------------------------------------------ public API

    def start(self) -> "Supervisor":
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
            while not self._state.finished:
                try:
                    command = self._queue.get(timeout=self._wait_time())
                except queue.Empty:
                    command = None
                if command is not None:
                    self._on_command(command)
                self._observe()
        except Exception:  # noqa: BLE001 - never leave an engine running behind a dead thread
            log.exception("the supervisor thread failed; stopping the engine")
            raise
        finally:
            if self._proc is not None:
                self._proc.stop(grace_s=self._stop_grace_s)
                self._proc = None
            if self._http is not None:
                self._http.close()

    def _wait_time(self) -> float:
        phase = self._state.phase
        if phase is EngineState.STARTING:
            return STARTING_POLL_S
        if phase is EngineState.READY:
            return READY_POLL_S
        if phase is EngineState.BACKOFF and self._state.retry_at is not None:
            return min(IDLE_POLL_S, max(0.0, self._state.retry_at - self._clock()))
        return IDLE_POLL_S

    def _on_command(self, command) -> None:
        if isinstance(command, (cmd.StartModel, cmd.SwitchModel, cmd.Restart, cmd.ApplyOverrides)):
            self._after_failure = False
            self._incident_blockers = ()
        if isinstance(command, cmd.StartModel):
            self._feed(StartRequested(command.model_path))
        elif isinstance(command, cmd.SwitchModel):
            self._feed(StartRequested(command.model_path))
        elif isinstance(command, cmd.Stop):
            self._feed(StopRequested())
        elif isinstance(command, cmd.Restart):
            self._feed(RestartRequested(command.reason))
        elif isinstance(command, cmd.ApplyOverrides):
            self._overrides[command.model_path] = command.overrides
            running = self._launch.model_path if self._launch else self._state.model_path
            if command.restart and running == command.model_path:
                self._feed(RestartRequested("new settings for this model"))
        elif isinstance(command, cmd.LiftQuarantine):
            lift = getattr(self._preparer, "lift_quarantine", None)
            if lift is not None:  # the quarantine ledger belongs to the preparer's engine choice
                lift(command.build_id)
            self._refresh_health()
            self._publish()
        elif isinstance(command, cmd.Shutdown):
            self._feed(ShutdownRequested())
        else:
            log.warning("ignoring unknown command %r", command)

    def _observe(self) -> None:
        """Turn what the process and /health say now into events."""
        st, proc, now = self._state, self._proc, self._clock()
        if proc is not None and st.phase in (EngineState.STARTING, EngineState.READY):
            if proc.poll() is not None:
                self._proc = None
                self._next_health_at = None
                report = proc.exit_report(now)
                incident = diagnose_exit(report, self._launch)
                decision = self._after_exit(incident, report)
                hopeless = hopeless_reason(report, self._launch, incident)
                if decision.retry is True:
                    hopeless = None
                elif decision.retry is False and report.phase == "starting" and incident is not None:
                    hopeless = hopeless or incident.title
                if hopeless:
                    report = replace(report, hopeless=hopeless)
                self._diagnosed = (report, incident, decision)
                self._last_exit = report
                self._refresh_health()
                self._after_failure = not report.signalled_by_us
                self._feed(Exited(report))
                return
        if st.phase is EngineState.STARTING and proc is not None and self._launch is not None:
            if self._http is None:
                # Made after the first spawn (it costs tens of ms), so it overlaps the model load.
                self._http = httpx.Client()
            status = probe_health(self._launch.spec.endpoint, client=self._http, timeout_s=0.5)
            now = self._clock()
            if status == 200:
                proc.mark_ready(now)
                self._on_ready(proc)
                self._feed(BecameReady())
            elif st.spawned_at is not None and now - st.spawned_at > self._launch.startup_deadline_s:
                self._feed(StartupTimedOut(now - st.spawned_at))
        elif st.phase is EngineState.BACKOFF and st.retry_at is not None and now >= st.retry_at:
            self._after_failure = True
            self._feed(RetryDue())
        elif st.phase is EngineState.READY and self._launch is not None:
            self._watch_health(now)

    def _watch_health(self, now: float) -> None:
        """Probe a READY engine now and then; several failures in a row mean it hangs."""
        if self._next_health_at is None:
            self._next_health_at = now + self._health_interval_s
            self._failed_probes, self._silent_since = 0, None
            return
        if now < self._next_health_at:
            return
        self._next_health_at = now + self._health_interval_s
        status = probe_health(self._launch.spec.endpoint, client=self._http,
                              timeout_s=min(HEALTH_TIMEOUT_S, max(0.5, self._health_interval_s)))
        if status == 200:
            self._failed_probes, self._silent_since = 0, None
            return
        self._failed_probes += 1
        self._silent_since = self._silent_since or now
        if self._failed_probes >= self._health_failures:
            silent = self._clock() - self._silent_since
            self._next_health_at = None
            self._feed(Unresponsive(silent))

    def _feed(self, event) -> None:
        self._events.append(event)
        if len(self._events) > 1:
            return  # an effect fed this; the outer loop below picks it up in order
        while self._events:
            ev = self._events[0]
            self._state, effects = step(self._state, ev, self._clock())
            for effect in effects:
                self._carry_out(effect)
            self._events.pop(0)

    def _carry_out(self, effect) -> None:
        if isinstance(effect, Spawn):
            self._spawn(effect.model_path)
        elif isinstance(effect, Kill):
            self._kill()
        elif isinstance(effect, RecordIncident):
            self._record_incident(effect)
        elif isinstance(effect, Publish):
            self._publish()
        elif isinstance(effect, (ScheduleRetry, Finish)):
            pass  # the state carries retry_at / finished; the loop acts on them
        else:
            log.warning("unknown effect %r", effect)

    # ------------------------------------------------------------------ effects

    def _spawn(self, model_path: str | None) -> None:
        attempt = AttemptContext(
            attempt=self._state.restarts, port=free_loopback_port(), log_dir=self._log_dir,
            overrides=self._overrides.get(model_path) if model_path else None,
            last_exit=self._last_exit, after_failure=self._after_failure)
        self._ready_blockers = ()
        self._drafter_note = None
        try:
            prepared = self._preparer(model_path, attempt)
        except Exception as exc:  # noqa: BLE001 - a preparer bug must read as a failed start
            log.exception("preparing the launch failed")
            prepared = PreparationRefused(model_path, f"preparing the launch failed: {exc}")
        self._refresh_health()
        if isinstance(prepared, PreparationRefused):
            self._events.append(SpawnFailed(prepared.reason))
            return
        self._launch = prepared
        if self._on_launch is not None:
            self._on_launch(prepared)
        try:
            self._proc = EngineProcess.start(prepared.spec, secrets=dict(prepared.secrets),
                                             log_dir=self._log_dir, run_dir=self._run_dir)
        except OSError as exc:
            self._events.append(SpawnFailed(str(exc)))
            return
        # The reducer keeps the model it was asked for; remember what the preparer chose.
        if self._state.model_path is None:
            self._state = replace(self._state, model_path=prepared.model_path)
        self._events.append(Spawned(self._proc.pid))

    def _kill(self) -> None:
        self._next_health_at = None
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(grace_s=self._stop_grace_s)
            self._last_exit = proc.exit_report(self._clock())
        self._events.append(StoppedClean())

    def _record_incident(self, effect: RecordIncident) -> None:
        now, launch = self._clock(), self._launch
        incident, decision = None, ExitDecision()
        if effect.exit is not None and self._diagnosed is not None and self._diagnosed[0] is effect.exit:
            _, incident, decision = self._diagnosed
        elif effect.exit is not None:
            incident = diagnose_exit(effect.exit, launch)
        action = effect.action
        if decision.action:
            action = f"{decision.action}; {action}"
        if incident is None:
            incident = plain_incident(effect)
        view = IncidentView(at=now, kind=incident.kind, summary=incident.title,
                            evidence=incident.evidence or None, advice=incident.advice, action=action)
        self._incidents = (self._incidents + (view,))[-MAX_INCIDENTS:]
        if effect.exit is not None:
            blocker = _blocker_for(incident, effect.exit, launch, self._state.model_path)
            if blocker is not None:
                self._incident_blockers = tuple(
                    b for b in self._incident_blockers if b.kind != blocker.kind) + (blocker,)
        try:
            self._incident_log.append(incident, at=now, model=self._state.model_path,
                                      build=launch.build_id if launch else None, action=action)
        except OSError:
            log.warning("could not append to the incident log", exc_info=True)
        self._publish()

    # ------------------------------------------------------------------ preparer hooks

    def _after_exit(self, incident, report: EngineExit) -> ExitDecision:
        hook = getattr(self._preparer, "after_exit", None)
        if hook is None or incident is None or self._launch is None or report.signalled_by_us:
            return ExitDecision()
        try:
            return hook(self._launch, incident, report) or ExitDecision()
        except Exception:  # noqa: BLE001 - a hook bug must not lose the exit
            log.exception("the preparer's after_exit failed")
            return ExitDecision()

    def _on_ready(self, proc: EngineProcess) -> None:
        launch = self._launch
        if launch is None:
            return
        lines = proc.tail()
        self._ready_blockers = gpu_unused_blockers(lines, launch)
        self._drafter_note = drafter_left_out_by_engine(lines, launch)
        hook = getattr(self._preparer, "after_ready", None)
        if hook is not None:
            try:
                hook(launch, lines)
            except Exception:  # noqa: BLE001 - measuring is a bonus; the engine is READY anyway
                log.exception("the preparer's after_ready failed")

    def _refresh_health(self) -> None:
        hook = getattr(self._preparer, "engine_health", None)
        if hook is None:
            return
        try:
            self._health = hook() or EngineHealth()
        except Exception:  # noqa: BLE001
            log.exception("the preparer's engine_health failed")

    def _publish(self) -> None:
        self._seq += 1
        blockers: list[BlockerView] = []
        for b in self._health.blockers + self._incident_blockers + self._ready_blockers:
            if b not in blockers:
                blockers.append(b)
        snap = build_snapshot(self._seq, self._state, self._launch, self._incidents, self._proc,
                              blockers=tuple(blockers), quarantined=self._health.quarantined,
                              drafter_note=self._drafter_note)
        self._snapshot = snap
        with self._sub_lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            self._deliver(callback, snap)

    @staticmethod
    def _deliver(callback: Subscriber, snap: AppSnapshot) -> None:
        try:
            callback(snap)
        except Exception:  # noqa: BLE001 - one bad subscriber must not stop the supervisor
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
    if plan is not None and hasattr(plan, "ctx"):
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


def build_snapshot(seq: int, st: LifecycleState, launch: PreparedLaunch | None,
                   incidents: tuple[IncidentView, ...], proc: EngineProcess | None, *,
                   blockers: tuple[BlockerView, ...] = (),
                   quarantined: tuple[tuple[str, str], ...] = (),
                   drafter_note: tuple[str, str] | None = None) -> AppSnapshot:
    running = st.phase in (EngineState.STARTING, EngineState.READY, EngineState.STOPPING)
    model_path = launch.model_path if launch is not None else st.model_path
    fields: dict = {}
    if launch is not None:
        facts = launch_facts(launch)
        fields.update(facts)
        ctx, slots = facts["ctx"], facts["slots"]
        parts = [f"context {ctx:,}" if ctx else "context from the model"]
        if slots:
            parts.append(f"{slots} slot{'s' if slots != 1 else ''}")
        parts.append(f"KV {facts['kv_type_k']}/{facts['kv_type_v']}")
        if launch.backend:
            parts.append(launch.backend)
        fields["plan_summary"] = ", ".join(parts)
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
                            "cuda-driver-too-old", "no-kernel-image"})


def drafter_left_out_by_engine(lines, launch: PreparedLaunch | None) -> tuple[str, str] | None:
    """("left-out", sentence) when the engine dropped the planned drafter while starting."""
    from stoker.core.diagnosis import drafter_dropped_from_log

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
    from stoker.core import diagnosis

    has_drafter, forced = _drafter_facts(launch)
    try:
        report = diagnosis.report_from_engine_exit(
            ex, backend=launch.backend if launch else None, plan_wanted_gpu=_plan_wanted_gpu(launch),
            has_drafter=has_drafter, drafter_forced=forced,
            os={"posix": "linux", "nt": "windows"}.get(os.name, "linux"), oom_killed=ex.oom_killed)
        return diagnosis.classify_exit(report)
    except Exception:  # noqa: BLE001 - diagnosis is another module; never lose the incident
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
    from stoker.core.diagnosis import Incident

    return Incident(kind=effect.kind or "unknown", title=effect.summary, evidence="",
                    advice="see the engine log, or start it again with a smaller context",
                    counts_as_strike=False, recoverable_by=None, exit_description=None)


def _blocker_for(incident, ex: EngineExit, launch: PreparedLaunch | None,
                 model_path: str | None) -> BlockerView | None:
    from stoker.core.blockers import blocker_from_incident

    name = Path(model_path).name.removesuffix(".gguf") if model_path else None
    try:
        return blocker_from_incident(incident, name, ex.phase, launch.backend if launch else None)
    except Exception:  # noqa: BLE001
        log.warning("could not turn an incident into a blocker", exc_info=True)
        return None


def gpu_unused_blockers(lines, launch: PreparedLaunch) -> tuple[BlockerView, ...]:
    """gpuUnused for the build that just became READY, from its own start-up log."""
    from stoker.core.blockers import gpu_unused_blocker
    from stoker.core.diagnosis import gpu_unused_from_log

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
