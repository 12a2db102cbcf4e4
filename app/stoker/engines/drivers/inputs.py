"""What every engine driver is asked, and with what: `PlanInputs` (everything that changes a
plan, none of it optional), the build a plan is for, one build row for `stoker engines`, and
the `EngineDriver` Protocol each kind's driver (llama-server, ds4, sd-server, rpc-server)
implements.

It exists so the fleet, the CLI and the desktop ask a driver instead of branching on the
engine kind themselves. Values only: it must not find builds, read files or plan (the
drivers do; `stoker.fleet.pipeline.gather_plan_inputs` gathers the inputs, in one place).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from stoker.base.overrides import ModelOverrides
from stoker.base.rpc_address import RpcWorker
from stoker.engines.ds4_launch import Ds4Measurement, Ds4Plan
from stoker.engines.kind import EngineDescription, EngineKind
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.sd_server import ImagePlan
from stoker.library.gguf_summary import ModelSummary
from stoker.planning.machine import Machine
from stoker.planning.measured import MeasuredMemory
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.planner import PlanPolicy

EnginePlan = LaunchPlan | Ds4Plan | ImagePlan


class BuildPick(Enum):
    """How a launch chooses among a kind's builds."""

    LEDGER = "ledger"  # the best usable build not quarantined by start-up crashes (llama-server)
    FIRST_FOUND = "first-found"  # the first the driver finds (ds4, sd-server, the RPC engine)


@dataclass(frozen=True)
class EngineChoice:
    """The build a plan is for (None binary: no build known, plan for the host alone)."""

    binary: str | None
    build_id: str | None = None
    why: str | None = None  # which build runs and why, for the plan's decisions
    backend: str | None = None  # cpu | cuda | rocm | vulkan | metal; None: unknown


@dataclass(frozen=True)
class DriverBuild:
    """One build of one kind, as `stoker engines` lists it."""

    kind: EngineKind
    id: str
    path: str
    backend: str | None
    usable: bool
    source: str  # own | configured | path | package
    version: str | None = None
    reason: str | None = None  # why it cannot run; None when usable


@dataclass(frozen=True)
class PlanInputs:
    """Everything that changes a plan, gathered in one place (fleet/pipeline.py).

    `machine` is the machine the plan sees: as probed (with the RPC workers' devices), the
    bytes other residents hold added back, each pool capped at the budget; `held_bytes`
    and `budget_bytes` say what was done to it. Fields a kind does not read stay empty
    (a llama-server plan has no ds4 measurements), never absent.
    """

    kind: EngineKind
    model_path: str
    model: ModelSummary
    model_bytes: int | None  # the model file's size; None for a header read off the hub
    machine: Machine
    overrides: ModelOverrides
    policy: PlanPolicy  # Settings' memory reserve, or a recovery step's headroom
    build: EngineChoice
    held_bytes: tuple[tuple[str, int], ...]
    budget_bytes: int | None  # what all models together may use; None: no cap
    projector_path: str | None
    projector: ModelSummary | None
    drafter_path: str | None
    drafter: ModelSummary | None
    broken_drafters: frozenset[str]
    rpc_workers: tuple[RpcWorker, ...]
    measured: MeasuredMemory | None  # llama-server's lines for (model, build)
    ds4_measured: tuple[Ds4Measurement, ...]

    @property
    def reserve_bytes(self) -> int:
        return self.policy.os_reserve_min_bytes


@dataclass(frozen=True)
class ReadyLesson:
    """What a launch taught at READY, for the fleet's ledger (the driver saved the rest)."""

    measured_lines: int  # memory lines recorded for the next plan (0: none found)
    drafter_dropped: str | None = None  # why the engine started without the chosen drafter
    problem: str | None = None  # one sentence when what it taught could not be saved


class EngineDriver(Protocol):
    """Everything that differs between engine kinds; callers ask `driver_for(...)` for one."""

    kind: EngineKind  # the kind whose builds it lists
    launch_kind: EngineKind  # the engine process a launch of its plan runs (PreparedLaunch.kind)
    description: EngineDescription
    build_pick: BuildPick
    lists_devices: bool  # whether `--list-devices` of its binary tells the machine's GPUs
    uses_rpc_workers: bool  # whether its plan spreads over RPC workers' devices
    # Whether the fleet's strikes, quarantine and out-of-memory ladder apply to its exits
    # (they read a llama-server plan); its own failure lines name the others' exits.
    learns_from_exit: bool

    def builds(self) -> tuple[DriverBuild, ...]: ...
    def default_build(self) -> EngineChoice | None: ...
    def measured(self, model_path: str, binary: str | None
                 ) -> tuple[MeasuredMemory | None, tuple[Ds4Measurement, ...]]: ...
    def plan(self, inputs: PlanInputs) -> EnginePlan | PlanRefusal: ...
    def launch_spec(self, plan: EnginePlan, inputs: PlanInputs, *, binary: str, port: int,
                    alias: str | None) -> LaunchSpec: ...
    def missing_build(self) -> str: ...
    def launch_backend(self, plan: EnginePlan, build: EngineChoice) -> str: ...
    def is_ready(self, status: int | None) -> bool: ...
    def progress(self, lines: Iterable[str]) -> str | None: ...
    def failure_of_line(self, line: str) -> str | None: ...
    def learn_at_ready(self, model_path: str, binary: str, plan: EnginePlan,
                       lines: Iterable[str]) -> ReadyLesson: ...
