"""The sentences a person reads for an incident: a title and advice for each kind of failure.

classify.py decides the kind and how sure it is (the UNSURE_ and OPEN_ marks below); this module
words it, from the kind, the facts of the exit (the phase, the OS, who stopped it) and, where a
catalogue entry says more than its kind, that entry's own words. It must not decide a kind.

Pure: strings in, strings out.
"""

from __future__ import annotations

from collections.abc import Callable

from stoker.diagnosis.exit_codes import ARITHMETIC_TRAPS, ntstatus_of
from stoker.diagnosis.exit_report import ExitReport, effective_signal

VC_REDIST_URL = "https://aka.ms/vs/17/release/vc_redist.x64.exe"

# What made a title less than certain; the title says so rather than guessing.
UNSURE_SIGKILL = "sigkill-only"   # host-oom read from a bare SIGKILL
UNSURE_GPU_VENDOR = "gpu-vendor"  # ggml-cuda's words without saying CUDA or HIP
UNSURE_CONTEXT = "context-failed"  # the context could not be created, no reason given
UNSURE_DEVICE = "device-unnamed"  # an allocation failed, on a device the log does not name
UNSURE_GPU_OR_HOST = "gpu-or-host"  # ... on a discrete-GPU build: most often its GPU
UNSURE_STOPPED_STARTING = "stopped-starting"  # a wrapper stopped it before it was ready
OPEN_GPU_ERROR_OR_DRAFTER = "gpu-error-or-drafter"  # a GPU runtime error with a drafter loaded
OPEN_ASSERT_OR_DRAFTER = "assert-or-drafter"  # a GGML_ASSERT with a drafter loaded
OPEN_LOAD_ERROR_OR_DRAFTER = "load-error-or-drafter"  # a load error the log places in no load

# The kinds whose title and advice depend on nothing but the kind: (title, advice).
_FIXED_WORDS: dict[str, tuple[str, str]] = {
    "cuda-driver-too-old": (
        "The NVIDIA driver is too old for this CUDA build of the engine (the build was made "
        "with a newer CUDA toolkit than the driver supports).",
        "Update the NVIDIA driver; until then Stoker uses the next build in line "
        "(Vulkan or CPU)."),
    "system-too-old": (
        "The engine build needs a newer C/C++ runtime (glibc or libstdc++) than this "
        "system has.",
        "Use a build compiled on this machine (`stoker setup` builds one) or a release "
        "made for older systems; Stoker falls back to the next build in line."),
    "illegal-instruction": (
        "The engine build uses instructions this CPU (or its GPU library) cannot run.",
        "Use a build made for this machine (`stoker setup` compiles one here); Stoker "
        "falls back to the next build in line."),
    "bad-model": (
        "The model file could not be loaded: it is damaged, incomplete or not supported "
        "by this engine build.",
        "Download the model again (check its size and checksum), or update the engine if "
        "the model's architecture is newer than the build."),
    "port-in-use": (
        "The engine could not listen on its address: another program already uses the "
        "port (or the host address is not one of this machine's).",
        "Stop the other program or choose another port; this does not count against the "
        "engine build."),
    "bad-argument": (
        "The engine refused its command line: an option or value is not valid for this "
        "build (an older build may not know a newer option).",
        "Remove or correct the option in this model's extra arguments or overrides (the "
        "evidence line names it), or update the engine build."),
    "gpu-unused": (
        "The GPU engine build is running without its GPU, on the CPU (slower).",
        "Check that the GPU driver is installed and working (nvidia-smi / rocminfo / "
        "vulkaninfo), then restart the engine."),
    "gpu-error": (
        "The GPU reported an error and the engine stopped.",
        "Update the GPU driver; if it repeats, lower the GPU load (fewer layers) or use "
        "the next build in line."),
}


