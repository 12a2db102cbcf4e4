"""sd-server's effects: find the binary to launch, find an image model's files, and turn a
model into the launch the supervisor runs.

The binary: the configured path (setting `sd_server`, or the STOKER_SD_SERVER environment
variable), then Stoker's own builds made by `stoker setup --image` (GPU backends before CPU,
intact ones only), then `sd-server` on PATH. An image model's files are its diffusion model
(or checkpoint) and the VAE and text encoders in its folder, told apart by their tensor
names (stoker/library/image_parts.py, read through the cached GGUF summaries).

It finds and assembles; it does not decide how to launch (stoker/engines/sd_server.py) or build
(stoker/engines/setup.py).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import read_setting
from stoker.engines.builds import BACKEND_ORDER, sd_build_id
from stoker.engines.kind import SD_SERVER, EngineKind
from stoker.engines.launch import AttemptContext, PreparationRefused, PreparedLaunch
from stoker.engines.sd_server import ImagePart, image_memory, plan_image_launch, sd_launch_spec
from stoker.engines.setup import installed_sd_build
from stoker.library.gguf_io import load_summary
from stoker.library.image_parts import ImageFile, ImageModel, image_models_from
from stoker.planning.machine import Machine

CONFIG_ENV = "STOKER_SD_SERVER"


@dataclass(frozen=True)
class SdServerBinary:
    path: str
    source: str  # configured | own | path
    backend: str | None  # from an own build's manifest; None when unknown


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_sd_server(configured: str | None = None) -> SdServerBinary | None:

    configured = configured or os.environ.get(CONFIG_ENV) or read_setting("sd_server")
    if configured and _executable(Path(configured).expanduser()):
        return SdServerBinary(str(Path(configured).expanduser()), "configured", None)
    root = stoker_paths().engines / "sd-server"
    for backend in BACKEND_ORDER:
        manifest = installed_sd_build(root, backend) if root.is_dir() else None
        if manifest is not None:
            return SdServerBinary(str(root / sd_build_id(backend) / SD_SERVER.binary_name), "own", backend)
    on_path = shutil.which(SD_SERVER.binary_name)
    return SdServerBinary(on_path, "path", None) if on_path else None


def image_files_in(folder: Path) -> list[ImageFile]:
    """The GGUF files in one folder that are parts of an image model (unreadable ones left out)."""
    out = []
    for p in sorted(folder.glob("*.gguf")) if folder.is_dir() else []:
        try:
            part = load_summary(p).image_part
        except (OSError, ValueError):
            continue
        if part:
            out.append(ImageFile(str(p.resolve()), ImagePart(part)))
    return out


def image_model_at(model_path: str | Path) -> ImageModel | None:
    """The image model whose diffusion model or checkpoint is this file, with the files beside
    it; None when the file is not one."""
    real = str(Path(model_path).resolve())
    for model in image_models_from(image_files_in(Path(real).parent)):
        if real in (model.checkpoint, model.diffusion_model):
            return model
    return None


def prepare_image_launch(model_path: str, attempt: AttemptContext, *, machine: Machine,
                         budgets: dict[str, int], idle_timeout_s: float | None
                         ) -> PreparedLaunch | PreparationRefused:
    """The sd-server launch for an image model: its files, the plan's steps and tiling, and
    what it holds (its files plus compute buffers) in the pool it runs in (`budgets`, by
    device name as the llama-server planner names them), for residency."""
    binary = find_sd_server()
    if binary is None:
        return PreparationRefused(model_path, "no sd-server is installed to run this image model; run "
                                              "`stoker setup --image`, or set `sd_server` in the settings "
                                              f"(or {CONFIG_ENV}) to your own build.")
    model = image_model_at(model_path)
    if model is None:
        return PreparationRefused(model_path, f"{Path(model_path).name} is not a diffusion model or checkpoint "
                                              "that sd-server can load.")
    weights = sum(Path(f).stat().st_size for f in model.files)
    gpu = next((d for d in machine.gpus), None) if binary.backend not in (None, "cpu") else None
    # The CPU build holds its weights in RAM; unified memory has one pool, named for its GPU.
    device = gpu.name if gpu is not None and gpu.name in budgets else \
        "CPU" if "CPU" in budgets else next(iter(budgets), "CPU")
    plan = plan_image_launch(model, threads=machine.physical_cores or None,
                             memory=image_memory(weights, budgets.get(device, 0), device))
    spec = sd_launch_spec(plan, binary=binary.path, port=attempt.port)
    backend = binary.backend or "cpu"
    build = sd_build_id(backend) if binary.source == "own" else f"sd-server ({binary.source})"
    return PreparedLaunch(spec=spec, model_path=str(Path(model_path).resolve()), plan=plan, build_id=build,
                          backend=backend, startup_deadline_s=SD_SERVER.startup_deadline_s,
                          idle_timeout_s=idle_timeout_s, kind=EngineKind.SD_SERVER)
