"""Name an engine failure in one sentence: what happened, the line that shows it, what to do.

`classify_exit(ExitReport) -> Incident` reads the exit code or signal, who sent the signal,
the phase (starting / ready / stopping), the uptime and the log tail of one llama-server
process, and decides the kind of failure, whether it counts as a strike against the engine
build (stoker/fleet/quarantine.py) and which recovery, if any, can help (stoker/fleet/recovery.py).
The patterns are the real lines of llama.cpp b11434 (shared/reference/llama-server.md §3.3),
the seed's panic regexes (gezel-behaviours.md §2), and what real users' logs show
(tests/data/wild, measured by `stoker bench diagnose`): older and newer engine wordings,
HIP builds speaking CUDA's words, loader messages, and the exit and OOM lines that Ollama,
LM Studio, llama-swap, docker, systemd and shells write around the engine. When the caller
does not know how the process ended, such a wrapper line stands in for the exit.

The facts in and the reading out (ExitReport, Incident) live in exit_report.py, the sentences
a person reads for each kind in incident_words.py, and the readings left open between two kinds in
open_readings.py: this module decides, those word it or leave it open.

Pure: no files, no clock, no processes. The shell gathers the facts (including whether the
kernel's OOM killer fired, from cgroup memory.events or the kernel log) and passes them in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from stoker.diagnosis.evidence import Evidence, LoadPlace, Verdict, decide, draft_scoped, gather, load_places
from stoker.diagnosis.exit_codes import (
    NTSTATUS_KIND,
    exit_from_log,
    ntstatus_of,
    signal_name,
)
from stoker.diagnosis.exit_report import ExitReport, Incident, describe_exit, effective_signal
from stoker.diagnosis.incident_words import (
    OPEN_ASSERT_OR_DRAFTER,
    OPEN_GPU_ERROR_OR_DRAFTER,
    OPEN_LOAD_ERROR_OR_DRAFTER,
    UNSURE_CONTEXT,
    UNSURE_DEVICE,
    UNSURE_GPU_OR_HOST,
    UNSURE_GPU_VENDOR,
    UNSURE_SIGKILL,
    UNSURE_STOPPED_STARTING,
    entry_words,
    words,
)
from stoker.diagnosis.log_lines import backend_from_log, shortened, strip_log_prefix, unwrapped
from stoker.diagnosis.open_readings import SPLIT_OOM_KINDS, WEIGHTS_UNNAMED, left_open
from stoker.diagnosis.silent_fallbacks import (
    found_no_nvidia_driver,
    gpu_unused_from_log,
    lacks_the_gpus_architecture,
    left_for_a_cpu_without_avx,
    left_for_an_old_driver,
)
from stoker.diagnosis.wrapper_memory import host_share_over_free

# Every kind classify_exit can return; the README lists them for users.
KINDS = (
    "host-oom", "cuda-oom", "vulkan-oom", "metal-oom", "rocm-oom",
    "cuda-driver-too-old", "no-kernel-image", "missing-library", "stale-library",
    "system-too-old", "illegal-instruction",
    "bad-model", "port-in-use", "bad-argument", "drafter-failure", "gpu-unused",
    "startup-timeout", "assertion-failed", "gpu-error", "stopped", "unknown",
    "rpc-worker-lost",
)
OOM_KINDS = frozenset({"host-oom", "cuda-oom", "vulkan-oom", "metal-oom", "rocm-oom"})
# Faults of the build on this machine: they would happen again with the same binary.
BUILD_FAULT_KINDS = frozenset({"cuda-driver-too-old", "no-kernel-image", "missing-library",
                               "stale-library", "system-too-old", "illegal-instruction"})
# Crashes that count as a strike only when they happen while starting.
STARTUP_CRASH_KINDS = frozenset({"assertion-failed", "gpu-error", "unknown"})
PHASES = ("starting", "ready", "stopping")


# The wordings, their kinds and their root-cause order live in the catalogue
# (stoker/diagnosis/wordings/, joined by catalogue.py) and the verdict (stoker/diagnosis/evidence.py). Their ranks
# keep this module's earlier priorities: 90 the build cannot run here (driver older than the
# toolkit, no kernel for this architecture), 88 a lost RPC worker, 85 the drafter, 80 a device
# ran out of memory, 79 the kernel's OOM killer, 78 system memory, 77 the C/C++ runtime too
# old, 76 another build's library, 75 a missing library or a taken port, 70 a bad argument,
# 65 an allocation on an unnamed device, 60 a bad model file, 50 a wrapper gave up waiting,
# 45 a wrapper's unload, 40 a GPU error, 30 an assertion. With no line at all, the exit
# (given, or written by the wrapper) decides: _kind_from_exit. "gpu-oom" is resolved to
# cuda/rocm by the ROCm signs in the whole log (`cudaMalloc failed` and `CUDA error` also
# appear on HIP builds); "device-oom" by the buffer the line names, else by the build's
# backend (_device_oom_kind).

# The KV line alone says nothing about the device; the device line before it does.
_KV_FAIL = re.compile(r"failed to allocate buffer for kv cache|failed to allocate compute buffers",
                      re.IGNORECASE)
# A context that could not be created, with no reason given anywhere in the log: in
# llama.cpp that is nearly always an allocation that failed, so it is read as memory on the
# build's device, and the title says it is a reading, not a certainty.
_CONTEXT_FAIL = re.compile(r"failed to create context with model", re.IGNORECASE)
# ... unless the log says the GPU backend itself did not start: the Metal shaders or a kernel's
# pipeline did not compile for this GPU (ggml_metal_init's `load pipeline error`, llama.cpp#3423 on
# an Intel Mac's AMD GPU), so the context failed for that, with nothing allocated yet.
_BACKEND_DID_NOT_START = frozenset({"metal.library-compile"})


def _backend_started(verdict: Verdict) -> bool:
    return not any(p.entry.name in _BACKEND_DID_NOT_START for p in verdict.pieces)


# While the engine is still starting, a wrapper's own words for giving up on it: a timeout
# word and a start, readiness or health word in one line (Ollama, llama-swap, LocalAI,
# launchers' `Timed out waiting for llama-server to become healthy`, a Dart or Python
# `TimeoutException` around a health poll). A flag (`--timeout 600`, `timeout=30`) is not one.
_TIMEOUT_WORD = re.compile(r"\btimed[ -]?out\b|(?<![-\w])time-?out\b(?!\s*[=:]?\s*\d)|Timeout(Exception|Error)"
                           r"|deadline exceeded|took too long", re.IGNORECASE)
_START_WORD = re.compile(r"\bstart(s|ed|ing|-?up)?\b|\bready\b|readiness|health|become available"
                         r"|\bload(ing)?( the)? model|model load|\brunner\b|listening", re.IGNORECASE)
# llama-swap's stop of its upstream (`cmdStopUpstreamProcess() initiating graceful stop`):
# while the engine is still starting and nothing failed, a start-up timeout or a swap.
# A Metal command buffer that failed, in a build that printed no reason: llama.cpp prints
# `error: <localizedDescription>` after `command buffer %d failed with status %d` since
# 2024 (ggml-metal-context.m, b11434); before that the bare status line (5 is
# MTLCommandBufferStatusError, any error) and the GGML_ASSERT(false) after it were all.
# `GGML_ASSERT(false && "not implemented")` (an op or type the Metal backend lacks, in
# ggml-metal.m's switches of 2023 and ggml-metal-device.cpp in b11434) is an engine limit read
# as the assertion it is, not that command buffer (llama.cpp#1697, text-generation-webui#3538).
# A paste may lose the colon after the line number (LlamaEdge#7: `ggml-metal.m:1459 false`).
_METAL_FAILED = re.compile(r"command buffer \d+ failed with status \d+|ggml-metal\.m:\d+:? false(?!\s*&&)"
                           r"|ggml_metal_get_buffer: error: .*buffer is nil")
_METAL_DESCRIBED = re.compile(r"^error: \S|kIOGPUCommandBufferCallbackError|MTLCommandBufferError")
_METAL_OVER_WORKING_SET = re.compile(r"current allocated size is greater than the recommended max working set")


def metal_failure_without_its_error(lines: Iterable[str]) -> tuple[str, str] | None:
    """(kind, failing line) for an old Metal build's failure that names no error: metal-oom
    when its allocations already exceeded the recommended working set, else "unknown" (an
    out-of-memory and a GPU fault leave the same bare line). None when it does not apply."""
    stripped = [strip_log_prefix(x) for x in lines]
    failed = next((x for x in stripped if _METAL_FAILED.search(x)), None)
    if failed is None or any(_METAL_DESCRIBED.search(x) for x in stripped):
        return None
    over = any(_METAL_OVER_WORKING_SET.search(x) for x in stripped)
    return ("metal-oom" if over else "unknown"), failed


_WRAPPER_STOP = re.compile(r"initiating graceful stop of upstream process|stopping upstream process",
                           re.IGNORECASE)

# Ollama kills its own runner to unload a model (idle keep-alive, a swap, shutdown): exec.CommandContext's
# cancel, later Process.Kill, both SIGKILL. 0.1.x (llm/llama.go Close) logs the runner's wait error
# (`signal: killed`) and at once `llama runner stopped successfully`, in the same second; a runner the
# kernel killed gets that line too, but only when Ollama unloads it later (ollama#1290 is the first).
# 0.3 on (llm/server.go Close, debug level) logs `stopping llama server` before the kill it causes.
_GO_LOG_STAMP = re.compile(r"^\s*(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)\b")
_RUNNER_KILLED = re.compile(r"\bsignal: killed\b")
_OLLAMA_RUNNER_STOPPED = re.compile(r"\bllama runner stopped successfully\b")
_OLLAMA_STOPPING_SERVER = re.compile(r"\bmsg=\"?stopping llama server\b")
_OLLAMA_STARTING_SERVER = re.compile(r"\bmsg=\"?starting llama server\b")
_STOPPED_BY_ITS_WRAPPER_RULE = "wrapper-killed-its-runner"


def wrapper_killed_its_runner(lines: Iterable[str]) -> str | None:
    """The line in which Ollama says it stopped the runner whose `signal: killed` the log shows,
    when the stop is Ollama's own (said in the same second as the kill, or before it), else None."""
    stripped = [x.strip() for x in lines if x.strip()]
    for i, line in enumerate(stripped):
        if not _RUNNER_KILLED.search(line):
            continue
        # the last stop or start before the kill: a stop asked for an earlier runner is not this one's
        last = next((x for x in reversed(stripped[:i])
                     if _OLLAMA_STOPPING_SERVER.search(x) or _OLLAMA_STARTING_SERVER.search(x)), None)
        if last is not None and _OLLAMA_STOPPING_SERVER.search(last):
            return last
        after = stripped[i + 1] if i + 1 < len(stripped) else ""
        stamp, stamp_after = _GO_LOG_STAMP.match(line), _GO_LOG_STAMP.match(after)
        if (_OLLAMA_RUNNER_STOPPED.search(after) and stamp is not None and stamp_after is not None
                and stamp.group(1) == stamp_after.group(1)):
            return after
    return None


