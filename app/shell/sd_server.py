"""Find the sd-server to launch: the configured path (setting `sd_server`, or the
STOKER_SD_SERVER environment variable), then Stoker's own builds made by
`stoker setup --image` (GPU backends before CPU, intact ones only), then `sd-server` on PATH.

It finds; it does not decide how to launch (core/sd_server.py) or build (shell/setup.py).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from stoker.core.engine_kind import SD_SERVER
from stoker.core.engines import BACKEND_ORDER, sd_build_id
from stoker.shell.engines import read_setting
from stoker.shell.paths import stoker_paths

CONFIG_ENV = "STOKER_SD_SERVER"


@dataclass(frozen=True)
class SdServerBinary:
    path: str
    source: str  # configured | own | path
    backend: str | None  # from an own build's manifest; None when unknown


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_sd_server(configured: str | None = None) -> SdServerBinary | None:
    from stoker.shell.setup import installed_sd_build  # the manifest check lives with the installer

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
