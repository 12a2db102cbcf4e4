"""The ds4 driver: DeepSeek-V4-class models (architecture deepseek4) on antirez/ds4's
ds4-server. Its build is the first ds4-server found (stoker/engines/ds4_files.py), its plan
stoker/engines/ds4_launch.py's `plan_ds4` on the machine the other residents leave, its
readiness /v1/models, its progress and failure lines its own, and at READY it keeps the
memory line ds4 prints, per (model file, build), for the next plan.

Effects (the binary, the measurement store, the KV folder); it decides nothing the pure
ds4 module does not.
"""

from __future__ import annotations

from collections.abc import Iterable

from stoker.engines.drivers.inputs import BuildPick, DriverBuild, EngineChoice, EnginePlan, PlanInputs, ReadyLesson
from stoker.engines.ds4_files import (
    CONFIG_ENV,
    ds4_measurements,
    find_ds4_binary,
    kv_disk_dir,
    own_ds4_root,
    record_ds4_measurement,
)
from stoker.engines.ds4_launch import Ds4Measurement, Ds4Model, Ds4Plan, ds4_launch_spec, plan_ds4
from stoker.engines.kind import DS4, EngineKind, failure_of_line, is_ready_status, progress_text
from stoker.engines.launch_spec import LaunchSpec
from stoker.planning.measured import MeasuredMemory
from stoker.planning.plan import PlanRefusal


class Ds4Driver:
    kind = EngineKind.DS4
    launch_kind = EngineKind.DS4
    description = DS4
    build_pick = BuildPick.FIRST_FOUND
    lists_devices = False  # ds4-server has no --list-devices; the machine is probed without it
    uses_rpc_workers = False
    learns_from_exit = False

    def builds(self) -> tuple[DriverBuild, ...]:
        found = find_ds4_binary()
        if found is None:
            return ()
        return (DriverBuild(kind=self.kind, id=f"ds4 ({found.source})", path=found.path, backend=None,
                            usable=True, source=found.source),)

    def default_build(self) -> EngineChoice | None:
        found = find_ds4_binary()
        return None if found is None else EngineChoice(found.path, f"ds4 ({found.source})", None, None)

    def launch_backend(self, plan: EnginePlan, build: EngineChoice) -> str:
        """The backend the launch runs on, for the snapshot and the exit's diagnosis."""
        return plan.backend if isinstance(plan, Ds4Plan) else "cpu"  # metal | cuda, its plan decides

    def missing_build(self) -> str:
        return ("this model runs on ds4 and no ds4-server was found; build antirez/ds4 and set "
                f"`ds4_server` in the settings (or {CONFIG_ENV}), put ds4-server on PATH, or in "
                f"{own_ds4_root()}.")

    def measured(self, model_path: str, binary: str | None
                 ) -> tuple[MeasuredMemory | None, tuple[Ds4Measurement, ...]]:
        return None, (ds4_measurements(model_path, binary) if binary else ())

    def plan(self, inputs: PlanInputs) -> EnginePlan | PlanRefusal:
        model = Ds4Model(inputs.model_path, inputs.model_bytes, inputs.model.architecture,
                         inputs.model.n_ctx_train)
        return plan_ds4(model, inputs.machine, inputs.overrides, measured=inputs.ds4_measured,
                        kv_disk_dir=str(kv_disk_dir()))

    def launch_spec(self, plan: EnginePlan, inputs: PlanInputs, *, binary: str, port: int,
                    alias: str | None) -> LaunchSpec:
        if not isinstance(plan, Ds4Plan):
            raise TypeError(f"a ds4 launch needs a Ds4Plan, not {type(plan).__name__}")
        kv_disk_dir().mkdir(parents=True, exist_ok=True)
        return ds4_launch_spec(plan, binary=binary, port=port)

    def is_ready(self, status: int | None) -> bool:
        return is_ready_status(self.kind, status)

    def progress(self, lines: Iterable[str]) -> str | None:
        return progress_text(self.kind, lines)

    def failure_of_line(self, line: str) -> str | None:
        return failure_of_line(self.kind, line)

    def learn_at_ready(self, model_path: str, binary: str, plan: EnginePlan,
                       lines: Iterable[str]) -> ReadyLesson:
        if not isinstance(plan, Ds4Plan):
            return ReadyLesson(0)
        try:
            kept = record_ds4_measurement(model_path, binary, plan, tuple(lines))
        except OSError as exc:
            return ReadyLesson(0, None, f"could not save ds4's measured memory: {exc}")
        return ReadyLesson(0 if kept is None else 1)