def start_timeout_from_log(lines: Iterable[str]) -> str | None:
    """The line in which a wrapper says it gave up waiting for the engine to start, else None.
    Only meaningful while the engine was still starting (the caller checks the phase)."""
    for raw in unwrapped(lines):
        line = strip_log_prefix(raw)
        if _TIMEOUT_WORD.search(line) and _START_WORD.search(line):
            return line.strip()
    return None


# ggml-backend-reg.cpp's load_backend (2025 to b11434) logs each backend library it loads:
# `load_backend: loaded CUDA backend from <path>`. One backend loaded from a folder and again from a
# folder inside it is two installs of the engine in one search path: a wrapper's update that left
# the previous layout's library beside the new one (Ollama's lib/ollama/ggml-cuda.dll from before the
# cuda_v12 folder, ollama#11211, #11229). Two sibling folders (Ollama's cuda_v12 and cuda_v13, probed
# one after the other) are variants of one install, not this.
_LOADED_BACKEND = re.compile(r"load_backend: loaded (\w+) backend from (.+?)\s*$")
_ONE_BACKEND_TWICE_RULE = "one-backend-from-two-installs"


def _folder(path: str) -> str:
    return re.split(r"[\\/](?=[^\\/]*$)", path.strip().strip("'\""))[0].replace("\\", "/").lower()


