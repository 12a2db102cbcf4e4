"""`stoker connect APP`: what each app's own configuration must say to use Stoker, decided alone.

Every app keeps its endpoint, key, model ids and context window in its own place and shape.
Given the endpoint, the key, and the models with the context window the running plan gives
each request (per slot, not the model's training maximum), this module decides the file
each app reads, the edit to make to what is in it now (keys Stoker does not own are left as
they are), the environment lines for an app that reads only those, and the one request that
app would send first, to test the connection. The effect module
(stoker/integration/app_connect.py) reads, backs up, writes and sends. Pure: values in,
values out; JSON/TOML text is parsed with the standard library only (YAML arrives parsed).

Where each app reads its settings (checked against each app's own documentation):
- Claude Code: ~/.claude/settings.json, its `env` object (ANTHROPIC_BASE_URL,
  ANTHROPIC_AUTH_TOKEN, ANTHROPIC_MODEL, ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL,
  CLAUDE_CODE_AUTO_COMPACT_WINDOW, CLAUDE_CODE_MAX_OUTPUT_TOKENS) — code.claude.com/docs/en/env-vars.
- Codex: $CODEX_HOME/config.toml (~/.codex): root `model`, `model_provider`,
  `model_context_window`, `model_auto_compact_token_limit`, and `[model_providers.<id>]` with
  base_url, wire_api = "responses" (the only value current Codex accepts) and the key —
  developers.openai.com/codex/config-sample.
- OpenCode: ~/.config/opencode/opencode.json, `provider.<id>` with npm
  "@ai-sdk/openai-compatible", options.baseURL/apiKey and models.<id>.limit.{context,output};
  `model` = "<provider>/<model>" — opencode.ai/docs/providers.
- Continue: ~/.continue/config.yaml, `models[]` with provider openai, apiBase, apiKey and
  defaultCompletionOptions.contextLength/maxTokens — docs.continue.dev/reference.
- Zed: settings.json (~/.config/zed, JSON with comments), language_models.openai_compatible.<name>
  with api_url and available_models[] {name, max_tokens (the context window), max_output_tokens,
  capabilities}; the key comes from <NAME>_API_KEY or Zed's own key store, never the file —
  zed.dev/docs/ai/llm-providers.
- Open WebUI: OPENAI_API_BASE_URL / OPENAI_API_KEY in its environment (first start) or its
  admin settings — docs.openwebui.com/getting-started/env-configuration.
- llm: extra-openai-models.yaml in llm's user folder ($LLM_USER_PATH, else the platform's app
  folder io.datasette.llm), entries {model_id, model_name, api_base, api_key_name}, the key in
  keys.json — llm.datasette.io/en/stable/other-models.html.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from enum import Enum
from typing import Any

PROVIDER_ID = "stoker"  # the name each app's settings know Stoker by
PROVIDER_NAME = "Stoker"
NO_KEY = "stoker"  # sent where an app insists on some key and Stoker asks for none
OWNED_ENV_KEYS = ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
                  "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
                  "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "CLAUDE_CODE_MAX_OUTPUT_TOKENS")


class App(Enum):
    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    OPENCODE = "opencode"
    CONTINUE = "continue"
    ZED = "zed"
    OPEN_WEBUI = "open-webui"
    LLM = "llm"


class Format(Enum):
    JSON = "json"
    JSONC = "jsonc"  # JSON with comments and trailing commas (Zed, OpenCode)
    TOML = "toml"
    YAML = "yaml"


class Api(Enum):
    ANTHROPIC = "anthropic messages"
    RESPONSES = "responses"
    CHAT = "chat completions"


TITLES = {App.CLAUDE_CODE: "Claude Code", App.CODEX: "Codex", App.OPENCODE: "OpenCode", App.CONTINUE: "Continue",
          App.ZED: "Zed", App.OPEN_WEBUI: "Open WebUI", App.LLM: "the llm CLI"}
ALIASES = {"claude": App.CLAUDE_CODE, "claude-code": App.CLAUDE_CODE, "codex": App.CODEX, "opencode": App.OPENCODE,
           "continue": App.CONTINUE, "zed": App.ZED, "open-webui": App.OPEN_WEBUI, "openwebui": App.OPEN_WEBUI,
           "llm": App.LLM}


def app_named(name: str) -> App | None:
    return ALIASES.get(name.strip().lower().replace("_", "-").replace(" ", "-"))


@dataclass(frozen=True)
class ModelFacts:
    id: str
    context: int | None  # tokens one request may use: the running plan's window per slot
    max_output: int | None = None


@dataclass(frozen=True)
class Target:
    base_url: str  # Stoker's endpoint without /v1, e.g. http://127.0.0.1:7857
    key: str | None  # the gateway's API key; None when Stoker asks for none
    model: ModelFacts  # the one the app uses by default
    models: tuple[ModelFacts, ...]  # every chat model, the default first

    @property
    def openai_base(self) -> str:
        return self.base_url.rstrip("/") + "/v1"


@dataclass(frozen=True)
class ConfigFile:
    """A file an app reads: where (a path with ~ and ${VAR} decided by `config_files`) and how."""

    path: str
    format: Format
    holds_key: bool  # written with owner-only permissions


@dataclass(frozen=True)
class ProbeRequest:
    api: Api
    path: str
    body: dict[str, Any]


class ConfigProblem(ValueError):
    """The current file cannot be edited as it is; the message says why."""


def mask(key: str | None) -> str:
    if not key:
        return "(none: Stoker asks for no key)"
    return key[:3] + "…" + key[-4:] if len(key) > 10 else "…" * 3


def _window(m: ModelFacts) -> int | None:
    return m.context if m.context and m.context > 0 else None


def _max_output(m: ModelFacts) -> int | None:
    """What the app may ask to generate: the model's stated maximum, else a quarter of the window
    (an app asking for more than the window leaves the prompt no room and gets a 400)."""
    window = _window(m)
    if m.max_output and m.max_output > 0:
        return min(m.max_output, window) if window else m.max_output
    return max(256, window // 4) if window else None


# ---------------------------------------------------------------------------- where

def config_files(app: App, home: str, env: dict[str, str], platform: str) -> tuple[ConfigFile, ...]:
    """The files `stoker connect` edits for `app` (none: it prints environment lines)."""
    def under(var: str, default: str) -> str:
        return env.get(var) or f"{home}/{default}"

    if app is App.CLAUDE_CODE:
        return (ConfigFile(f"{under('CLAUDE_CONFIG_DIR', '.claude')}/settings.json", Format.JSON, True),)
    if app is App.CODEX:
        return (ConfigFile(f"{under('CODEX_HOME', '.codex')}/config.toml", Format.TOML, True),)
    if app is App.OPENCODE:
        return (ConfigFile(f"{under('XDG_CONFIG_HOME', '.config')}/opencode/opencode.json", Format.JSONC, True),)
    if app is App.CONTINUE:
        return (ConfigFile(f"{under('CONTINUE_GLOBAL_DIR', '.continue')}/config.yaml", Format.YAML, True),)
    if app is App.ZED:
        folder = (f"{home}/.config/zed" if platform != "win32" else f"{env.get('APPDATA', home)}/Zed")
        if platform == "linux" and env.get("XDG_CONFIG_HOME"):
            folder = f"{env['XDG_CONFIG_HOME']}/zed"
        return (ConfigFile(f"{folder}/settings.json", Format.JSONC, False),)
    if app is App.LLM:
        if env.get("LLM_USER_PATH"):
            folder = env["LLM_USER_PATH"]
        elif platform == "darwin":
            folder = f"{home}/Library/Application Support/io.datasette.llm"
        elif platform == "win32":
            folder = f"{env.get('APPDATA', home)}/io.datasette.llm"
        else:
            folder = f"{under('XDG_CONFIG_HOME', '.config')}/io.datasette.llm"
        return (ConfigFile(f"{folder}/extra-openai-models.yaml", Format.YAML, False),
                ConfigFile(f"{folder}/keys.json", Format.JSON, True))
    return ()


# ---------------------------------------------------------------------------- reading text

def strip_jsonc(text: str) -> str:
    """JSON with // and /* */ comments and trailing commas (Zed, OpenCode) → plain JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def parse_json_text(text: str, fmt: Format) -> dict[str, Any]:
    """The object in a JSON (or JSONC) file; an empty file is an empty object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(strip_jsonc(text) if fmt is Format.JSONC else text)
    except ValueError as exc:
        raise ConfigProblem(f"it is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigProblem(f"it holds a JSON {type(value).__name__}, not an object")
    return value


# ---------------------------------------------------------------------------- the edits

def edit_claude_code(current: dict[str, Any], t: Target) -> dict[str, Any]:
    if not isinstance(current.get("env") or {}, dict):
        raise ConfigProblem("its `env` is not an object")
    env = dict(current.get("env") or {})
    m = t.model
    env.update({"ANTHROPIC_BASE_URL": t.base_url, "ANTHROPIC_AUTH_TOKEN": t.key or NO_KEY,
                "ANTHROPIC_MODEL": m.id, "ANTHROPIC_DEFAULT_OPUS_MODEL": m.id,
                "ANTHROPIC_DEFAULT_SONNET_MODEL": m.id, "ANTHROPIC_DEFAULT_HAIKU_MODEL": m.id,
                "ANTHROPIC_SMALL_FAST_MODEL": m.id})
    # Claude Code assumes a window of 200,000 (or 1,000,000) tokens for a model it does not know.
    for name, value in (("CLAUDE_CODE_AUTO_COMPACT_WINDOW", _window(m)), ("CLAUDE_CODE_MAX_OUTPUT_TOKENS",
                                                                         _max_output(m))):
        if value is not None:
            env[name] = str(value)
        else:
            env.pop(name, None)
    return {**current, "env": env}


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


_TABLE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ROOT_KEYS = ("model", "model_provider", "model_context_window", "model_auto_compact_token_limit")


def edit_codex_toml(text: str, t: Target) -> str:
    """Codex's config.toml with Stoker's root keys and provider table; every other line kept."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigProblem(f"it is not valid TOML ({exc})") from None
    lines = text.splitlines()
    kept: list[str] = []
    table: str | None = None
    for line in lines:
        header = _TABLE.match(line)
        if header:
            table = header.group(1).strip().strip('"')
        if table is None and re.match(rf"^\s*({'|'.join(_ROOT_KEYS)})\s*=", line):
            continue  # Stoker's root keys: written again below
        if table == f"model_providers.{PROVIDER_ID}":
            continue  # Stoker's own table: written again below
        kept.append(line)
    first_table = next((i for i, line in enumerate(kept) if _TABLE.match(line)), len(kept))
    m = t.model
    root = [f"model = {_toml_str(m.id)}", f"model_provider = {_toml_str(PROVIDER_ID)}"]
    window = _window(m)
    if window:
        root.append(f"model_context_window = {window}")
        # Codex compacts the conversation at this many tokens; leave room for an answer.
        root.append(f"model_auto_compact_token_limit = {window * 4 // 5}")
    provider = [f"[model_providers.{PROVIDER_ID}]", f"name = {_toml_str(PROVIDER_NAME)}",
                f"base_url = {_toml_str(t.openai_base)}", 'wire_api = "responses"']
    if t.key:
        provider.append(f"experimental_bearer_token = {_toml_str(t.key)}")
    head, tail = kept[:first_table], kept[first_table:]
    while head and not head[-1].strip():
        head.pop()
    while tail and not tail[-1].strip():
        tail.pop()
    out = head + root + [""] + tail + ([""] if tail else []) + provider
    result = "\n".join(out).lstrip("\n") + "\n"
    tomllib.loads(result)  # what Codex will read must parse
    return result