# Words for a deciding line whose catalogue entry says more than its kind's words (title, advice):
# read when that entry decided and the kind stands. They change what a person reads, not the kind.
_ENTRY_WORDS: dict[str, tuple[str, str]] = {
    "metal.kernel-not-for-this-gpu": (
        "This Mac's GPU (an AMD or Intel GPU, not Apple's own) cannot compile one of the engine's Metal "
        "kernels, so the Metal backend could not start.",
        "Update the engine (newer builds skip the kernels this GPU cannot run), or run without the GPU "
        "(0 GPU layers) or with a Vulkan (MoltenVK) build."),
    "gpu.driver-crash-report": (
        "The engine crashed inside the GPU driver's own library (the crash report names it), not in "
        "the engine's code.",
        "Update or reinstall the GPU driver. A program that hooks into the GPU (an overlay, an FPS "
        "monitor, a screen recorder) loads its own layer into the driver: close or uninstall it and "
        "try again; if it repeats, run a build for another backend or the CPU."),
    "opencl.no-platform": (
        "The OpenCL build found no OpenCL driver: the OpenCL loader had no platform (ICD) to load "
        "(CL_PLATFORM_NOT_FOUND_KHR, -1001).",
        "Install the GPU vendor's OpenCL driver (on Linux its ICD file under /etc/OpenCL/vendors and the "
        "library it names, e.g. intel-opencl-icd or mesa-opencl-icd) and check that `clinfo` lists the "
        "GPU, or run a build for another backend or the CPU."),
    "server.loading-model-reply": (
        "A client asked the engine before its model had loaded, got its 503 `Loading model` answer and "
        "gave up instead of waiting.",
        "Let the client wait for the load: poll /health until it answers 200 (llama-server answers 503 "
        "while it loads), or raise the client's timeout; a large model can take minutes to load."),
    "appimage.fuse-missing": (
        "The AppImage could not start: its runtime needs FUSE 2 (libfuse.so.2), which this system "
        "does not have.",
        "Install FUSE 2 (Ubuntu 22.04: `sudo apt install libfuse2`; 24.04: `libfuse2t64`; Fedora: "
        "`fuse-libs`), or start the AppImage with `--appimage-extract-and-run`."),
    "wsl.linux-driver-libraries": (
        "Inside WSL 2, a Linux NVIDIA driver's libraries were found before WSL's own "
        "(/usr/lib/wsl/lib), and they cannot reach the GPU.",
        "Remove the distribution's NVIDIA driver packages inside WSL (WSL uses the Windows driver; "
        "install only the CUDA toolkit there, without a driver), then run `sudo ldconfig`."),
    "model.path-is-folder": (
        "The model path names a folder, not a model file: no engine loads a folder.",
        "Point the model path at the .gguf file inside it; a download of another format (a "
        "PyTorch or safetensors checkpoint) needs a GGUF build of the model, or converting."),
    "win.dll-init-failed": (
        "Windows could not start the engine library: its start-up code failed inside the loader, "
        "most often because the build uses instructions (AVX, AVX2) this CPU lacks or has switched "
        "off.",
        "Use a build made for this CPU (`stoker setup` compiles one here; in koboldcpp, --failsafe or "
        "its _oldcpu build), or turn AVX2 back on in the BIOS if it was switched off."),
    "ld.interpreter-missing": (
        "The program could not start because its loader is missing: it was built for glibc, and "
        "this system has no glibc loader (ld-linux) for it.",
        "Use a build made for this system (`stoker setup` compiles llama-server here): a musl "
        "system such as Alpine or Void musl has no glibc loader, and a 32-bit program needs the "
        "32-bit one installed."),
    "omp.duplicate-runtime": (
        "Two OpenMP runtimes were loaded into one process: another program's library (Intel's "
        "libiomp5md from PyTorch or MKL) clashes with the engine's.",
        "Run the engine in a process of its own, or load it before the library that brings the "
        "other OpenMP runtime; KMP_DUPLICATE_LIB_OK=TRUE only hides the check and may give wrong "
        "results."),
    "alloc.impossible-size": (
        "The engine asked for more memory than any computer can address: a size it computed wrongly "
        "(an overflow or a bad dimension), not memory running out.",
        "Try another engine build, or undo the setting that set the size (image size, context, "
        "batch); more memory will not help. Report the line upstream."),
    "ggml.tensor-name-empty": (
        "The engine looked up a model tensor with no name: the program and the ggml library it "
        "loaded are from different builds, so they read ggml's tensors differently.",
        "Make sure one ggml is loaded: rebuild or update the program and every library bundling its "
        "own ggml (llama.cpp and whisper.cpp bindings side by side) to matching versions."),
    "container.image-as-command": (
        "The container runtime was told to run an image's name as its command: the wrapper built a "
        "malformed container command line (an image named twice, or an option that lost its value).",
        "Check the container options the wrapper was given (an image or option where the command "
        "goes) and update the wrapper if it built the line itself; run the step by hand with the "
        "image named once to confirm."),
    "exec.program-missing": (
        "The engine never ran: the program the wrapper starts (the engine's binary, or a helper it runs "
        "first) is not where the wrapper looks for it.",
        "Reinstall the engine or the wrapper so the program it names is in place (`stoker setup` for "
        "Stoker's own build); if an antivirus removed it, restore it and exclude the folder."),
    "container.option-as-command": (
        "The container runtime was told to run one of the wrapper's options as its command: the "
        "options came after the image name, where the runtime reads the program to run.",
        "Update the wrapper (its container command line puts options after the image); run the step by "
        "hand with every option before the image name to confirm."),
    "container.mounted-library-missing": (
        "The container could not start: a library it is to mount from the host is not on the host, "
        "most often a GPU driver library named by a container-device (CDI) spec written for a driver "
        "since updated.",
        "Regenerate the GPU's container-device spec for the driver installed now (NVIDIA: `sudo "
        "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`), then start the container again."),
    "arg.gqa-not-set": (
        "The model uses grouped-query attention and was loaded without its GQA factor, so its K and V "
        "tensors did not have the shape the engine expected; the file is fine.",
        "Pass the factor (`-gqa 8` for LLaMA 2 70B and Code Llama 34B GGML files, `n_gqa=8` in "
        "llama-cpp-python), or use a GGUF build of the model, which stores it."),
    "ollama.client-cancelled-predict": (
        "The client closed its request while the model was still answering (its own time limit ran "
        "out, or it was cancelled): the engine did not fail, though Ollama reports that the runner "
        "stopped.",
        "Raise the client's timeout for long prompts (a large context on a model partly in system "
        "memory is slow to start answering), or shorten the prompt or context."),
    "jvm.native-library-missing": (
        "The Java binding found no native llama library built for this system and CPU (in its jar "
        "or on java.library.path), so the engine never loaded.",
        "Use a release of the binding that ships a native library for this OS and CPU (or build "
        "one and point de.kherud.llama.lib.path or java.library.path at its folder)."),
    "lmstudio.rocm-engine-no-target": (
        "LM Studio's ROCm engine was not built for this GPU's gfx target, so it cannot run on it "
        "(LM Studio falls back to its Vulkan engine).",
        "Use LM Studio's Vulkan engine for this GPU, or a ROCm build of llama.cpp made for this gfx "
        "target."),
    "lemonade.config-value": (
        "Lemonade refused one of its settings before it started the engine: the value is not one "
        "it takes here (a backend this machine does not offer, a wrong type or range, or a path that "
        "is not there).",
        "Set the value the evidence line names to one it lists (`auto` picks the backend for you), in "
        "Lemonade's config.json or its settings, or remove the override."),
    "server.router-stopped-the-instance": (
        "llama-server's router stopped this model's instance on purpose (an unload, an eviction to "
        "make room for another model, or a reload), killing it if it was still loading: the engine "
        "did not fail.",
        "Nothing to do if another model was asked for; if the model must stay loaded, raise the "
        "router's model limit (--models-max) or do not unload it while it loads."),
    "arg.template-needs-jinja": (
        "The model's chat template is one the engine's built-in templates do not know; only its "
        "Jinja engine can render it, and the launch did not turn that on.",
        "Start the engine with `--jinja` (in RamaLama: `--runtime-args=\"--jinja\"`; recent llama.cpp "
        "builds, b11434 (Stoker's) among them, turn it on by default), or give a chat template the built-in "
        "list knows."),
    "dyld.system-too-old": (
        "The engine build needs a newer macOS than this one: a function it uses is missing from "
        "macOS's own libraries.",
        "Use a build compiled on this Mac (`stoker setup` builds one) or a release made for this "
        "macOS version, or update macOS."),
    "dyld.system-library-missing": (
        "The engine build needs a newer macOS than this one: it links to a library of macOS's own "
        "that this macOS does not have.",
        "Use a build compiled on this Mac (`stoker setup` builds one) or a release made for this "
        "macOS version, or update macOS."),
    "python.module-missing": (
        "The program could not start: a Python package it imports is not installed for the Python "
        "that runs it.",
        "Install the package the evidence names for that interpreter (`python -m pip install …` with "
        "the same python), or reinstall the program; in a container, the image's Python and the "
        "version its packages were installed for must be the same."),
    "exec.unexpanded-macro": (
        "The wrapper tried to run a command that still holds a macro or variable it never expanded "
        "(`${…}` or `$NAME`), so no program by that name exists.",
        "Fix the wrapper's config: define the macro (in llama-swap, under `macros:` at the top "
        "level, indented as its example shows) or write the engine's full path in the command."),
    "ollama.foreign-cudart": (
        "Ollama's GPU discovery used an ancient CUDA runtime found on PATH (NVIDIA PhysX's) instead of "
        "its own, misread the card and left the GPU for the CPU.",
        "Update Ollama (its later releases load the CUDA runtime they ship first), or take the PhysX folder "
        "(C:\\Program Files (x86)\\NVIDIA Corporation\\PhysX\\Common) off PATH."),
}