# A model file named as GGML's own formats were (`llama-2-7b-chat.ggmlv3.q4_0.bin`, the uploads of
# 2023; `ggml-model-q4_0.bin`, convert.py's default): GGUF replaced them in August 2023 (llama.cpp#2398,
# merged on 21 August, the bindings within days), and llama.cpp has not read them since (koboldcpp
# alone kept a legacy loader). A load that failed with nothing but a wrapper's generic words
# (llama-cpp-python's `assert self.model is not None`) then failed on the file's format
# (llama2-webui#67, where the maintainer pinned the last GGML-era binding).
_GGML_ERA_FILE = re.compile(r"\.ggmlv[1-3]\.[\w.-]*\.bin\b|\bggml-model-[\w.-]*\.bin\b", re.IGNORECASE)
_GGML_ERA_FILE_RULE = "a-ggml-era-model-file-that-failed-to-load"


def _ggml_era_file_failed(weak: tuple[Evidence, ...], lines: tuple[str, ...]) -> str | None:
    """The line naming a GGML-era model file, when the log's only signs are a generic load failure."""
    if [p.kind for p in weak] != ["bad-model"]:
        return None
    return next((strip_log_prefix(raw).strip() for raw in lines if _GGML_ERA_FILE.search(raw)), None)


_GPU_LEFT_FOR_THE_CPU_RULE = "gpu-left-for-a-cpu-without-avx"
_GPU_LEFT_FOR_NO_DRIVER_RULE = "gpu-left-for-want-of-a-driver"
# Words for a rule that says more than its kind's words (title, advice).
_RULE_WORDS = {
    _STOPPED_BY_ITS_WRAPPER_RULE: (
        "The wrapper stopped its own engine (it unloaded the model, as it does when the model sits "
        "idle or another one is loaded): the kill was its own, not a fault.",
        "Nothing to do; to keep a model loaded longer, raise the wrapper's keep-alive (Ollama: "
        "OLLAMA_KEEP_ALIVE, or `keep_alive` in the request)."),
    _ONE_BACKEND_TWICE_RULE: (
        "The engine loaded one of its backends twice, from two installs: a library left from an earlier "
        "install sits beside the new one and is loaded with it.",
        "Remove the engine's library folder and install again (for Ollama: uninstall, delete the "
        "lib/ollama folder that remains, then install), so one copy of each backend is left."),
    _GGML_ERA_FILE_RULE: (
        "The model file is in GGML's old format (a .bin from before GGUF), which this engine no longer "
        "reads, and its load failed.",
        "Download the model as a .gguf file (the same model is almost always published in GGUF), or "
        "convert it with llama.cpp's convert_llama_ggml_to_gguf.py."),
    _GPU_LEFT_FOR_NO_DRIVER_RULE: (
        "The GPU build runs on the CPU: no NVIDIA driver is installed where the engine runs (a container "
        "the GPU was not passed to, or a machine without an NVIDIA GPU), so its CUDA start failed and "
        "the wrapper went on without the GPU.",
        "Install NVIDIA's driver on the machine, and pass the GPU to the container (`docker run --gpus "
        "all` with the NVIDIA Container Toolkit); a Mac has no NVIDIA GPU: run the native app, which uses "
        "Metal."),
    _GPU_LEFT_FOR_THE_CPU_RULE: (
        "The GPU was found but left unused: the wrapper's GPU runners need AVX, which this CPU does "
        "not have, so the model runs on the CPU.",
        "Update the wrapper (Ollama dropped this check in 0.5.4), or use an engine built for this CPU "
        "with its GPU backend (`stoker setup` compiles llama.cpp here)."),
}


