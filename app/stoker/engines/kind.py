"""Engine kinds: llama-server, ds4, sd-server and rpc-server behind one description the supervisor and
the gateway read, instead of `if engine == "ds4"` spread across them.

Each kind says which requests it serves (so the gateway knows where `/v1/images/generations`
may go), where its readiness is asked and what answer counts as ready, how long a start may
take, what its binary and log files are called, and how a line of its output reads as
progress or as a named failure. The per-kind decisions (argv for a plan, progress parsers)
live in one core module per kind: `stoker/engines/argv.py` + `stoker/engines/engine_log.py` for llama-server,
`stoker/engines/ds4_launch.py` for ds4, `stoker/engines/sd_server.py` for sd-server; `failure_of_line` here only
routes a line to the right kind's table.

Pure: values and table look-ups, no processes, no files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from stoker.engines.ds4_launch import is_ds4_model, parse_ds4_output
from stoker.engines.sd_server import parse_sd_output
from stoker.library.model_ids import ModelKind


class EngineKind(Enum):
    LLAMA_SERVER = "llama-server"
    DS4 = "ds4"
    SD_SERVER = "sd-server"
    RPC_SERVER = "rpc-server"  # a worker lending its devices to a llama-server elsewhere


class Capability(Enum):
    """A family of requests a client sends; the gateway routes by it."""

    CHAT = "chat"  # /v1/chat/completions (and Anthropic /v1/messages where the engine has it)
    COMPLETIONS = "completions"  # /v1/completions
    EMBEDDINGS = "embeddings"  # /v1/embeddings
    IMAGES = "images"  # /v1/images/generations, /sdapi/v1/txt2img, /sdapi/v1/img2img


@dataclass(frozen=True)
class EngineDescription:
    kind: EngineKind
    binary_name: str  # the file discovery looks for
    log_base: str  # logs/<log_base>-YYYY-MM-DD.log
    serves: frozenset[Capability]
    readiness_path: str
    # True: any HTTP answer means ready (sd-server answers `/` only once its model is
    # loaded, because it loads before it listens). False: only a 2xx (llama-server answers
    # 503 on /health while loading).
    ready_on_any_response: bool
    startup_deadline_s: float
    # Requests one engine process takes at a time; None: as many as its slots.
    concurrency: int | None
    # Whether a request can be cancelled inside the engine; when False, cancelling a
    # request means stopping the engine (an expected exit) and starting it again later.
    cancellable_in_engine: bool
    # The API key goes to the child in this variable, never argv; None: the engine has no
    # key (it listens on loopback only and is reached through the gateway).
    api_key_env: str | None
    paths: tuple[str, ...]  # the HTTP routes the gateway may forward to it
    # Whether its slots' KV state can be saved to disk and restored (`--slot-save-path`), so
    # a conversation survives an unload (stoker/fleet/kv_keeper.py).
    saves_slots: bool = False


LLAMA_SERVER = EngineDescription(
    kind=EngineKind.LLAMA_SERVER, binary_name="llama-server", log_base="llama-server",
    serves=frozenset({Capability.CHAT, Capability.COMPLETIONS, Capability.EMBEDDINGS}),
    readiness_path="/health", ready_on_any_response=False, startup_deadline_s=180.0,
    concurrency=None, cancellable_in_engine=True, api_key_env="LLAMA_API_KEY",
    paths=("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models"),
    saves_slots=True,
)
# ds4 maps tens of GiB and may warm pages before it listens: the seed waits 600 s.
DS4 = EngineDescription(
    kind=EngineKind.DS4, binary_name="ds4-server", log_base="ds4-server",
    serves=frozenset({Capability.CHAT, Capability.COMPLETIONS}),
    readiness_path="/v1/models", ready_on_any_response=False, startup_deadline_s=600.0,
    concurrency=1, cancellable_in_engine=True, api_key_env=None,
    paths=("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/v1/models"),
)
# sd-server (stable-diffusion.cpp examples/server) renders synchronously under one mutex
# and has no way to abort a render it started (seed-behaviours.md §Image engine).
SD_SERVER = EngineDescription(
    kind=EngineKind.SD_SERVER, binary_name="sd-server", log_base="sd-server",
    serves=frozenset({Capability.IMAGES}),
    readiness_path="/", ready_on_any_response=True, startup_deadline_s=300.0,
    concurrency=1, cancellable_in_engine=False, api_key_env=None,
    paths=("/v1/images/generations", "/sdapi/v1/txt2img", "/sdapi/v1/img2img"),
)

# rpc-server serves no HTTP request: a llama-server reaches it over its own TCP protocol, and
# it is ready once its port accepts a connection (stoker/fleet/rpc_worker.py).
RPC_SERVER = EngineDescription(
    kind=EngineKind.RPC_SERVER, binary_name="rpc-server", log_base="rpc-server",
    serves=frozenset(), readiness_path="", ready_on_any_response=True, startup_deadline_s=30.0,
    concurrency=None, cancellable_in_engine=True, api_key_env=None, paths=(),
)

DESCRIPTIONS: dict[EngineKind, EngineDescription] = {
    d.kind: d for d in (LLAMA_SERVER, DS4, SD_SERVER, RPC_SERVER)}


def describe(kind: EngineKind) -> EngineDescription:
    return DESCRIPTIONS[kind]


def keyless_engines_note() -> str:
    """What the API key does not cover, said beside it in Settings: the engines that take
    no key of their own (sd-server 0.4.7, ds4-server and rpc-server have no key option), whose loopback
    port another local user could reach while they run."""
    names = [d.binary_name for d in DESCRIPTIONS.values() if d.api_key_env is None]
    if not names:
        return "Every engine gets a random key of its own at each launch."
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (f"The key guards Stoker's endpoint, and each llama-server gets a random key of its own. "
            f"{listed} have no key option: while one runs, another user on this computer could "
            f"reach its loopback port directly.")


def engine_kind_for(model_kind: ModelKind, architecture: str | None) -> EngineKind:
    """The engine a model runs on: sd-server for an image model, ds4 for a DeepSeek-V4-class
    model (architecture deepseek4, which llama-server does not load), llama-server else."""
    if model_kind is ModelKind.IMAGE:
        return EngineKind.SD_SERVER
    if is_ds4_model(architecture):
        return EngineKind.DS4
    return EngineKind.LLAMA_SERVER


def kinds_serving(capability: Capability) -> tuple[EngineKind, ...]:
    return tuple(k for k, d in DESCRIPTIONS.items() if capability in d.serves)


_IMAGE_PATHS = ("/v1/images/", "/sdapi/v1/")


def capability_of_path(path: str) -> Capability | None:
    """The request family of an HTTP path the gateway received; None for paths no engine serves."""
    p = path.split("?", 1)[0].rstrip("/")
    if p.startswith(_IMAGE_PATHS):
        return Capability.IMAGES
    if p.endswith("/chat/completions") or p in ("/v1/messages", "/v1/responses"):
        return Capability.CHAT
    if p.endswith("/completions"):
        return Capability.COMPLETIONS
    if p.endswith("/embeddings"):
        return Capability.EMBEDDINGS
    return None


def is_ready_status(kind: EngineKind, status: int | None) -> bool:
    """Whether a readiness probe's HTTP status means the engine is ready (None: no answer)."""
    if status is None:
        return False
    return True if DESCRIPTIONS[kind].ready_on_any_response else 200 <= status < 300