def entry_words(entry_name: str | None) -> tuple[str, str] | None:
    """The deciding catalogue entry's own words (title, advice), if it has any."""
    return _ENTRY_WORDS.get(entry_name) if entry_name is not None else None


def _when(report: ExitReport) -> str:
    return "while loading the model" if report.phase == "starting" else "while serving"


def _rpc_worker_lost_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    return (f"An RPC worker the engine was using went away or stopped answering {_when(report)}.",
            "Check that `stoker worker` still runs on that machine (and its SSH tunnel, if any); "
            "Stoker re-plans without it and restarts, and offers to use it again once it is back.")


def _host_oom_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    if unsure == UNSURE_CONTEXT:
        title = ("The engine could not create its context and the log does not say why; most "
                 "likely the system memory (RAM) ran out.")
    elif unsure == UNSURE_DEVICE:
        title = ("The engine could not allocate a memory buffer and the log does not say on "
                 "which device; with no GPU build named, most likely the system memory (RAM).")
    elif unsure == UNSURE_SIGKILL:
        title = (f"The engine was killed from outside (SIGKILL) {_when(report)}, with no error in its "
                 "log; most likely the system ran out of memory (RAM) and the kernel's "
                 "out-of-memory killer ended it.")
    elif report.phase == "starting":
        title = "The engine ran out of system memory (RAM) while loading the model."
    else:
        title = "The engine was stopped for lack of system memory (RAM) while serving."
    return title, ("Close other memory-hungry programs, or give this model a smaller context or a "
                   "cheaper KV cache type (q8_0); Stoker retries with a plan that leaves more room.")