def _gpu_left_reading(unused: str) -> tuple[str, str]:
    """(kind, rule) for a line saying the GPU was left unused: the wrapper may say why."""
    if lacks_the_gpus_architecture(unused):  # its build lacks the GPU
        return "no-kernel-image", "gpu-left-for-want-of-its-code"
    if left_for_an_old_driver(unused):  # the driver is too old for its CUDA build
        return "cuda-driver-too-old", "gpu-left-for-an-old-driver"
    if left_for_a_cpu_without_avx(unused):
        return "gpu-unused", _GPU_LEFT_FOR_THE_CPU_RULE
    return "gpu-unused", "gpu-build-on-cpu"


def _left_for_want_of_a_driver(tail: tuple[str, ...], report: ExitReport) -> str | None:
    """The line showing the run went on on the CPU, where the log also says no NVIDIA driver is
    installed at all, else None: the runtime's "driver too old" (error 35) is then its word for no
    driver, and what the user meets is the GPU left unused, which no driver update cures."""
    if found_no_nvidia_driver(tail) is None:
        return None
    return gpu_unused_from_log(tail, report.backend or backend_from_log(tail), report.plan_wanted_gpu)


def backend_loaded_twice_from_log(lines: Iterable[str]) -> str | None:
    """The second `load_backend` line of one backend loaded from a folder and from a folder inside
    it (a leftover install shadowing the right one), else None."""
    folders: dict[str, list[str]] = {}
    for raw in lines:
        line = strip_log_prefix(raw).strip()
        m = _LOADED_BACKEND.search(line)
        if m is None:
            continue
        here = _folder(m.group(2))
        seen = folders.setdefault(m.group(1).lower(), [])
        if any(here != there and (here.startswith(there + "/") or there.startswith(here + "/"))
               for there in seen):
            return line
        seen.append(here)
    return None


@dataclass(frozen=True)
class _Match:
    kind: str
    line: str
    priority: int
    verdict: Verdict


def _scan(lines: tuple[str, ...]) -> tuple[_Match | None, Verdict]:
    """The verdict of the log's evidence, with the match it names (None when no line is
    evidence of a kind, or only weak signs are: those stay in the verdict as candidates)."""
    pieces = draft_scoped(lines, gather(lines, strip_log_prefix))
    verdict = decide(pieces)
    if verdict.winner is None or verdict.kind is None:
        return None, verdict
    return _Match(verdict.kind, verdict.winner.line, verdict.winner.rank, verdict), verdict


def _entry_words(match: _Match | None, kind: str, unsure: str | None) -> tuple[str, str] | None:
    """The deciding entry's own words, when it decided this kind with nothing left unsure."""
    winner = match.verdict.winner if match is not None else None
    if winner is None or unsure is not None or winner.kind != kind:
        return None
    return entry_words(winner.entry.name)


def _signs_title(weak: tuple[Evidence, ...]) -> str:
    """Only signs that follow many causes (a wrapper's "Failed to load model"): shown as candidates,
    never named, since a confident wrong kind sends the user the wrong way."""
    signs = "; ".join(f"{p.kind} ({shortened(p.line, 120)})" for p in weak)
    return f"The log shows only signs that follow many causes: {signs}; Stoker does not name a kind from them."


def _weak_candidates(verdict: Verdict) -> tuple[Evidence, ...]:
    """One weak sign per kind (the first), at most two: what an `unknown` names as candidates
    when the log held only signs that never decide a kind on their own."""
    if verdict.rule != "weak-evidence":
        return ()
    seen: dict[str, Evidence] = {}
    for p in verdict.pieces:
        seen.setdefault(p.kind, p)
    return tuple(seen.values())[:2]


_BUFFER_DEVICE = re.compile(r"\b(CUDA|ROCm|MUSA|Vulkan|MTL|Metal|SYCL|CPU)\d*(?:_\w+)?\s+buffer\b")
# HIP builds reuse ggml-cuda's code and many of its words (`ggml_cuda_init`, `cudaMalloc`,
# `CUDA error`), so a ROCm sign anywhere in the log outweighs a CUDA word.
_ROCM_SIGN = re.compile(r"\bROCm\d*\b|\bhip[A-Z]\w*|\bHIP\b|\bgfx\d{3,4}\b|rocBLAS")


def _gpu_oom_kind(lines: tuple[str, ...], backend: str | None) -> tuple[str, bool]:
    """(cuda-oom | rocm-oom, whether the log left it open which of the two it was)."""
    if backend == "rocm" or any(_ROCM_SIGN.search(raw) for raw in lines):
        return "rocm-oom", False
    if backend == "cuda":
        return "cuda-oom", False
    for raw in lines:
        m = _BUFFER_DEVICE.search(raw)
        if m and m.group(1) in ("CUDA", "MUSA"):
            return "cuda-oom", False
        if re.search(r"ggml_cuda_init|ggml_init_cublas|found \d+ CUDA devices|\bNVIDIA\b|cudaMalloc", raw):
            return "cuda-oom", False
    return "cuda-oom", True  # ggml-cuda's words alone: a CUDA or a HIP build


_BUFFER_NAMED = re.compile(r"allocate (\w+) buffer", re.IGNORECASE)


