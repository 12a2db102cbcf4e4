"""Run one llama.cpp `rpc-server` on this machine and keep it running: `stoker worker`.

It is the engine supervisor's lifecycle on a smaller process: the same pure reducer
(stoker/fleet/lifecycle.py `step`) and restart policy (stoker/fleet/restart.py) decide every transition,
and this module only carries out the effects. It is not the multi-model Supervisor: an
rpc-server has no /health, no model, no plan and no gateway route, so READY here means
"its port accepts a TCP connection", and a port that already accepts one before rpc-server
is spawned belongs to another program: the start is refused aloud, never read as ready. An
exit is read by the engine's own diagnosis (stoker/fleet/exit_diagnosis.py), so the incident
names its kind (port-in-use, missing-library, host-oom …; `rpc-worker-exit` when the log says
nothing) and a start-up failure that a retry cannot mend stops the restarts, as for an engine.
Incidents go to the same ledger (`<data>/incidents.jsonl`). The binary comes from
`stoker setup --rpc` (`<data>/engines/rpc/b11434-cpu-rpc/rpc-server`).

Two drivers use it: `stoker worker` (the foreground command) and `SharedWorker`, which runs
one on a thread of its own for the app (Settings' "Share this machine as an RPC worker", the
tray's worker line) and says when its view changed. Either way the state is a WorkerView
(stoker/fleet/snapshot.py), the same value the tray and `stoker status --json` show.

It never decides whether a non-loopback bind is allowed: the command asks for the flag.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.rpc_address import RpcWorker
from stoker.diagnosis.exit_report import Incident
from stoker.diagnosis.incidents import IncidentLog
from stoker.diagnosis.views import IncidentView
from stoker.engines.engine_exit import EngineExit
from stoker.engines.find import BINARY_NAME
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.probe import reachable
from stoker.engines.process import EngineProcess
from stoker.engines.rpc import NO_AUTH_WARNING, is_loopback, worker_devices
from stoker.engines.setup import RPC_BUILD_ID, RPC_SERVER_NAME
from stoker.fleet.exit_diagnosis import diagnose_exit, hopeless_reason
from stoker.fleet.lifecycle import (
    BecameReady,
    Exited,
    Finish,
    Kill,
    LifecycleState,
    Publish,
    RecordIncident,
    RetryDue,
    ScheduleRetry,
    ShutdownRequested,
    Spawn,
    Spawned,
    SpawnFailed,
    StartRequested,
    StartupTimedOut,
    StoppedClean,
    step,
)
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.snapshot import EngineState, WorkerView

POLL_S = 0.1
STARTUP_DEADLINE_S = 30.0


def rpc_build_folder() -> Path:

    return stoker_paths().engines / "rpc" / RPC_BUILD_ID


def rpc_server_binary() -> Path | None:
    p = rpc_build_folder() / RPC_SERVER_NAME
    return p if p.is_file() else None


def rpc_llama_server() -> Path | None:
    """The llama-server built with GGML_RPC=ON (the plain builds cannot take --rpc)."""

    p = rpc_build_folder() / BINARY_NAME
    return p if p.is_file() else None


# coreutils' stdbuf library: preloaded with _STDBUF_O=L it makes rpc-server's stdout line
# buffered, so its start-up banner (the devices it lends) reaches the log while it runs
# instead of when its pipe buffer fills. Where it is absent the devices stay unlisted.
_LIBSTDBUF = ("/usr/libexec/coreutils/libstdbuf.so", "/usr/lib/coreutils/libstdbuf.so",
              "/usr/lib64/coreutils/libstdbuf.so", "/usr/local/libexec/coreutils/libstdbuf.so")


def line_buffered_env() -> tuple[tuple[str, str], ...]:
    if not sys.platform.startswith("linux") or os.environ.get("LD_PRELOAD"):
        return ()  # someone else's preload is not ours to replace
    lib = next((p for p in _LIBSTDBUF if os.path.isfile(p)), None)
    return (("LD_PRELOAD", lib), ("_STDBUF_O", "L")) if lib else ()


@dataclass(frozen=True)
class WorkerIncident:
    """What the ledger records for a worker failure (the fields IncidentLog reads)."""

    kind: str
    title: str
    evidence: str
    advice: str
    exit_description: str


def _as_worker(sentence: str) -> str:
    # Diagnosis speaks of "the engine"; the process here is rpc-server.
    return sentence.replace("The engine", "rpc-server").replace("the engine", "rpc-server")


_REBUILD = "Build the worker's engine again: `stoker setup --rpc`."
_FREE_MEMORY = ("Free memory on this machine, or give the engines that use it fewer layers here "
                "(their --tensor-split).")
# What a person does about a worker's failure. Diagnosis's own advice speaks of the engine's
# plan ("Stoker retries with a smaller plan"), which a worker does not have.
WORKER_ADVICE = {
    "port-in-use": ("Stop the program that holds the port, or share this machine on another "
                    "port (Settings, or `stoker worker --port N`)."),
    "bad-argument": "Check the worker's options (`stoker worker --help`).",
    "host-oom": _FREE_MEMORY, "cuda-oom": _FREE_MEMORY, "rocm-oom": _FREE_MEMORY,
    "vulkan-oom": _FREE_MEMORY, "metal-oom": _FREE_MEMORY,
    "missing-library": _REBUILD, "stale-library": _REBUILD, "illegal-instruction": _REBUILD,
    "no-kernel-image": _REBUILD,
}


def worker_incident(endpoint: str, ex: EngineExit | None, diagnosed: Incident | None,
                    summary: str, kind: str | None, log_path: Path) -> WorkerIncident:
    """The incident for a worker that stopped (`ex`, read by diagnosis as `diagnosed`) or
    could not be started (`ex` None: `summary` says why, `kind` names it)."""
    see_log = f"The worker log is {log_path}."
    lost = "Engines using this worker lose its layers until it is back."
    if ex is None:
        return WorkerIncident(kind=kind or "rpc-worker-exit",
                              title=f"The RPC worker on {endpoint} did not start: {_as_worker(summary)}.",
                              evidence=summary, advice=see_log, exit_description=summary)
    tail = [ln for ln in ex.log_tail if ln.strip()]
    if diagnosed is None or diagnosed.kind == "unknown":
        # Nothing in its log names a cause: say how it ended and where to look.
        return WorkerIncident(
            kind="rpc-worker-exit",
            title=f"The RPC worker on {endpoint} stopped: {_as_worker(ex.describe())}.",
            evidence=(tail[-1] if tail else ex.describe())[:300],
            advice=f"{lost} If it keeps stopping, see the worker log {log_path}.",
            exit_description=ex.describe())
    what = WORKER_ADVICE.get(diagnosed.kind, "")
    return WorkerIncident(
        kind=diagnosed.kind,
        title=f"The RPC worker on {endpoint} stopped: {_as_worker(diagnosed.title)}",
        evidence=diagnosed.evidence[:300], advice=" ".join(x for x in (what, lost, see_log) if x),
        exit_description=diagnosed.exit_description or ex.describe())


class WorkerSupervisor:
    """One rpc-server, restarted with backoff; `run_until(stop)` blocks, `status()` any time."""

    def __init__(self, binary: Path, host: str, port: int, *, cache: bool = False,
                 threads: int | None = None, log_allocations: bool = False,
                 policy: RestartPolicy | None = None, log_dir: Path | None = None,
                 incident_log: IncidentLog | None = None,
                 on_status: Callable[[WorkerView], None] | None = None,
                 clock: Callable[[], float] = time.time):

        paths = stoker_paths()
        self.binary = Path(binary)
        self.worker = RpcWorker(host, port)
        self.cache = cache
        self.threads = threads
        self.log_allocations = log_allocations
        self.log_dir = Path(log_dir or paths.logs)
        self.log_name = f"rpc-worker-{port}.log"
        self.incidents = incident_log or IncidentLog.in_data_dir(paths.data)
        self.on_status = on_status
        self.clock = clock
        self.state = LifecycleState(policy=policy or RestartPolicy(), model_path=self.worker.endpoint)
        self.proc: EngineProcess | None = None
        self.last_incident: IncidentView | None = None
        self._devices_seen = False  # the banner came through: publish once more for it
        self._diagnosed: tuple[EngineExit, Incident | None] | None = None  # the last exit, read
        self._lock = threading.Lock()

    # -- what it runs

    def spec(self) -> LaunchSpec:
        argv = [str(self.binary), "--host", self.worker.host, "--port", str(self.worker.port)]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        if self.cache:
            argv.append("--cache")
        env = line_buffered_env() + ((("GGML_RPC_DEBUG", "1"),) if self.log_allocations else ())
        return LaunchSpec(binary=str(self.binary), argv=tuple(argv), env=env,
                          drop_env_prefixes=("LLAMA_ARG_",), secret_env=(), host=self.worker.host,
                          port=self.worker.port)

    def status(self) -> WorkerView:
        with self._lock:
            st, proc = self.state, self.proc
            devices = worker_devices(proc.tail()) if proc is not None else ()
            return WorkerView(
                host=self.worker.host, port=self.worker.port, endpoint=self.worker.endpoint,
                state=st.phase, pid=st.pid, restarts=st.restarts, cache=self.cache,
                loopback=is_loopback(self.worker.host), devices=devices,
                next_retry_at=st.retry_at if st.phase is EngineState.BACKOFF else None,
                last_error=st.last_error, last_incident=self.last_incident)

    # -- the loop

    def run_until(self, stop: threading.Event) -> EngineState:
        """Start it, keep it up until `stop` is set (or the restart budget is spent)."""
        self._feed(StartRequested(self.worker.endpoint))
        asked_stop = False
        while not self.state.finished:
            now = self.clock()
            if stop.is_set() and not asked_stop:
                asked_stop = True
                self._feed(ShutdownRequested())
                continue
            if self.state.phase is EngineState.FAILED and not asked_stop:
                break
            proc = self.proc
            if proc is not None and self.state.phase in (EngineState.STARTING, EngineState.READY):
                if proc.poll() is not None:
                    ex = proc.exit_report(now)
                    diagnosed = diagnose_exit(ex, None)
                    hopeless = hopeless_reason(ex, None, diagnosed)
                    if hopeless:
                        ex = replace(ex, hopeless=_as_worker(hopeless))
                    with self._lock:
                        self.proc = None
                        self._diagnosed = (ex, diagnosed)
                    self._feed(Exited(ex))
                    continue
                if (self.state.phase is EngineState.READY and not self._devices_seen
                        and worker_devices(proc.tail())):
                    self._devices_seen = True
                    self._publish()
                if self.state.phase is EngineState.STARTING:
                    # Its start-up lines may sit in a pipe buffer (no stdbuf here), so the
                    # port, not the log, says it is listening.
                    if _port_open(self.worker):
                        proc.mark_ready(now)
                        self._feed(BecameReady())
                    elif now - (self.state.spawned_at or now) > STARTUP_DEADLINE_S:
                        self._feed(StartupTimedOut(STARTUP_DEADLINE_S))
            if self.state.phase is EngineState.BACKOFF and self.state.retry_at and now >= self.state.retry_at:
                self._feed(RetryDue())
            time.sleep(POLL_S)
        return self.state.phase

    def _feed(self, event) -> None:
        with self._lock:
            self.state, effects = step(self.state, event, self.clock())
        for effect in effects:
            self._carry_out(effect)

    def _carry_out(self, effect) -> None:
        if isinstance(effect, Spawn):
            if _port_open(self.worker):
                # Our last rpc-server has exited, so whoever answers there is another
                # program; reading its port as our worker's readiness would lie.
                self._feed(SpawnFailed(f"port {self.worker.port} is already in use by another program",
                                       "port-in-use"))
                return
            try:
                proc = EngineProcess.start(self.spec(), log_dir=self.log_dir, log_name=self.log_name)
            except OSError as exc:
                self._feed(SpawnFailed(str(exc)))
                return
            with self._lock:
                self.proc = proc
                self._devices_seen = False
            self._feed(Spawned(proc.pid))
        elif isinstance(effect, Kill):
            running = self.proc
            if running is not None:
                running.stop(grace_s=1.0 if effect.hung else 5.0)
                with self._lock:
                    self.proc = None
            self._feed(StoppedClean())
        elif isinstance(effect, RecordIncident):
            self._record(effect)
        elif isinstance(effect, Publish):
            self._publish()
        elif isinstance(effect, (ScheduleRetry, Finish)):
            pass  # the loop polls retry_at and finished

    def _publish(self) -> None:
        if self.on_status is not None:
            self.on_status(self.status())

    def _record(self, effect: RecordIncident) -> None:
        ex = effect.exit
        with self._lock:
            seen = self._diagnosed
        # the loop read this exit before feeding it (every exit comes through there)
        diagnosed = seen[1] if seen is not None and ex is not None and seen[0] is ex else None
        incident = worker_incident(self.worker.endpoint, ex, diagnosed, effect.summary, effect.kind,
                                   self.log_dir / self.log_name)
        now = self.clock()
        with self._lock:
            self.last_incident = IncidentView(at=now, kind=incident.kind, summary=incident.title,
                                              evidence=incident.evidence or None, advice=incident.advice,
                                              action=effect.action)
        with contextlib.suppress(OSError):
            self.incidents.append(incident, at=now, model=None, build=RPC_BUILD_ID,
                                  action=effect.action)


class SharedWorker:
    """This machine's RPC worker inside the app: one WorkerSupervisor at a time, each on a
    thread of its own, started and stopped by the engine supervisor's commands
    (ShareWorker / StopWorker). `view()` is what the snapshot shows; `on_change()` is called
    (on the worker's thread; it must not block) whenever that changed. Changing the address
    stops the old rpc-server first, on the new one's thread, so the caller never waits."""

    def __init__(self, on_change: Callable[[], None], *, policy: RestartPolicy | None = None,
                 clock: Callable[[], float] = time.time):
        self._on_change = on_change
        self._policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._sup: WorkerSupervisor | None = None
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._refused: WorkerView | None = None  # why the last start could not begin
        self.wanted: tuple[str, int, bool] | None = None  # (host, port, cache) of the last start
        self._allow_remote = False  # the last start's consent to a non-loopback host

    def view(self) -> WorkerView | None:
        with self._lock:
            sup, refused = self._sup, self._refused
        if refused is not None:
            return refused
        return sup.status() if sup is not None else None

    def start(self, host: str, port: int, cache: bool = False, *, allow_remote: bool = False) -> None:

        running = (self._thread is not None and self._thread.is_alive() and self._sup is not None
                   and self._stop is not None and not self._stop.is_set())
        if running and self._sup is not None and self.wanted == (host, port, cache) \
                and self._sup.state.phase is not EngineState.FAILED:
            return  # already sharing exactly this
        self.wanted, self._allow_remote = (host, port, cache), allow_remote
        why = None
        binary = rpc_server_binary()
        if not 0 < port < 65536:
            why = f"{port} is not a port number; give 1 to 65535."
        elif not is_loopback(host) and not allow_remote:
            why = (f"{host} would let other machines reach this worker; {NO_AUTH_WARNING} Allow it "
                   "in Settings to bind it anyway.")
        if why is not None or binary is None:
            why = why or "rpc-server is not installed; run `stoker setup --rpc` first."
            self.stop()
            with self._lock:
                self._refused = WorkerView(host=host, port=port, endpoint=RpcWorker(host, port).endpoint,
                                           state=EngineState.FAILED, cache=cache, loopback=is_loopback(host),
                                           last_error=why)
            self._on_change()
            return
        sup = WorkerSupervisor(binary, host, port, cache=cache, policy=self._policy,
                               on_status=lambda _view: self._on_change(), clock=self._clock)
        old_thread, old_stop = self._thread, self._stop
        if old_stop is not None:
            old_stop.set()
        stop = threading.Event()

        def run() -> None:
            if old_thread is not None:
                old_thread.join()  # the old rpc-server lets go of its port first
            if not stop.is_set():
                sup.run_until(stop)
            self._on_change()

        with self._lock:
            self._sup, self._stop, self._refused = sup, stop, None
        self._thread = threading.Thread(target=run, name=f"stoker-rpc-worker-{port}", daemon=True)
        self._thread.start()
        self._on_change()

    def start_again(self) -> None:
        """Start as last shared (with the consent given then); nothing when never shared."""
        if self.wanted is not None:
            host, port, cache = self.wanted
            self.start(host, port, cache, allow_remote=self._allow_remote)

    def stop(self) -> None:
        """Ask the running rpc-server to stop (it is gone once the view says stopped)."""
        with self._lock:
            self._refused = None
        if self._stop is not None:
            self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True


def _port_open(worker: RpcWorker) -> bool:
    # rpc-server serves one client at a time and a probe connection is dropped at once
    # (no HELLO), so this check does not disturb an engine that is connected.
    return reachable(worker, timeout_s=0.3)
