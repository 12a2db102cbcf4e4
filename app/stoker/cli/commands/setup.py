"""`stoker setup`: build llama-server b11434 for this machine and fetch the demo model;
`stoker setup --image` builds the image engine instead (sd-server of stable-diffusion.cpp).

This module decides only how progress looks: a bar on a terminal, a line every 5 % when
the output is a log (CI), or JSON lines with `--json-progress` (for the app's own UI).
What to build is `core.engines`; how to build and install it is `shell.setup`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from stoker.base.paths import stoker_paths
from stoker.engines.bandwidth import cached_cpu_bandwidth, measure_cpu_bandwidth
from stoker.engines.builds import (
    ENGINE_BUILD,
    SD_VERSION,
    build_id,
    cmake_flags,
    detect_toolkits,
    progress_steps_to_report,
    sd_build_id,
    sd_cmake_flags,
)
from stoker.engines.find import BINARY_NAME
from stoker.engines.setup import (
    RPC_BUILD_ID,
    SetupError,
    fetch_demo_model,
    setup_engine,
    setup_image_engine,
    setup_rpc,
    toolkit_presence,
)
from stoker.errors import UserError

BACKEND_CHOICES = ("auto", "cpu", "cuda", "rocm", "vulkan", "metal")


def add_arguments(parser) -> None:
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                        help="which build to make; auto = CPU plus each GPU backend whose toolkit and GPU "
                             "are present (default: auto)")
    parser.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                        help="parallel compile jobs (default: all CPU cores)")
    parser.add_argument("--force", action="store_true",
                        help="rebuild and reinstall even when an intact build is installed")
    parser.add_argument("--native", action="store_true",
                        help="compile for this CPU's every extension (GGML_NATIVE=ON) instead of the "
                             "portable AVX2 baseline; faster where it works, but some VMs advertise "
                             "extensions (AVX-512, AMX) the engine then crashes on")
    parser.add_argument("--build-dir", type=Path, default=None, metavar="DIR",
                        help="use this build folder (one backend only); a folder already configured with "
                             "the same flags is reused")
    parser.add_argument("--image-build-dir", type=Path, default=None, metavar="DIR",
                        help="with --image: use this build folder for sd-server (one backend only); a folder "
                             "already configured with the same flags is reused")
    parser.add_argument("--json-progress", action="store_true",
                        help="print progress as JSON lines on stdout (schema 1)")
    parser.add_argument("--skip-model", action="store_true", help="do not fetch the demo model")
    parser.add_argument("--rpc", action="store_true",
                        help="also build rpc-server and an engine that can use RPC workers "
                             "(`stoker worker`, `stoker run --rpc`); needs the CPU build")
    parser.add_argument("--rpc-build-dir", type=Path, default=None, metavar="DIR",
                        help="use this build folder for the RPC build; one configured with the same "
                             "flags is reused")
    parser.add_argument("--image", action="store_true",
                        help=f"build the image engine, sd-server {SD_VERSION} (stable-diffusion.cpp), for the "
                             "same backends instead of llama-server and the demo model; about 12 minutes on 2 "
                             "cores for the CPU build")


class TerminalReporter:
    """A redrawn bar on a TTY; otherwise one line per 5 % so CI logs stay short."""

    def __init__(self, stream=None, tty: bool | None = None, width: int = 30):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.width = width
        self.bar_open = False
        self.last: float | None = None

    def _close_bar(self) -> None:
        if self.bar_open:
            self.stream.write("\n")
            self.bar_open = False

    def phase(self, text: str) -> None:
        self._close_bar()
        self.last = None
        self.stream.write(f"{text} …\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        self._close_bar()
        self.stream.write(f"  {text}\n")
        self.stream.flush()

    def progress(self, fraction: float) -> None:
        if self.tty:
            filled = int(round(fraction * self.width))
            self.stream.write(f"\r  [{'#' * filled}{'-' * (self.width - filled)}] {fraction * 100:5.1f}%")
            self.bar_open = True
        elif progress_steps_to_report(self.last, fraction):
            self.stream.write(f"  {int(fraction * 100)}%\n")
            self.last = fraction
        self.stream.flush()

    def finish(self) -> None:
        self._close_bar()


class JsonReporter:
    """`{"schema": 1, "event": "phase"|"progress"|"note"|"done"|"error", …}` one per line."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.last_percent: int | None = None

    def emit(self, **fields) -> None:
        self.stream.write(json.dumps({"schema": 1, **fields}) + "\n")
        self.stream.flush()

    def phase(self, text: str) -> None:
        self.last_percent = None
        self.emit(event="phase", text=text)

    def note(self, text: str) -> None:
        self.emit(event="note", text=text)

    def progress(self, fraction: float) -> None:
        percent = int(fraction * 100)
        if percent != self.last_percent:
            self.last_percent = percent
            self.emit(event="progress", fraction=round(fraction, 4))

    def finish(self) -> None:
        pass


