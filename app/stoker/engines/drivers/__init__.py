"""One driver per engine kind, and `driver_for`: the one place that decides which kind runs
a model (sd-server for an image model, ds4 for a deepseek4 one, the RPC engine when workers
are required, llama-server else) or which driver answers for a running launch's kind.

Callers ask the driver (its builds, its plan, argv, readiness, progress and failure lines,
what READY teaches) and never branch on the kind themselves. A new engine kind is a module
here with a class implementing `inputs.EngineDriver`, and one line in `_DRIVERS`.
"""

from __future__ import annotations

from stoker.engines.drivers.ds4 import Ds4Driver
from stoker.engines.drivers.inputs import EngineDriver
from stoker.engines.drivers.llama import LlamaServerDriver
from stoker.engines.drivers.rpc import RpcServerDriver
from stoker.engines.drivers.sd import SdServerDriver
from stoker.engines.kind import EngineKind, engine_kind_for
from stoker.library.gguf_summary import ModelSummary
from stoker.library.model_ids import model_kind

_DRIVERS: dict[EngineKind, EngineDriver] = {
    EngineKind.LLAMA_SERVER: LlamaServerDriver(),
    EngineKind.DS4: Ds4Driver(),
    EngineKind.SD_SERVER: SdServerDriver(),
    EngineKind.RPC_SERVER: RpcServerDriver(),
}


def driver_for(model: ModelSummary | EngineKind, *, rpc_workers: tuple = ()) -> EngineDriver:
    """The driver for a model (by its header) or for an engine kind. A text model with RPC
    workers required runs on the RPC engine; an image or ds4 model ignores them."""
    if isinstance(model, EngineKind):
        return _DRIVERS[model]
    kind = engine_kind_for(model_kind(model.architecture, model.pooling_type, model.general_type,
                                      model.image_part), model.architecture)
    if kind is EngineKind.LLAMA_SERVER and rpc_workers:
        kind = EngineKind.RPC_SERVER
    return _DRIVERS[kind]


def all_drivers(engine_path: str | None = None) -> tuple[EngineDriver, ...]:
    """Every kind's driver, llama-server first (`engine_path`: a llama-server to consider too)."""
    llama = LlamaServerDriver(engine_path) if engine_path else _DRIVERS[EngineKind.LLAMA_SERVER]
    return (llama, _DRIVERS[EngineKind.RPC_SERVER], _DRIVERS[EngineKind.SD_SERVER], _DRIVERS[EngineKind.DS4])
