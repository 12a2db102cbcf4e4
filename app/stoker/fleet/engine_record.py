"""What the supervisor keeps per model: its lifecycle state and the handles of its engine.

A record of its own so that both runners the supervisor drives can name it: EngineRunner
(stoker/fleet/supervisor.py) carries out one engine's lifecycle effects on it, FleetRunner
(stoker/fleet/fleet_runner.py) the fleet's. It is touched only on the supervisor thread
(the stop thread sets `stop_done` and nothing else) and holds no decision: the lifecycle's
are stoker/fleet/lifecycle.py's, the fleet's stoker/fleet/fleet_state.py's.
"""

from __future__ import annotations

import threading

from stoker.diagnosis.exit_report import Incident
from stoker.diagnosis.views import BlockerView
from stoker.engines.engine_exit import EngineExit
from stoker.engines.launch import ExitDecision, PreparationRefused, PreparedLaunch
from stoker.engines.process import EngineProcess
from stoker.fleet import lifecycle as life
from stoker.fleet.lifecycle import LifecycleState
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.snapshot import EngineState


class EngineRecord:
    """One model's lifecycle state and the handles of its process and launch; touched only
    by the supervisor thread. What the fleet decides about it lives in fleet_state."""

    def __init__(self, key: str, policy: RestartPolicy) -> None:
        self.key = key
        self.state = LifecycleState(policy=policy, model_path=key or None)
        self.proc: EngineProcess | None = None
        self.launch: PreparedLaunch | None = None
        self.prepared: PreparedLaunch | PreparationRefused | None = None  # admitted, not spawned
        self.events: list[life.Event] = []
        self.stopper: threading.Thread | None = None  # a stop in progress, off this thread
        self.stop_done = threading.Event()  # set by the stopper as it ends, before it wakes us
        self.diagnosed: tuple[EngineExit, Incident | None, ExitDecision] | None = None
        self.last_exit: EngineExit | None = None
        self.incident_blockers: tuple[BlockerView, ...] = ()  # until a person starts again
        self.ready_blockers: tuple[BlockerView, ...] = ()  # about the build running now
        self.drafter_note: tuple[str, str] | None = None  # the engine dropped the drafter
        self.after_failure = False  # the next attempt is an automatic retry
        self.cancelling = False  # stopped to cancel its work: a short grace, no incident
        self.progress: str | None = None  # what a working ds4 / sd-server says it is doing
        self.progress_at = 0.0
        self.ctx_at_least: int | None = None  # per slot, asked by a request (WidenContext)
        self.context_asked: tuple[int, str] | None = None  # (tokens asked, what was done, in words)
        self.reload_s: float | None = None  # its measured load time, as eviction prices it

    @property
    def phase(self) -> EngineState:
        return self.state.phase
