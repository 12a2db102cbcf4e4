"""The tray icon and its menu: the face of Stoker a user sees every day.

The icon and tooltip follow every snapshot; the menu is rebuilt from the latest snapshot
each time it opens, so it can never show a state older than the icon. Each resident model
(snapshot.engines) gets a line with its state, bytes per device and idle time, whose
submenu loads, unloads, pins it or opens its settings; Models ▸ switches to one model or
loads another beside the ones resident. This machine's RPC worker, once started, has a line
too (state, address, what it lends, restarts) whose submenu shows its details and last
incident and starts or stops it; an RPC worker that came back is offered as "Use HOST:PORT
again". Every action sends a command
(stoker.fleet.commands) or opens a window; nothing here waits for the engine.
What to show is decided in stoker.desktop.tray_view; this module only lays it out.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QUrl, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.icons import state_icon
from stoker.desktop.services import model_key
from stoker.desktop.tray_view import (
    EngineLine,
    WorkerLine,
    menu_view,
    resident_keys,
    switch_does_something,
    tooltip_text,
    tray_state,
)
from stoker.fleet.commands import (
    CancelRender,
    Command,
    LoadModel,
    PinModel,
    Restart,
    StartModel,
    StartWorker,
    Stop,
    StopWorker,
    SwitchModel,
    UnloadModel,
    UseWorkerAgain,
)
from stoker.fleet.snapshot import AppSnapshot


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
    open_connect = Signal()  # "Connect an app…" (stoker/desktop/connect_dialog.py)
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
        self.activity: str | None = None  # a download's progress line ("Get a model…")
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
        self.tray.setToolTip(tooltip_text(snap) + (f"\n{self.activity}" if self.activity else ""))
        if self.menu.isVisible():
            self.rebuild_menu()

    @Slot(str)
    def set_activity(self, line: str | None) -> None:
        """A line about work beside the engine (a model downloading), in the tooltip and menu."""
        self.activity = line or None
        self.on_snapshot(self._bridge.latest())

    def _on_activated(self, reason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:  # left click
            self.open_status.emit()

    def _info(self, text: str, name: str | None = None, menu: QMenu | None = None) -> QAction:
        action = (menu or self.menu).addAction(_elide(text))
        action.setEnabled(False)
        if _elide(text) != text:
            action.setToolTip(text)  # the whole line, where the menu shows it cut
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
        view = menu_view(snap, now=time.time())
        for action in self.menu.actions():  # clear() keeps submenus alive: free the old ones
            if action.menu() is not None:
                action.menu().deleteLater()
        self.menu.clear()
        self._info(view.headline, "info-headline")
        if self.activity:
            self._info(self.activity, "info-activity")
        if view.plan:
            self._info(view.plan, "info-plan")
        if view.drafter:
            self._info(view.drafter, "info-drafter")
        for message, advice in view.blockers:
            self._info(f"⚠ {message}", "info-blocker")
            if advice:
                self._info(f"    {advice}", "info-blocker-advice")
        for offer in view.offers:
            self._action(offer.label, f"use-worker:{offer.endpoint}",
                         lambda _=False, ep=offer.endpoint: self._submit(UseWorkerAgain(ep)))
            self._info(f"    {offer.detail}", "info-offer")
        if view.incidents:
            self.menu.addSeparator()
            self._info("Recent incidents", "info-incidents")
            for at, kind, line in view.incidents:
                self._info(f"{_clock(at)}  {kind}: {line}", "info-incident")
        if view.engines:
            self.menu.addSeparator()
            self._info("Loaded models", "info-engines")
            for engine_line in view.engines:
                self._add_engine_menu(engine_line)
        if view.worker is not None:
            self.menu.addSeparator()
            self._add_worker_menu(view.worker)
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
        self._action(f"Copy endpoint ({view.endpoint})" if view.endpoint else "Copy endpoint",
                     "action-copy-endpoint",
                     lambda: QGuiApplication.clipboard().setText(view.endpoint or ""),
                     enabled=bool(view.endpoint))
        self._action("Open logs folder", "action-open-logs", self._open_logs)
        self.menu.addSeparator()
        self._action("Connect an app…", "action-connect", self.open_connect.emit)
        self._action("Settings…", "action-settings", self.open_settings.emit)
        self._action("Status window…", "action-status", self.open_status.emit)
        self._action("About Stoker…", "action-about", self.open_about.emit)
        self.menu.addSeparator()
        self._action("Quit", "action-quit", self.quit_requested.emit)

    def _add_engine_menu(self, line: EngineLine) -> None:
        """One resident model: its line in the menu, and a submenu of what can be done."""
        sub = self.menu.addMenu(_elide(line.title))
        path = line.model_path
        sub.menuAction().setObjectName(f"engine:{path or line.model_id}")
        for detail in line.details:
            self._info(detail, "info-engine-detail", menu=sub)
        sub.addSeparator()

        def load() -> None:
            if path:  # enabled only with a path
                self._submit(LoadModel(path))

        def cancel() -> None:
            if path:
                self._submit(CancelRender(path, "cancelled in the tray"))

        self._action("Load", f"load:{path}", load, enabled=bool(path) and line.can_load, menu=sub)
        self._action("Unload", f"unload:{path}", lambda: self._submit(UnloadModel(path)),
                     enabled=bool(path) and line.can_unload, menu=sub)
        if line.can_cancel:  # an image engine mid-render: stopping it is the only way to cancel
            self._action("Cancel render", f"cancel:{path}", cancel, menu=sub)
        pin = self._action("Pin (keep loaded)", f"pin:{path}",
                           lambda checked: self._submit(PinModel(path, bool(checked))),
                           enabled=bool(path), menu=sub)
        pin.setCheckable(True)
        pin.setChecked(line.pinned)
        self._action("Model settings…", f"engine-settings:{path}",
                     lambda: self.open_model_settings.emit(path), enabled=bool(path), menu=sub)

    def _add_worker_menu(self, line: WorkerLine) -> None:
        """This machine's RPC worker: its line, and a submenu with its details, Start, Stop."""
        sub = self.menu.addMenu(_elide(line.title))
        sub.menuAction().setObjectName("worker")
        for detail in line.details:
            self._info(detail, "info-worker-detail", menu=sub)
        if line.last_incident is not None:
            at, text = line.last_incident
            self._info(f"Last incident {_clock(at)}: {text}", "info-worker-incident", menu=sub)
        sub.addSeparator()
        self._action("Start", "worker-start", lambda: self._submit(StartWorker()), enabled=line.can_start,
                     menu=sub)
        self._action("Stop", "worker-stop", lambda: self._submit(StopWorker()), enabled=line.can_stop,
                     menu=sub)

    def _add_models_menu(self, snap: AppSnapshot | None) -> None:
        sub = self.menu.addMenu("Models")
        sub.setObjectName("menu-models")
        models = self._list_models()
        if not models:
            sub.addAction("No models found; add a folder in Settings").setEnabled(False)
            return
        self._info("Switch to (the others unload):", "info-switch", menu=sub)
        group = QActionGroup(sub)
        current = model_key(snap.model_path) if snap and snap.model_path else None
        resident = resident_keys(snap)
        for entry in models:
            key = model_key(entry.path)
            action = sub.addAction(entry.name + ("  · loaded" if key in resident else ""))
            action.setObjectName("model:" + entry.path)
            action.setData(entry.path)
            action.setCheckable(True)
            action.setChecked(key == current)
            action.setActionGroup(group)
            if entry.problem:
                action.setEnabled(False)
                action.setToolTip(entry.problem)
            action.triggered.connect(lambda _=False, p=entry.path: self.switch_to(p))
        sub.addSeparator()
        beside = sub.addMenu("Load beside the others")
        beside.menuAction().setObjectName("menu-load-beside")
        for entry in models:
            loaded = model_key(entry.path) in resident
            action = self._action(entry.name + ("  · loaded" if loaded else ""),
                                  "load-beside:" + entry.path,
                                  lambda _=False, p=entry.path: self._submit(LoadModel(p)),
                                  enabled=not (loaded or entry.problem), menu=beside)
            if entry.problem:
                action.setToolTip(entry.problem)

    def switch_to(self, model_path: str) -> None:
        if not switch_does_something(self._bridge.latest(), model_key(model_path)):
            return  # running it alone already: a switch would do nothing
        self._submit(SwitchModel(model_path))

    def _open_logs(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self._logs_dir())))

    def find_action(self, name: str, menu: QMenu | None = None) -> QAction | None:
        """The action with this object name in the current menu or any submenu (tests,
        screenshots)."""
        for action in (menu or self.menu).actions():
            if action.objectName() == name:
                return action
            sub = action.menu()  # typed QObject; a submenu is a QMenu
            if isinstance(sub, QMenu):
                found = self.find_action(name, sub)
                if found is not None:
                    return found
        return None
