"""JSON files under the config folder that must survive crashes and hand edits.

A settings or overrides file is the user's work: a crash half-way through a write must
leave the previous file, and a file that no longer parses must be kept (moved aside and
reported) rather than silently replaced by defaults on the next save. Writes go to a
temporary file in the same folder, are fsynced, then renamed over the old file (and
the folder fsynced where the OS allows), so a reader sees the old file or the new one,
never half of one.

Validation of per-model overrides is `stoker.base.overrides`; this module only stores.
It never imports Qt; concurrent writers from two processes are last-writer-wins.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stoker.base.overrides import ModelOverrides, overrides_to_dict, validate_overrides
from stoker.base.paths import stoker_paths
from stoker.base.rpc_address import DEFAULT_PORT as DEFAULT_RPC_PORT
from stoker.base.rpc_address import parse_worker, parse_workers

SCHEMA = 1

# Files this process moved aside: a fact for the whole session (the next read finds no file,
# so its reader cannot say it again), reported by `moved_aside_problems`.
_moved_aside: list[str] = []


def moved_aside_problems() -> tuple[str, ...]:
    """Every "was not valid JSON, so it was moved to …" sentence of this process, oldest first."""
    return tuple(_moved_aside)


def write_json_atomic(path: Path | str, obj) -> None:
    """Replace `path` with `obj` as JSON: temp file in the same folder, fsync, rename, fsync folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not exc.filename:  # a full disk fails in write(): say where
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable. Windows cannot open a folder for fsync; there the
    # rename is as durable as the file system makes it.
    if os.name == "nt":
        return
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _move_aside(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():  # two corruptions in one second must not overwrite the first
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    os.replace(path, aside)
    return aside


def read_json(path: Path | str, expect: type | None = dict) -> tuple[object | None, str | None]:
    """Read a JSON file: (value, None), or (None, None) when it does not exist, or
    (None, problem) when it cannot be used.

    A file that is not JSON (or not of the `expect`ed type) is moved aside to
    `<name>.corrupt-<UTC timestamp>` so the next save cannot overwrite it; the problem
    sentence names both paths. A file that cannot be read at all is left in place.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"Could not read {path} ({exc.strerror or exc}); check its permissions."
    try:
        value = json.loads(raw.decode("utf-8"))
        if expect is not None and not isinstance(value, expect):
            raise ValueError(f"expected a JSON {expect.__name__}, found {type(value).__name__}")
    except (UnicodeDecodeError, ValueError) as exc:
        try:
            aside = _move_aside(path)
        except OSError as move_exc:
            return None, (f"{path} is not valid JSON ({exc}) and could not be moved aside "
                          f"({move_exc.strerror or move_exc}); fix or remove it by hand.")
        problem = (f"{path} was not valid JSON ({_short_error(exc)}), so it was moved to {aside} and "
                   f"defaults are used; copy any settings you need back from it.")
        _moved_aside.append(problem)
        return None, problem
    return value, None


def _short_error(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 120 else text[:117] + "..."


def model_key(model_path: Path | str) -> str:
    """The key a model's overrides are stored under: its resolved absolute path."""
    return str(Path(model_path).expanduser().resolve())


class OverridesStore:
    """Per-model overrides in `<config>/overrides.json`, keyed by the model's resolved path.

    File format: `{"schema": 1, "models": {"/abs/model.gguf": {"ctx": 8192, ...}}}`.
    Every call reads the file again, so the tray and the CLI see each other's edits.
    `problems` collects sentences about a corrupt file or values that failed validation.
    """

    def __init__(self, config_dir: Path | str):
        self.path = Path(config_dir) / "overrides.json"
        self.problems: list[str] = []

    def _load(self) -> dict[str, dict]:
        value, problem = read_json(self.path)
        if problem:
            self.problems.append(problem)
        if not isinstance(value, dict) or not value:  # read_json gives a dict or None
            return {}
        models = value.get("models", {})
        if not isinstance(models, dict):
            self.problems.append(f"{self.path}: 'models' must be an object keyed by model path; ignored it.")
            return {}
        return {k: v for k, v in models.items() if isinstance(v, dict)}

    def _validated(self, key: str, raw: dict) -> ModelOverrides:
        overrides, errors = validate_overrides(raw)
        for error in errors:
            self.problems.append(f"Overrides for {Path(key).name} in {self.path}: {error}; "
                                 "Stoker plans that value itself instead.")
        return overrides

    def get(self, model_path: Path | str) -> ModelOverrides:
        key = model_key(model_path)
        raw = self._load().get(key)
        return self._validated(key, raw) if raw is not None else ModelOverrides()

    def all(self) -> dict[str, ModelOverrides]:
        return {key: self._validated(key, raw) for key, raw in self._load().items()}

    def set(self, model_path: Path | str, overrides: ModelOverrides) -> None:
        """Store one model's overrides (all-default removes its entry); others are kept as stored."""
        key = model_key(model_path)
        models = self._load()  # a corrupt file is moved aside here, before anything is written
        stored = overrides_to_dict(overrides)
        if stored:
            models[key] = stored
        else:
            models.pop(key, None)
        write_json_atomic(self.path, {"schema": SCHEMA, "models": models})

    def clear(self, model_path: Path | str) -> None:
        self.set(model_path, ModelOverrides())


LOG_LEVELS = ("debug", "info", "warning", "error")
DEFAULT_GATEWAY_PORT = 7857  # "STKR" on a phone keypad; clear of 8080, 11434, 1234, 1337, 5001


@dataclass(frozen=True)
class AppSettings:
    """App-wide settings. `engine` None = pick the best discovered build."""

    engine: str | None = None  # path to a llama-server binary, or None for automatic
    model_folders: tuple[str, ...] = ()
    memory_reserve_gib: float = 4.0  # kept free for the OS and apps when planning
    idle_unload_minutes: int = 5  # 0 = never unload an idle model
    start_at_login: bool = False
    log_level: str = "info"
    last_model: str | None = None
    # The gateway's loopback port: the one endpoint chat clients keep (see core/gateway_rules).
    gateway_port: int = DEFAULT_GATEWAY_PORT
    # Memory the models together may use, in GiB; None: what the machine has free (minus the
    # reserve). Residency admits a model only when its plan fits beside the resident ones.
    model_memory_gib: float | None = None
    cors_origins: tuple[str, ...] = ()  # browser origins allowed beside loopback ones
    # Also answer on 127.0.0.1:11434, where apps written for Ollama look (read at start; not
    # when Ollama or another program holds it: stoker/gateway/ollama_port.py).
    ollama_port: bool = False
    # Models left out of every list (paths): other tools' models are hidden, never deleted.
    hidden_models: tuple[str, ...] = ()
    # RPC workers (`stoker worker` on other machines), HOST:PORT each; `stoker run --rpc` beats it.
    rpc_workers: tuple[str, ...] = ()
    # This machine as an RPC worker for other machines' Stoker (the app runs rpc-server while
    # it runs; the tray shows its line). A host other machines can reach also needs
    # worker_allow_remote: RPC has no authentication and no encryption.
    worker_enabled: bool = False
    worker_host: str = "127.0.0.1"
    worker_port: int = DEFAULT_RPC_PORT
    worker_cache: bool = False
    worker_allow_remote: bool = False
    # The Linux Ollama service's store (/usr/share/ollama) belongs to another account, which
    # any local user can make pull anything: its models are listed only when this is on.
    read_ollama_service_store: bool = False
    # Disk for conversations kept across an unload (each slot's KV cache, saved before a model
    # leaves memory and restored at its next load), in GiB; least recently used dropped first.
    # 0 = keep none (stoker/fleet/kv_keeper.py).
    conversation_disk_gib: float = 4.0
    # Keys a newer Stoker wrote; kept so saving from this version does not drop them.
    extra: tuple[tuple[str, object], ...] = field(default=(), compare=False)


def _is_origin(text: str) -> bool:
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname)
            and parts.path in ("", "/") and not parts.query and not parts.fragment
            and not parts.username and not any(c.isspace() for c in text.strip()))