GPU_OF_OOM = {"cuda-oom": "NVIDIA (CUDA)", "rocm-oom": "AMD (ROCm)", "vulkan-oom": "Vulkan",
               "metal-oom": "Apple (Metal)"}


def _gpu_oom_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    gpu = GPU_OF_OOM[kind]
    if unsure == UNSURE_GPU_VENDOR:
        gpu = "NVIDIA (CUDA) or AMD (ROCm): the log does not say which,"
    when = _when(report)
    if unsure == UNSURE_GPU_OR_HOST:
        return (f"The engine could not allocate a memory buffer {when} and the log does not say on "
                f"which device; on this {gpu} build most likely the GPU ran out of graphics "
                "memory, but it may be the system memory (RAM).",
                "Put fewer layers on the GPU or lower the context, and check the free system "
                "memory; Stoker retries with a smaller plan.")
    if unsure == UNSURE_CONTEXT:
        return (f"The engine could not create its context and the log does not say why; most "
                f"likely the {gpu} GPU ran out of graphics memory.",
                "Lower the context, use a cheaper KV cache type or put fewer layers on the GPU; "
                "Stoker retries with a smaller plan.")
    return (f"The {gpu} GPU ran out of graphics memory {when}.",
            "Close other programs using the GPU, or lower the context, use a cheaper KV cache "
            "type or put fewer layers on the GPU; Stoker retries with a smaller plan.")


def _no_kernel_image_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    gpu = "AMD" if report.backend == "rocm" else "GPU"
    return (f"This engine build has no code for this {gpu}'s architecture.",
            "Use a build compiled for this GPU (Stoker falls back to the next build in line: "
            "Vulkan, then CPU), or rebuild with this GPU's architecture included.")


def _missing_library_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    if report.os == "windows":
        advice = ("Install the Microsoft Visual C++ Redistributable (" + VC_REDIST_URL + ") and "
                  "keep the build's DLLs next to llama-server.exe, then start again.")
    else:
        advice = ("Reinstall the engine build with all its libraries next to the binary "
                  "(`stoker setup`), or install the runtime it names.")
    return "The engine could not start because a library it needs is missing.", advice


