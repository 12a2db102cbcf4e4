"""The tray application: supervisor, snapshot bridge, tray, notifications, windows, control.

`StokerApp` wires a running Supervisor to the widgets (snapshots in through the bridge,
commands out through `submit`) and keeps the windows it opened. `run_tray` is what
`stoker` runs: when no system tray exists (no display, an offscreen platform, a desktop
without a tray host) it says so in one line and runs headless exactly like
`stoker run --headless`. So does a Qt that cannot start (its platform plugin cannot load:
shell.qt_platform asks a child process first and names the missing library). Quit stops
the engine cleanly before the event loop ends, and so do SIGTERM, SIGHUP, Ctrl-C and the
desktop session's end (commitDataRequest, aboutToQuit). A second `stoker` asks the running
one to show its status window and exits 0. Nothing here blocks the GUI thread on the engine.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from stoker.base.paths import stoker_paths, storage_sentence
from stoker.desktop.about_box import AboutDialog
from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.connect_dialog import ConnectDialog
from stoker.desktop.icons import app_icon
from stoker.desktop.model_settings import ModelSettingsDialog
from stoker.desktop.notify import Notifier
from stoker.desktop.services import Services
from stoker.desktop.settings import SettingsDialog
from stoker.desktop.status_window import StatusWindow
from stoker.desktop.tray import TrayController
from stoker.desktop.workers import run_in_background
from stoker.engines.process import reap_orphans
from stoker.errors import UserError
from stoker.fleet.commands import Shutdown, StartModel
from stoker.fleet.launcher import RealPreparer
from stoker.instance.control import AlreadyRunning, ControlServer, request
from stoker.instance.instance import GatewayError, Instance, gateway_port
from stoker.integration.qt_platform import qt_start_problem

NO_TRAY_LINE = ("stoker: no system tray is available here; running headless "
                "(like `stoker run --headless`).")


class StokerApp(QObject):
    finished = Signal()  # the supervisor has shut down after Quit
    remote_quit = Signal()  # `stoker stop` from the control thread
    remote_show = Signal()  # a second `stoker` asked for the status window

    def __init__(self, supervisor, services: Services | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.supervisor = supervisor
        self.services = services or Services()
        self.bridge = SnapshotBridge(self)
        self.models: tuple = ()
        self.tray = TrayController(self.bridge, self.submit, lambda: self.models,
                                   self.services.logs_dir, self)
        self.notifier = Notifier(self.bridge, self.tray.tray, parent=self)
        self.settings_dialog: SettingsDialog | None = None
        self.model_dialogs: dict[str, ModelSettingsDialog] = {}
        self.status_window: StatusWindow | None = None
        self.about_dialog: AboutDialog | None = None
        self.connect_dialog: ConnectDialog | None = None
        self.quitting = False
        self.signal_timer: QTimer | None = None  # wakes Python for signal handlers (quit_on_signals)
        self.tray_shown_flag = False  # written on the GUI thread, read by the control thread
        self.remote_quit.connect(self.quit)
        self.remote_show.connect(self.open_status)
        self.tray.open_settings.connect(self.open_settings)
        self.tray.open_model_settings.connect(self.open_model_settings)
        self.tray.open_status.connect(self.open_status)
        self.tray.open_about.connect(self.open_about)
        self.tray.open_connect.connect(self.open_connect)
        self.tray.quit_requested.connect(self.quit)
        self.tray.menu.aboutToShow.connect(self.refresh_models)
        self._unsubscribe = supervisor.subscribe(self.bridge.push)
        self.refresh_models()

    @property
    def tray_shown(self) -> bool:
        return self.tray.tray.isVisible()

    def show_tray(self) -> bool:
        self.tray_shown_flag = self.tray.show()
        return self.tray_shown_flag

    def submit(self, command) -> None:
        if not self.quitting:
            self.supervisor.submit(command)

    @Slot()
    def refresh_models(self) -> None:
        """Re-list models in the background; the menu shows the newest list it has."""

        def done(models, error) -> None:
            if error is None:
                self.models = tuple(models)

        run_in_background(self.services.models, done)

    @Slot()
    def open_settings(self) -> SettingsDialog:
        if self.settings_dialog is None or not self.settings_dialog.isVisible():
            self.settings_dialog = SettingsDialog(self.services, self.bridge, self.submit,
                                                  on_progress=self.tray.set_activity)
            self.settings_dialog.accepted.connect(self.refresh_models)
        self._raise(self.settings_dialog)
        return self.settings_dialog

    @Slot(str)
    def open_model_settings(self, model_path: str) -> ModelSettingsDialog:
        dialog = self.model_dialogs.get(model_path)
        if dialog is None or not dialog.isVisible():
            dialog = ModelSettingsDialog(model_path, self.services, self.bridge, self.submit)
            self.model_dialogs[model_path] = dialog
        self._raise(dialog)
        return dialog

    @Slot()
    def open_status(self) -> StatusWindow:
        if self.status_window is None:
            self.status_window = StatusWindow(self.bridge, self.services)
        self._raise(self.status_window)
        return self.status_window

    @Slot()
    def open_about(self) -> AboutDialog:
        if self.about_dialog is None or not self.about_dialog.isVisible():
            self.about_dialog = AboutDialog(self.services)
        self._raise(self.about_dialog)
        return self.about_dialog

    @Slot()
    def open_connect(self) -> ConnectDialog:
        if self.connect_dialog is None or not self.connect_dialog.isVisible():
            self.connect_dialog = ConnectDialog()
        self._raise(self.connect_dialog)
        return self.connect_dialog

    @staticmethod
    def _raise(widget) -> None:
        widget.show()
        widget.raise_()
        widget.activateWindow()

    @Slot()
    def quit(self) -> None:
        """Stop the engine cleanly, then end: the wait happens off the GUI thread."""
        if self.quitting:
            return
        self.quitting = True
        self.tray.tray.hide()
        self.tray_shown_flag = False
        for w in [self.settings_dialog, self.status_window, self.about_dialog, self.connect_dialog,
                  *self.model_dialogs.values()]:
            if w is not None:
                w.close()
        self.supervisor.submit(Shutdown())
        run_in_background(lambda: self.supervisor.join(60), self._stopped)

    def _stopped(self, _result, _error) -> None:
        self._unsubscribe()
        self.finished.emit()


def display_available(env: Mapping[str, str] | None = None) -> bool:
    """Could Qt open a real window system here? (Without one, QApplication would abort.)"""
    env = os.environ if env is None else env
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform.startswith(("offscreen", "minimal")):
        return False
    if sys.platform.startswith("linux"):
        return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))
    return True


def control_handler(stoker: StokerApp, instance) -> Callable[[dict], dict]:
    """Answers `stoker status / ps / load / unload / stop` like `stoker run` (the Instance's
    answers, with whether the icon shows), plus `show`, which a second `stoker` sends to
    bring up this one's status window. Runs on the control thread: it only reads the latest
    snapshot and a flag, submits commands, and asks the GUI thread (queued signals) to quit
    or to show the window."""

    def answer(req: dict) -> dict:
        if req.get("op") == "show":
            stoker.remote_show.emit()
            return {"ok": True, "shown": True}
        return instance.answer(req)

    return answer


def run_tray(model: str | None = None, *, headless: Callable[[], int], preparer=None,
             port: int | None = None) -> int:
    """`stoker` / `stoker tray` / `stoker run`: the tray app, or `headless()` when no tray
    exists here. The CLI passes `headless` (exactly `stoker run MODEL --headless`), so the
    desktop never imports the CLI above it."""
    if not display_available():
        print(NO_TRAY_LINE, file=sys.stderr)
        return headless()
    if sys.platform.startswith("linux") and QApplication.instance() is None:

        problem = qt_start_problem()  # QApplication would abort the process with qFatal
        if problem is not None:
            print(f"stoker: {problem}", file=sys.stderr)
            return headless()
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    if not QSystemTrayIcon.isSystemTrayAvailable():
        print(NO_TRAY_LINE, file=sys.stderr)
        return headless()

    try:
        paths = stoker_paths().ensure()
    except OSError as exc:
        raise UserError(storage_sentence(exc)) from None
    holder: dict = {}
    control = ControlServer(lambda req: holder["answer"](req) if "answer" in holder
                            else {"ok": False, "error": "Stoker is still starting; try again"})
    try:
        control.claim()
    except AlreadyRunning as exc:
        shown = request("show", timeout=5.0)
        if shown and shown.get("ok"):
            who = f" (pid {exc.pid})" if exc.pid else ""
            print(f"stoker: Stoker is already running{who}; its status window is open now.")
            return 0
        print(f"stoker: {exc}.")
        return 0
    instance = None
    try:
        reap_orphans(paths.run)
        if preparer is None:

            preparer = RealPreparer()
        flags: dict = {}
        try:
            instance = Instance(preparer, port=gateway_port(port),
                                extra_models=(model,) if model and os.path.isfile(model) else (),
                                tray_shown=lambda: flags["stoker"].tray_shown_flag if "stoker" in flags else False,
                                on_stop=lambda: flags["stoker"].remote_quit.emit())
        except GatewayError as exc:
            raise UserError(str(exc)) from None
        supervisor = instance.supervisor
        app.setQuitOnLastWindowClosed(False)
        app.setApplicationName("Stoker")
        app.setWindowIcon(app_icon())
        stoker = StokerApp(supervisor)
        flags["stoker"] = stoker
        holder["answer"] = control_handler(stoker, instance)
        stoker.finished.connect(app.quit)
        quit_on_session_end(app, stoker)
        try:
            instance.start()
        except GatewayError as exc:
            raise UserError(str(exc)) from None
        control.serve()
        if not stoker.show_tray():
            print(NO_TRAY_LINE, file=sys.stderr)  # the host vanished between check and show
        supervisor.submit(StartModel(model))
        previous = quit_on_signals(stoker)
        try:
            app.exec()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        if not stoker.quitting:  # the loop ended some other way: still stop the engine cleanly
            supervisor.submit(Shutdown())
            supervisor.join(60)
        return 0
    finally:
        if instance is not None:
            instance.close()
        control.close()


def quit_on_session_end(app: QApplication, stoker: StokerApp) -> None:
    """The desktop session ending (log-out, shutdown) is a Quit: stop the engine first."""
    app.commitDataRequest.connect(lambda _manager: stoker.quit())

    def about_to_quit() -> None:
        if not stoker.quitting:  # the loop is ending without Quit: begin the stop at once
            stoker.quitting = True
            stoker.supervisor.submit(Shutdown())

    app.aboutToQuit.connect(about_to_quit)


def quit_on_signals(stoker: StokerApp) -> dict:
    """SIGTERM, SIGHUP and SIGINT act like Quit. Python runs signal handlers only between
    bytecodes, so a timer wakes the interpreter while Qt's loop waits. Returns the handlers
    it replaced."""
    def on_signal(signum, frame) -> None:
        stoker.remote_quit.emit()

    wanted = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {s: signal.signal(s, on_signal) for s in wanted}
    stoker.signal_timer = QTimer(stoker)
    stoker.signal_timer.timeout.connect(lambda: None)
    stoker.signal_timer.start(200)
    return previous
