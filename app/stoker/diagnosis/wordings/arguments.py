"""Wordings of an argument the engine or its wrapper refused, and of an allocation whose device
the line does not name (the buffer or backend around it decides).

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S = Strength.DECISIVE, Strength.STRONG
_wordings = Wordings()
_e = _wordings.add

# ---------------------------------------------------------------------------- arguments

_e("arg.invalid", "bad-argument", 70, _D,
   f"common/arg.cpp, {_B}; older common.cpp (`unknown argument`, `invalid parameter for argument`)",
   "the engine refused an option or value on its command line",
   r"error: invalid argument:", r"error while handling argument", r"unknown argument",
   r"error: unrecognized arguments?:", r"error while handling environment variable",
   r"Unsupported cache type", r"unknown speculative type", r"invalid parameter for argument",
   # common.cpp kv_cache_type_from_str before it said `Unsupported` (2024: `Invalid cache type: %s`,
   # thrown and printed by the C++ runtime's terminate handler, llama.cpp#7639)
   r"Invalid cache type: \S",
   r"unk?nown value for --", r"quantized V cache requires flash_attn",
   # llama.cpp mid-2024 to early 2025 (src/llama.cpp llama_new_context_with_model, after the
   # quantized V cache came in): the same refusal in its first words
   r"V cache quantization requires flash_attn",
   r"K cache type \S+ with block size \d+ does not divide", r"model does not support different K",
   r"SPLIT_MODE_TENSOR requires flash_attn", r"invalid device:", r"Available buffer types:",
   r"^not a directory:", r"Unknown reasoning format",
   # ... but with no device at all, main_gpu 0 (the default) is refused because no GPU
   # backend gave one ("gpu.no-device" below), not because the value was wrong
   r"invalid value for main_gpu: -?\d+(?! \(available devices: 0\))",
   r"invalid boolean value", r"unrecognized option '-", r": invalid option -- ",
   r"error: unrecognized command line option", r"error: the argument .{0,40} requires a value",
   r"unknown cache type", r"invalid (ngl|n_gpu_layers|ctx.size|tensor.split) value",
   # the CLI parsers wrappers use: Rust's clap (LlamaEdge), Go's flag package
   r"error: unexpected argument '[^']+' found", r"flag provided but not defined: -",
   # Python's argparse (`argument %s: invalid %s value`, `expected one argument`, `invalid
   # choice`), click (NoSuchOption, BadParameter, extra arguments), Go's pflag/cobra
   r"error: argument [-\w/, ]+: (invalid|expected|ignored explicit|not allowed)",
   r"Error: No such option: -", r"Error: Invalid value for ['\"-]", r"Got unexpected extra arguments? \(",
   r"\bunknown (shorthand )?flag: ['\"-]", r"invalid argument \"[^\"]*\" for \"-",
   # koboldcpp.py (`Error: Using --quantkv requires --flashattention`), llamafile
   # (`error: invalid --gpu flag value: %s`)
   r"Using --\w+ requires --\w+", r"error: invalid --gpu flag value",
   # src/llama-context.cpp llama_init_from_model, b11434
   r"n_batch and n_ubatch cannot both be zero", r"n_ctx and model->hparams.n_ctx_train cannot both be zero",
   # src/llama-context.cpp's llama_context constructor, b11434: a quantized V cache without
   # Flash Attention (the newer wording of `quantized V cache requires flash_attn`) and more
   # parallel sequences than LLAMA_MAX_SEQ
   r"quantized V cache was requested, but this requires Flash Attention", r"n_seq_max must be <= \d+",
   # llama_init_from_model, b11434: a quantized K or V cache type whose block does not divide
   # this model's head size (-ctk/-ctv chose a type the model's heads cannot be cut into)
   r"[KV] cache type \w+ with block size \d+ does not divide n_embd_head_[kv]=\d+",
   # Rust's clap (tabby, LlamaEdge): `error: invalid value '%s' for '%s'` (ErrorKind::InvalidValue)
   r"error: invalid value '[^']*' for '-")
# llama-run (examples/run/run.cpp, 2024-12 to 2025): its own parser's refusal, then its help.
# The words are generic (shell scripts print them too), so they decide only alone.
_e("run.parse-failed", "bad-argument", 70, _S,
   "examples/run/run.cpp Opt::init (`Error: Failed to parse arguments.`, `Error: No arguments "
   "provided.`), llama.cpp 2024-12 to 2025",
   "llama-run refused its command line (an option this build does not have, or no model)",
   r"^Error: (Failed to parse arguments|No arguments provided)\.$")
# common/arg.cpp (b11434) takes any integer for -b; llama_context then sizes its batch to 0 and
# the graph reserve aborts on GGML_ASSERT(n_outputs >= 1). -ub 0 is fine (it means "as -b"). The
# launch line or the context's own `n_batch = 0` shows the value.
_e("arg.batch-zero", "bad-argument", 70, _S,
   f"common/arg.cpp `-b, --batch-size N` (no lower bound) and src/llama-context.cpp, {_B}",
   "the launch set a logical batch size of 0, which the parser accepts and no context can run with",
   r"--batch-size[= ]+0(\s|\\|$)", r"(^|\s)-b 0(\s|\\|$)", r"\bLLAMA_ARG_BATCH=0\b",
   r"llama_context: n_batch\s+= 0\b")
# common/chat.cpp (b11434: `this custom template is not supported, try using --jinja`; common.cpp
# of 2024 without the hint): the model's chat template is not one the built-in matcher knows, and
# only the Jinja engine (`--jinja`) renders it. The model is fine; the launch lacked the option
# (containers/ramalama#1212: `ramalama run` without `--jinja`, which `ramalama serve` passes).
_e("arg.template-needs-jinja", "bad-argument", 70, _S,
   f"common/chat.cpp, {_B}; common/common.cpp, 2024 (`this custom template is not supported`)",
   "the model's chat template needs llama.cpp's Jinja engine, and the launch did not turn it on",
   r"this custom template is not supported")
# llama.cpp's GGML loader of July-August 2023 (llama.cpp llama_model_loader, `-gqa N` /
# llama-cpp-python's `n_gqa`, added for LLaMA 2 70B before GGUF stored the KV head count): a
# grouped-query model loaded with the default of 1 expects its K and V projections square, and the
# file's are n_embd / n_gqa wide (`tensor 'layers.0.attention.wk.weight' has wrong shape; expected
# 8192 x 8192, got 8192 x 1024`, serge#675). The file is fine; the load was not told its GQA factor.
_e("arg.gqa-not-set", "bad-argument", 70, _S,
   "llama.cpp (GGML era, July-August 2023) llama_model_loader's shape check of "
   "`layers.N.attention.wk|wv.weight` (`has wrong shape; expected %5u x %5u, got %5u x %5u`)",
   "a grouped-query-attention GGML model (LLaMA 2 70B, Code Llama 34B) was loaded without its GQA "
   "factor (`-gqa 8`, `n_gqa=8`)",
   r"tensor 'layers\.\d+\.attention\.w[kv]\.weight' has wrong shape; expected\s+(\d+) x\s+\1, "
   r"got\s+\1 x\s+(?!\1\b)\d+")
# src/llama-model-loader.cpp, b11434 (and since split GGUFs, 2024): the file named as the model
# is a later shard of a split model (`illegal split file idx: 3 (file: …-00004-of-00004.gguf),
# model must be loaded with the first split`). The shards are fine; the path handed to the engine
# names the wrong one (docker/model-runner#672: the runner passed the last shard). A shard whose
# own index disagrees with its name (`invalid split file idx … expected N`) is the file's.
_e("arg.split-not-first", "bad-argument", 70, _D,
   f"src/llama-model-loader.cpp llama_model_loader, {_B}: `illegal split file idx: %d (file: %s), "
   "model must be loaded with the first split`",
   "the model path names a later shard of a split model; the engine must be given the first",
   r"illegal split file idx")
_e("arg.wrapper-api", "bad-argument", 70, _S,
   "CPython's call check (`%U() got an unexpected keyword argument '%S'`) and pydantic v1's "
   "`extra fields not permitted` (value_error.extra): the wrapper's installed version does not "
   "take an option the caller passes (an option renamed, removed or not yet added)",
   "the caller passed an option the installed wrapper or binding does not accept",
   r"got an unexpected keyword argument '\w+'", r"extra fields not permitted \(type=value_error\.extra\)")
# Docker Model Runner's check of the engine flags a user set for a model (`docker model configure
# --runtime-flags`, pkg/inference/scheduling/scheduler.go and pkg/inference/runtime_flags.go, November
# 2025 on): a string that does not split into words, a flag not on the backend's allowlist, a path,
# a value that looks like another flag. The runner is never started with them.
_e("arg.runner-flags", "bad-argument", 70, _S,
   "docker/model-runner pkg/inference/scheduling/scheduler.go (`invalid runtime flags: %w`) and "
   "pkg/inference/runtime_flags.go ValidateRuntimeFlags, 2025-2026",
   "the engine flags configured for the model were refused before the engine started",
   r"\binvalid runtime flags: ", r"\bruntime flag \"[^\"]+\" is not allowed for backend \"",
   r"\binvalid runtime flag \"[^\"]+\": paths are not allowed",
   r"\binvalid flag \"[^\"]+\": value cannot start with '-'")
# Lemonade's C++ server (src/cpp/server/runtime_config.cpp, config.json since March-April 2026)
# checks each setting before it loads a model: a value outside the choices (`'llamacpp.backend'
# must be one of: auto, vulkan, cpu`: the backends this machine offers, lemonade#1614 after a
# forced `rocm`), of the wrong type or range, or a path that is not there. The engine is never run.
_e("lemonade.config-value", "bad-argument", 70, _S,
   "lemonade-sdk/lemonade src/cpp/server/runtime_config.cpp (RuntimeConfig validate_backend_choice, "
   "validate_path and the per-key checks: `'%s.backend' must be one of: %s`, `'%s' must be a "
   "boolean`, `'%s.%s' path does not exist: %s`), 2026",
   "a Lemonade setting holds a value Lemonade refuses (a backend this machine does not offer, a "
   "wrong type or range, a path that is not there)",
   r"'[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)?' (must be (one of: |either '|a (boolean|number|string)\b|"
   r"an integer\b|positive\b|between -?[\d.]+ and |>= -?\d|\"auto\" or |-1 \(unlimited\) or )|"
   r"path does not exist: |does not have a selectable backend)")
_e("arg.wrapper-origins", "bad-argument", 70, _D,
   "gin-contrib/cors config.go (`bad origin: origins must contain '*' or include <schemes>`), "
   "which Ollama's server builds from OLLAMA_ORIGINS (server/routes.go, 0.1.2x to 2026)",
   "an allowed-origins setting (Ollama's OLLAMA_ORIGINS) holds a value that is not an origin",
   r"bad origin: origins must contain '\*' or include")

# -------------------------------------------------------------- allocations, device unnamed

_e("alloc.unnamed", "device-oom", 65, _D,
   f"src/llama-model.cpp (`unable to allocate %s buffer`), src/llama-kv-cache.cpp, "
   f"src/llama-context.cpp, {_B}; older `unable to allocate backend buffer`",
   "an allocation failed on the buffer type the line names (or the build's device)",
   r"unable to allocate (\w+ )?buffer",
   # b11434's per-purpose buffers: llama-kv-cache.cpp, llama-memory-recurrent.cpp (`rs cache`),
   # the DeepSeek V4 compressor state (llama-context.cpp), llama-adapter.cpp (LoRA adapters
   # and control vectors): `failed to allocate buffer for <what>`
   r"failed to allocate buffer for (kv cache|rs cache|DSV4 compressor state|lora adapter|control vector)",
   r"failed to allocate compute (pp |tg )?buffers", r"failed to allocate output buffer",
   r"ggml_gallocr_reserve_n(_impl)?: failed to allocate",
   # ggml-backend.cpp's default buffer allocation and the CPU extra buffers (AMX, HBM), b11434:
   # `failed to allocate %s buffer of size %zu`
   r"failed to allocate (\w+ )?buffer of size \d+", r"ggml_backend_alloc_ctx_tensors\w*: failed to allocate",
   r"llama_kv_cache_init: failed to allocate", r"ggml_gallocr_alloc_graph: failed to allocate")


ENTRIES = _wordings.entries()
