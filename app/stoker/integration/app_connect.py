"""`stoker connect APP` carried out: ask the running Stoker, edit the app's file, test it.

The edits are decided in stoker/integration/app_configs.py; this module reads and writes the
files, keeps the backups, and talks to the running instance. Before a file is first edited
it is copied to `<file>.stoker-backup` (or, when there was none, `<file>.stoker-absent` is
left to say so); a second `connect` keeps that first backup, so `--undo` always gives back
what the user had before Stoker. A file that does not parse is never edited blind: it is
moved aside to `<file>.corrupt-<UTC time>` (after the backup) and reported, and a fresh
file is written. Every write is atomic (a temporary file in the same folder, fsynced, then
renamed), with owner-only permissions where the file holds the key.

The CLI (stoker/cli/commands/connect.py) and the tray's "Connect an app…" call the same
`gather_target`, `connect`, `undo` and `send_test` functions. Must not print.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import yaml

from stoker.base.secrets import get_api_key
from stoker.instance.control import request as control_request
from stoker.integration.app_configs import (
    TITLES,
    App,
    ConfigFile,
    ConfigProblem,
    Format,
    ModelFacts,
    Target,
    answer_text,
    config_files,
    edit_claude_code,
    edit_codex_toml,
    edit_continue,
    edit_llm_keys,
    edit_llm_models,
    edit_opencode,
    edit_zed,
    env_lines,
    mask,
    parse_json_text,
    probe_request,
)

BACKUP_SUFFIX = ".stoker-backup"
ABSENT_SUFFIX = ".stoker-absent"
PROBE_TIMEOUT_S = 300.0  # the first request may load the model


class ConnectError(Exception):
    """One sentence saying what is wrong and what to do."""


@dataclass(frozen=True)
class ConnectReport:
    app: App
    target: Target
    written: tuple[str, ...]  # files written
    backups: tuple[str, ...]  # backups made now (none when an earlier connect made them)
    set_aside: tuple[str, ...]  # sentences: a file that did not parse, and where it went
    env: tuple[str, ...]  # environment lines for the user to set


# ---------------------------------------------------------------------------- the running Stoker

def _chat_ids(listing: dict) -> list[dict]:
    return [m for m in listing.get("data") or () if isinstance(m, dict) and m.get("kind", "chat") == "chat"
            and isinstance(m.get("id"), str)]


def _listed_context(entry: dict) -> int | None:
    """A window /v1/models states per request, where it states one (newer gateways do)."""
    for name in ("context_length", "loaded_context_length", "max_context_length"):
        value = entry.get(name)
        if isinstance(value, int) and value > 0:
            return value
    meta = entry.get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("n_ctx"), int):
        return meta["n_ctx"]
    return None


def gather_target(model: str | None = None, *, run_dir: Path | None = None) -> Target:
    """The endpoint, key, chat models and the chosen model's real window, from the running Stoker.
    The chosen model's window is read from its engine (`/props`: the plan's context per slot),
    which loads it when it is not loaded yet."""
    answer = control_request("status", run_dir=run_dir)
    if answer is None:
        raise ConnectError("no Stoker instance is running; start one with `stoker run` (or the tray app), "
                           "then connect again.")
    status = answer.get("status") or {}
    base = (status.get("gateway") or {}).get("url") or status.get("endpoint")
    if not base:
        raise ConnectError("the running Stoker has no endpoint yet; wait for it to start, then connect again.")
    key = get_api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        listing = httpx.get(f"{base}/v1/models", headers=headers, timeout=30).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ConnectError(f"Stoker's endpoint at {base} did not list its models ({exc}).") from None
    chats = _chat_ids(listing)
    if not chats:
        raise ConnectError("Stoker has no chat model; get one with `stoker pull` or `stoker setup`.")
    ids = [m["id"] for m in chats]
    if model is not None:
        chosen = next((m for m in chats if m["id"] == model or model in (m.get("aliases") or ())), None)
        if chosen is None:
            raise ConnectError(f"Stoker has no chat model called {model!r}; choose one of: {', '.join(ids)}.")
    else:
        loaded = [m for m in chats if m.get("status") == "loaded"]
        chosen = (loaded or chats)[0]
    window = _engine_window(base, headers, chosen["id"]) or _listed_context(chosen)
    facts = [ModelFacts(chosen["id"], window)]
    facts += [ModelFacts(m["id"], _listed_context(m)) for m in chats if m["id"] != chosen["id"]]
    return Target(base, key, facts[0], tuple(facts))


def _engine_window(base: str, headers: dict, model_id: str) -> int | None:
    try:
        props = httpx.get(f"{base}/props", params={"model": model_id}, headers=headers,
                          timeout=PROBE_TIMEOUT_S).json()
    except (httpx.HTTPError, ValueError):
        return None
    n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") if isinstance(props, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None


# ---------------------------------------------------------------------------- files

def _write_atomic(path: Path, text: str, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            if private and os.name == "posix":
                os.fchmod(f.fileno(), 0o600)
            elif path.exists() and os.name == "posix":
                os.fchmod(f.fileno(), path.stat().st_mode & 0o777)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _backup(path: Path) -> Path | None:
    """The first backup of `path` (an earlier one is kept); None when one already exists."""
    backup, absent = Path(str(path) + BACKUP_SUFFIX), Path(str(path) + ABSENT_SUFFIX)
    if backup.exists() or absent.exists():
        return None
    if path.exists():
        tmp = backup.with_name(backup.name + ".tmp")
        shutil.copy2(path, tmp)
        os.replace(tmp, backup)
        return backup
    _write_atomic(absent, f"{path.name} did not exist before `stoker connect`; --undo removes it.\n", False)
    return absent


def _set_aside(path: Path, why: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        aside, n = path.with_name(f"{path.name}.corrupt-{stamp}-{n}"), n + 1
    os.replace(path, aside)
    return f"{path} could not be read ({why}), so it was moved to {aside} and a new one written."


def _load(cf: ConfigFile, text: str):
    if cf.format in (Format.JSON, Format.JSONC):
        return parse_json_text(text, cf.format)
    if cf.format is Format.YAML:
        try:
            return yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigProblem(f"it is not valid YAML ({str(exc).splitlines()[0]})") from None
    return text  # TOML: edited as text, checked by app_configs


def _render(cf: ConfigFile, value) -> str:
    if cf.format in (Format.JSON, Format.JSONC):
        return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    if cf.format is Format.YAML:
        return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)
    return value


def _edit(app: App, cf: ConfigFile, current, t: Target):
    if app is App.CLAUDE_CODE:
        return edit_claude_code(current or {}, t)
    if app is App.CODEX:
        return edit_codex_toml(current or "", t)
    if app is App.OPENCODE:
        return edit_opencode(current or {}, t)
    if app is App.CONTINUE:
        if current is not None and not isinstance(current, dict):
            raise ConfigProblem("it is not a YAML mapping")
        return edit_continue(current or {}, t)
    if app is App.ZED:
        return edit_zed(current or {}, t)
    if cf.path.endswith("keys.json"):
        return edit_llm_keys(current or {}, t)
    return edit_llm_models(current, t)


def connect(app: App, t: Target, *, home: str | None = None, env: dict | None = None,
            platform: str = sys.platform) -> ConnectReport:
    """Write the app's files for `t` (backing each up first); the environment lines to set."""
    home = home or str(Path.home())
    env = dict(os.environ if env is None else env)
    written, backups, aside = [], [], []
    for cf in config_files(app, home, env, platform):
        if app is App.LLM and cf.path.endswith("keys.json") and not t.key and not Path(cf.path).exists():
            continue  # no key to keep: llm's keys file is not created for nothing
        path = Path(cf.path)
        made = _backup(path)
        if made is not None:
            backups.append(str(made))
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        try:
            current = _load(cf, text)
            new = _edit(app, cf, current, t)
        except ConfigProblem as exc:
            aside.append(_set_aside(path, str(exc)))
            new = _edit(app, cf, None if cf.format is not Format.TOML else "", t)
        _write_atomic(path, _render(cf, new), cf.holds_key and bool(t.key))
        written.append(str(path))
    return ConnectReport(app, t, tuple(written), tuple(backups), tuple(aside), env_lines(app, t))