def edit_opencode(current: dict[str, Any], t: Target) -> dict[str, Any]:
    providers = current.get("provider") or {}
    if not isinstance(providers, dict):
        raise ConfigProblem("its `provider` is not an object")
    models = {}
    for m in t.models:
        limit = {k: v for k, v in (("context", _window(m)), ("output", _max_output(m))) if v}
        models[m.id] = {"name": m.id, **({"limit": limit} if limit else {})}
    options = {"baseURL": t.openai_base, **({"apiKey": t.key} if t.key else {})}
    providers = {**providers, PROVIDER_ID: {"npm": "@ai-sdk/openai-compatible", "name": PROVIDER_NAME,
                                            "options": options, "models": models}}
    out = {**current, "provider": providers, "model": f"{PROVIDER_ID}/{t.model.id}"}
    out.setdefault("$schema", "https://opencode.ai/config.json")
    return out


def edit_continue(current: dict[str, Any], t: Target) -> dict[str, Any]:
    models = current.get("models") or []
    if not isinstance(models, list):
        raise ConfigProblem("its `models` is not a list")
    ours = [x for x in models if not (isinstance(x, dict) and str(x.get("name", "")).startswith(f"{PROVIDER_NAME}: "))]
    added = []
    for m in t.models:
        options = {k: v for k, v in (("contextLength", _window(m)), ("maxTokens", _max_output(m))) if v}
        added.append({"name": f"{PROVIDER_NAME}: {m.id}", "provider": "openai", "model": m.id,
                      "apiBase": t.openai_base, "apiKey": t.key or NO_KEY,
                      **({"defaultCompletionOptions": options} if options else {}),
                      "roles": ["chat", "edit", "apply"]})
    out = {"name": current.get("name") or "Local config", "version": current.get("version") or "1.0.0",
           "schema": current.get("schema") or "v1", **current}
    out["models"] = added + ours
    return out