def _stale_library_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    if report.os == "windows":
        advice = ("Another program's DLL of the same name is found before the build's own (on "
                  "PATH or in System32): keep the build's DLLs next to llama-server.exe and "
                  "remove or rename the other copy, then start again.")
    else:
        advice = ("Remove or move the older copy (often in /usr/local/lib or a directory on "
                  "LD_LIBRARY_PATH; `ldd llama-server` shows which file is loaded), or keep "
                  "the build's own libraries next to the binary.")
    return ("The engine could not start because a library from another llama.cpp build or another program was "
            "loaded in place of its own (an older libllama or ggml, or a same-named DLL found first)."), advice


def _drafter_failure_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    if report.drafter_forced:
        return ("The speculative drafter you chose broke the launch.",
                "Choose another draft model (formats change between engine releases) or turn "
                "speculative decoding off for this model.")
    return ("The speculative drafter broke the launch, so Stoker leaves it out with this "
            "engine build.",
            "Nothing to do: the model runs without the drafter. A drafter made for this "
            "engine release brings the speed-up back.")


def _startup_timeout_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    if unsure == UNSURE_STOPPED_STARTING:
        return ("The program running the engine stopped it before it became ready, with no "
                "error in the log; most likely its start-up (health check) timeout ran out, "
                "though a model swap or an idle unload ends it the same way.",
                "Give the wrapper a longer start-up timeout (llama-swap: healthCheckTimeout) "
                "if the model loads slowly, e.g. from a network disk.")
    return ("The engine did not become ready in time and was stopped.",
            "Look at the last log lines; a very large model on a slow disk may need a longer "
            "start-up time, otherwise try a smaller context.")


def _assertion_failed_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    when = "while starting." if report.phase == "starting" else "while serving."
    code = report.exit_code
    if effective_signal(report) == "SIGFPE" or (code is not None and ntstatus_of(code) in ARITHMETIC_TRAPS):
        return ("The engine crashed on an arithmetic fault (an integer division by zero) " + when,
                "This is an engine bug, often on a model value it did not check (a new model's vision "
                "projector): try a newer engine build, or the model without its projector, and report it "
                "upstream with the model's name.")
    return ("The engine stopped on an internal check (an assertion) " + when,
            "This is usually an engine bug or an unsupported setting: try another engine "
            "build or remove unusual options, and report the evidence line upstream.")


def _stopped_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    who = ("Stoker stopped the engine." if report.signalled_by_us else
           "The engine was stopped by something other than Stoker.")
    return who, "Nothing to do unless this was unexpected."


def _unknown_words(kind: str, report: ExitReport, unsure: str | None) -> tuple[str, str]:
    if report.exit_code is None and report.signal is None and not report.oom_killed:
        return ("The log shows no failure, and how the engine ended is not known.",
                "If it did stop, give the exit code or signal (`stoker diagnose LOG --exit-code N`); "
                "a log that ends mid-load may also mean it was killed.")
    return ("The engine stopped unexpectedly and the log does not say why.",
            "Look at the log around the end; if it repeats, try another engine build or a "
            "smaller plan.")


_WordsOf = Callable[[str, ExitReport, str | None], tuple[str, str]]

# The kinds whose words depend on the report (the phase, the OS, who stopped it) or on what
# made the reading unsure. A kind in neither table (`unknown`) gets `_unknown_words`.
_WORDS_BY_FACTS: dict[str, _WordsOf] = {
    "rpc-worker-lost": _rpc_worker_lost_words,
    "host-oom": _host_oom_words,
    "cuda-oom": _gpu_oom_words,
    "rocm-oom": _gpu_oom_words,
    "vulkan-oom": _gpu_oom_words,
    "metal-oom": _gpu_oom_words,
    "no-kernel-image": _no_kernel_image_words,
    "missing-library": _missing_library_words,
    "stale-library": _stale_library_words,
    "drafter-failure": _drafter_failure_words,
    "startup-timeout": _startup_timeout_words,
    "assertion-failed": _assertion_failed_words,
    "stopped": _stopped_words,
}


def words(kind: str, report: ExitReport, unsure: str | None = None) -> tuple[str, str]:
    """(title, advice) a person reads for an incident of `kind`."""
    fixed = _FIXED_WORDS.get(kind)
    if fixed is not None:
        return fixed
    return _WORDS_BY_FACTS.get(kind, _unknown_words)(kind, report, unsure)
