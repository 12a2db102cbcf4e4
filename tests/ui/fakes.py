"""A stand-in for stoker.desktop.services.Services: no files, no engine, answers set by the test."""

from __future__ import annotations

import time
from pathlib import Path

from stoker.base.overrides import ModelOverrides
from stoker.desktop.services import ModelEntry
from stoker.integration.login_items import Outcome
from stoker.planning.plan import Decision, DeviceMemory, DrafterChoice, LaunchPlan

GIB = 1024 ** 3


def hand_plan(model_path: str, overrides: ModelOverrides) -> LaunchPlan:
    ctx = overrides.ctx or 8192
    kv = overrides.kv_type_k or "f16"
    return LaunchPlan(
        model_path=model_path, ctx=ctx, slots=overrides.slots or 1, kv_unified=True,
        kv_type_k=kv, kv_type_v=overrides.kv_type_v or kv, flash_attn="auto", gpu_layers=None,
        n_cpu_moe=None, cpu_moe=False, swa_full=False,
        drafter=DrafterChoice("none", None, None, "no drafter configured"),
        devices=(DeviceMemory("CPU", 12 * GIB, 98_000_000, ctx * 23_040, 300_000_000),),
        decisions=(Decision(f"context {ctx:,}", "the trained context fits the budget"),
                   Decision(f"KV cache {kv}", "the default keeps full precision")))


class FakeServices:
    def __init__(self, tmp: Path, models=()):
        self.tmp = tmp
        self.settings = {"engine": None, "model_folders": [], "memory_reserve_gib": 4.0,
                         "idle_unload_minutes": 5, "gateway_port": 7857, "model_memory_gib": None,
                         "cors_origins": (), "start_at_login": False, "log_level": "info"}
        self.overrides: dict[str, ModelOverrides] = {}
        self.model_list = tuple(models)
        self.plan_delay_s = 0.0
        self.plans_made = 0
        self.saved: list[dict] = []
        self.keyring = (False, "No keyring backend is available to store the API key; install "
                               "gnome-keyring or KWallet, or run `pip install keyrings.alt`.")
        self.log = tmp / "engine.log"
        self.autostart_calls: list[bool] = []
        self.autostart_outcome = Outcome(True, "ok")
        self.launcher = False

    def load_settings(self):
        return dict(self.settings)

    def save_settings(self, values):
        self.saved.append(dict(values))
        self.settings.update(values)

    def apply_autostart(self, enabled):
        self.autostart_calls.append(enabled)
        return self.autostart_outcome

    def launcher_installed(self):
        return self.launcher

    def apply_launcher(self, enabled):
        self.launcher = enabled
        return Outcome(True, "launcher changed")

    def about(self, qt_version):
        return ("Stoker 0.0-test", f"Qt {qt_version}", "Engine: none installed; run `stoker setup`")

    def keyring_status(self):
        return self.keyring

    def has_api_key(self):
        return False

    def set_api_key(self, value):
        raise AssertionError("no keyring in this fake")

    def engines(self):
        return ()

    def models(self):
        return self.model_list

    def catalog(self):
        """The fake library named as the gateway would name it."""
        from stoker.library.model_ids import ModelKind, build_catalog

        found = [(m.path, Path(m.path).name, ModelKind.CHAT, "library") for m in self.model_list]
        return build_catalog(found, {k: v.aliases for k, v in self.overrides.items()})[0]

    def load_overrides(self, model_path):
        return self.overrides.get(model_path, ModelOverrides())

    def save_overrides(self, model_path, overrides):
        self.overrides[model_path] = overrides

    def plan(self, model_path, overrides):
        time.sleep(self.plan_delay_s)  # simulates a slow peer: a plan that takes its time
        self.plans_made += 1
        return hand_plan(model_path, overrides)

    def logs_dir(self):
        return self.tmp

    def log_tail(self, log_file, max_lines=300):
        from stoker.base.log_tail import read_tail

        path = Path(log_file) if log_file else self.log
        return (str(path), read_tail(path)) if path.exists() else ("", ())


def entries(*paths):
    return tuple(ModelEntry(str(p), Path(p).stem, 1) for p in paths)


def grab_menus(*menus):
    """A picture of open menus (a submenu is its own window): the screen around them."""
    from PySide6.QtGui import QGuiApplication

    area = menus[0].geometry()
    for m in menus[1:]:
        area = area.united(m.geometry())
    area = area.adjusted(-4, -4, 4, 4)
    return QGuiApplication.primaryScreen().grabWindow(0, area.x(), area.y(), area.width(),
                                                      area.height())
