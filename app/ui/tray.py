"""The tray icon and its menu: the face of Stoker a user sees every day.

The icon and tooltip follow every snapshot; the menu is rebuilt from the latest snapshot
each time it opens, so it can never show a state older than the icon. Every action sends
a command (stoker.core.commands) or opens a window; nothing here waits for the engine.
What to show is decided in stoker.core.tray_view; this module only lays it out.
"""

from __future__ import annotations

import time
from typing import Callable

from PySide6.QtCore import QObject, QUrl, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from stoker.core.commands import Command, Restart, StartModel, Stop, SwitchModel
from stoker.core.snapshot import AppSnapshot
from stoker.core.tray_view import menu_view, tooltip_text, tray_state
from stoker.ui.bridge import SnapshotBridge
from stoker.ui.icons import state_icon


def _clock(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))


def _elide(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TrayController(QObject):
    """Owns the QSystemTrayIcon; windows are opened through the callbacks it is given."""

    open_settings = Signal()
    open_model_settings = Signal(str)  # model path
    open_status = Signal()
    open_about = Signal()
    quit_requested = Signal()

    def __init__(self, bridge: SnapshotBridge, submit: Callable[[Command], None],
                 list_models: Callable[[], tuple], logs_dir: Callable[[], object],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._submit = submit
        self._list_models = list_models  # cached, cheap: (ModelEntry, ...)
        self._logs_dir = logs_dir
        self.tray = QSystemTrayIcon(self)
        self.menu = QMenu()
        self.menu.setObjectName("tray-menu")
        self.menu.aboutToShow.connect(self.rebuild_menu)
        self.tray.setContextMenu(self.menu)
        self.tray.messageClicked.connect(self.open_status)
        self.tray.activated.connect(self._on_activated)
        self.shown_state = "stopped"
        bridge.snapshot_ready.connect(self.on_snapshot)
        self.on_snapshot(bridge.latest())
        self.rebuild_menu()

    def show(self) -> bool:
        self.tray.show()
        return self.tray.isVisible()

    @Slot(object)
    def on_snapshot(self, snap: AppSnapshot | None) -> None:
        self.shown_state = tray_state(snap)
        self.tray.setIcon(state_icon(self.shown_state))
        self.tray.setToolTip(tooltip_text(snap))
        if self.menu.isVisible():
            self.rebuild_menu()

    def _on_activated(self, reason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:  # left click
            self.open_status.emit()

    def _info(self, text: str, name: str | None = None) -> QAction:
        action = self.menu.addAction(_elide(text))
        action.setEnabled(False)
        if name:
            action.setObjectName(name)
        return action

    def _action(self, text: str, name: str, slot, enabled: bool = True,
                menu: QMenu | None = None) -> QAction:
        action = (menu or self.menu).addAction(text)
        action.setObjectName(name)
        action.setEnabled(enabled)
        action.triggered.connect(slot)
        return action

    @Slot()
    def rebuild_menu(self) -> None:
        snap = self._bridge.latest()
        view = menu_view(snap)
        self.menu.clear()
        self._info(view.headline, "info-headline")
        if view.plan:
            self._info(view.plan, "info-plan")
        if view.drafter:
            self._info(view.drafter, "info-drafter")
        for message, advice in view.blockers:
            self._info(f"⚠ {message}", "info-blocker")
            if advice:
                self._info(f"    {advice}", "info-blocker-advice")
        if view.incidents:
            self.menu.addSeparator()
            self._info("Recent incidents", "info-incidents")
            for at, kind, line in view.incidents:
                self._info(f"{_clock(at)}  {kind}: {line}", "info-incident")
        self.menu.addSeparator()
        self._add_models_menu(snap)
        current = snap.model_path if snap else None
        self._action("Model settings…", "action-model-settings",
                     lambda: self.open_model_settings.emit(current), enabled=bool(current))
        self.menu.addSeparator()
        self._action("Start", "action-start", lambda: self._submit(StartModel(current)),
                     enabled=view.can_start)
        self._action("Stop", "action-stop", lambda: self._submit(Stop()), enabled=view.can_stop)
        self._action("Restart", "action-restart", lambda: self._submit(Restart()),
                     enabled=view.can_restart)
        self._action("Copy endpoint", "action-copy-endpoint",
                     lambda: QGuiApplication.clipboard().setText(view.endpoint or ""),
                     enabled=bool(view.endpoint))
        self._action("Open logs folder", "action-open-logs", self._open_logs)
        self.menu.addSeparator()
        self._action("Settings…", "action-settings", self.open_settings.emit)
        self._action("Status window…", "action-status", self.open_status.emit)
        self._action("About Stoker…", "action-about", self.open_about.emit)
        self.menu.addSeparator()
        self._action("Quit", "action-quit", self.quit_requested.emit)

    def _add_models_menu(self, snap: AppSnapshot | None) -> None:
        sub = self.menu.addMenu("Models")
        sub.setObjectName("menu-models")
        models = self._list_models()
        if not models:
            sub.addAction("No models found; add a folder in Settings").setEnabled(False)
            return
        group = QActionGroup(sub)
        current = snap.model_path if snap else None
        for entry in models:
            action = sub.addAction(entry.name)
            action.setObjectName("model:" + entry.path)
            action.setData(entry.path)
            action.setCheckable(True)
            action.setChecked(entry.path == current)
            action.setActionGroup(group)
            if entry.problem:
                action.setEnabled(False)
                action.setToolTip(entry.problem)
            action.triggered.connect(lambda _=False, p=entry.path: self.switch_to(p))

    def switch_to(self, model_path: str) -> None:
        snap = self._bridge.latest()
        if snap is not None and snap.model_path == model_path and snap.state.value in (
                "ready", "starting"):
            return  # already running it: a switch would only restart it
        self._submit(SwitchModel(model_path))

    def _open_logs(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._logs_dir())))

    def find_action(self, name: str) -> QAction | None:
        """The action with this object name in the current menu (tests, screenshots)."""
        for action in self.menu.actions():
            if action.objectName() == name:
                return action
            if action.menu() is not None:
                for inner in action.menu().actions():
                    if inner.objectName() == name:
                        return inner
        return None
