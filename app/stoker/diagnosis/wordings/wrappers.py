"""The wrappers' own wordings around the engine: Ollama, LM Studio, Jan, koboldcpp, llama-swap,
llama-cpp-python, text-generation-webui, LocalAI, Lemonade, Unsloth Studio and others.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import OLDER as _OLD
from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S, _W = Strength.DECISIVE, Strength.STRONG, Strength.WEAK
_wordings = Wordings()
_e = _wordings.add

# --------------------------------------------------------------------------- wrappers
# Wrappers' generic words around a failure: signs only (WEAK). They are shown as evidence
# but never decide, since each of them follows many causes (an OOM, an unknown
# architecture, a missing DLL all end in `Failed to load model`).
_e("wrapper.load-failed", "bad-model", 20, _W,
   "llama-cpp-python llama.py (`Failed to load model from file`); LM Studio (`Error loading model.`); "
   "Jan/cortex; text-generation-webui modules/models.py; koboldcpp (`Could not load text model`); "
   "LocalAI (`could not load model`); Ollama llm/server.go (`error loading llama server`)",
   "the wrapper saw the load fail; the cause is in the engine's own lines",
   r"Failed to load model from file", r"Error loading model\.", r"Failed to load the model",
   r"Could not load text model", r"could not load model", r"error loading llama server",
   r"failed to load model with internal loader", r"unable to load model", r"Failed to load model\b",
   # older llama-cpp-python llama.py: the load failed and the binding only asserts it
   r"assert self\.model is not None",
   # Ollama server/sched.go (0.1.4x to 0.5): appended to any error with `failed to load model`,
   # an out-of-memory included; Ollama 0.20's `model failed to load, this may be due to
   # resource limitations or an internal error`; LocalAI pkg/model (`backend %s returned no
   # usable model`)
   r"this model may be incompatible with your version of Ollama",
   r"model failed to load, this may be due to resource limitations",
   r"returned no usable model")
# Two wrappers' memory figures, read by stoker/diagnosis/wrapper_memory.py over several lines
# (no single line proves them, so their patterns match nothing; evidence.gather adds the piece
# on the line the reader names). Widened from spent batch 18 (lmstudio-bug-tracker#14,
# ollama#10739); wrapper_memory.py says what each field means and why the cut is where it is.
_e("lmstudio.ram-exhausted", "host-oom", 60, _S,
   "LM Studio 0.2.x load-error JSON (`data.memory`: `ram_capacity`, `ram_unused`), as pasted in "
   "lmstudio-bug-tracker#14 and llama-cpp-python#1556",
   "the system memory LM Studio found unused when the load failed was under a ten-thousandth of "
   "the total: the host's memory had run out (strong, not decisive: a figure taken after the "
   "failure, not the failing allocation; an engine's own allocation line before it wins)",
   r"(?!)")
_e("ollama.estimate-host-tight", "host-oom", 20, _W,
   "Ollama llm/server.go and llm/memory.go (0.3 to 0.11): `msg=\"system memory\" ... free=... "
   "free_swap=...` with `msg=offload ... memory.required.full=... memory.required.partial=...`",
   "Ollama's own estimate put at least nine tenths of the free system memory (with swap) on the "
   "host: a runner the kernel then kills leaves no line of its own; a sign only (a forecast, "
   "not a failure)",
   r"(?!)")
# LM Studio's runtime survey (`lms runtime survey --json`, the engine list of its Runtime page,
# 0.3.2x to 0.4.x) for its ROCm llama.cpp engine: the engine's compatibility check compares the
# GPUs it detects with the gfx targets the engine was built for, and says `No ROCm GPUs detected of
# supported targets: gfx1030, gfx1100, ...` (status `noSupportedGpus`; lmstudio-bug-tracker#1903,
# a gfx1150 absent from that list) or, in the older survey, `No supported GPUs` / `No compatible
# ROCm GPUs found on device` (#883, the same gfx1150); LM Studio then runs its Vulkan engine.
_e("lmstudio.rocm-engine-no-target", "no-kernel-image", 70, _S,
   "LM Studio runtime survey for its ROCm llama.cpp engine (compatibility `noSupportedGpus`), "
   "0.3.2x to 0.4.x",
   "LM Studio's ROCm engine found no GPU among the gfx targets it was built for: it has no kernels "
   "for this GPU",
   r"No ROCm GPUs detected of supported targets", r"No compatible ROCm GPUs found on device")
# Windows' crash report read by stoker/diagnosis/crash_reports.py over several lines (the faulting
# module, its version and the exception are fields of their own): a program built with Visual
# Studio 2022 17.10 or later faults in an older msvcp140.dll. Widened from spent batch 65
# (gpustack/llama-box#10; gpustack#861 of batch 12 is the same report).
_e("windows.msvc-runtime-too-old", "system-too-old", 77, _S,
   "Windows Error Reporting (APPCRASH `Sig[3..6]`) and the Application log's event 1000 "
   "(`Faulting module name`, `<Data>` fields); Microsoft STL changelog, VS 2022 17.10 (MSVC 14.40)",
   "the program faulted (0xc0000005) inside a Visual C++ runtime older than 14.40, which programs "
   "built with MSVC 14.40 or later need: the installed runtime is too old (install the current "
   "Visual C++ Redistributable)",
   r"(?!)")
_e("wrapper.layout-unfit", "device-oom", 65, _S,
   "Ollama llm/server.go (its own engine's layout fit, 0.11 and later): `memory layout cannot be "
   "allocated` (with `num_gpu = N`)",
   "the wrapper found no placement of the layers that fits the free memory: an out-of-memory "
   "found before the engine allocated (the build's device decides which)",
   r"memory layout cannot be allocated",
   # llm/server.go 0.11 to 0.2x: the runner's layout pass (LoadOperationAlloc/Commit) answered
   # Success false, which runner/ollamarunner sends only for ml.ErrNoMem
   r"failed to (allocate|commit) memory for model")
_e("metal.over-working-set", "metal-oom", 20, _W,
   f"ggml/src/ggml-metal/ggml-metal-device.m ggml_metal_log_allocated_size, {_B}; older "
   "ggml-metal.m ggml_metal_add_buffer: `warning: current allocated size is greater than the "
   "recommended max working set size`",
   "Metal's allocations already exceed the working set the OS recommends: a sign only (the run "
   "may go on); with a Metal command-buffer failure that names no error it says which",
   r"current allocated size is greater than the recommended max working set size")
_e("wrapper.context-failed", "device-oom", 20, _W,
   "llama-cpp-python llama.py (`Failed to create llama_context`); common.cpp (`failed to create context`)",
   "the context could not be created (most often memory); the cause is in the engine's lines",
   r"Failed to create llama_context", r"failed to create context with model")
_e("wrapper.runner-ended", "assertion-failed", 20, _W,
   "Ollama llm/server.go (`llama runner process has terminated`); LocalAI gRPC (`error reading from "
   "server: EOF`); Jan (`cortex exited`); koboldcpp (`Failed to execute script`)",
   "the engine process ended; the exit or the engine's lines say why",
   r"llama runner process has terminated", r"error reading from server: EOF", r"cortex exited with code",
   r"Failed to execute script", r"rpc error: code = Unavailable", r"grpc service not ready",
   # Ollama llm/server.go with llama-server as its runner (0.12 to 2026) and its API's words
   r"llama-server process has terminated", r"llama-server process no longer running",
   r"llama runner terminated", r"model runner has unexpectedly stopped",
   # LocalAI pkg/model (v1.40 to v4): the backend's gRPC process died or never answered
   r"GRPC (Model|Process) (is )?not responding", r"Backend process exited unexpectedly",
   r"failed starting/connecting to the gRPC service", r"the model is not responding anymore",
   # text-generation-webui modules/llama_cpp_server.py
   r"Server process terminated unexpectedly with exit code",
   # llama-swap internal/process (and proxy/process.go before it)
   r"upstream (process )?exited unexpectedly", r"process exited with error:",
   r"upstream command exited prematurely",
   # Jan tauri-plugin-llamacpp commands.rs and error.rs
   r"llama\.cpp (failed early|exited) with (error )?code", r"llama\.cpp exited successfully but without ready signal",
   r"The model process encountered an unexpected error", r"code: LlamaCppProcessError")
# A binding that refused a GGML-era file. LangChain's LlamaCpp (langchain/llms/llamacpp.py, 2023:
# `Could not load Llama model from path: %s. Received error %s`) over llama-cpp-python, which raises
# when llama.cpp's loader returns no model. A `.bin` file is a GGML-era model: llama.cpp refused
# the older GGML revisions from May 2023 (`this format is no longer supported`) and every GGML file
# from August 2023 (GGUF), and a crash or a memory failure of that loader leaves its own line, so
# a load refused with no other line is the file's format (llama.cpp#3183, private-gpt#113 and
# #1029). Strong, ranked below the engine's own lines, which name the cause when the log has them.
_e("binding.ggml-file-refused", "bad-model", 22, _S,
   "LangChain langchain/llms/llamacpp.py validate_environment (2023) over llama-cpp-python's "
   "Llama(), and LLamaSharp's LoadWeightsFailedException (0.10 on, GGUF-only backends); llama.cpp's "
   "GGML (.bin) formats, dropped in May and August 2023",
   "the loader refused a GGML-era (.bin) model file, a format the engine no longer reads",
   r"Could not load Llama model from path: \S*\.bin\b",
   # LLamaSharp's own refusal (LLama/Exceptions/RuntimeError.cs LoadWeightsFailedException, 0.10 of
   # February 2024 on: `Failed to load model '%s'`, thrown when llama_model_load_from_file returns
   # no model): every backend it ships since 0.5 (September 2023) reads GGUF only, so a `.bin`
   # GGML-era file is refused for its format (LLamaSharp#999: wizardLM-7B.ggmlv3.q4_1.bin)
   r"LoadWeightsFailedException: Failed to load model '[^']*\.bin'")
_e("wrapper.start-guess", "bad-model", 20, _W,
   "Unsloth Studio studio/backend core/inference (2026): `llama-server failed to start. Check that "
   "the GGUF file is valid and you have enough memory.`, said of any start that failed, also when "
   "the program itself is missing (unsloth#8184)",
   "the wrapper's own guess at a failed start",
   r"llama-server failed to start\. Check that the GGUF file is valid")
# Unsloth Studio's own diagnoses of a llama-server that would not start (studio/backend/core/inference
# llama_cpp.py, 2026: the explanation it builds from the server's output and exit status, shown in
# the app and raised as RuntimeError): each names the cause it read, so a user's paste of only that
# sentence still tells it. Strong, not decisive: when the paste carries the server's own lines,
# those are read too and the order decides between them. Its last-resort guess (`Check that the
# GGUF file is valid and you have enough memory`) is wrapper.start-guess, weak. Not read: the
# warnings before its own retries (`failed to start with speculative drafter …`, `a HIP kernel-image
# error on GPU(s) … Retrying on GPU(s) …`), since the retry's outcome, not the first try's, ends
# the start.
_UNSLOTH = "Unsloth Studio studio/backend/core/inference/llama_cpp.py (2026)"
_e("unsloth.library-missing", "missing-library", 75, _S,
   f"{_UNSLOTH}: _missing_library_message (`cannot open shared object file`), and exit 127",
   "the wrapper found a library its llama-server needs missing, or the program itself",
   r"llama-server could not start: the system library \S+ is missing",
   r"llama-server could not start: \S+ is part of (Unsloth's own llama\.cpp runtime and is missing"
   r"|the llama\.cpp runtime that the llama-server binary in use was built with\. That binary)",
   r"llama-server could not start: \S+ is missing from that exact location",
   r"llama-server exited immediately \(status 127\): either the llama-server executable could not be found")
_e("unsloth.library-mix", "stale-library", 76, _S,
   f"{_UNSLOTH}: a bundled HIP library resolving a symbol in the system's ROCm; a macOS binary "
   "built for the other CPU architecture",
   "the wrapper found libraries or a binary from another build than the one it runs",
   r"looked up \S+ in a different ROCm than it was built against",
   r"llama-server could not start: the executable was built for a different CPU architecture")
_e("unsloth.argument", "bad-argument", 70, _S,
   f"{_UNSLOTH}: llama-server's `invalid argument` and `error while handling argument` in its "
   "words, and tensor parallelism asked for an architecture without it",
   "an argument the wrapper passed (often from the model's extra arguments) was refused",
   r"llama-server does not recognise the argument '", r"llama-server rejected the value for '",
   r"Tensor parallelism is not supported for this model's architecture")
_e("unsloth.model", "bad-model", 60, _S,
   f"{_UNSLOTH}: `invalid magic characters`, `unknown model architecture`, a projector refused",
   "the wrapper read llama-server's refusal of the model file: not a GGUF, an architecture this "
   "build does not run (an image or video model among them), or a projector it cannot load",
   r"llama-server opened a file that is not a GGUF", r"llama\.cpp does not support this GGUF's model architecture",
   r"is an? (diffusion \(image-generation\)|text-to-video|image / video generation) GGUF, "
   r"which llama-server cannot run",
   r"Vision projector incompatible with this llama\.cpp build")
_e("unsloth.gpu-init", "gpu-error", 40, _S,
   f"{_UNSLOTH}: a crash at start-up with and without the vision projector",
   "the wrapper found the GPU runtime crashing as it started, whatever the model",
   r"a GPU driver/runtime initialization crash, not a model or vision-projector problem")
_e("unsloth.stopped", "stopped", 45, _S,
   f"{_UNSLOTH}: exit status -15 before /health answered",
   "the server was asked to stop (SIGTERM) before it was ready: an unload, a cancel or a supervisor",
   r"llama-server was terminated \(signal 15\) before it became healthy")
_e("unsloth.never-healthy", "startup-timeout", 50, _S,
   f"{_UNSLOTH}: `health check timed out`",
   "the server ran but never answered its /health check in the wrapper's time",
   r"llama-server started but never became healthy on its local /health endpoint")
# ... and its guess after a SIGKILL with no output, which Stoker's own reading of a bare SIGKILL
# shares (the kernel's out-of-memory killer, said as unsure); on macOS it names a refused code
# signature too, which is not read
_e("unsloth.killed", "host-oom", 20, _S,
   f"{_UNSLOTH}: exit status -9 with no output, outside macOS",
   "the wrapper's guess at a SIGKILL with nothing in the log: most often the out-of-memory killer",
   r"llama-server was stopped by the operating system \(signal 9\), most likely out of memory")
_e("wrapper.crash-guess", "host-oom", 20, _W,
   "gpt4all chat (`Previous attempt to load model resulted in crash ... most likely due to out "
   "of memory`): its guess after any crash on load, also a CPU without AVX",
   "the wrapper's own guess at a crash it did not see",
   r"Previous attempt to load model resulted in crash")
_e("wrapper.gpu-library-absent", "missing-library", 20, _W,
   "llamafile (`support for --gpu %s was explicitly requested, but it wasn't available`): no GPU "
   "module could be loaded or built, whether the library, the driver or the compiler is missing",
   "llamafile found no usable GPU module",
   r"support for --gpu \w+ was explicitly requested, but it wasn't available")
_e("wrapper.gpu-fallback", "gpu-error", 20, _W,
   "Ollama discover (`no compatible GPUs were discovered`, `amdgpu is not supported`); LM Studio",
   "the wrapper did not use the GPU; whether that is the failure depends on the plan",
   r"no compatible GPUs were discovered", r"amdgpu is not supported", r"unable to verify rocm library",
   # Ollama discover (0.12 to 2026): discovery gave up; koboldcpp.py's auto layers
   r"failure during (llama-server )?GPU discovery", r"GPU discovery watchdog timed out",
   r"failed to finish discovery before timeout",
   r"No GPU backend found, or could not automatically determine GPU layers")
# martin-olivier/dylib (the loader cortex.cpp, Jan's engine server, uses): `Could not load library
# "%s"` then, on a line of its own, the OS loader's reason (dlerror; FormatMessage on Windows).
# cortex found the file before loading it, so with the reason lost (a log cut at the line, or
# FormatMessage's empty text) what remains is Windows failing on a DLL that engine.dll needs:
# ERROR_MOD_NOT_FOUND, the CUDA runtime DLLs Jan downloads apart (jan#4149, cortex.cpp#1887).
# A reason that is there decides by its own line (another build's entry point: stale-library).
_e("dylib.load-failed", "missing-library", 74, _S,
   "martin-olivier/dylib load_error (`Could not load library \"%s\"`), in cortex.cpp 1.0 and Jan "
   "0.5 (engine.dll, libengine.so)",
   "the engine library is present but the OS loader refused it: most often a library it depends on "
   "is not installed",
   r"Could not load library \"[^\"]+\"\s*$")
# LocalAI core/cli/worker (worker_llamacpp.go, worker_ds4.go, worker_backend_common.go, 3.x): the
# P2P/RPC worker's backend (the llama-cpp package holding rpc-server) is not installed.
_e("localai.worker-backend-absent", "missing-library", 75, _D,
   "LocalAI core/cli/worker (`llama-cpp backend not found, install it first`, `%s backend not found "
   "after install`, `backend not found, failed to install it`), 3.x",
   "the backend package the worker runs (its rpc-server) is not installed",
   r"\b[\w.-]+ backend not found(, install it first| after install|, failed to install it)")
# Ollama 0.1.1x-0.1.3x llm/dyn_ext_server.c (dynamic_shim.c before): LoadLibrary/dlopen of its
# runner library (ext_server.so, ext_server.dll) failed, `Unable to load dynamic server library:
# %s` with the loader's words after it. Those words, when readable, rank above this (a `cannot
# open shared object file`, a DLL initialization failure); a line where they are lost (Windows'
# message garbled in another code page, ollama#2888; a unicode path, fixed in 0.1.33) is the
# loader refusing the runner: missing-library, as for dylib.load-failed.
_e("ollama.runner-library-load-failed", "missing-library", 30, _S,
   "Ollama llm/dyn_ext_server.c (`Unable to load dynamic server library: %s`) and dyn_ext_server.go "
   "(`Unable to load dynamic library: %s`), 0.1.1x to 0.1.3x",
   "the OS loader refused Ollama's runner library: most often a library it depends on is missing",
   r"Unable to load dynamic server library")
_e("wrapper.engine-library", "missing-library", 20, _W,
   "Jan's cortex.cpp engine loader (`Could not load engine: %s`, `Failed to load engine: %s`)",
   "the wrapper could not load its engine library; the loader's reason (a missing DLL, another "
   "build's, an instruction this CPU lacks) is in the rest of the line or log",
   r"Could not load engine: ", r"Failed to load engine: ")


# src/llama.cpp llama_prepare_model_devices in builds before b11434's `!model->devices.empty()`
# guard (JamePeng's llama-cpp-python fork of 2026 among them): main_gpu 0 refused with zero
# devices. The GPU backend never gave a device (its library or the runtime it needs did not
# load, no driver, no GPU); which one, only the lines before it can say.
_e("gpu.no-device", "missing-library", 20, _W, f"src/llama.cpp llama_prepare_model_devices, {_OLD}",
   "the engine found no GPU device at all; the reason is in the lines before it",
   r"invalid value for main_gpu: -?\d+ \(available devices: 0\)")
# Lemonade's C++ CLI (src/cpp/cli/lemonade_client.cpp assert_http_ok, Aug 2026): `Could not
# connect to Lemonade server (<httplib::to_string(error)>)`. cpp-httplib's Error::Read, `Failed
# to read connection`, means the server took the request and no reply came in the CLI's read
# timeout; a server that is not running gives Error::Connection (`Could not establish
# connection`) instead. Inside `Error loading model:` it is the CLI giving up on a model still
# loading (lemonade#1594 finished loading a minute later). A server that crashed mid-load also
# ends the read, so it is strong, not decisive: a crash line before it names that cause.
_e("lemonade.load-reply-lost", "startup-timeout", 50, _S,
   "lemonade-sdk/lemonade src/cpp/cli/lemonade_client.cpp (2026); cpp-httplib Error::Read",
   "the wrapper's client stopped waiting for the model load it had asked for",
   r"Error loading model: Could not connect to Lemonade server \(Failed to read connection\)")
# llama-server's answer to any request before its model is loaded (tools/server/server-http.cpp
# middleware_server_state, b11434: status 503 with `{"error": {"code": 503, "message": "Loading
# model", "type": "unavailable_error"}}`), printed by a client as its error: the client asked
# while the engine was still loading and ended there instead of waiting (canonical/inference-snaps
# #234, the snap's chat command). Strong, not decisive: a crash line in the same log is the reason
# the load never finished.
_e("server.loading-model-reply", "startup-timeout", 48, _S,
   "llama-server tools/server/server-http.cpp (503 `Loading model`, `unavailable_error`), b11434",
   "a client got the engine's `still loading` answer and gave up instead of waiting for the load",
   r"\"Loading model\".{0,40}\bunavailable_error\b|\bunavailable_error\b.{0,60}\"Loading model\"")
_e("wrapper.start-timeout", "startup-timeout", 50, _D,
   "llama-swap proxy/process.go; Ollama llm/server.go; systemd; Kubernetes",
   "the wrapper gave up waiting for the engine to become ready",
   r"health check (failed|timed out) after \d+", r"timed out waiting for llama runner to start",
   r"health check of container .* timed out", r"start operation timed out\. Terminating",
   r"Failed with result 'timeout'", r"failed startup probe", r"Startup probe failed",
   r"timed out waiting for (llama-server|the server|server) to (start|become)",
   # Jan tauri-plugin-llamacpp commands.rs (180 s without llama-server's ready line)
   r"The model took too long to load and timed out", r"code: ModelLoadTimedOut",
   # ComfyUI-Prompt-Manager's llama.cpp node (and others' wait loops): its wait ran out
   r"\b[Ss]erver did not start in time",
   # RamaLama's RAG front end polling llama-server's /health (containers/ramalama#2129)
   r"\bllama-server at \S+ did not become ready after \d+ ?(s|sec|seconds)\b",
   # Unsloth Studio's CLI (unsloth_cli/commands/studio.py, 2026: `Error: server did not become
   # healthy within 30 seconds.`) and its installers (`did not become healthy within Ns`)
   r"\bdid not become healthy (within|in) \d+ ?(s|sec|seconds)\b")
# llama-swap polls the upstream's check endpoint (`/health` unless checkEndpoint says otherwise)
# until it answers 200 or healthCheckTimeout runs out. A 404 there is the upstream serving HTTP
# without that path (an engine that is not llama-server, or a wrong checkEndpoint): llama-server
# answers 503 while it loads, so the check can never pass and the start ends in the wrapper's
# timeout (llama-swap#84, KoboldCpp behind it). Releases v88-v96 print `!!! Health check error:
# status code: 404`, v104-v216 `<model> Health check error on <url>, status code: 404 (normal
# during startup)`; later ones log no failed check. Strong, not decisive, and below the engine's
# own failures: a crash or a refusal the log shows is the cause of the start never completing.
_e("llama-swap.check-endpoint-not-served", "startup-timeout", 48, _S,
   "llama-swap proxy/process.go checkHealthEndpoint (v88-v216: `Health check error: %v`, `Health check "
   "error on %s, %v (normal during startup)` with `status code: %d`)",
   "the upstream answered without the check endpoint, so the wrapper's ready check could not pass",
   r"Health check error( on \S+,|:) status code: 404\b")
# llama-server's router mode (tools/server/server-models.cpp, b11434; Jan 0.8's
# tauri-plugin-llamacpp runs it): the router stops a model instance on purpose, on an unload
# request, to make room under --models-max, for an idle model a queued request needs the slot of,
# or when the model's source changed. One still loading is killed at once (jan#8667: Jan unloaded
# its embedding model while it loaded), one that does not stop in time after the stop timeout.
_e("server.router-stopped-the-instance", "stopped", 45, _S,
   f"tools/server/server-models.cpp server_models::unload, unload_lru and the instance monitor, {_B} "
   "(`stopping model instance name=%s`, `model name=%s is still loading, force-killing`, "
   "`force-killing model instance name=%s after timeout`)",
   "llama-server's router stopped the model's instance on purpose (an unload, an eviction to make "
   "room, a reload), killing it if it was still loading or did not stop in time",
   r"\bstopping model instance name=\S", r"\bmodel name=\S+ is still loading, force-killing",
   r"\bforce-killing model instance name=\S+ after (\d+ seconds )?timeout",
   r"\bmodels_max limit reached, removing LRU name=", r"\bevicting idle LRU name=\S+ for a queued request",
   r"\(reload\) unloading model name=\S+ \(source updated or removed\)")
_e("wrapper.ttl-unload", "stopped", 45, _D, "llama-swap proxy/process.go (TTL)",
   "the wrapper unloaded the model on purpose", r"Unloading model, TTL of \d+s? reached")


ENTRIES = _wordings.entries()