def _device_oom_kind(line: str, lines: tuple[str, ...], backend: str | None) -> tuple[str, str | None]:
    """(kind, unsure) for an allocation failure whose line names no device, or only a buffer
    type: the buffer's name decides (`CUDA0`, `Vulkan0`, `Metal`, `CPU`, `CUDA_Host`), else
    the build's backend; with neither, system memory, and the title says it is a reading."""
    m = _BUFFER_NAMED.search(line)
    name = m.group(1) if m else ""
    if re.search(r"host|^CPU", name, re.IGNORECASE):
        return "host-oom", None
    if re.match(r"(CUDA|MUSA)\d", name):
        kind, vendor_open = _gpu_oom_kind(lines, backend)
        return kind, UNSURE_GPU_VENDOR if vendor_open else None
    by_name = {"ROCm": "rocm-oom", "Vulkan": "vulkan-oom", "Metal": "metal-oom", "MTL": "metal-oom"}
    for prefix, kind in by_name.items():
        if name.startswith(prefix):
            return kind, None
    b = backend or backend_from_log(lines)
    if b in ("cuda", "rocm"):
        # A discrete GPU's build also allocates host buffers (layers left on the CPU): a
        # failure that names no buffer is most often the GPU's, and the title says so.
        kind, _vendor_open = _gpu_oom_kind(lines, b)
        return kind, UNSURE_GPU_OR_HOST
    if b in ("vulkan", "metal"):
        return f"{b}-oom", None
    if b == "cpu":
        return "host-oom", None
    return "host-oom", UNSURE_DEVICE



# --------------------------------------------------------------------------- classify

_STOP_SIGNALS = frozenset({"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"})


def _ended_cleanly(report: ExitReport) -> bool:
    """Exit code 0 and no signal: the process returned from main on its own."""
    return report.exit_code == 0 and report.signal is None


def _kind_from_exit(report: ExitReport, sig: str | None) -> tuple[str, str | None]:
    """Kind from the exit shape alone (no telling line), with the evidence if any."""
    if report.timed_out and report.signalled_by_us:
        return "startup-timeout", None
    if report.oom_killed:
        return "host-oom", "the kernel's out-of-memory killer ended the process"
    code = report.exit_code
    status = ntstatus_of(code) if code is not None else None
    if status in NTSTATUS_KIND:
        return NTSTATUS_KIND[status], None
    if status == 0xC000013A:
        return "stopped", None
    if sig == "SIGILL":
        return "illegal-instruction", None
    if sig == "SIGFPE":
        # x86 traps only integer division (by zero, or INT_MIN by -1); floating-point traps are
        # masked by default, and ARM64 does not trap on division at all: the engine's own slip
        return "assertion-failed", None
    if report.signalled_by_us:
        return "stopped", None
    if sig == "SIGKILL" and report.oom_killed is None:
        stop = wrapper_killed_its_runner(report.log_tail)
        if stop is not None:
            return "stopped", stop
        # A SIGKILL nobody here sent, with nothing in the log: on Linux almost always
        # the kernel's OOM killer (it writes no line into the engine's log).
        return "host-oom", "killed by SIGKILL from outside Stoker with no error in the log " \
                           "(the usual sign of the kernel's out-of-memory killer)"
    if sig in _STOP_SIGNALS:
        return "stopped", None  # asked to stop by a service manager, a wrapper or a user
    if code == 127 and report.os != "windows":
        return "missing-library", None
    if _ended_cleanly(report) and report.phase != "starting":
        return "stopped", None
    # (a clean exit before the engine was ready, with nobody here asking: the engine ended by
    # itself, and a wrapper's `exited with code 0` says nothing of why; gpustack#109 was an old
    # Visual C++ runtime)
    return "unknown", None


def _with_exit_from_log(report: ExitReport) -> tuple[ExitReport, str | None]:
    """The report with the exit a wrapper wrote into the log, when the caller knew none."""
    if report.exit_code is not None or report.signal is not None:
        return report, None
    code, sig, line = exit_from_log(report.log_tail)
    if line is None:
        return report, None
    os_name = "windows" if code is not None and ntstatus_of(code) is not None else report.os
    return replace(report, exit_code=code, signal=sig, os=os_name), line