def undo(app: App, *, home: str | None = None, env: dict | None = None,
         platform: str = sys.platform) -> tuple[str, ...]:
    """Give back each file as it was before the first `connect`; sentences saying what was done."""
    home = home or str(Path.home())
    env = dict(os.environ if env is None else env)
    done = []
    for cf in config_files(app, home, env, platform):
        path = Path(cf.path)
        backup, absent = Path(str(path) + BACKUP_SUFFIX), Path(str(path) + ABSENT_SUFFIX)
        if backup.exists():
            os.replace(backup, path)
            done.append(f"restored {path} from its backup")
        elif absent.exists():
            path.unlink(missing_ok=True)
            absent.unlink()
            done.append(f"removed {path} (it did not exist before)")
    if not done and config_files(app, home, env, platform):
        raise ConnectError(f"there is nothing to undo for {TITLES[app]}: `stoker connect` made no backup "
                           "of its settings here.")
    return tuple(done)


# ---------------------------------------------------------------------------- the test request

def send_test(app: App, t: Target) -> tuple[bool, str]:
    """Send the request the app would send first; (answered, one line saying what happened)."""
    req = probe_request(app, t)
    headers = {"Content-Type": "application/json"}
    if t.key:
        headers["Authorization"] = f"Bearer {t.key}"
    if app is App.CLAUDE_CODE:
        headers.update({"x-api-key": t.key or "stoker", "anthropic-version": "2023-06-01"})
    started = time.monotonic()
    try:
        r = httpx.post(t.base_url + req.path, json=req.body, headers=headers, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return False, f"{TITLES[app]}'s test request ({req.api.value}) got no answer: {exc}."
    took = time.monotonic() - started
    try:
        body = r.json()
    except ValueError:
        body = {}
    if r.status_code != 200:
        err = body.get("error") if isinstance(body, dict) else None
        message = err.get("message") if isinstance(err, dict) else err or r.text[:200]
        return False, f"{TITLES[app]}'s test request ({req.api.value}) was refused ({r.status_code}): {message}"
    text = answer_text(req.api, body) if isinstance(body, dict) else None
    if not text:
        return False, f"{TITLES[app]}'s test request ({req.api.value}) was answered without text."
    line = " ".join(text.split())
    return True, (f"{TITLES[app]}'s test request ({req.api.value}) to {t.model.id} answered in {took:.1f} s: "
                  f"{line[:60]!r}")


@dataclass(frozen=True)
class ConnectOutcome:
    """What `stoker connect` and the tray's dialog both show: lines to read, problems to heed."""

    answered: bool  # the test request got an answer
    lines: tuple[str, ...]
    problems: tuple[str, ...]  # sentences for stderr (a file set aside, a refused test)


def connect_and_test(app: App, model: str | None = None, *, show_key: bool = False) -> ConnectOutcome:
    """Gather from the running Stoker, write the app's settings, send its test request.
    Raises ConnectError (one sentence) when no Stoker runs or it has no such model."""
    target = gather_target(model)
    report = connect(app, target)
    window = (f", a window of {target.model.context:,} tokens" if target.model.context
              else " (its window is not known, so none was written)")
    lines = [f"{TITLES[app]} → {target.openai_base}, model {target.model.id}{window}, key {mask(target.key)}"]
    lines += [f"wrote {path}" for path in report.written]
    lines += [f"backup {path} (`stoker connect {app.value} --undo` restores it)" for path in report.backups]
    if report.env:
        lines.append("set these in the app's environment:" if app is App.OPEN_WEBUI
                     else "set this where the app starts (or enter the key in its settings):")
        lines += [f"  {line}" for line in (env_lines(app, target, show_key=True) if show_key else report.env)]
    ok, result = send_test(app, target)
    problems = list(report.set_aside)
    if ok:
        lines.append(result)
    else:
        problems.append(result)
    return ConnectOutcome(ok, tuple(lines), tuple(problems))
