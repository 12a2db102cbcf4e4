"""What the gateway decides about a request before it is forwarded: pure rules, tested alone.

Which paths are passed through and which kind of model serves them, where the request names
its model (JSON body, form field, `?model=`), whether the Host header is a loopback name
(DNS rebinding), whether a browser Origin is allowed, whether the API key matches, and the
error bodies in OpenAI's and Anthropic's shapes. Nothing here touches a socket.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qs, urlsplit

from stoker.library.model_ids import ModelKind

# Every llama-server b11434 endpoint the gateway passes through, with the kind of model that
# serves it. The Anthropic ones answer errors in Anthropic's shape.
PASS_THROUGH: dict[str, ModelKind] = {
    "/v1/chat/completions": ModelKind.CHAT,
    "/chat/completions": ModelKind.CHAT,
    "/v1/completions": ModelKind.CHAT,
    "/completions": ModelKind.CHAT,
    "/v1/responses": ModelKind.CHAT,
    "/v1/messages": ModelKind.CHAT,
    "/v1/messages/count_tokens": ModelKind.CHAT,
    "/infill": ModelKind.CHAT,
    "/completion": ModelKind.CHAT,
    "/v1/embeddings": ModelKind.EMBEDDING,
    "/embeddings": ModelKind.EMBEDDING,
    "/embedding": ModelKind.EMBEDDING,
    "/v1/rerank": ModelKind.RERANK,
    "/rerank": ModelKind.RERANK,
    "/reranking": ModelKind.RERANK,
    "/v1/reranking": ModelKind.RERANK,
    # sd-server's A1111 routes, passed through as they are; OpenAI's images route is mapped
    # onto its txt2img (stoker/engines/sd_server.py).
    "/v1/images/generations": ModelKind.IMAGE,
    "/sdapi/v1/txt2img": ModelKind.IMAGE,
    "/sdapi/v1/img2img": ModelKind.IMAGE,
}
IMAGES_GENERATIONS = "/v1/images/generations"
# Served by any model; they say nothing about a model's kind, so never refused for it.
ANY_MODEL = frozenset({"/tokenize", "/detokenize", "/apply-template", "/props", "/slots", "/metrics"})
ANTHROPIC_PATHS = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
OPEN_PATHS = frozenset({"/health", "/v1/health"})

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost", "ip6-loopback"})


def host_name(host_header: str | None) -> str | None:
    """The name in a Host header without its port ("[::1]:7857" → "::1"); None when what
    follows the name is not a port of digits (`localhost:7857@evil.com` names no host)."""
    if not host_header:
        return None
    h = host_header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        rest = h[end + 1:] if end > 0 else ""
        if end <= 0 or (rest and not (rest[0] == ":" and rest[1:].isdigit() and rest[1:].isascii())):
            return None
        return h[1:end]
    if h.count(":") == 1:
        h, port = h.split(":", 1)
        if not (port.isdigit() and port.isascii()):
            return None
    return h


def is_loopback_name(name: str | None) -> bool:
    if not name:
        return False
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(host_header: str | None) -> bool:
    """A request must name a loopback host: a web page on another name that resolves to
    127.0.0.1 (DNS rebinding) is refused, as Ollama does."""
    return is_loopback_name(host_name(host_header))


def origin_allowed(origin: str | None, extra: tuple[str, ...] = ()) -> bool:
    """No Origin (not a browser), a loopback origin, or one the user added in Settings."""
    if not origin:
        return True
    if origin.rstrip("/") in extra:
        return True
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and is_loopback_name(parts.hostname)


@dataclass(frozen=True)
class GatewayKey:
    """What the gateway knows of the API key: its value (None: no key is stored, anyone may
    call), or that the keyring could not be read and no earlier value is known, in which
    case nothing but /health is answered until it can be (never "open" by accident)."""

    value: str | None
    unreadable: bool = False


NO_KEY = GatewayKey(None)
KEY_UNREADABLE_MESSAGE = ("Stoker could not read its API key from the system keyring (it may be "
                          "locked), so it answers no requests until it can: unlock the keyring, then "
                          "save the key again in Stoker's Settings or restart Stoker.")


def key_after_read(last: GatewayKey | None, value: str | None, failed: bool) -> GatewayKey:
    """The key to use after a keyring read: the value read; after a failed read the last
    one known (a locked keyring must not open the gateway), or "unreadable" when none is."""
    if not failed:
        return GatewayKey(value or None)
    if last is not None and not last.unreadable:
        return last
    return GatewayKey(None, unreadable=True)


class KeyVerdict(Enum):
    PASS = "pass"
    MISSING = "missing"  # 401: a key is set and the request does not carry it
    UNREADABLE = "unreadable"  # 503: the key is not known, so nothing is answered


def key_verdict(key: GatewayKey, authorization: str | None, x_api_key: str | None) -> KeyVerdict:
    if key.unreadable:
        return KeyVerdict.UNREADABLE
    return KeyVerdict.PASS if key_matches(key.value, authorization, x_api_key) else KeyVerdict.MISSING


def fetch_site_allowed(sec_fetch_site: str | None, origin: str | None, extra: tuple[str, ...] = ()) -> bool:
    """A browser says in `Sec-Fetch-Site` where a request comes from. One from another site
    (`cross-site`, or `same-site`: another port or subdomain of the same site) is allowed only
    when it carries an Origin that is allowed: a page's `<img src=…>` or form GET is a
    "no-cors" request with no Origin at all, which must not reach an engine (or load one)."""
    site = (sec_fetch_site or "").strip().lower()
    if site not in ("cross-site", "same-site"):
        return True  # same-origin, none (typed in the address bar), or not a browser
    return bool(origin) and origin_allowed(origin, extra)


def may_load_model(method: str, path: str) -> bool:
    """Only a POST to a model's route may name a model by `?model=` or load one. A browser
    sends its Origin with every POST (checked above), but not with a GET: a page's image
    tag, a prefetch or a crawler's GET is answered by a model already loaded, never one
    loaded for it (/props, /slots and /metrics are read that way)."""
    return method.upper() == "POST" and (path in PASS_THROUGH or path in ANY_MODEL)


def key_matches(expected: str | None, authorization: str | None, x_api_key: str | None) -> bool:
    """True when no key is set, or the request carries it (`Authorization: Bearer …` as
    OpenAI clients send, or `x-api-key` as Anthropic's do); compared in constant time."""
    if not expected:
        return True
    given = []
    if authorization and authorization[:7].lower() == "bearer ":
        given.append(authorization[7:].strip())
    if x_api_key:
        given.append(x_api_key.strip())
    return any(hmac.compare_digest(g.encode(), expected.encode()) for g in given)


_FORM_NAME_RE = re.compile(rb'name="model"\r?\n?', re.IGNORECASE)


def requested_model(body: bytes, content_type: str | None, query: str) -> str | None:
    """The model a request names: `model` in a JSON body, a form field, or `?model=`."""
    ctype = (content_type or "").lower()
    # JSON also when the client forgot the header (`curl -d '{…}'` says form-urlencoded).
    if body and ("json" in ctype or body.lstrip()[:1] == b"{"):
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            obj = None
        model = obj.get("model") if isinstance(obj, dict) else None
        if isinstance(model, str) and model.strip():
            return model.strip()
    elif body and "x-www-form-urlencoded" in ctype:
        try:
            values = parse_qs(body.decode("utf-8", "replace")).get("model")
        except ValueError:
            values = None
        if values and values[0].strip():
            return values[0].strip()
    elif body and "multipart/form-data" in ctype:
        found = _multipart_field(body, content_type or "", "model")  # the boundary keeps its case
        if found:
            return found
    values = parse_qs(query).get("model")
    return values[0].strip() if values and values[0].strip() else None


def _multipart_field(body: bytes, ctype: str, name: str) -> str | None:
    m = re.search(r'boundary="?([^";]+)"?', ctype)
    if not m:
        return None
    for part in body.split(b"--" + m.group(1).encode()):
        head, sep, value = part.partition(b"\r\n\r\n")
        if sep and re.search(rb'name="' + name.encode() + rb'"(;|\r|$)', head, re.IGNORECASE):
            text = value.rstrip(b"\r\n-").decode("utf-8", "replace").strip()
            return text or None
    return None


def error_body(path: str, status: int, message: str, *, code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    """An error in the shape the client for `path` parses: Ollama's for /api/*, Anthropic's for /v1/messages,
    OpenAI's everywhere else."""
    if path.startswith("/api/"):  # Ollama's routes (stoker/gateway/ollama.py): its own shape
        return {"error": message}
    if path in ANTHROPIC_PATHS:
        kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 429: "rate_limit_error", 502: "api_error",
                503: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "invalid_request_error", 429: "rate_limit_exceeded", 502: "server_error",
            503: "server_error"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def unknown_model_message(name: str, closest: tuple[str, ...]) -> str:
    hint = f" The closest: {', '.join(closest)}." if closest else " No models are installed; run `stoker setup`."
    return f"The model '{name}' does not exist here.{hint} `GET /v1/models` lists them all."


def wrong_kind_message(model_id: str, kind: ModelKind, path: str, able: tuple[str, ...]) -> str:
    want = {ModelKind.EMBEDDING: "embeddings", ModelKind.RERANK: "reranking",
            ModelKind.CHAT: "text generation", ModelKind.IMAGE: "images"}[PASS_THROUGH[path]]
    what = {ModelKind.EMBEDDING: "an embedding model", ModelKind.RERANK: "a reranking model",
            ModelKind.CHAT: "a chat model", ModelKind.IMAGE: "an image model"}[kind]
    if able:
        return (f"{model_id} is {what} and cannot serve {path}; for {want} use "
                f"{', '.join(able[:3])}.")
    add = {ModelKind.IMAGE: "a diffusion model GGUF with its VAE and text encoder in one folder",
           ModelKind.CHAT: "a chat model GGUF"}.get(PASS_THROUGH[path], "a GGUF with a pooling type")
    return (f"{model_id} is {what} and cannot serve {path}, and no model here can serve {want}; "
            f"add one ({add}) to the library.")


# ------------------------------------------------------------------ connections (starvation)

HEADER_TIMEOUT_S = 10.0  # a connection that has not sent a whole request head by then is dropped
MAX_CONNECTIONS = 4096
# Descriptors kept free under the open-file limit: asyncio accepts up to a listen backlog
# (128) of connections in one pass before the guard can drop any (a dropped socket is closed
# on the next pass), and the engines' connections, logs and the link need theirs. Less, and
# a flood makes accept() meet EMFILE, after which asyncio stops accepting for 1 s.
FD_RESERVE = 320
OPEN_FILES_WANTED = 65536  # when the hard limit is "unlimited"


def open_files_soft_limit(soft: int, hard: int, unlimited: int) -> int | None:
    """The open-file soft limit the gateway process should raise itself to (None: leave it):
    up to the hard limit, since 1,024 descriptors are used up by 1,024 idle connections."""
    target = OPEN_FILES_WANTED if hard == unlimited else hard
    if soft == unlimited or soft >= target:
        return None
    return target


def connection_cap(soft_limit: int | None, unlimited: int = -1) -> int:
    """How many client connections the gateway holds at once: its own cap, and always
    FD_RESERVE descriptors under the open-file limit, so accept() never meets EMFILE."""
    if soft_limit is None or soft_limit == unlimited:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft_limit - FD_RESERVE))


class Admission(Enum):
    ADMIT = "admit"
    EVICT_OLDEST_WAITING = "evict"  # drop the oldest connection still sending its request head
    REFUSE = "refuse"  # every slot carries a real request: close the new one


def admission(open_now: int, cap: int, waiting_for_head: int) -> Admission:
    """A new connection always gets in while a slot is free, or by taking the slot of the
    oldest one that has not finished its request head (a half-sent flood cannot lock out
    /health); it is refused only when every slot serves a request."""
    if open_now < cap:
        return Admission.ADMIT
    return Admission.EVICT_OLDEST_WAITING if waiting_for_head > 0 else Admission.REFUSE