def classify_exit(report: ExitReport) -> Incident:
    """The kind of failure, its evidence, the advice, and what it means for the build."""
    report, exit_line = _with_exit_from_log(report)
    sig = effective_signal(report)
    exit_text = describe_exit(report)
    tail = tuple(report.log_tail)
    match, verdict = _scan(tail)
    kind: str
    unsure: str | None = None
    evidence: str | None = None
    rule: str | None = None
    conflict = match is not None and bool(match.verdict.candidates)
    if match is not None:
        kind, evidence, rule = match.kind, match.line, match.verdict.rule
        if kind == "gpu-oom":
            kind, vendor_open = _gpu_oom_kind(tail, report.backend)
            unsure = UNSURE_GPU_VENDOR if vendor_open else None
        elif kind == "device-oom":
            kind, unsure = _device_oom_kind(evidence, tail, report.backend)
        if kind == "assertion-failed" and report.oom_killed:
            kind, evidence = "host-oom", "the kernel's out-of-memory killer ended the process"
    else:
        kind, evidence = _kind_from_exit(report, sig)
        # (the wrapper's own kill is the one stop _kind_from_exit returns a line for)
        rule = _STOPPED_BY_ITS_WRAPPER_RULE if kind == "stopped" and evidence is not None else "exit"
        if kind == "host-oom" and not report.oom_killed:
            unsure = UNSURE_SIGKILL
        # A KV/compute allocation failure line without a device line: the backend decides.
        if kind in ("unknown", "stopped") and not report.signalled_by_us and _backend_started(verdict):
            for raw in tail:
                line = strip_log_prefix(raw)
                kv, context = _KV_FAIL.search(line), _CONTEXT_FAIL.search(line)
                if kv or (context and kind == "unknown"):
                    b = report.backend
                    kind = {"cuda": "cuda-oom", "rocm": "rocm-oom", "vulkan": "vulkan-oom",
                            "metal": "metal-oom"}.get(b or "", "host-oom")
                    evidence = line
                    unsure = None if kv else UNSURE_CONTEXT
                    rule = "allocation-on-the-build's-device"
                    break
        if evidence is None and exit_line is not None and kind != "unknown":
            evidence = exit_line
    if kind in ("unknown", "startup-timeout") and (match is None or match.kind == "startup-timeout"):
        twice = backend_loaded_twice_from_log(tail)
        if twice is not None:  # a build fault: the wrapper's wait after it is not the cause
            kind, evidence, rule, unsure = "stale-library", twice, _ONE_BACKEND_TWICE_RULE, None
    if (report.phase == "starting" and not report.signalled_by_us and rule != _ONE_BACKEND_TWICE_RULE
            and (match is None or match.priority < 50) and kind not in OOM_KINDS):
        waited = start_timeout_from_log(tail)
        stop = next((strip_log_prefix(x) for x in tail if _WRAPPER_STOP.search(x)), None)
        if waited is not None and not conflict:
            kind, evidence, unsure, rule = "startup-timeout", waited, None, "wrapper-gave-up-waiting"
        elif stop is not None and match is None and kind in ("unknown", "stopped"):
            kind, evidence, unsure = "startup-timeout", stop, UNSURE_STOPPED_STARTING
            rule = "wrapper-stopped-it-starting"
    if kind in ("stopped", "unknown") and match is None:
        unused = gpu_unused_from_log(tail, report.backend or backend_from_log(tail),
                                     report.plan_wanted_gpu)
        # (a clean exit, `--list-devices` ending, is no fault to outweigh the line)
        if unused is not None and (kind == "stopped" or report.exit_code is None and sig is None
                                   or _ended_cleanly(report)):
            evidence = unused
            kind, rule = _gpu_left_reading(unused)
    if kind == "cuda-driver-too-old" and (unused := _left_for_want_of_a_driver(tail, report)) is not None:
        kind, evidence, rule, unsure = "gpu-unused", unused, _GPU_LEFT_FOR_NO_DRIVER_RULE, None
    kind, unsure, rule, evidence = _with_the_drafter(kind, unsure, rule, evidence, report, match, conflict,
                                                     exit_text)

    kind, unsure, rule, evidence = _host_by_the_estimate(kind, unsure, rule, evidence, tail)
    title, advice = (_entry_words(match, kind, unsure) or _RULE_WORDS.get(rule or "")
                     or words(kind, report, unsure))
    candidates: tuple[str, ...] = ()
    opened = left_open(kind, unsure, evidence, tail)
    if opened is not None:
        candidates, title = opened.candidates, opened.title
        kind, rule = "unknown", rule if kind == "unknown" else opened.rule
        advice = opened.advice or advice
    if conflict and kind == "unknown" and match is not None:
        first, second = match.verdict.candidates
        candidates = (first.kind, second.kind)
        title = (f"The log shows two causes that no rule ranks: {first.kind} ({shortened(first.line, 120)}) and "
                 f"{second.kind} ({shortened(second.line, 120)}); Stoker does not guess between them.")
        evidence = f"{first.line} | {second.line}"
    metal = metal_failure_without_its_error(tail) if kind in ("gpu-error", "assertion-failed") else None
    if metal is not None and not conflict:
        kind, evidence = metal
        if kind == "metal-oom":
            rule, unsure = "metal-failure-over-working-set", None
            title, advice = words(kind, report, None)
        else:
            rule, candidates = "metal-failure-without-its-error", ("metal-oom", "gpu-error")
            title = (f"A Metal command buffer failed ({shortened(evidence, 120)}) in a build that prints no "
                     "reason: an out-of-memory and a GPU fault end the same way; Stoker does not guess.")
            advice = words(kind, report, None)[1]
    weak = _weak_candidates(verdict) if kind == "unknown" and not candidates else ()
    if (ggml_file := _ggml_era_file_failed(weak, tail)) is not None:
        kind, evidence, rule, weak, (title, advice) = ("bad-model", ggml_file, _GGML_ERA_FILE_RULE, (),
                                                        _RULE_WORDS[_GGML_ERA_FILE_RULE])
    if weak:
        candidates, title, evidence = tuple(p.kind for p in weak), _signs_title(weak), evidence or weak[0].line
    counts = (kind in BUILD_FAULT_KINDS
              or (kind in STARTUP_CRASH_KINDS and report.phase == "starting"
                  and not report.signalled_by_us))
    if kind == "unknown" and report.exit_code is None and sig is None:
        counts = False  # nothing ended: a log with no failure in it is not a crash
    if "drafter-failure" in candidates:
        counts = False  # the start without the drafter tells first whose fault it was
    return Incident(
        kind=kind,
        title=title,
        evidence=shortened(evidence or exit_text),
        advice=advice,
        counts_as_strike=counts,
        recoverable_by=_recovery(kind, report, candidates),
        exit_description=exit_text,
        rule=rule,
        evidence_lines=tuple(shortened(p.line) for p in verdict.pieces),
        candidates=candidates,
    )


