"""The rpc-server driver: llama.cpp's RPC workers (`stoker setup --rpc`). Its builds are the
rpc-server and the llama-server built with GGML_RPC=ON beside it (`<engines>/rpc/`); the
launch it plans is that llama-server's, on this machine plus the devices the workers lend,
so it plans only with workers required (`PlanInputs.rpc_workers`). Everything about the
engine process (argv, readiness, lines, what READY teaches) is llama-server's.

Effects: it finds the RPC build. Running a worker is stoker/fleet/rpc_worker.py's.
"""

from __future__ import annotations

import dataclasses

from stoker.base.paths import stoker_paths
from stoker.engines.drivers.inputs import BuildPick, DriverBuild, EngineChoice, EnginePlan, PlanInputs
from stoker.engines.drivers.llama import LlamaServerDriver, build_row
from stoker.engines.find import BINARY_NAME, discover_engines
from stoker.engines.kind import RPC_SERVER, EngineKind
from stoker.engines.setup import RPC_BUILD_ID, RPC_SERVER_NAME, installed_rpc_build
from stoker.planning.plan import PlanRefusal

WHY = "the llama-server built with GGML_RPC=ON, the one here that can take --rpc"


class RpcServerDriver(LlamaServerDriver):
    kind = EngineKind.RPC_SERVER
    launch_kind = EngineKind.LLAMA_SERVER  # the engine it launches is a llama-server with --rpc
    description = RPC_SERVER
    build_pick = BuildPick.FIRST_FOUND
    lists_devices = True
    uses_rpc_workers = True
    learns_from_exit = True

    def _folder(self):
        return stoker_paths().engines / "rpc" / RPC_BUILD_ID

    def builds(self) -> tuple[DriverBuild, ...]:
        folder = self._folder()
        if not folder.is_dir():
            return ()
        manifest = installed_rpc_build(folder.parent)
        reason = None if manifest is not None else \
            "its files do not match its manifest; run `stoker setup --rpc --force`."
        version = f"{manifest.get('version')} (b{manifest.get('build')})" if manifest else None
        rows = [DriverBuild(kind=self.kind, id=RPC_BUILD_ID, path=str(folder / RPC_SERVER_NAME),
                            backend="cpu", usable=manifest is not None, source="own",
                            version=version, reason=reason)]
        engine = folder / BINARY_NAME
        if engine.is_file():
            rows += [dataclasses.replace(build_row(b), id=RPC_BUILD_ID, backend="cpu", source="own (rpc)")
                     for b in discover_engines(str(engine)) if b.source == "configured"]
        return tuple(rows)

    def default_build(self) -> EngineChoice | None:
        engine = self._folder() / BINARY_NAME
        if not engine.is_file():
            return None
        usable = [b for b in discover_engines(str(engine)) if b.source == "configured" and b.usable]
        return EngineChoice(usable[0].binary, RPC_BUILD_ID, WHY, "cpu") if usable else None

    def missing_build(self) -> str:
        if (self._folder() / BINARY_NAME).is_file():
            return f"the RPC engine {self._folder() / BINARY_NAME} cannot run here; run `stoker setup --rpc --force`."
        return ("RPC workers are set but the engine that can use them is not installed; run "
                "`stoker setup --rpc`, or remove the workers (--rpc, Settings' rpc_workers).")

    def plan(self, inputs: PlanInputs) -> EnginePlan | PlanRefusal:
        if not inputs.rpc_workers:
            return PlanRefusal(inputs.model_path, "an RPC plan needs at least one worker; name one with "
                               "--rpc HOST:PORT or in Settings' rpc_workers", None, None, ())
        return super().plan(inputs)