def zed_key_variable() -> str:
    """Zed reads an openai_compatible provider's key from <NAME>_API_KEY (the name upper-cased)."""
    return re.sub(r"[^A-Z0-9]", "_", PROVIDER_NAME.upper()) + "_API_KEY"


def edit_zed(current: dict[str, Any], t: Target) -> dict[str, Any]:
    lm = current.get("language_models") or {}
    compatible = lm.get("openai_compatible") or {} if isinstance(lm, dict) else None
    if not isinstance(lm, dict) or not isinstance(compatible, dict):
        raise ConfigProblem("its `language_models.openai_compatible` is not an object")
    available = []
    for m in t.models:
        entry: dict[str, Any] = {"name": m.id, "display_name": f"{m.id} (Stoker)"}
        if _window(m):
            entry["max_tokens"] = _window(m)  # Zed's max_tokens is the context window
        if _max_output(m):
            entry["max_output_tokens"] = _max_output(m)
        entry["capabilities"] = {"tools": True, "images": False, "parallel_tool_calls": False,
                                 "prompt_cache_key": False}
        available.append(entry)
    compatible = {**compatible, PROVIDER_NAME: {"api_url": t.openai_base, "available_models": available}}
    return {**current, "language_models": {**lm, "openai_compatible": compatible}}