def host_short_from_log(lines: Iterable[str]) -> str | None:
    """The wrapper's own memory lines, when they show the host's share of the load larger than
    the system memory free (with swap) before the load: then a nameless allocation failure on a
    GPU build is the host's (ollama#6606, #7711); None when the log cannot tell."""
    found = host_share_over_free(lines)
    if found is None:
        return None
    free_line, share_line = found
    return f"{shortened(strip_log_prefix(free_line), 150)} | {shortened(strip_log_prefix(share_line), 150)}"


# llama_context::encode's single-shot check: only a non-causal context runs it; in a launch
# with a drafter that is the block-diffusion (DFlash) drafter's, the target decoding causally
# with its KV cache (buun-llama-cpp#21: "The DFlash draft model uses non-causal
# (encoder-style) attention"; llama.cpp src/llama-context.cpp encode()).
_ENCODER_ASSERT = re.compile(r"encoder requires n_ubatch >= n_tokens")
# An assert on the MTP head's own parts (hparams.n_layer_nextn, layer.nextn.*, "... MTP ..."):
# src/llama-model.cpp `GGML_ASSERT(hparams.n_layer_nextn <= hparams.n_layer_all)` (`<` in b10743,
# llama.cpp#28188), src/models/deepseek2.cpp, deepseek32.cpp, qwen4exp.cpp (`GLM4 MTP requires
# n_layer_nextn > 0`, `MTP block missing nextn.eh_proj`), b11434. A model with built-in MTP
# layers loads them without speculative decoding too, so it names the drafter only when one is
# in the launch.
_MTP_HEAD_ASSERT = re.compile(r"GGML_ASSERT.*(nextn|\bMTP\b)")



def _with_the_drafter(kind: str, unsure: str | None, rule: str | None, evidence: str | None,
                      report: ExitReport, match: _Match | None, conflict: bool,
                      exit_text: str) -> tuple[str, str | None, str | None, str | None]:
    """What a drafter in the launch changes: a crash with no telling line is blamed on it, an
    abort or a GPU error is left open with it, and a load error no load holds is either's."""
    # A start-up crash without a telling line while a catalog drafter was loaded: the
    # drafter is the likeliest culprit (formats change between releases), so it is
    # blamed instead of the build. An abort or a GPU error is read the same way while serving:
    # the drafter's graph runs on every speculative step, so the line no more tells whose graph
    # tripped it once the model has loaded (llama.cpp#24324: fattn.cu's `fatal error`, no flash
    # attention kernel for a shape, on the first decode with an MTP head).
    told = match is not None and match.kind in ("assertion-failed", "gpu-error")
    if (report.has_drafter and not report.drafter_forced and (report.phase == "starting" or told)
            and kind in ("unknown", "assertion-failed", "gpu-error", "illegal-instruction")
            and not report.signalled_by_us and not conflict
            and not _ended_cleanly(report)):  # a clean exit is no crash
        kind, rule = "drafter-failure", "crash-starting-with-a-catalog-drafter"
        evidence = evidence or f"the engine crashed while starting with a drafter loaded ({exit_text})"
        if match is not None and match.kind == "gpu-error":
            kind, unsure, rule = "unknown", OPEN_GPU_ERROR_OR_DRAFTER, "gpu-error-with-a-drafter"
        elif match is not None and match.kind == "assertion-failed" and _MTP_HEAD_ASSERT.search(match.line):
            rule, evidence = "assertion-on-the-mtp-head", match.line  # the draft head's own check
        elif match is not None and match.kind == "assertion-failed" and _ENCODER_ASSERT.search(match.line):
            rule, evidence = "encoder-check-with-a-drafter", match.line  # only the DFlash drafter encodes
        elif match is not None and match.kind == "assertion-failed":
            # An abort names the check that failed, not whose graph or buffer tripped it:
            # ggml-backend.cpp's GGML_ASSERT(buffer) (a tensor with no buffer reached
            # ggml_backend_buffer_*) fired under an MTP launch (llama.cpp#23260, bisected to
            # 3e12fbd) and in llama-bench with no drafter at all (llama.cpp#23285, b9204).
            kind, unsure, rule = "unknown", OPEN_ASSERT_OR_DRAFTER, "assertion-with-a-drafter"
    if (kind == "bad-model" and report.has_drafter and match is not None
            and match.verdict.winner is not None
            and load_places(report.log_tail)[match.verdict.winner.index] is not LoadPlace.TARGET):
        # A model-load error with a drafter in the launch, the log not saying whose load it
        # was (no `loading model '` of the target before it, no `loading draft model` /
        # KoboldCpp's `Attempting to load draft model` either, which draft_scoped reads as
        # the drafter's): llama.cpp's `error loading model:` and common_init_from_params'
        # `failed to load model '%s'` are printed alike for both (lmstudio-bug-tracker#441:
        # the draft's). Left open (open_readings.left_open).
        unsure = OPEN_LOAD_ERROR_OR_DRAFTER
    return kind, unsure, rule, evidence


def _host_by_the_estimate(kind: str, unsure: str | None, rule: str | None, evidence: str | None,
                          tail: tuple[str, ...]) -> tuple[str, str | None, str | None, str | None]:
    """A nameless allocation on a GPU build is the host's when the wrapper's own estimate shows
    the host's share beyond the free system memory (host_short_from_log); else unchanged."""
    if kind in SPLIT_OOM_KINDS and WEIGHTS_UNNAMED.search(evidence or ""):
        short = host_short_from_log(tail)
        if short is not None:
            return "host-oom", None, "nameless-allocation-host-short-by-the-estimate", f"{evidence} | {short}"
    return kind, unsure, rule, evidence