def check_setting(name: str, value) -> tuple[object, str | None]:
    """What `SettingsStore.update` would store for `name` (JSON-like value in), or the one
    sentence why it would refuse it: the settings dialog checks each field with it as typed."""
    if name == "extra" or name not in {f.name for f in fields(AppSettings)}:
        return None, f"'{name}' is not a Stoker setting."
    raw = list(value) if isinstance(value, tuple) else value
    v, why = _check_setting(name, raw, None)
    return (None, f"{why[0].upper()}{why[1:]}.") if why else (v, None)


def _check_setting(name: str, value, default):
    """(value, None) when `value` is a valid `name`, else (default, why)."""
    if name in ("engine", "last_model"):
        if value is None or (isinstance(value, str) and value.strip()):
            return value, None
        return default, f"{name} must be a path or null"
    if name == "model_folders":
        if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            return tuple(value), None
        return default, "model_folders must be a list of folder paths"
    if name == "hidden_models":
        if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            return tuple(value), None
        return default, "hidden_models must be a list of model file paths"
    if name == "memory_reserve_gib":
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1024:
            return float(value), None
        return default, "memory_reserve_gib must be a number of GiB between 0 and 1024"
    if name == "conversation_disk_gib":
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 4096:
            return float(value), None
        return default, "conversation_disk_gib must be a number of GiB from 0 (keep none) to 4096"
    if name == "idle_unload_minutes":
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 7 * 24 * 60:
            return value, None
        return default, "idle_unload_minutes must be a whole number of minutes from 0 (never) to 10080"
    if name == "gateway_port":
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
            return value, None
        return default, "gateway_port must be a port number from 1 to 65535"
    if name == "model_memory_gib":
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and 0 < value <= 65536):
            return (None if value is None else float(value)), None
        return default, "model_memory_gib must be a number of GiB above 0, or null for the machine's"
    if name == "cors_origins":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return default, "cors_origins must be a list of origins such as https://chat.example"
        for v in value:
            if not _is_origin(v):
                return default, (f"{v!r} is not a browser origin: write it as scheme://host[:port] "
                                 "with no path, such as https://chat.example")
        # As a browser sends it (lower case, no trailing slash), since the gateway matches it exactly.
        return tuple(v.strip().rstrip("/").lower() for v in value), None
    if name == "rpc_workers":
        try:
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return tuple(w.endpoint for w in parse_workers(value)), None
        except ValueError as exc:
            return default, f"rpc_workers: {exc}"
        return default, "rpc_workers must be a list of HOST:PORT strings"
    if name in ("start_at_login", "worker_enabled", "worker_cache", "worker_allow_remote", "ollama_port",
                "read_ollama_service_store"):
        if isinstance(value, bool):
            return value, None
        return default, f"{name} must be true or false"
    if name == "worker_port":
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
            return value, None
        return default, "worker_port must be a port number from 1 to 65535"
    if name == "worker_host":
        try:
            if isinstance(value, str):
                host = value.strip().strip("[]")
                return parse_worker(f"[{host}]:1" if ":" in host else f"{host}:1").host, None
        except ValueError:
            pass
        return default, "worker_host must be an address such as 127.0.0.1 or 192.168.1.20"
    if name == "log_level":
        if isinstance(value, str) and value.lower() in LOG_LEVELS:
            return value.lower(), None
        return default, f"log_level must be one of {', '.join(LOG_LEVELS)}"
    raise KeyError(name)


