"""Wordings of a model file the engine cannot load: damaged, incomplete, in a format or
architecture this build does not read, or over its limits.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S, _W = Strength.DECISIVE, Strength.STRONG, Strength.WEAK
_wordings = Wordings()
_e = _wordings.add

# -------------------------------------------------------------------------------- model

# The multimodal projector's loader and graph builders (tools/mtmd, b11434; examples/llava's
# clip.cpp before): a projector type this build does not know is a model newer than the
# engine (or a projector file for another model family).
_e("mtmd.projector-unknown", "bad-model", 60, _D,
   f"tools/mtmd/clip.cpp (`unknown projector type: %s`, `unknown vision projector type`), "
   f"mtmd.cpp (`unexpected vision/audio projector type`), models/llava.cpp, siglip.cpp, "
   f"whisper-enc.cpp (GGML_ABORT), {_B}; clip.cpp's `Unknown projector type` abort (2025-2026); "
   "examples/llava/clip.cpp's `GGML_ASSERT(new_clip->has_llava_projector)` (2024)",
   "the projector (mmproj) is of a type this build does not know: a newer model than the engine",
   r"\b(unknown|unexpected|unsupported) (vision |audio )?projector type",
   # the same for MiniCPM-V's projector, whose versions each build lists (b11434 clip.cpp
   # `GGML_ABORT("Unknown minicpmv version")`, mtmd.cpp `unsupported minicpmv version: %d`): a
   # MiniCPM-V newer than the engine (ollama#12104: MiniCPM-V 4.5 on an older bundled clip.cpp)
   r"\b(Unknown|unsupported) minicpmv version",
   # examples/llava/clip.cpp clip_model_load (2024, until MiniCPM-V's projector was added):
   # `GGML_ASSERT(new_clip->has_llava_projector)` after reading the file's clip.has_llava_projector
   # key; a projector without it (MiniCPM-V's, a text or semantic-search encoder) is one this
   # loader does not know (llamafile#540: fixed by a newer llamafile)
   r"GGML_ASSERT\W.{0,80}\bnew_clip->has_llava_projector\b")
# src/llama-model.cpp load_hparams, b11434 (and since 2024): the model's own expert or layer count
# checked against what this engine was compiled to hold. A model over it is newer than the engine
# (DeepSeek V3's 256 experts against the 160 of llama.cpp before b4400); a newer build raises the
# limit, so the file is not broken but the engine cannot take it. `seq_id < LLAMA_MAX_SEQ` is a
# request's, not the model's, and is not read here.
_e("model.over-engine-limit", "bad-model", 62, _D,
   f"src/llama-model.cpp (`GGML_ASSERT(hparams.n_expert <= LLAMA_MAX_EXPERTS)`, `n_layer_all <= "
   f"LLAMA_MAX_LAYERS`), src/models/*.cpp, {_B}",
   "the model has more experts or layers than this engine build can hold: a model newer than the engine",
   r"GGML_ASSERT\([^)]*<= ?(\(size_t\) ?)?LLAMA_MAX_(EXPERTS|LAYERS)\)\s*failed")
# The reader's check of a tensor's type as an assert, in ggml.c before gguf.cpp took the reader
# over (2023 to mid 2024: `GGML_ASSERT(0 <= info->type && info->type < GGML_TYPE_COUNT)`; gguf.cpp
# prints the same check as `tensor '%s' has invalid ggml type`, read by model.load): the file holds
# a tensor type this build does not know (BitNet's i2_s under a plain llama.cpp, microsoft/BitNet#55).
# Ranked over the assert it is written in: the abort is the reader refusing the file.
_e("gguf.tensor-type-unknown", "bad-model", 61, _D,
   "ggml.c gguf_init_from_file (2023 to 2024): `GGML_ASSERT: ggml.c:N: 0 <= info->type && "
   "info->type < GGML_TYPE_COUNT`",
   "the model file holds a tensor type this build does not know: a newer quantization, or a fork's own",
   r"\binfo->type < GGML_TYPE_COUNT\b")
_e("model.load", "bad-model", 60, _D,
   f"ggml/src/gguf.cpp, src/llama-model-loader.cpp, src/llama-model.cpp, src/llama.cpp, {_B}; "
   "older llama.cpp (ggml-format loaders)",
   "the model file is damaged, incomplete, or not supported by this build",
   r"failed to open GGUF file", r"gguf_init_from_\w+: failed", r"error loading model:",
   r"error loading model architecture", r"unknown model architecture", r"missing tensor",
   r"not within the file bounds", r"model is corrupted or incomplete",
   r"chat template parsing error",
   # common/chat.cpp common_chat_templates_init, b11434: the model's own Jinja template (from
   # its metadata) does not parse; the server stops (`--no-jinja` or another template helps)
   r"common_chat_templates_init: failed to initialize chat template",
   r"failed to load multimodal model", r"invalid magic",
   # src/llama-model-loader.cpp llama_model_loader (2024 to b11434): gguf_init_from_file returned
   # NULL (the file is missing, not GGUF, or holds a type or field this build does not read, as
   # the Q4_0_4_8 files after online repacking replaced them). Thrown before any buffer is
   # allocated, so unlike llama_model_load's own `failed to load model` it is never memory.
   # Wrappers quote it without llama.cpp's `error loading model:` (LM Studio's `llama.cpp error:`)
   r"\bllama_model_loader: failed to load model from (?!file pointer)\S",
   # llama-cpp-python llama.py (`Model path does not exist: %s`, 0.1.x to 2026): its own check
   # before llama.cpp opens the file, the same failure as `failed to open GGUF file` above
   r"\bModel path does not exist: ",
   # Lemonade's llama.cpp backend (src/cpp/server/backends/llamacpp/llamacpp_server.cpp, October 2025
   # on): the model's GGUF is not where its checkpoint should have put it (a download never made or
   # since removed), before llama-server is started
   r"\bGGUF file not found for checkpoint: \S",
   # Docker Model Runner's llama.cpp backend (pkg/inference/backends/llamacpp, 2025-2026): the model
   # artifact it was asked to run carries no GGUF (a safetensors or other packaging)
   r"\bmodel\([^)]+\) has no GGUF layer", r"\bGGUF file required by llama\.cpp backend",
   # Ollama's GGUF reader (llm/ggml.go DecodeGGML 0.1.x, fs/ggml/ggml.go to 0.33): the file's first
   # four bytes are no GGUF (a broken or HTML download), or an old GGML file it no longer takes;
   # `ollama create` and the load both stop on it (ollama#4075)
   r"\binvalid file magic\b", r"\bunsupported model format\b",
   # the same reader's bounds checks (fs/ggml/gguf.go, 2026): a tensor past the end of a truncated
   # file, a count or length no real file has; the runner's projector checks (runner/llamarunner
   # image.go 0.4 to 0.12: a projector of another architecture or for another model)
   r"offset\+size \(\d+\) exceeds file size", r"GGUF (array size|\w+ length) \d+ exceeds maximum",
   r"tensor \"[^\"]+\" (size|dimensions) \d+ exceeds maximum", r"unknown vision model architecture",
   r"projector embedding size \(\d+\) does not match model",
   # Ollama llm/server.go rewrites a runner's `unknown model …` error to this (0.1.30 to 2026);
   # its registry refuses a pull the same way (HTTP 412)
   r"this model is not supported by your version of Ollama", r"requires a newer version of Ollama",
   # the projector's loader (tools/mtmd/clip.cpp clip_init, b11434): its own `failed to load
   # model '%s': <why>` and the whys of a file made for another loader
   r"clip_init: failed to load model '", r"clip_model_loader: unable to find tensor ",
   r"failed to load CLIP model from",
   # GPT4All's llmodel_c.cpp: no backend implementation accepts the file (an architecture or
   # format the bundled llama.cpp does not know)
   r"Model format not supported \(no matching implementation found\)",
   r"unknown \(magic, version\) combination", r"this format is no longer supported",
   r"GGML files are no longer supported", r"tensor '[^']+' has wrong shape", r"wrong number of tensors",
   r"invalid model file", r"unexpectedly reached end of file", r"tensor data is not within",
   r"key not found in model:",
   # src/llama-model-loader.cpp, b11434 (require_weight, require_tensor_meta, check_tensor_dims;
   # create_tensor before them, 2024): a tensor the architecture needs is not in the file, written
   # after the function's name. Wrappers that print only the exception's text drop llama.cpp's
   # `error loading model:` before it (Ollama 0.1.x: `exception create_tensor: tensor '…' not found`).
   r"\b(create_tensor|check_tensor_dims|require_tensor_meta|require_weight): tensor '[^']+' not found",
   # the same loader's other refusals of a file's contents (b11434): its tensor count, a tensor
   # twice, a key of the wrong type or length, a split set that does not add up
   r"too many tensors created; expected \d+", r"corrupted model: \d+ tensors expected",
   r"invalid model: tensor '[^']+' is duplicated", r"key \S+ has wrong (array length|type)",
   r"has wrong array element type", r"expected scalar, found array for key",
   r"array length \d+ for key \S+ exceeds max", r"missing key \S+ in GGUF split",
   r"invalid split (count|file)", r"found tensors with invalid data",
   # src/llama-vocab.cpp, b11434: a tokenizer the file names but this build does not know (a model
   # newer than the engine), or a vocabulary the file lacks or states wrongly
   r"unknown tokenizer: '", r"cannot find tokenizer (vocab|merges) in model file",
   r"Index out of array bounds (for (scores|toktypes)|in (XCDA array|precompiled charsmap))",
   r"Unterminated string in precompiled charsmap", r"precompiled_charsmap too small",
   # src/llama-model.cpp, b11434: hyperparameters that contradict each other
   r"invalid n_rot: \d+, expected \d+", r"model has expert layers but no expert layers are used",
   # every refusal of gguf.cpp's reader (b11434 `gguf_init_from_reader`, before it
   # `gguf_init_from_file_impl`; its `failed …` lines are read above): a header, key, tensor-info
   # or size field the file states wrongly (what a damaged, truncated or hand-edited file has),
   # and a version too new
   r"gguf_init_from_\w+: (invalid|tensor|key|duplicate|number of|alignment|string length|incorrect shape"
   r"|memory size overflow|this GGUF file|encountered|bad GGUF version|GGUFv1)",
   r"unsupported model (architecture|type)", r"tensor '[^']+' (has invalid ggml type|data is not within)",
   r"invalid ggml type \d+", r"GGUF version \d+ is not supported", r"is not a valid GGUF file",
   r"failed to read (tensor info|key-value pairs|magic|header)", r"file is truncated",
   # gguf.cpp, b11434 (gguf_read_emplace_helper, gguf_init_from_reader; gguf_init_from_file_impl
   # before, as `… error while reading`): a length field read from a damaged file asks for an
   # absurd size (these are the file's fault, not the host's memory)
   r"encountered (bad_alloc|length_error)( error)? while reading",
   # gguf-py gguf_reader.py (`GGUF magic invalid`) and the mobile/JVM bindings' own magic check
   r"GGUF magic invalid", r"not in GGUF format", r"invalid GGUF magic",
   # WasmEdge's WASI-NN plugin (plugins/wasi_nn/ggml.cpp, the llama.cpp under LlamaEdge and
   # GaiaNet): the model path it was given names no file (a failed or partial download)
   r"GGML backend: Model file not found",
   r"tensor '[^']+' has invalid data", r"failed to read tensor data",
   # b11434 gguf.cpp and src/llama-model-loader.cpp, src/llama-model.cpp
   r"GGUFv1 is no longer supported", r"this GGUF file is version \d+ but this software only supports",
   r"bad GGUF version", r"GGUF data section at file offset \d+ is not \d+ byte aligned",
   r"failed to load GGUF split from", r"error loading model hyperparameters",
   # src/llama.cpp llama_model_load (b11434) wraps llama_vocab::load's throw the same way as the
   # hyperparameters'; llama-vocab.cpp's own `unknown pre-tokenizer type: '%s'` (a model newer
   # than the build) and the projector file given as the main model
   r"error loading model vocabulary", r"unknown pre-tokenizer type",
   r"CLIP cannot be used as main model",
   r"tensor '[^']+' not found in the model", r"This GGUF does not support multimodal",
   # koboldcpp gpttype_adapter.cpp (its file-format detection found no known model)
   r"^\s*Unknown Model, cannot load\.",
   # a projector without a key its loader needs (made for another loader): examples/llava/clip.cpp
   # get_key_idx, 2023-2025 (`key %s not found in file`, `Missing required key: %s`; Ollama's
   # vendored copy, ollama#7300), tools/mtmd/clip.cpp in b11434 (`Key not found: %s`)
   r"(Missing required key|Key not found): clip\.\w", r"key clip\.\S+ not found in file",
   # Jan tauri-plugin-llamacpp error.rs: said only on llama.cpp's `error loading model architecture`
   r"The model's architecture is not supported by this version of the backend",
   r"code: ModelArchNotSupported")
# stable-diffusion.cpp's loader (src/model_loader.cpp ModelLoader::init_from_file, model.cpp before
# 2026; src/stable-diffusion.cpp init_model_loader and new_sd_ctx): a file that exists but is no
# GGUF, safetensors, diffusers folder or torch checkpoint (`unknown format %s`), a path with no file
# (`file %s not found`), and the tensors that match no model family it knows (`get sd version from
# file failed`). sd-server and sd-cli stop on them before any buffer is allocated.
# stable-diffusion.cpp's loader refusing a file that is in no format it reads; open_readings settles
# its `get sd version from file failed` reading on it (the file, not the flag, is at fault)
SD_UNKNOWN_FORMAT = r"\bmodel(_loader)?\.cpp:\d+\s+- unknown format"
_e("sd.model-load", "bad-model", 60, _D,
   "stable-diffusion.cpp src/model_loader.cpp (`unknown format %s`, `file %s not found`) and "
   "src/stable-diffusion.cpp (`init model loader from file failed: '%s'`, `get sd version from file "
   "failed: '%s'`), 2023 to 2026",
   "the image model file is not one stable-diffusion.cpp can read: another format, damaged, or a "
   "model family this build does not know",
   SD_UNKNOWN_FORMAT, r"\bmodel(_loader)?\.cpp:\d+\s+- file .+ not found$",
   r"init model loader from file failed: '", r"get sd version from file failed:")

# llama.cpp's BPE tokenizer of late 2023 (llm_tokenizer_bpe::tokenize in llama.cpp, before the
# pre-tokenizer types of spring 2024): a symbol with no token falls back to its single bytes, and a byte
# the vocabulary lacks prints `ERROR: byte not found in vocab: '%s'` and reads past the map (the
# segfault that follows). Loading tokenizes the newline, so a vocabulary this build's BPE code does
# not know (DeepSeek Coder's, in builds of that time) fails there: the model is newer than the
# engine, or its vocabulary is damaged.
_e("vocab.byte-missing", "bad-model", 58, _S,
   "llama.cpp llm_tokenizer_bpe (`ERROR: byte not found in vocab: '%s'`), late 2023",
   "the model's vocabulary lacks a byte this build's tokenizer needs: a vocabulary it does not know",
   r"ERROR: byte not found in vocab\b")

# A load failure whose path ends at a folder separator: the path names a folder (a checkpoint's
# download, a model store) where a model file was expected, as LLamaSharp's SafeLlamaModelHandle
# (`Failed to load model %s.`), llama-cpp-python (`Failed to load model from file: %s`) and
# llama.cpp (`failed to load model '%s'`) quote it; no engine loads a folder (LLamaSharp#332).
_e("model.path-is-folder", "bad-model", 57, _S,
   "the load failure of LLamaSharp (SafeLlamaModelHandle.LoadFromFile), llama-cpp-python and "
   "llama.cpp, quoting the path they were given",
   "the model path names a folder, not a model file",
   r"failed to load model( from file)?:? ['\"]?[^\s'\"]*[/\\]['\"]?\.?\s*$")

# Ollama llm/server.go NewLlamaServer (0.5 to 0.12, before 9db4bdbad moved every GGML model to
# llama-server) loads the model vocab-only through llama/llama.go LoadModelFromFile, which says
# `unable to load model: %s` (the blob path) when llama_model_load_from_file returns NULL; sched.go
# logs it (`NewLlamaServer failed`) and the client prints it (`Error: unable to load model:`, `500
# Internal Server Error: unable to load model:`). A vocab-only load allocates no weights, so no
# memory runs out there: the file's architecture, vocabulary or format is what this engine cannot
# read (a model newer than the installed Ollama). The runner's own full load says the same words
# after `panic: `, where an allocation may be the cause: that one is not read here.
_e("ollama.vocab-load", "bad-model", 55, _S,
   "Ollama llm/server.go NewLlamaServer's vocab-only load via llama/llama.go LoadModelFromFile "
   "(`unable to load model: %s`), 0.5 to 0.12",
   "the engine could not read the model's metadata and vocabulary (no weights were loaded): an "
   "architecture or format it does not know",
   r"(?<!panic: )(?<!\w)unable to load model: .{0,200}?\bblobs[\\/]sha256-")

# llama.cpp's closing line after a failed load: a sign only. src/llama.cpp
# llama_model_load_from_file_impl (b3xxx to b11434; `llama_load_model_from_file` before the
# rename) logs `%s: failed to load model` whenever llama_model_load returns an error, that is
# after ANY exception llama_model_load caught: a damaged file, an unknown architecture, and a
# buffer that could not be allocated alike (src/llama-model-loader.cpp load_all_data throws
# `unable to allocate %s buffer`, caught the same way). common/common.cpp
# common_init_from_params (`failed to load model '%s'`), the examples' `main: error: failed to
# load model` and koboldcpp's copies follow it. Spent batch 15 (koboldcpp#1852): alone it read
# as bad-model where the thread's cause was the host's memory.
_e("llama.load-failed", "bad-model", 20, _W,
   f"src/llama.cpp llama_model_load_from_file_impl (`llama_load_model_from_file` before the "
   f"rename), common/common.cpp common_init_from_params, tools' main, {_B} and older",
   "the model load failed, for any of the reasons llama_model_load catches (file, architecture, "
   "memory): the cause is in the lines before it",
   # llama.cpp's own functions only (a wrapper's "Fails: failed to load model" is the wrapper's)
   r"(?-i:\b(llama_load_model_from_file|llama_model_load_from_file(_impl)?|common_init_from_params"
   r"|common_init_|llama_init_from_gpt_params|load_model|main|llama_model_load)\w*: (error: )?failed to load model)")


ENTRIES = _wordings.entries()