def edit_llm_models(current: list[Any] | None, t: Target) -> list[Any]:
    if current is not None and not isinstance(current, list):
        raise ConfigProblem("it is not a YAML list of models")
    others = [x for x in (current or []) if not (isinstance(x, dict) and x.get("api_base") == t.openai_base)]
    ours = [{"model_id": m.id, "model_name": m.id, "api_base": t.openai_base, "can_stream": True,
             **({"api_key_name": PROVIDER_ID} if t.key else {})} for m in t.models]
    return ours + others


def edit_llm_keys(current: dict[str, Any], t: Target) -> dict[str, Any]:
    out = {k: v for k, v in current.items() if k != PROVIDER_ID}
    if t.key:
        out[PROVIDER_ID] = t.key
    return out


def env_lines(app: App, t: Target, show_key: bool = False) -> tuple[str, ...]:
    """The environment an app that reads only that needs (Open WebUI), or the key variable an
    app reads from the environment (Zed). The key is masked unless `show_key`."""
    key = (t.key if show_key else mask(t.key)) if t.key else None
    if app is App.OPEN_WEBUI:
        lines = [f"OPENAI_API_BASE_URL={t.openai_base}", f"OPENAI_API_KEY={key or NO_KEY}"]
        return tuple(lines)
    if app is App.ZED and key:
        return (f"{zed_key_variable()}={key}",)
    return ()


def probe_request(app: App, t: Target) -> ProbeRequest:
    """The first request the app would send, small enough for any model."""
    say = [{"role": "user", "content": "Say hello in three words."}]
    if app is App.CLAUDE_CODE:
        return ProbeRequest(Api.ANTHROPIC, "/v1/messages", {"model": t.model.id, "max_tokens": 16, "messages": say})
    if app is App.CODEX:
        return ProbeRequest(Api.RESPONSES, "/v1/responses",
                           {"model": t.model.id, "max_output_tokens": 16, "input": say, "stream": False})
    return ProbeRequest(Api.CHAT, "/v1/chat/completions", {"model": t.model.id, "max_tokens": 16, "messages": say})


def answer_text(api: Api, body: dict[str, Any]) -> str | None:
    """The text of a test request's answer, or None when it holds none."""
    try:
        if api is Api.ANTHROPIC:
            return "".join(b.get("text", "") for b in body["content"] if b.get("type") == "text") or None
        if api is Api.RESPONSES:
            return "".join(c.get("text", "") for item in body["output"] if item.get("type") == "message"
                           for c in item.get("content", []) if c.get("type") == "output_text") or None
        return body["choices"][0]["message"].get("content") or None
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
