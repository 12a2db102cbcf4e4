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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.base import overrides as core_overrides
from stoker.base.log_tail import newest_log, read_tail
from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.secrets import get_api_key, keyring_status, set_api_key
from stoker.base.store import OverridesStore, SettingsStore
from stoker.engines.about import about_lines
from stoker.engines.about_facts import about_info
from stoker.engines.drivers import driver_for
from stoker.engines.drivers.inputs import EngineChoice, EngineDriver
from stoker.engines.find import discover_engines
from stoker.engines.kind import EngineKind
from stoker.engines.probe import probe_machine
from stoker.errors import UserError
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.pipeline import load_settings, remote_planner
from stoker.integration.autostart import set_autostart
from stoker.integration.desktop_entry import DesktopError, install_launcher, is_installed, uninstall_launcher
from stoker.integration.login_items import Outcome
from stoker.library.catalog import ModelCatalog
from stoker.library.gguf_io import load_summary
from stoker.library.models import list_models
from stoker.library.store_layouts import parse_hf_reference
from stoker.planning import pull as model_pull
from stoker.planning.machine import Machine
from stoker.planning.quant_choice import QuantPick

# The settings the settings dialog edits (fields of stoker.base.store.AppSettings).
SETTINGS_KEYS = ("engine", "model_folders", "memory_reserve_gib", "idle_unload_minutes",
                 "gateway_port", "model_memory_gib", "cors_origins", "start_at_login", "log_level",
                 "worker_enabled", "worker_host", "worker_port", "worker_cache", "worker_allow_remote",
                 "ollama_port", "read_ollama_service_store", "conversation_disk_gib")
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class ModelEntry:
    path: str
    name: str
    size_bytes: int | None = None
    problem: str | None = None


def _settings_store():

    return SettingsStore(stoker_paths().config)