def _recovery(kind: str, report: ExitReport, candidates: tuple[str, ...]) -> str | None:
    """What the supervisor may try next: a smaller plan after memory ran out (also when the
    log leaves open only which memory), the start without the drafter, or the next build."""
    drafter_is_ours = report.has_drafter and not report.drafter_forced
    memory = kind in OOM_KINDS or (kind == "unknown" and bool(candidates)
                                   and all(c in OOM_KINDS for c in candidates))
    if memory:
        # the drafter's memory is the cheapest thing to give back
        return "drop-drafter" if drafter_is_ours and report.phase == "starting" else "smaller-plan"
    if kind == "drafter-failure" or (kind == "unknown" and "drafter-failure" in candidates):
        return "drop-drafter" if drafter_is_ours else None
    if kind in BUILD_FAULT_KINDS:
        return "next-build"
    return None


def incident_of_kind(kind: str, report: ExitReport, evidence: str) -> Incident:
    """An incident whose kind another engine's own table found (core/engine_kind.failure_of_line
    for ds4 and sd-server): the same words as llama-server's, no strike and no recovery step
    (those belong to llama-server's builds and plans)."""
    title, advice = words(kind, report, None)
    return Incident(kind=kind, title=title, evidence=shortened(evidence), advice=advice,
                    counts_as_strike=False, recoverable_by=None, exit_description=describe_exit(report))


# Lines an engine prints only once its model is loaded: llama-server's ready lines, and its work on a
# request (server-common.h SLT_*: `slot <func>: id N | task M |`, where a slot not yet given a task
# prints `task -1` while loading; the 2024 server's `slot N is processing [task id: M]`; the timings
# print_timing writes after a request), llama-cli's `sampler seed:` (completion.cpp, after the model
# and context exist), and Ollama's runner started.
_LOADED = re.compile(r"llama_server: model loaded|listening on http|server is listening on"
                     r"|starting the main loop|llama runner started in"
                     r"|\bslot\s+\w+: id\s+\d+ \| task \d+ \||\bslot \d+ is processing \[task id: \d+\]"
                     r"|^\s*prompt eval time =|\bsampler seed: \d+")


def phase_from_log(lines: Iterable[str]) -> str:
    """"ready" when the log shows the engine had finished loading, else "starting"."""
    for raw in lines:
        if _LOADED.search(strip_log_prefix(raw)):
            return "ready"
    return "starting"


def drafter_in_log(lines: Iterable[str]) -> bool:
    """Whether the log shows a draft model (or an MTP head) was part of the launch."""
    return any(re.search(r"(-md|--spec-draft-model|--model-draft)\s|draft model|MTP context", raw)
               for raw in lines)


def report_from_log(lines: Iterable[str], *, exit_code: int | None = None, signal: str | None = None,
                    phase: str | None = None, backend: str | None = None,
                    os: str = "linux", has_drafter: bool | None = None) -> ExitReport:
    """An ExitReport for a log from anywhere (`stoker diagnose`, the wild corpus): what the
    caller does not know (None) is read from the log (phase, backend, drafter; the exit,
    later, from wrapper lines), and a Metal log is taken to come from macOS."""
    lines = tuple(lines)
    if any(re.search(r"ggml_metal|MTL\d", x) for x in lines):
        os = "darwin"
    if exit_code is not None and ntstatus_of(exit_code) is not None:
        os = "windows"
    return ExitReport(
        exit_code=exit_code, signal=signal, signalled_by_us=False,
        phase=phase or phase_from_log(lines), uptime_s=None, log_tail=lines,
        backend=backend or backend_from_log(lines), plan_wanted_gpu=False,
        has_drafter=drafter_in_log(lines) if has_drafter is None else has_drafter, os=os,
    )



class EngineExitLike(Protocol):
    """What report_from_engine_exit reads of `engines.engine_exit.EngineExit` (a room above
    this one, so named by shape, not imported)."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def signal(self) -> int | None: ...
    @property
    def signalled_by_us(self) -> bool: ...
    @property
    def phase(self) -> str: ...
    @property
    def uptime_s(self) -> float | None: ...
    @property
    def log_tail(self) -> tuple[str, ...]: ...


def report_from_engine_exit(ex: EngineExitLike, *, backend: str | None, plan_wanted_gpu: bool = False,
                            has_drafter: bool = False, drafter_forced: bool = False,
                            os: str = "linux", oom_killed: bool | None = None,
                            timed_out: bool = False) -> ExitReport:
    """The supervisor's `core.lifecycle.EngineExit` (signal as a number) as an ExitReport."""
    sig = signal_name(ex.signal, os) if ex.signal is not None else None
    code = ex.exit_code
    if sig is None and code is not None and code < 0 and os != "windows" and ntstatus_of(code) is None:
        sig, code = signal_name(-code, os), None
    return ExitReport(
        exit_code=code, signal=sig, signalled_by_us=ex.signalled_by_us, phase=ex.phase,
        uptime_s=ex.uptime_s, log_tail=tuple(ex.log_tail), backend=backend,
        plan_wanted_gpu=plan_wanted_gpu, has_drafter=has_drafter, drafter_forced=drafter_forced,
        os=os, oom_killed=oom_killed, timed_out=timed_out,
    )
