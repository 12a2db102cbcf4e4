"""Run one llama.cpp `rpc-server` on this machine and keep it running: `stoker worker`.

It is the engine supervisor's lifecycle on a smaller process: the same pure reducer
(core/lifecycle.py `step`) and restart policy (core/restart.py) decide every transition,
and this module only carries out the effects. It is not the multi-model Supervisor: an
rpc-server has no /health, no model, no plan and no gateway route, so READY here means
"its port accepts a TCP connection". Incidents (an exit, a crash loop) go to the same
ledger (`<data>/incidents.jsonl`, kind `rpc-worker-exit`). The binary comes from
`stoker setup --rpc` (`<data>/engines/rpc/b11434-cpu-rpc/rpc-server`).

It never decides whether a non-loopback bind is allowed: the command asks for the flag.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stoker.core.launch_spec import LaunchSpec
from stoker.core.lifecycle import (
    BecameReady, Exited, Finish, Kill, LifecycleState, Publish, RecordIncident, RetryDue,
    ScheduleRetry, ShutdownRequested, Spawn, Spawned, SpawnFailed, StartRequested, StartupTimedOut,
    StoppedClean, step)
from stoker.core.restart import RestartPolicy
from stoker.core.rpc import RpcWorker, allocated_bytes
from stoker.core.snapshot import EngineState
from stoker.shell.incidents import IncidentLog
from stoker.shell.process import EngineProcess
from stoker.shell.setup import RPC_BUILD_ID, RPC_SERVER_NAME

POLL_S = 0.1
CONNECT_TIMEOUT_S = 1.0
STARTUP_DEADLINE_S = 30.0


def rpc_build_folder() -> Path:
    from stoker.shell.paths import stoker_paths

    return stoker_paths().engines / "rpc" / RPC_BUILD_ID


def rpc_server_binary() -> Path | None:
    p = rpc_build_folder() / RPC_SERVER_NAME
    return p if p.is_file() else None


def rpc_llama_server() -> Path | None:
    """The llama-server built with GGML_RPC=ON (the plain builds cannot take --rpc)."""
    from stoker.shell.engines import BINARY_NAME

    p = rpc_build_folder() / BINARY_NAME
    return p if p.is_file() else None


def reachable(worker: RpcWorker, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """A TCP connect within `timeout_s`: the check before the engine is asked (it would hang
    or abort on a worker that is not there)."""
    try:
        with socket.create_connection((worker.host, worker.port), timeout=timeout_s):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class WorkerStatus:
    endpoint: str
    phase: EngineState
    pid: int | None
    restarts: int
    last_error: str | None
    allocated_bytes: int | None  # from the debug log, when --log-allocations is on


@dataclass(frozen=True)
class _WorkerIncident:
    """What the ledger records for a worker exit (the fields IncidentLog reads)."""

    kind: str
    title: str
    evidence: str
    advice: str
    exit_description: str


class WorkerSupervisor:
    """One rpc-server, restarted with backoff; `run_until(stop)` blocks, `status()` any time."""

    def __init__(self, binary: Path, host: str, port: int, *, cache: bool = False,
                 threads: int | None = None, log_allocations: bool = False,
                 policy: RestartPolicy | None = None, log_dir: Path | None = None,
                 incident_log: IncidentLog | None = None,
                 on_status: Callable[[WorkerStatus], None] | None = None,
                 clock: Callable[[], float] = time.time):
        from stoker.shell.paths import stoker_paths

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
        self._lock = threading.Lock()

    # -- what it runs

    def spec(self) -> LaunchSpec:
        argv = [str(self.binary), "--host", self.worker.host, "--port", str(self.worker.port)]
        if self.threads:
            argv += ["--threads", str(self.threads)]
        if self.cache:
            argv.append("--cache")
        env: tuple[tuple[str, str], ...] = (("GGML_RPC_DEBUG", "1"),) if self.log_allocations else ()
        return LaunchSpec(binary=str(self.binary), argv=tuple(argv), env=env,
                          drop_env_prefixes=("LLAMA_ARG_",), secret_env=(), host=self.worker.host,
                          port=self.worker.port)

    def status(self) -> WorkerStatus:
        with self._lock:
            proc = self.proc
            return WorkerStatus(self.worker.endpoint, self.state.phase, self.state.pid,
                                self.state.restarts, self.state.last_error,
                                allocated_bytes(proc.tail()) if proc is not None else None)

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
                    with self._lock:
                        self.proc = None
                    self._feed(Exited(ex))
                    continue
                if self.state.phase is EngineState.STARTING:
                    # Its start-up lines sit in a pipe buffer until it writes more, so the
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
            try:
                proc = EngineProcess.start(self.spec(), log_dir=self.log_dir, log_name=self.log_name)
            except OSError as exc:
                self._feed(SpawnFailed(str(exc)))
                return
            with self._lock:
                self.proc = proc
            self._feed(Spawned(proc.pid))
        elif isinstance(effect, Kill):
            proc = self.proc
            if proc is not None:
                proc.stop(grace_s=1.0 if effect.hung else 5.0)
                with self._lock:
                    self.proc = None
            self._feed(StoppedClean())
        elif isinstance(effect, RecordIncident):
            self._record(effect)
        elif isinstance(effect, Publish) and self.on_status is not None:
            self.on_status(self.status())
        elif isinstance(effect, (ScheduleRetry, Finish)):
            pass  # the loop polls retry_at and finished

    def _record(self, effect: RecordIncident) -> None:
        ex = effect.exit
        tail = [ln for ln in (ex.log_tail if ex else ()) if ln.strip()]
        evidence = tail[-1] if tail else effect.summary
        title = (f"The RPC worker on {self.worker.endpoint} stopped: "
                 f"{ex.describe().replace('the engine', 'rpc-server') if ex else effect.summary}.")
        incident = _WorkerIncident(
            kind=effect.kind or "rpc-worker-exit", title=title, evidence=evidence[:300],
            advice=("Engines using this worker lose its layers until it is back; Stoker restarts it. "
                    "If it keeps stopping, see the worker log " + str(self.log_dir / self.log_name) + "."),
            exit_description=ex.describe() if ex else effect.summary)
        try:
            self.incidents.append(incident, at=self.clock(), model=None, build=RPC_BUILD_ID,
                                  action=effect.action)
        except OSError:
            pass


def _port_open(worker: RpcWorker) -> bool:
    # rpc-server serves one client at a time and a probe connection is dropped at once
    # (no HELLO), so this check does not disturb an engine that is connected.
    return reachable(worker, timeout_s=0.3)