class Services:
    """The real shell behind the windows; each method may block (run it off the GUI thread)."""

    def __init__(self) -> None:
        self._summaries: dict[tuple, object] = {}
        self._machine: Machine | None = None
        self._builds: dict[EngineKind, EngineChoice] = {}
        self._machines: dict[EngineKind, Machine] = {}  # as each kind's build sees this machine

    # -- settings ---------------------------------------------------------------------
    def load_settings(self) -> dict[str, Any]:
        settings = _settings_store().load()
        return {key: getattr(settings, key) for key in SETTINGS_KEYS}

    def save_settings(self, values: dict[str, Any]) -> None:
        """Raises ValueError with one sentence when a value is not acceptable."""
        _settings_store().update(**{k: v for k, v in values.items() if k in SETTINGS_KEYS})

    def apply_autostart(self, enabled: bool) -> Outcome:

        return set_autostart(enabled)

    # -- the desktop's launcher (Linux) ---------------------------------------------------
    def launcher_installed(self) -> bool:

        return is_installed()

    def apply_launcher(self, enabled: bool) -> Outcome:

        try:
            result = install_launcher() if enabled else uninstall_launcher()
        except DesktopError as exc:
            return Outcome(False, f"{str(exc)[:1].upper()}{str(exc)[1:]}")
        return Outcome(True, result.sentence)

    # -- About ------------------------------------------------------------------------------
    def about(self, qt_version: str | None) -> tuple[str, ...]:

        return about_lines(about_info(qt_version))

    # -- secrets ----------------------------------------------------------------------
    def keyring_status(self) -> tuple[bool, str]:

        return keyring_status()

    def has_api_key(self) -> bool:

        return bool(get_api_key())

    def set_api_key(self, value: str | None) -> None:

        set_api_key(value)

    # -- engines and models -------------------------------------------------------------
    def engines(self) -> tuple:

        return discover_engines()

    def models(self) -> tuple[ModelEntry, ...]:
        """The library and added folders, names only (headers are read when planning)."""

        return tuple(ModelEntry(str(m.path), m.label, m.size_bytes, m.error)
                     for m in list_models(with_summary=False))

    def catalog(self):
        """The models by gateway id, as the gateway names them (headers read, then cached)."""

        return ModelCatalog().refresh()

    # -- getting a model from the hub ------------------------------------------------------
    def hub_lookup(self, text: str):
        """(JudgedRepo, QuantPick | sentence) for a pasted repository; raises UserError with one sentence."""

        ref = parse_hf_reference(text)
        if isinstance(ref, str):
            raise UserError(ref)
        settings, _ = load_settings()
        policy, plan = remote_planner(self.machine(), settings)
        judged = model_pull.judge_repo(ref, self.machine(), policy, plan)
        pick: QuantPick | str
        try:
            pick = model_pull.choose(judged, ref)
        except UserError as exc:
            pick = str(exc)
        return judged, pick

    def hub_download(self, judged, option, progress) -> Path:

        return model_pull.download(judged, option, progress)

    # -- overrides ------------------------------------------------------------------------
    def _overrides_store(self):

        return OverridesStore(stoker_paths().config)

    def load_overrides(self, model_path: str) -> ModelOverrides:
        return self._overrides_store().get(model_path)

    def save_overrides(self, model_path: str, overrides: ModelOverrides) -> None:
        self._overrides_store().set(model_path, overrides)

    # -- planning ---------------------------------------------------------------------------
    def summary(self, model_path: str):

        st = os.stat(model_path)
        key = (model_path, st.st_size, st.st_mtime_ns)
        if key not in self._summaries:
            self._summaries[key] = load_summary(model_path)
        return self._summaries[key]

    def build_for(self, driver: EngineDriver) -> EngineChoice:
        """The build a launch of this driver would use, chosen as the launcher does (no build
        yet: plan for the host alone)."""
        if driver.kind not in self._builds:
            try:
                self._builds[driver.kind] = RealPreparer().choose_build(driver)
            except (UserError, OSError, ValueError):
                self._builds[driver.kind] = EngineChoice(None)
        return self._builds[driver.kind]

    def engine(self) -> EngineChoice:
        """The llama-server build a launch would use (the machine is probed with it)."""
        return self.build_for(driver_for(EngineKind.LLAMA_SERVER))

    def machine(self):
        """This machine as the engine that would run sees it (probed once per dialog session)."""
        if self._machine is None:

            self._machine = probe_machine(self.engine().binary)
        return self._machine

    def plan(self, model_path: str, overrides: ModelOverrides):
        """The plan a launch would make (a LaunchPlan, Ds4Plan or ImagePlan) or a PlanRefusal:
        the model's driver planning from the launcher's own inputs (Settings' reserve and
        budget, the projector, the drafter, broken drafters, measured lines, RPC workers)."""

        preparer = RealPreparer(machine=self._machine)
        model = Path(model_path)
        driver = preparer.driver_of(model)
        build = self.build_for(driver)
        machine = self._machines.get(driver.kind) or preparer.machine_for(driver, build)
        if not driver.uses_rpc_workers:  # a worker may go or come back between two previews
            self._machines[driver.kind] = machine
        settings, _ = load_settings()
        inputs = preparer.plan_inputs(model, held_bytes={}, driver=driver, build=build, machine=machine,
                                      settings=settings, overrides=overrides)
        return driver.plan(inputs)

    # -- logs ---------------------------------------------------------------------------------
    def logs_dir(self) -> Path:
        return stoker_paths().logs

    def log_tail(self, log_file: str | None, max_lines: int = 300) -> tuple[str, tuple[str, ...]]:

        path = Path(log_file) if log_file else newest_log(self.logs_dir())
        if path is None:
            return "", ()
        return str(path), read_tail(path, max_lines=max_lines)


def model_key(model_path: str) -> str:
    """Overrides are keyed by the model's resolved path (stoker/base/store.py's convention)."""
    return str(Path(model_path).expanduser().resolve())


def validate(raw: dict) -> tuple[ModelOverrides, tuple[str, ...]]:
    """The store's validation of a per-model form (the one the launch applies)."""
    return core_overrides.validate_overrides(raw)