def choose_backends(requested: str) -> tuple[tuple[str, ...], tuple[str, ...]]:

    if requested != "auto":
        return (requested,), ()
    return detect_toolkits(toolkit_presence(), platform.system())


def _interrupt_on_sigterm() -> None:
    """Treat SIGTERM (a cancelled CI job, `kill`) like Ctrl-C, so the same cleanup runs:
    the compiler is stopped and a half-copied install is removed."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # not the main thread (tests calling run() from a worker)
        signal.signal(signal.SIGTERM, handler)


def run(args) -> int:

    _interrupt_on_sigterm()
    reporter: JsonReporter | TerminalReporter = JsonReporter() if args.json_progress else TerminalReporter()
    try:
        return _run(args, reporter)
    except UserError as exc:
        if isinstance(reporter, JsonReporter):  # a UI reading the stream learns why it ended, not only the exit code
            reporter.emit(event="error", text=str(exc))
        raise


def _measure_cpu_bandwidth(installed, model, reporter):
    """Measure this CPU's decode bandwidth once per installed build (cached; plans read it)."""

    if model is None:
        return None
    found = None
    for b in installed:
        binary = b.folder / BINARY_NAME
        found = cached_cpu_bandwidth(binary)
        if found is None or not found.effective_bytes_per_s:
            reporter.phase("Measuring how fast this CPU reads model weights (a few seconds)")
            # 32 tokens: well under a second on a desktop, and bounded on a loaded machine
            found, reason = measure_cpu_bandwidth(binary, model, n_predict=32, requests=1, timeout_s=60.0)
            if not found.effective_bytes_per_s:
                reporter.note(f"could not measure this CPU's bandwidth ({reason}); plans will say their "
                              f"decode speed is unknown until `stoker bench speed` measures it.")
    return found