# --- failure lines -----------------------------------------------------------------------
# kind -> ((pattern, failure kind from core.diagnosis.KINDS), ...), highest priority first.
# llama-server's own table is stoker/diagnosis/classify.py (it reads more than lines); these are the
# lines of the other two engines, copied from their sources and logs.
_FAILURES: dict[EngineKind, tuple[tuple[re.Pattern[str], str], ...]] = {
    EngineKind.DS4: (
        (re.compile(r"CUDA error:\s*(out of memory|memory allocation)|alloc failed \([^)]*\): out of memory",
                    re.I), "cuda-oom"),
        (re.compile(r"ds4-server: failed to listen on", re.I), "port-in-use"),
        (re.compile(r"ds4-server: (unknown option|invalid .* value)", re.I), "bad-argument"),
        (re.compile(r"ds4: (failed to open|cannot open|invalid gguf|not a gguf|unsupported model)", re.I),
         "bad-model"),
        (re.compile(r"CUDA backend requested but this build|Metal is unavailable|this build has no Metal",
                    re.I), "gpu-unused"),
        (re.compile(r"illegal memory access|CUDA end commands failed|Metal .* failed", re.I), "gpu-error"),
    ),
    EngineKind.SD_SERVER: (
        (re.compile(r"new_sd_ctx_t failed|get sd version from file failed|load tensors from model loader failed",
                    re.I), "bad-model"),
        (re.compile(r"error: the following arguments are required|error: invalid parameter|unknown argument",
                    re.I), "bad-argument"),
        (re.compile(r"ggml_aligned_malloc: insufficient memory|failed to allocate", re.I), "host-oom"),
        (re.compile(r"CUDA error:\s*out of memory", re.I), "cuda-oom"),
    ),
}


def failure_of_line(kind: EngineKind, line: str) -> str | None:
    """The failure kind one output line of a ds4 or sd-server process shows, or None.

    llama-server lines go through core/diagnosis.classify_exit, which also weighs the exit
    code, the phase and who sent the signal; this table is for the two engines it does not know.
    """
    for pattern, failure in _FAILURES.get(kind, ()):
        if pattern.search(line[:1000]):
            return failure
    return None


# --- progress --------------------------------------------------------------------------------


def progress_text(kind: EngineKind, lines: Iterable[str]) -> str | None:
    """What the engine is doing now, from its latest output, in words for the tray: sd-server's
    `N/M - Xs/it` bar as "rendering step 3 of 20 (1.2 s per step)", ds4's prefill, generation
    and start-up lines. None when its last lines say nothing about progress (llama-server's
    progress is its slots, not its log)."""
    if kind is EngineKind.SD_SERVER:
        events = parse_sd_output(lines)
        last = events[-1] if events else None
        if last is None or last.phase == "ready":
            return None
        if last.phase == "loading":
            return f"loading tensors {last.done}/{last.total}"
        done = f"rendering step {last.done} of {last.total}"
        return done + (f" ({last.seconds_per_step:.2f} s per step)" if last.seconds_per_step else "")
    if kind is EngineKind.DS4:
        ds4_events = [e for e in parse_ds4_output(lines) if e.phase != "memory"]
        ds4 = ds4_events[-1] if ds4_events else None
        if ds4 is None or ds4.phase == "ready":
            return None
        rate = f" ({ds4.tokens_per_s:g} tokens/s)" if ds4.tokens_per_s else ""
        if ds4.phase in ("prefill", "rebuild") and ds4.done is not None and ds4.total:
            doing = "reading the prompt" if ds4.phase == "prefill" else "rebuilding"
            return f"{doing} {ds4.done:,}/{ds4.total:,}{rate}"
        if ds4.phase == "generating" and ds4.done is not None:
            return f"generating, {ds4.done:,} tokens{rate}"
        if ds4.phase in ("mapping", "warming") and ds4.bytes:
            return f"{'mapping' if ds4.phase == 'mapping' else 'warming'} {ds4.bytes / 1024 ** 3:.1f} GiB of weights"
        return None
    return None
