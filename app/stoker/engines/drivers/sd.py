"""The sd-server driver: image models (a diffusion model or checkpoint with its VAE and text
encoders in one folder) on stable-diffusion.cpp's sd-server. Its builds are Stoker's own
(`stoker setup --image`), the configured one and PATH's (stoker/engines/sd_files.py); its
plan is stoker/engines/sd_server.py's, with what it holds priced in the pool it runs in on
the machine the other residents leave; readiness is any answer on `/` (it loads before it
listens); its progress and failure lines are its own. A READY teaches it nothing yet.

Effects: it finds builds and reads the model's folder to find its parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.engines.builds import BACKEND_ORDER, sd_build_id
from stoker.engines.drivers.inputs import BuildPick, DriverBuild, EngineChoice, EnginePlan, PlanInputs, ReadyLesson
from stoker.engines.ds4_launch import Ds4Measurement
from stoker.engines.kind import SD_SERVER, EngineKind, failure_of_line, is_ready_status, progress_text
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.sd_files import CONFIG_ENV, find_sd_server, image_model_at
from stoker.engines.sd_server import ImagePlan, image_memory, plan_image_launch, sd_launch_spec
from stoker.engines.setup import installed_sd_build
from stoker.planning.measured import MeasuredMemory
from stoker.planning.plan import PlanRefusal
from stoker.planning.planner import machine_budgets


def _build_id(source: str, backend: str | None) -> str:
    return sd_build_id(backend or "cpu") if source == "own" else f"sd-server ({source})"


class SdServerDriver:
    kind = EngineKind.SD_SERVER
    launch_kind = EngineKind.SD_SERVER
    description = SD_SERVER
    build_pick = BuildPick.FIRST_FOUND
    lists_devices = False
    uses_rpc_workers = False
    learns_from_exit = False

    def builds(self) -> tuple[DriverBuild, ...]:
        """Every own build folder (intact or not, so a broken one shows with its reason), then
        the configured binary and PATH's when the search would use them."""
        root = stoker_paths().engines / "sd-server"
        rows = []
        for backend in BACKEND_ORDER:
            folder = root / sd_build_id(backend)
            if not folder.is_dir():
                continue
            manifest = installed_sd_build(root, backend)
            version = str(manifest.get("version")) if manifest and manifest.get("version") else None
            rows.append(DriverBuild(
                kind=self.kind, id=sd_build_id(backend), path=str(folder / SD_SERVER.binary_name),
                backend=backend, usable=manifest is not None, source="own", version=version,
                reason=None if manifest is not None else
                "its files do not match its manifest (a partial or changed build); run "
                "`stoker setup --image --force`."))
        found = find_sd_server()
        if found is not None and found.source != "own":
            rows.insert(0 if found.source == "configured" else len(rows), DriverBuild(
                kind=self.kind, id=_build_id(found.source, found.backend), path=found.path,
                backend=found.backend, usable=True, source=found.source))
        return tuple(rows)

    def default_build(self) -> EngineChoice | None:
        found = find_sd_server()
        if found is None:
            return None
        return EngineChoice(found.path, _build_id(found.source, found.backend), None, found.backend or "cpu")

    def launch_backend(self, plan: EnginePlan, build: EngineChoice) -> str:
        """The backend the launch runs on, for the snapshot and the exit's diagnosis."""
        return build.backend or "cpu"

    def missing_build(self) -> str:
        return ("no sd-server is installed to run this image model; run `stoker setup --image`, or set "
                f"`sd_server` in the settings (or {CONFIG_ENV}) to your own build.")

    def measured(self, model_path: str, binary: str | None
                 ) -> tuple[MeasuredMemory | None, tuple[Ds4Measurement, ...]]:
        return None, ()

    def plan(self, inputs: PlanInputs) -> EnginePlan | PlanRefusal:
        """Steps, CFG and tiling, and what it holds (its files plus compute buffers) in the pool
        it runs in: the GPU's for a GPU build, else host RAM."""
        model = image_model_at(inputs.model_path)
        if model is None:
            return PlanRefusal(inputs.model_path, f"{Path(inputs.model_path).name} is not a diffusion "
                               "model or checkpoint that sd-server can load", None, None, ())
        weights = sum(Path(f).stat().st_size for f in model.files)
        budgets = {p.name: p.budget for p in machine_budgets(inputs.machine, inputs.policy).pools}
        backend = inputs.build.backend
        gpu = next(iter(inputs.machine.gpus), None) if backend not in (None, "cpu") else None
        # The CPU build holds its weights in RAM; unified memory has one pool, named for its GPU.
        device = gpu.name if gpu is not None and gpu.name in budgets else \
            "CPU" if "CPU" in budgets else next(iter(budgets), "CPU")
        return plan_image_launch(model, threads=inputs.machine.physical_cores or None,
                                 memory=image_memory(weights, budgets.get(device, 0), device))

    def launch_spec(self, plan: EnginePlan, inputs: PlanInputs, *, binary: str, port: int,
                    alias: str | None) -> LaunchSpec:
        if not isinstance(plan, ImagePlan):
            raise TypeError(f"an sd-server launch needs an ImagePlan, not {type(plan).__name__}")
        return sd_launch_spec(plan, binary=binary, port=port)

    def is_ready(self, status: int | None) -> bool:
        return is_ready_status(self.kind, status)

    def progress(self, lines: Iterable[str]) -> str | None:
        return progress_text(self.kind, lines)

    def failure_of_line(self, line: str) -> str | None:
        return failure_of_line(self.kind, line)

    def learn_at_ready(self, model_path: str, binary: str, plan: EnginePlan,
                       lines: Iterable[str]) -> ReadyLesson:
        return ReadyLesson(0)  # its memory is priced from its files; nothing is measured yet