class SettingsStore:
    """App settings in `<config>/settings.json` (`{"schema": 1, ...fields}`), with defaults.

    A bad value falls back to its default and adds a sentence to `problems`; a corrupt
    file is moved aside (see `read_json`) and all defaults are used.
    """

    # Names other modules used before this store existed, read as the setting they mean.
    ALIASES = {"engine_path": "engine"}

    def __init__(self, config_dir: Path | str | None = None):
        if config_dir is None:

            config_dir = stoker_paths().config
        self.path = Path(config_dir) / "settings.json"
        self.problems: list[str] = []

    def get(self, name: str):
        """One setting's current value (defaults applied); KeyError for a name that is not a setting."""
        name = self.ALIASES.get(name, name)
        if name == "extra" or name not in {f.name for f in fields(AppSettings)}:
            raise KeyError(name)
        return getattr(self.load(), name)

    def load(self) -> AppSettings:
        value, problem = read_json(self.path)
        if problem:
            self.problems.append(problem)
        if not isinstance(value, dict) or not value:  # read_json gives a dict or None
            return AppSettings()
        defaults = AppSettings()
        known = {f.name for f in fields(AppSettings)} - {"extra"}
        out: dict[str, Any] = {}  # each value of its own field's type
        for name in known:
            if name in value:
                v, why = _check_setting(name, value[name], getattr(defaults, name))
                if why:
                    self.problems.append(f"{self.path}: {why}; using {getattr(defaults, name)!r}.")
                out[name] = v
        extra = tuple(sorted((k, v) for k, v in value.items() if k not in known and k != "schema"))
        return AppSettings(**out, extra=extra)

    def save(self, settings: AppSettings) -> None:
        data = {k: v for k, v in settings.extra}
        data.update({k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in asdict(settings).items() if k != "extra"})
        data["schema"] = SCHEMA
        write_json_atomic(self.path, data)

    def update(self, **changes) -> AppSettings:
        """Change some settings and save; a bad value raises ValueError with one sentence."""
        current = self.load()
        checked: dict[str, Any] = {}  # each value of its own field's type
        for name, value in changes.items():
            v, why = check_setting(name, value)
            if why:
                raise ValueError(why)
            checked[name] = v
        new = replace(current, **checked)
        self.save(new)
        return new


def read_setting(key: str):
    """One setting (`engine_path`, `model_folders`), or None when absent or unreadable.

    `stoker.base.store.SettingsStore` owns settings.json (it reads `engine_path` as its
    `engine`); the raw JSON read below is the fallback for a store that lacks the key.
    """
    try:
        value = SettingsStore().get(key)
        if value:
            return value
    except (ImportError, KeyError):
        pass
    path = stoker_paths().config / "settings.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get(key) if isinstance(data, dict) else None
