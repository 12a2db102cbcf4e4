"""Everything the windows need from the shell, behind one plain-Python object.

The UI is the wiring point: it may call the effect rooms, but the dialogs should not each know
which module lists models, stores settings, plans a preview or tails a log. `Services`
gathers those calls (imported lazily, so a missing piece shows as one sentence in the
dialog instead of an import error at start) and tests can hand the windows a fake.
Everything here may be slow (files, subprocesses in the probe): call it off the GUI
thread (stoker.desktop.workers). No Qt here.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from stoker.base.paths import stoker_paths
from stoker.integration.login_items import Outcome
from stoker.planning.overrides import ModelOverrides

# The settings the settings dialog edits (fields of stoker.base.store.AppSettings).
SETTINGS_KEYS = ("engine", "model_folders", "memory_reserve_gib", "idle_unload_minutes",
                 "gateway_port", "model_memory_gib", "cors_origins", "start_at_login", "log_level",
                 "worker_enabled", "worker_host", "worker_port", "worker_cache", "worker_allow_remote",
                 "read_ollama_service_store")
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class ModelEntry:
    path: str
    name: str
    size_bytes: int | None = None
    problem: str | None = None


def _settings_store():
    from stoker.base.store import SettingsStore

    return SettingsStore(stoker_paths().config)


class Services:
    """The real shell behind the windows; each method may block (run it off the GUI thread)."""

    def __init__(self) -> None:
        self._summaries: dict[tuple, object] = {}
        self._machine = None
        self._engine = None

    # -- settings ---------------------------------------------------------------------
    def load_settings(self) -> dict[str, Any]:
        settings = _settings_store().load()
        return {key: getattr(settings, key) for key in SETTINGS_KEYS}

    def save_settings(self, values: dict[str, Any]) -> None:
        """Raises ValueError with one sentence when a value is not acceptable."""
        _settings_store().update(**{k: v for k, v in values.items() if k in SETTINGS_KEYS})

    def apply_autostart(self, enabled: bool) -> Outcome:
        from stoker.integration.autostart import set_autostart

        return set_autostart(enabled)

    # -- the desktop's launcher (Linux) ---------------------------------------------------
    def launcher_installed(self) -> bool:
        from stoker.integration.desktop_entry import is_installed

        return is_installed()

    def apply_launcher(self, enabled: bool) -> Outcome:
        from stoker.integration.desktop_entry import DesktopError, install_launcher, uninstall_launcher

        try:
            result = install_launcher() if enabled else uninstall_launcher()
        except DesktopError as exc:
            return Outcome(False, f"{str(exc)[:1].upper()}{str(exc)[1:]}")
        return Outcome(True, result.sentence)

    # -- About ------------------------------------------------------------------------------
    def about(self, qt_version: str | None) -> tuple[str, ...]:
        from stoker.engines.about import about_lines
        from stoker.engines.about_facts import about_info

        return about_lines(about_info(qt_version))

    # -- secrets ----------------------------------------------------------------------
    def keyring_status(self) -> tuple[bool, str]:
        from stoker.base.secrets import keyring_status

        return keyring_status()

    def has_api_key(self) -> bool:
        from stoker.base.secrets import get_api_key

        return bool(get_api_key())

    def set_api_key(self, value: str | None) -> None:
        from stoker.base.secrets import set_api_key

        set_api_key(value)

    # -- engines and models -------------------------------------------------------------
    def engines(self) -> tuple:
        from stoker.engines.find import discover_engines

        return discover_engines()

    def models(self) -> tuple[ModelEntry, ...]:
        """The library and added folders, names only (headers are read when planning)."""
        from stoker.library.models import list_models

        return tuple(ModelEntry(str(m.path), m.label, m.size_bytes, m.error)
                     for m in list_models(with_summary=False))

    def catalog(self):
        """The models by gateway id, as the gateway names them (headers read, then cached)."""
        from stoker.library.catalog import ModelCatalog

        return ModelCatalog().refresh()

    # -- getting a model from the hub ------------------------------------------------------
    def hub_lookup(self, text: str):
        """(JudgedRepo, QuantPick | sentence) for a pasted repository; raises UserError with one sentence."""
        from stoker.errors import UserError
        from stoker.library import pull as model_pull
        from stoker.library.store_layouts import parse_hf_reference

        ref = parse_hf_reference(text)
        if isinstance(ref, str):
            raise UserError(ref)
        judged = model_pull.judge_repo(ref, self.machine())
        try:
            pick = model_pull.choose(judged, ref)
        except UserError as exc:
            pick = str(exc)
        return judged, pick

    def hub_download(self, judged, option, progress) -> Path:
        from stoker.library import pull as model_pull

        return model_pull.download(judged, option, progress)

    # -- overrides ------------------------------------------------------------------------
    def _overrides_store(self):
        from stoker.base.store import OverridesStore

        return OverridesStore(stoker_paths().config)

    def load_overrides(self, model_path: str) -> ModelOverrides:
        return self._overrides_store().get(model_path)

    def save_overrides(self, model_path: str, overrides: ModelOverrides) -> None:
        self._overrides_store().set(model_path, overrides)

    # -- planning ---------------------------------------------------------------------------
    def summary(self, model_path: str):
        from stoker.library.gguf_io import load_summary

        st = os.stat(model_path)
        key = (model_path, st.st_size, st.st_mtime_ns)
        if key not in self._summaries:
            self._summaries[key] = load_summary(model_path)
        return self._summaries[key]

    def engine(self):
        """The build a launch would use (shell.planning.EngineChoice), chosen as the launcher does."""
        if self._engine is None:
            from stoker.fleet.launcher import RealPreparer
            from stoker.planning.pipeline import EngineChoice

            preparer = RealPreparer()
            try:
                build = preparer.choose_engine()
                self._engine = EngineChoice(build.binary, build.id, preparer.engine_choice)
            except Exception:  # no usable build yet: plan for the host alone
                self._engine = EngineChoice(None)
        return self._engine

    def machine(self):
        """This machine as the engine that would run sees it (probed once per dialog session)."""
        if self._machine is None:
            from stoker.planning.probe import probe_machine

            self._machine = probe_machine(self.engine().binary)
        return self._machine

    def plan(self, model_path: str, overrides: ModelOverrides):
        """A LaunchPlan, a Ds4Plan (a ds4 model when ds4 is installed) or a PlanRefusal, made by
        the launcher's own pipeline (shell.planning): Settings' memory reserve and budget, the
        drafter, broken drafters and measured lines included."""
        from stoker.engines.ds4_launch import is_ds4_model
        from stoker.planning.pipeline import load_settings, plan_model

        summary = self.summary(model_path)
        if is_ds4_model(summary.architecture):
            from stoker.engines.ds4_files import ds4_model_of, find_ds4_binary, plan_ds4_model

            binary = find_ds4_binary()
            if binary is not None:
                model = ds4_model_of(model_path, summary.architecture, summary.n_ctx_train)
                return plan_ds4_model(model_path, self.machine(), overrides, binary=binary.path, model=model)
        settings, _ = load_settings()
        return plan_model(model_path, self.machine(), overrides, engine=self.engine(),
                          settings=settings)

    # -- logs ---------------------------------------------------------------------------------
    def logs_dir(self) -> Path:
        return stoker_paths().logs

    def log_tail(self, log_file: str | None, max_lines: int = 300) -> tuple[str, tuple[str, ...]]:
        from stoker.base.log_tail import newest_log, read_tail

        path = Path(log_file) if log_file else newest_log(self.logs_dir())
        if path is None:
            return "", ()
        return str(path), read_tail(path, max_lines=max_lines)


def model_key(model_path: str) -> str:
    """Overrides are keyed by the model's resolved path (stoker/base/store.py's convention)."""
    return str(Path(model_path).expanduser().resolve())


def validate(raw: dict) -> tuple[ModelOverrides, tuple[str, ...]]:
    """The store's validation, or a type-only fallback until it exists."""
    from stoker.planning import overrides as core_overrides

    try:
        return core_overrides.validate_overrides(raw)
    except NotImplementedError:
        known = {f.name for f in fields(ModelOverrides)}
        clean = {k: v for k, v in raw.items() if k in known and v is not None}
        if isinstance(clean.get("extra_args"), str):
            clean["extra_args"] = tuple(shlex.split(clean["extra_args"]))
        elif "extra_args" in clean:
            clean["extra_args"] = tuple(clean["extra_args"])
        return ModelOverrides(**clean), ()
