"""sd-server's effects: find the binary to launch, find an image model's files, and turn a
model's files into the image model its driver (stoker/engines/drivers/sd.py) plans.

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
from stoker.engines.kind import SD_SERVER
from stoker.engines.setup import installed_sd_build
from stoker.library.gguf_io import load_summary
from stoker.library.image_parts import ImageFile, ImageModel, ImagePart, image_models_from

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
