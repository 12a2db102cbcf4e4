"""Ollama's API in llama-server's words: pure translations, tested alone.

Apps that speak only Ollama's API (Enchanted, Open WebUI, Home Assistant, Zed, VS Code
Copilot's own-model flow, the `ollama` Python client …) reach Stoker's gateway on the same
port. Each Ollama request is turned into a request to one of llama-server's own endpoints
(/v1/chat/completions, /completion, /infill, /v1/embeddings) and each answer back into
Ollama's shape; nothing is generated or tokenised here. It also reads `keep_alive`
(a duration string or seconds), builds the listings (/api/tags, /api/show, /api/ps) from
the catalog's header facts and the plan's numbers, and words errors as Ollama does
(`{"error": "…"}`). Must not touch a socket, a clock or a file: times are passed in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from stoker.library.model_ids import CatalogEntry, ModelFacts, ModelKind

# The Ollama API level these routes follow: apps gate features on /api/version (VS Code
# Copilot asks for 0.6.4 or newer). `stoker` in the same answer tells Stoker from Ollama.
OLLAMA_API_VERSION = "0.12.0"
NEVER_EXPIRES = "2318-01-01T00:00:00Z"  # what Ollama answers for keep_alive < 0
OLLAMA_PREFIX = "/api/"
OLLAMA_PORT = 11434  # where apps written for Ollama look first
NOT_SUPPORTED = {
    "/api/create": "creating models from a Modelfile",
    "/api/push": "pushing models to a registry",
    "/api/copy": "copying models under a new name (add an alias in the model's settings instead)",
}
BLOB_PREFIX = "/api/blobs/"

# Ollama's `options` that llama-server's endpoints take under the same or another name.
_SAMPLING = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
             "seed": "seed", "stop": "stop", "repeat_penalty": "repeat_penalty",
             "repeat_last_n": "repeat_last_n", "presence_penalty": "presence_penalty",
             "frequency_penalty": "frequency_penalty", "typical_p": "typical_p",
             "mirostat": "mirostat", "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta"}
# Options that are the plan's business, not a request's: accepted and not used.
_PLAN_OPTIONS = frozenset({"num_gpu", "num_thread", "num_batch", "main_gpu", "use_mmap", "use_mlock",
                           "numa", "low_vram", "f16_kv", "vocab_only", "num_keep", "penalize_newline"})
_DURATION_RE = re.compile(r"(-?\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class OllamaRequestError(ValueError):
    """The request cannot be translated; the message is one sentence for `{"error": …}`."""


@dataclass(frozen=True)
class KeepAlive:
    """What a request's keep_alive asks: unload right after the answer, stay this many
    seconds idle, or never unload for idleness (`seconds` None)."""

    seconds: float | None
    unload_after: bool = False


def parse_keep_alive(value: object) -> KeepAlive | None:
    """Ollama's keep_alive: seconds (a number), a Go duration ("5m", "1h30m", "-1m"), or a
    number in a string; 0 unloads after the answer, a negative value keeps the model loaded.
    None when the request has none."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise OllamaRequestError("keep_alive must be a duration such as \"5m\" or a number of seconds, "
                                 f"not {value!r}.")
    seconds: float | None = None
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION_RE.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
                raise OllamaRequestError(f"keep_alive {value!r} is not a duration; write it as \"5m\", "
                                         "\"1h30m\", \"30s\" or a number of seconds.") from None
            seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    else:
        raise OllamaRequestError("keep_alive must be a duration such as \"5m\" or a number of seconds.")
    if seconds < 0:
        return KeepAlive(None)
    if seconds == 0:
        return KeepAlive(0.0, unload_after=True)
    return KeepAlive(seconds)


def request_keep_alive(body: dict[str, Any]) -> KeepAlive | None:
    """keep_alive on any route; `ttl` (LM Studio's name, seconds) on the OpenAI ones."""
    if "keep_alive" in body:
        return parse_keep_alive(body["keep_alive"])
    if "ttl" in body:
        return parse_keep_alive(body["ttl"])
    return None


