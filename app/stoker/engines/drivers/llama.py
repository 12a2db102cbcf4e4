"""The llama-server driver: its builds (Stoker's own, the configured one, the package's, PATH),
its plan (stoker/planning/planner.py), its argv (stoker/engines/argv.py), readiness on
/health, and what a READY teaches (the memory lines of its start-up report, a drafter it
refused). Also the base of the rpc-server driver, whose engine is a llama-server with --rpc.

Effects: it finds builds and reads and writes the measured lines. It must not choose among
builds by their strikes (the fleet's quarantine ledger does) nor decide what an exit means
(stoker/diagnosis/classify.py does).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from stoker.base.paths import storage_sentence
from stoker.diagnosis.silent_fallbacks import drafter_dropped_from_log
from stoker.engines import measurements
from stoker.engines.argv import PER_LAUNCH_KEY, build_launch_spec
from stoker.engines.drivers.inputs import BuildPick, DriverBuild, EngineChoice, EnginePlan, PlanInputs, ReadyLesson
from stoker.engines.ds4_launch import Ds4Measurement
from stoker.engines.engine_log import parse_memory_report
from stoker.engines.find import discover_engines
from stoker.engines.kind import LLAMA_SERVER, EngineKind, failure_of_line, is_ready_status, progress_text
from stoker.engines.launch_spec import LaunchSpec
from stoker.library.model_ids import model_kind
from stoker.planning.measured import MeasuredMemory
from stoker.planning.plan import Decision, LaunchPlan, PlanRefusal
from stoker.planning.planner import plan_launch

HOST = "127.0.0.1"


def build_row(b, kind: EngineKind = EngineKind.LLAMA_SERVER) -> DriverBuild:
    """A discovered llama-server-family build as `stoker engines` lists it."""
    version = f"{b.version or '?'} (b{b.build})" if b.build is not None else b.version
    return DriverBuild(kind=kind, id=b.id, path=b.binary, backend=b.backend, usable=b.usable,
                       source=b.source, version=version,
                       reason=None if b.usable else (b.status_reason or b.status))


class LlamaServerDriver:
    kind = EngineKind.LLAMA_SERVER
    launch_kind = EngineKind.LLAMA_SERVER
    description = LLAMA_SERVER
    build_pick = BuildPick.LEDGER
    lists_devices = True
    uses_rpc_workers = False
    learns_from_exit = True

    def __init__(self, engine_path: str | None = None) -> None:
        self.engine_path = engine_path  # `--engine` / `--engine-path`: also consider this build

    def builds(self) -> tuple[DriverBuild, ...]:
        return tuple(build_row(b) for b in self._discovered())

    def _discovered(self):
        return discover_engines(self.engine_path) if self.engine_path else discover_engines()

    def default_build(self) -> EngineChoice | None:
        usable = next((b for b in self._discovered() if b.usable), None)
        return None if usable is None else EngineChoice(usable.binary, usable.id, None, usable.backend)

    def launch_backend(self, plan: EnginePlan, build: EngineChoice) -> str:
        """The backend the launch runs on, for the snapshot and the exit's diagnosis."""
        return build.backend or "cpu"

    def missing_build(self) -> str:
        return ("no usable llama-server build was found; run `stoker setup` or set the engine path "
                "in the settings.")

    def measured(self, model_path: str, binary: str | None
                 ) -> tuple[MeasuredMemory | None, tuple[Ds4Measurement, ...]]:
        if not binary:
            return None, ()
        try:
            return measurements.lookup(model_path, binary), ()
        except OSError:  # an unreadable store is a cache miss, never a reason not to plan
            return None, ()

    def plan(self, inputs: PlanInputs) -> EnginePlan | PlanRefusal:
        plan = plan_launch(inputs.model, inputs.machine, inputs.overrides, inputs.policy,
                           draft=inputs.drafter, mmproj=inputs.projector, measured=inputs.measured,
                           broken_drafters=inputs.broken_drafters)
        if isinstance(plan, LaunchPlan) and inputs.build.why:
            what = f"engine {inputs.build.build_id}" if inputs.build.build_id else "engine"
            plan = dataclasses.replace(plan, decisions=(Decision(what, inputs.build.why),) + plan.decisions)
        return plan

    def launch_spec(self, plan: EnginePlan, inputs: PlanInputs, *, binary: str, port: int,
                    alias: str | None) -> LaunchSpec:
        if not isinstance(plan, LaunchPlan):
            raise TypeError(f"a llama-server launch needs a LaunchPlan, not {type(plan).__name__}")
        m = inputs.model
        return build_launch_spec(plan, binary=binary, port=port, host=HOST, log_file=None,
                                 api_key_entry=PER_LAUNCH_KEY, backend=inputs.build.backend or "cpu",
                                 serves=model_kind(m.architecture, m.pooling_type, m.general_type),
                                 alias=alias)

    def is_ready(self, status: int | None) -> bool:
        return is_ready_status(self.kind, status)

    def progress(self, lines: Iterable[str]) -> str | None:
        return progress_text(self.kind, lines)  # its progress is its slots, not its log: None

    def failure_of_line(self, line: str) -> str | None:
        return failure_of_line(self.kind, line)  # classify_exit reads llama-server's lines

    def learn_at_ready(self, model_path: str, binary: str, plan: EnginePlan,
                       lines: Iterable[str]) -> ReadyLesson:
        """Record this launch's real buffers (the next plan uses the measured line); say
        whether it dropped the drafter it was given."""
        lines = tuple(lines)
        if not isinstance(plan, LaunchPlan):
            return ReadyLesson(0)
        drafter = plan.drafter
        why = drafter_dropped_from_log(lines) if drafter.status == "in" and drafter.draft_path else None
        try:
            recorded = measurements.record_launch(model_path, binary, plan, parse_memory_report(lines))
        except OSError as exc:
            return ReadyLesson(0, why, f"could not save the measured memory: {storage_sentence(exc)}")
        return ReadyLesson(recorded, why)
