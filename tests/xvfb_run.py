"""Run a command under a private Xvfb display with a system-tray host (trayer).

Used by packaging/test.sh so the UI tests meet a real tray, as on a Linux desktop.
When Xvfb is missing (a dev machine without it) the command runs as it is and the UI
tests skip themselves. Usage: python -m tests.xvfb_run CMD [ARGS...]
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
import time


def free_display() -> int:
    for n in range(90, 200):
        if not os.path.exists(f"/tmp/.X11-unix/X{n}") and not os.path.exists(f"/tmp/.X{n}-lock"):
            return n
    raise RuntimeError("no free X display number between :90 and :199")


def wait_for_display(display: str, xvfb: subprocess.Popen, deadline_s: float = 15.0) -> None:
    sock = f"/tmp/.X11-unix/X{display.lstrip(':')}"
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if xvfb.poll() is not None:
            raise RuntimeError(f"Xvfb exited with {xvfb.returncode}")
        if os.path.exists(sock):
            return
        time.sleep(0.05)  # paces the poll
    raise RuntimeError("Xvfb did not come up within 15 s")


def wait_for_tray_host(display: str, host: subprocess.Popen, deadline_s: float = 30.0) -> None:
    """Until the tray host owns the system-tray selection (_NET_SYSTEM_TRAY_S0, the freedesktop
    tray protocol): a tray icon shown before that finds no tray, and Qt re-docks it when the
    host appears mid-test. Asked of the X server itself through libX11 (what Qt's
    isSystemTrayAvailable reads), not guessed with a sleep: under load trayer takes seconds."""
    x11 = ctypes.CDLL(ctypes.util.find_library("X11") or "libX11.so.6")
    x11.XOpenDisplay.restype, x11.XOpenDisplay.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XGetSelectionOwner.restype = ctypes.c_ulong
    x11.XGetSelectionOwner.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    dpy = x11.XOpenDisplay(display.encode())
    if not dpy:
        raise RuntimeError(f"cannot open the X display {display}")
    try:
        selection = x11.XInternAtom(dpy, b"_NET_SYSTEM_TRAY_S0", 0)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if host.poll() is not None:
                raise RuntimeError(f"the tray host exited with {host.returncode}")
            if x11.XGetSelectionOwner(dpy, selection):
                return
            time.sleep(0.05)  # paces the poll
    finally:
        x11.XCloseDisplay(dpy)
    raise RuntimeError(f"the tray host did not take the system tray within {deadline_s:g} s")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which("Xvfb"):
        print("xvfb_run: Xvfb not found; running without a display (UI tests will skip).",
              file=sys.stderr)
        return subprocess.call(argv)
    display = f":{free_display()}"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    helpers: list[subprocess.Popen] = []
    try:
        wait_for_display(display, xvfb)
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb")
        env.pop("WAYLAND_DISPLAY", None)
        if shutil.which("trayer"):
            helpers.append(subprocess.Popen(
                ["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel",
                 "--width", "200", "--height", "28", "--transparent", "false"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            env["STOKER_TEST_TRAY_HOST"] = "trayer"
            wait_for_tray_host(display, helpers[-1])
        return subprocess.call(argv, env=env)
    finally:
        for p in helpers + [xvfb]:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