def parse_body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise OllamaRequestError("The request body is not JSON; send a JSON object.") from None
    if not isinstance(body, dict):
        raise OllamaRequestError("The request body must be a JSON object.")
    return body


def requested_num_ctx(body: dict[str, Any]) -> int | None:
    options = body.get("options") or {}
    value = options.get("num_ctx") if isinstance(options, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise OllamaRequestError(f"options.num_ctx must be a whole number of tokens above 0, not {value!r}.")
    return value


def sampling_fields(body: dict[str, Any], *, chat: bool) -> dict[str, Any]:
    """Ollama's options (and `format`) as llama-server request fields."""
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise OllamaRequestError("options must be a JSON object such as {\"temperature\": 0.7}.")
    out: dict[str, Any] = {}
    for name, value in options.items():
        if name in _SAMPLING:
            out[_SAMPLING[name]] = value
        elif name == "num_predict":
            if isinstance(value, int) and value >= 0:
                out["max_tokens" if chat else "n_predict"] = value
        elif name not in _PLAN_OPTIONS and name != "num_ctx":
            raise OllamaRequestError(f"options.{name} is not an option Stoker knows; the options are "
                                     f"num_predict, num_ctx and {', '.join(sorted(_SAMPLING))}.")
    fmt = body.get("format")
    if fmt in (None, ""):
        return out
    if fmt == "json":
        schema: dict[str, Any] = {"type": "object"}
    elif isinstance(fmt, dict):
        schema = fmt
    else:
        raise OllamaRequestError("format must be \"json\" or a JSON schema object.")
    if chat:
        out["response_format"] = {"type": "json_schema", "json_schema": {"name": "format", "schema": schema}}
    else:
        out["json_schema"] = schema
    return out


# ---------------------------------------------------------------------- chat


def _data_uri(image: object) -> str:
    if not isinstance(image, str) or not image:
        raise OllamaRequestError("images must be base64-encoded image files, as strings.")
    if image.startswith("data:"):
        return image
    kind = "png" if image.startswith("iVBOR") else "webp" if image.startswith("UklGR") else "jpeg"
    return f"data:image/{kind};base64,{image}"


def _oai_message(m: object, index: int, vision: bool) -> dict[str, Any]:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise OllamaRequestError(f"messages[{index}] must be an object with a role and content.")
    content = m.get("content") or ""
    out: dict[str, Any] = {"role": m["role"]}
    images = m.get("images") or ()
    if images:
        if not vision:
            raise OllamaRequestError("This model has no vision projector, so it cannot read images; "
                                     "put its mmproj file beside it or use a vision model.")
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        parts += [{"type": "image_url", "image_url": {"url": _data_uri(i)}} for i in images]
        out["content"] = parts
    else:
        out["content"] = content
    if m.get("thinking"):
        out["reasoning_content"] = m["thinking"]
    calls = m.get("tool_calls") or ()
    if calls:
        out["tool_calls"] = [
            {"id": f"call_{index}_{n}", "type": "function",
             "function": {"name": (c.get("function") or {}).get("name", ""),
                          "arguments": json.dumps((c.get("function") or {}).get("arguments") or {})}}
            for n, c in enumerate(calls) if isinstance(c, dict)]
    if m["role"] == "tool":
        if m.get("tool_name"):
            out["name"] = m["tool_name"]
        out["tool_call_id"] = m.get("tool_call_id") or m.get("tool_name") or "call"
    return out


def chat_request(body: dict[str, Any], model_id: str, *, vision: bool, stream: bool) -> dict[str, Any]:
    """An Ollama /api/chat body as a /v1/chat/completions body."""
    messages = body.get("messages") or []
    if not isinstance(messages, list):
        raise OllamaRequestError("messages must be a list of {role, content} objects.")
    out: dict[str, Any] = {"model": model_id, "stream": stream,
                 "messages": [_oai_message(m, i, vision) for i, m in enumerate(messages)]}
    if stream:
        out["stream_options"] = {"include_usage": True}
    if body.get("tools"):
        out["tools"] = body["tools"]
    think = body.get("think")
    if isinstance(think, bool):
        out["chat_template_kwargs"] = {"enable_thinking": think}
    if body.get("template"):
        raise OllamaRequestError(_TEMPLATE_REFUSAL)
    out.update(sampling_fields(body, chat=True))
    return out


_TEMPLATE_REFUSAL = ("Stoker uses the model's own chat template and cannot run an Ollama (Go) template; "
                     "leave out `template`, or send `raw: true` with the prompt already formatted.")


def generate_request(body: dict[str, Any], model_id: str, *, vision: bool, stream: bool) -> tuple[str, dict[str, Any]]:
    """An Ollama /api/generate body as (llama-server path, body): `raw` goes to /completion
    as it is, `suffix` to /infill, anything else to /v1/chat/completions (the model's own
    template, with `system` as the system message)."""
    prompt = body.get("prompt") or ""
    if not isinstance(prompt, str):
        raise OllamaRequestError("prompt must be a string.")
    if body.get("template"):
        raise OllamaRequestError(_TEMPLATE_REFUSAL)
    if body.get("raw") or body.get("suffix"):
        if body.get("images"):
            raise OllamaRequestError("images need the model's chat template; leave out `raw` and `suffix`.")
        out = {"stream": stream, **sampling_fields(body, chat=False)}
        if body.get("suffix"):
            return "/infill", {**out, "input_prefix": prompt, "input_suffix": body["suffix"]}
        return "/completion", {**out, "prompt": prompt}
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": body["system"]})
    messages.append({"role": "user", "content": prompt, "images": body.get("images") or ()})
    return "/v1/chat/completions", chat_request({**body, "messages": messages}, model_id,
                                                vision=vision, stream=stream)


# ---------------------------------------------------------------------- answers


def iso_time(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _durations(timings: dict[str, Any] | None, total_s: float, load_s: float) -> dict[str, Any]:
    out = {"total_duration": int(total_s * 1e9), "load_duration": int(load_s * 1e9)}
    if timings:
        out.update(prompt_eval_count=int(timings.get("prompt_n") or 0),
                   prompt_eval_duration=int((timings.get("prompt_ms") or 0) * 1e6),
                   eval_count=int(timings.get("predicted_n") or 0),
                   eval_duration=int((timings.get("predicted_ms") or 0) * 1e6))
    return out


def _done_reason(finish: str | None) -> str:
    return {"length": "length", "tool_calls": "stop"}.get(finish or "stop", "stop")


def _ollama_calls(calls: list[Any] | tuple[Any, ...]) -> list[dict[str, Any]]:
    out = []
    for c in calls:
        fn = c.get("function") or {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"_raw": args}  # the model wrote arguments that are not JSON: kept as they came
        out.append({"function": {"name": fn.get("name", ""), "arguments": args or {}}})
    return out


def chat_answer(oai: dict[str, Any], model_id: str, now: float, total_s: float, load_s: float, *,
                generate: bool) -> dict[str, Any]:
    """A /v1/chat/completions answer as Ollama's /api/chat (or /api/generate) answer."""
    choice = (oai.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    out: dict[str, Any] = {"model": model_id, "created_at": iso_time(now)}
    if generate:
        out["response"] = msg.get("content") or ""
        if msg.get("reasoning_content"):
            out["thinking"] = msg["reasoning_content"]
    else:
        message = {"role": "assistant", "content": msg.get("content") or ""}
        if msg.get("reasoning_content"):
            message["thinking"] = msg["reasoning_content"]
        if msg.get("tool_calls"):
            message["tool_calls"] = _ollama_calls(msg["tool_calls"])
        out["message"] = message
    out.update(done=True, done_reason=_done_reason(choice.get("finish_reason")),
               **_durations(oai.get("timings"), total_s, load_s))
    usage = oai.get("usage") or {}
    if not oai.get("timings") and usage:
        out.update(prompt_eval_count=usage.get("prompt_tokens", 0), eval_count=usage.get("completion_tokens", 0))
    return out


def completion_answer(native: dict[str, Any], model_id: str, now: float, total_s: float,
                      load_s: float) -> dict[str, Any]:
    """A /completion or /infill answer (or its last stream chunk) as Ollama's /api/generate."""
    stop_type = native.get("stop_type")
    return {"model": model_id, "created_at": iso_time(now), "response": native.get("content") or "",
            "done": True, "done_reason": "length" if stop_type == "limit" else "stop",
            **_durations(native.get("timings"), total_s, load_s)}


@dataclass(frozen=True)
class ChatStream:
    """What a /v1/chat/completions stream has said so far: the tool calls (their arguments
    arrive in pieces, Ollama sends them whole), the finish reason and the timings."""

    calls: tuple[tuple[str, str], ...] = ()  # (name, arguments so far) by index
    finish: str | None = None
    timings: dict[str, Any] | None = field(default=None, compare=False)
    usage: dict[str, Any] | None = field(default=None, compare=False)


def chat_stream_step(state: ChatStream, event: dict[str, Any], model_id: str, now: float, *,
                     generate: bool) -> tuple[ChatStream, tuple[dict[str, Any], ...]]:
    """One SSE event of llama-server's chat stream: the new state and the NDJSON lines to send
    (text and thinking pieces as they come; tool calls and the final line at `chat_stream_end`)."""
    if event.get("timings"):
        state = replace(state, timings=event["timings"])
    if event.get("usage"):
        state = replace(state, usage=event["usage"])
    lines: list[dict[str, Any]] = []
    for choice in event.get("choices") or ():
        delta = choice.get("delta") or {}
        calls = list(state.calls)
        for c in delta.get("tool_calls") or ():
            i = int(c.get("index", len(calls)))
            while len(calls) <= i:
                calls.append(("", ""))
            fn = c.get("function") or {}
            name, args = calls[i]
            calls[i] = (name + (fn.get("name") or ""), args + (fn.get("arguments") or ""))
        state = replace(state, calls=tuple(calls), finish=choice.get("finish_reason") or state.finish)
        text, thinking = delta.get("content"), delta.get("reasoning_content")
        if text or thinking:
            line: dict[str, Any] = {"model": model_id, "created_at": iso_time(now)}
            if generate:
                line["response"] = text or ""
                if thinking:
                    line["thinking"] = thinking
            else:
                line["message"] = {"role": "assistant", "content": text or ""}
                if thinking:
                    line["message"]["thinking"] = thinking
            line["done"] = False
            lines.append(line)
    return state, tuple(lines)


def chat_stream_end(state: ChatStream, model_id: str, now: float, total_s: float, load_s: float, *,
                    generate: bool) -> tuple[dict[str, Any], ...]:
    """The last lines of a translated stream: the tool calls, whole, then `done: true`."""
    out: list[dict[str, Any]] = []
    if state.calls and not generate:
        calls = [{"function": {"name": n, "arguments": a}} for n, a in state.calls]
        out.append({"model": model_id, "created_at": iso_time(now), "done": False,
                    "message": {"role": "assistant", "content": "", "tool_calls": _ollama_calls(calls)}})
    last: dict[str, Any] = {"model": model_id, "created_at": iso_time(now)}
    if generate:
        last["response"] = ""
    else:
        last["message"] = {"role": "assistant", "content": ""}
    last.update(done=True, done_reason=_done_reason(state.finish), **_durations(state.timings, total_s, load_s))
    if not state.timings and state.usage:
        last.update(prompt_eval_count=state.usage.get("prompt_tokens", 0),
                    eval_count=state.usage.get("completion_tokens", 0))
    out.append(last)
    return tuple(out)


def completion_stream_line(native: dict[str, Any], model_id: str, now: float) -> dict[str, Any]:
    """A /completion stream chunk that is not the last, as an /api/generate line."""
    return {"model": model_id, "created_at": iso_time(now), "response": native.get("content") or "",
            "done": False}


def embed_request(body: dict[str, Any], model_id: str, *, legacy: bool) -> dict[str, Any]:
    """/api/embed ({input}) or /api/embeddings ({prompt}) as a /v1/embeddings body."""
    value = body.get("prompt") if legacy else body.get("input")
    if isinstance(value, str):
        inputs = [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        inputs = value
    else:
        raise OllamaRequestError("prompt must be a string." if legacy else
                                 "input must be a string or a list of strings.")
    out: dict[str, Any] = {"model": model_id, "input": inputs}
    if isinstance(body.get("dimensions"), int) and not legacy:
        out["dimensions"] = body["dimensions"]
    return out


def embed_answer(oai: dict[str, Any], model_id: str, total_s: float, load_s: float, *, legacy: bool,
                 dimensions: int | None = None) -> dict[str, Any]:
    vectors = [d.get("embedding") or [] for d in sorted(oai.get("data") or (), key=lambda d: d.get("index", 0))]
    if dimensions:
        vectors = [v[:dimensions] for v in vectors]
    if legacy:
        return {"embedding": vectors[0] if vectors else []}
    usage = oai.get("usage") or {}
    return {"model": model_id, "embeddings": vectors, "total_duration": int(total_s * 1e9),
            "load_duration": int(load_s * 1e9), "prompt_eval_count": usage.get("prompt_tokens", 0)}


# ---------------------------------------------------------------------- listings


def _size_words(n: int | None) -> str | None:
    if not n:
        return None
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def details(facts: ModelFacts | None) -> dict[str, Any]:
    arch = facts.architecture if facts else None
    return {"parent_model": "", "format": "gguf", "family": arch or "",
            "families": [arch] if arch else None,
            "parameter_size": _size_words(facts.parameter_count if facts else None) or "",
            "quantization_level": (facts.quantization if facts else None) or ""}


def capabilities(entry: CatalogEntry) -> list[str]:
    """Ollama's capability words from what the model's own files say."""
    f = entry.facts
    if entry.kind is ModelKind.EMBEDDING:
        return ["embedding"]
    if entry.kind is not ModelKind.CHAT:
        return []
    out = ["completion"]
    if f is not None and f.template_tools:
        out.append("tools")
    if f is not None and f.fill_in_middle:
        out.append("insert")
    if f is not None and f.projector:
        out.append("vision")
    return out


def tag_entry(entry: CatalogEntry) -> dict[str, Any]:
    f = entry.facts
    out: dict[str, Any] = {"name": entry.id, "model": entry.id, "size": (f.size_bytes if f else None) or 0,
                 "details": details(f)}
    if f is not None and f.modified_at is not None:
        out["modified_at"] = iso_time(f.modified_at)
    if f is not None and f.digest:
        out["digest"] = f.digest.removeprefix("sha256:").removeprefix("sha256-")
    return out


def show_answer(entry: CatalogEntry, ctx_per_slot: int | None) -> dict[str, Any]:
    """/api/show: the context is the plan's per slot (what one request may use), never the
    training maximum; without a plan yet it is left out rather than guessed."""
    f = entry.facts
    arch = (f.architecture if f else None) or "unknown"
    info: dict[str, Any] = {"general.architecture": arch}
    if f is not None and f.parameter_count:
        info["general.parameter_count"] = f.parameter_count
    if ctx_per_slot:
        info[f"{arch}.context_length"] = ctx_per_slot
    if f is not None and f.n_embd:
        info[f"{arch}.embedding_length"] = f.n_embd
    out: dict[str, Any] = {"modelfile": "", "parameters": "", "template": "", "details": details(f),
                 "model_info": info, "capabilities": capabilities(entry)}
    if f is not None and f.modified_at is not None:
        out["modified_at"] = iso_time(f.modified_at)
    return out


def ps_entry(entry: CatalogEntry, bytes_by_device: tuple[tuple[str, int], ...], ctx_per_slot: int | None,
             expires_at: float | None) -> dict[str, Any]:
    """/api/ps: size and size_vram from the plan (bytes not on the CPU are VRAM), expires_at
    from the idle timer (None: never unloaded for idleness)."""
    size = sum(b for _, b in bytes_by_device)
    vram = sum(b for d, b in bytes_by_device if d.upper() != "CPU")
    out = {**tag_entry(entry), "size": size, "size_vram": vram,
           "expires_at": iso_time(expires_at) if expires_at is not None else NEVER_EXPIRES}
    if ctx_per_slot:
        out["context_length"] = ctx_per_slot
    return out


def pull_refusal(name: str) -> str | None:
    """None when `name` is a Hugging Face GGUF repository Stoker can pull (hf.co/OWNER/REPO[:QUANT]);
    otherwise the sentence why not."""
    if hf_repo(name) is not None:
        return None
    return (f"'{name}' is a name in Ollama's own library, which Stoker does not pull from; pull the GGUF from "
            "Hugging Face instead, as hf.co/OWNER/REPO:QUANT (for example "
            "hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M).")


def hf_repo(name: str) -> tuple[str, str | None] | None:
    """`hf.co/OWNER/REPO[:QUANT]` (also huggingface.co/…) as ("OWNER/REPO", QUANT or None)."""
    m = re.fullmatch(r"(?:https?://)?(?:hf\.co|huggingface\.co)/([\w.-]+/[\w.-]+)(?::([\w.-]+))?", name.strip())
    if m is None:
        return None
    return m.group(1), m.group(2)


def error(message: str) -> dict[str, Any]:
    return {"error": message}


def name_candidates(name: str) -> tuple[str, ...]:
    """The names an Ollama client's model name may mean here, in order: as written; without
    `hf.co/` (what /api/pull was given: the store's own name is an alias); without Ollama's
    default tag `:latest`, which some clients add to every name."""
    out = [name.strip()]
    for prefix in ("hf.co/", "huggingface.co/"):
        if out[0].lower().startswith(prefix):
            out.append(out[0][len(prefix):])
    out += [n.removesuffix(":latest") for n in list(out) if n.endswith(":latest")]
    return tuple(dict.fromkeys(n for n in out if n))


def not_found(name: str) -> str:
    """Ollama's own words for an unknown model (clients match on them)."""
    return f"model '{name}' not found"


def expires_at(last_used_at: float | None, idle_timeout_s: float | None, now: float,
               in_flight: int) -> float | None:
    """When the idle timer unloads the model: None when it never does."""
    if idle_timeout_s is None:
        return None
    start = now if in_flight or last_used_at is None else last_used_at
    return start + idle_timeout_s


def ollama_port_refusal(port: int, held: bool, version: dict[str, Any] | None) -> str | None:
    """Why Stoker will not also listen on Ollama's port, or None when it may: `held` says
    something accepts connections there, `version` is its /api/version answer (None: none)."""
    if not held:
        return None
    if version is not None and version.get("stoker") is True:
        return (f"Another Stoker already answers on 127.0.0.1:{port}, so this one does not listen "
                "there; quit the other one, or turn off \u201cAlso answer on Ollama's port\u201d here.")
    if version is not None and isinstance(version.get("version"), str):
        return (f"Ollama itself (version {version['version']}) runs on 127.0.0.1:{port}, so Stoker does "
                "not listen there; quit Ollama and restart Stoker to take the port, or point the app at "
                "Stoker's own port.")
    return (f"Another program holds 127.0.0.1:{port}, so Stoker does not listen there; stop that program "
            "and restart Stoker, or point the app at Stoker's own port.")