def _run(args, reporter) -> int:

    paths = stoker_paths().ensure()
    backends, skipped = choose_backends(args.backend)
    if args.build_dir is not None and len(backends) != 1:
        raise UserError("--build-dir needs one backend; add --backend cpu (or the backend that folder holds).")
    if args.image_build_dir is not None and (len(backends) != 1 or not args.image):
        raise UserError("--image-build-dir needs --image and one backend; add --image --backend cpu.")
    for sentence in skipped:
        reporter.note(sentence)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 2)
    if jobs < 1:
        raise UserError("--jobs must be 1 or more.")

    installed: list[Any] = []
    failures: list[Any] = []
    if args.image:
        images, failures = _setup_image(args, backends, paths, jobs, reporter)
        if images is None:
            return 130
        if args.json_progress:
            reporter.emit(event="done", engines=[], model=None, failures=failures,
                          image_engines=[{"id": sd_build_id(b.backend), "path": str(b.folder), "reused": b.reused}
                                         for b in images])
        else:
            print()
            for b in images:
                print(f"Images  {sd_build_id(b.backend)} (sd-server {SD_VERSION}): {b.folder}")
        return 0
    for backend in backends:
        flags = cmake_flags(backend, platform.system(), native=args.native)
        try:
            result = setup_engine(backend, flags, paths, jobs, force=args.force,
                                  build_dir=args.build_dir, reporter=reporter)
        except KeyboardInterrupt:
            reporter.finish()
            print(f"stoker: setup was interrupted while making {build_id(backend)}; nothing was half-installed, "
                  "and `stoker setup` resumes the build where it stopped.", file=sys.stderr)
            return 130
        except SetupError as exc:
            reporter.finish()
            have = [b.backend for b in installed]
            if backend == "cpu" or args.backend != "auto" or not have:
                raise UserError(str(exc)) from None
            failures.append(f"{exc}; the {', '.join(h.upper() for h in have)} build is still installed.")
            reporter.note(failures[-1])
            continue
        reporter.finish()
        installed.append(result)
        if result.reused:
            reporter.note(f"{build_id(backend)} is already installed and intact ({result.folder}); "
                          "nothing to do (use --force to rebuild).")

    rpc = None
    if args.rpc:
        rpc = _setup_rpc(args, paths, jobs, reporter)
        if rpc is None:
            return 130

    model = None
    if not args.skip_model:
        try:
            model, reused = fetch_demo_model(paths, reporter)
        except KeyboardInterrupt:
            print("stoker: setup was interrupted while fetching the demo model; nothing was half-installed.",
                  file=sys.stderr)
            return 130
        except SetupError as exc:
            raise UserError(str(exc)) from None
        reporter.finish()

    bandwidth = _measure_cpu_bandwidth(installed, model, reporter)
    if args.json_progress:
        reporter.emit(event="done", engines=[{"id": b.folder.name, "path": str(b.folder),
                                              "reused": b.reused} for b in installed + ([rpc] if rpc else [])],
                      model=str(model) if model else None, failures=failures,
                      cpu_bandwidth_bytes_per_s=bandwidth.effective_bytes_per_s if bandwidth else None)
    else:
        print()
        for b in installed + ([rpc] if rpc else []):
            print(f"Engine  {b.folder.name} (llama-server b{ENGINE_BUILD}): {b.folder}")
        if model is not None:
            print(f"Model   {model.name}: {model}")
        if bandwidth is not None and bandwidth.effective_bytes_per_s:
            print(f"CPU     {bandwidth.effective_bytes_per_s / 1e9:.1f} GB/s for decoding (memory reads "
                  f"{(bandwidth.memory_read_bytes_per_s or 0) / 1e9:.1f} GB/s, the engine's kernels "
                  f"{(bandwidth.engine_decode_bytes_per_s or 0) / 1e9:.1f} GB/s): plans predict decode speed with it")
        print("Next:   stoker run        (launch the demo model and print its endpoint)")
    # Auto mode: a GPU build that failed was reported above; the CPU build works, so CI and
    # scripts that run `stoker setup` carry on.
    return 0


def _setup_rpc(args, paths, jobs: int, reporter):
    """The RPC build (rpc-server + an engine that takes --rpc); None when interrupted."""

    flags = cmake_flags("cpu", platform.system(), native=args.native)
    try:
        result = setup_rpc(flags, paths, jobs, force=args.force, build_dir=args.rpc_build_dir, reporter=reporter)
    except KeyboardInterrupt:
        reporter.finish()
        print(f"stoker: setup was interrupted while making {RPC_BUILD_ID}; nothing was half-installed, "
              "and `stoker setup --rpc` resumes the build where it stopped.", file=sys.stderr)
        return None
    except SetupError as exc:
        reporter.finish()
        raise UserError(str(exc)) from None
    reporter.finish()
    if result.reused:
        reporter.note(f"{RPC_BUILD_ID} is already installed and intact ({result.folder}); nothing to do.")
    return result
def _setup_image(args, backends, paths, jobs, reporter):
    """Build sd-server for each backend; (installed, failure sentences), or (None, ()) on Ctrl-C.

    A GPU image build that fails in auto mode is reported and skipped like a GPU llama-server
    build; the CPU one must succeed."""

    installed: list[Any] = []
    failures: list[Any] = []
    for backend in backends:
        try:
            result = setup_image_engine(backend, sd_cmake_flags(backend, native=args.native), paths, jobs,
                                        force=args.force, build_dir=args.image_build_dir, reporter=reporter)
        except KeyboardInterrupt:
            reporter.finish()
            print(f"stoker: setup was interrupted while making {sd_build_id(backend)}; nothing was half-installed, "
                  "and `stoker setup --image` resumes the build where it stopped.", file=sys.stderr)
            return None, ()
        except SetupError as exc:
            reporter.finish()
            if backend == "cpu" or args.backend != "auto" or not installed:
                raise UserError(str(exc)) from None
            failures.append(f"{exc}; the {', '.join(b.backend.upper() for b in installed)} image build is still "
                            "installed.")
            reporter.note(failures[-1])
            continue
        reporter.finish()
        installed.append(result)
        if result.reused:
            reporter.note(f"{sd_build_id(backend)} is already installed and intact ({result.folder}); "
                          "nothing to do (use --force to rebuild).")
    return installed, failures
