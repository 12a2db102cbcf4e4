"""Desktop integration writers in a temp home: the Linux launcher files go in and come out
exactly; the macOS LaunchAgent and the Windows Run value are written where each OS reads them."""

from __future__ import annotations

import json
import plistlib
import shutil
import struct
import subprocess
import sys
import types

import pytest

from stoker.integration import autostart
from stoker.integration import desktop_entry as desktop
from stoker.integration.login_items import APP_ID, desktop_entry, launch_agent_plist, run_key_value
from stoker.resources import APP_ICON_SIZES, app_icon_png, read_resource

CMD = ("/opt/Stoker/stoker",)


@pytest.fixture
def xdg(tmp_path, monkeypatch, stoker_home):
    share = tmp_path / "share"
    monkeypatch.setenv("XDG_DATA_HOME", str(share))
    monkeypatch.setattr(desktop.sys, "platform", "linux")
    return share


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_shipped_pngs_have_the_size_their_folder_names():
    for size in APP_ICON_SIZES:
        data = read_resource(app_icon_png(size))
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == (size, size)


def test_install_then_uninstall_leaves_the_data_home_as_it_was(xdg):
    (xdg / "applications").mkdir(parents=True)
    (xdg / "applications" / "other.desktop").write_text("[Desktop Entry]\nName=Other\n")
    before = tree(xdg)
    result = desktop.install_launcher(CMD)
    entry = xdg / "applications" / "stoker.desktop"
    assert entry.read_text() == desktop_entry(CMD, icon="stoker")
    for size in APP_ICON_SIZES:
        icon = xdg / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "stoker.png"
        assert icon.read_bytes() == read_resource(app_icon_png(size))
    assert (xdg / "icons/hicolor/scalable/apps/stoker.svg").read_bytes() == read_resource("icons/stoker.svg")
    assert desktop.is_installed()
    record = json.loads(desktop.record_file().read_text())
    assert set(record["files"]) == set(result.files) and str(entry) in record["files"]
    # Everything written is in the record, nothing else is.
    written = {str(xdg / p) for p in tree(xdg) if (xdg / p).is_file()} - {str(xdg / p) for p in before}
    assert written == set(record["files"])

    desktop.install_launcher(CMD)  # a second install replaces the first, no duplicates
    assert len(json.loads(desktop.record_file().read_text())["files"]) == len(record["files"])

    removed = desktop.uninstall_launcher()
    assert set(removed.files) == set(record["files"])
    assert tree(xdg) == before and (xdg / "applications" / "other.desktop").is_file()
    assert not desktop.is_installed() and not desktop.record_file().exists()
    assert desktop.uninstall_launcher().files == ()


@pytest.mark.skipif(not shutil.which("desktop-file-validate"), reason="desktop-file-utils not installed")
def test_written_entries_pass_desktop_file_validate(xdg, tmp_path, monkeypatch):
    desktop.install_launcher(("/home/ann b/.local/bin/stoker-tray", "--model=50% a.gguf"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    autostart.set_autostart(True, CMD, system="linux")
    for entry in (xdg / "applications" / "stoker.desktop", autostart.autostart_file()):
        r = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
        assert r.returncode == 0 and "error" not in r.stdout, r.stdout


def test_uninstall_keeps_a_file_install_did_not_write(xdg):
    desktop.install_launcher(CMD)
    mine = xdg / "icons" / "hicolor" / "48x48" / "apps" / "mine.png"
    mine.write_bytes(b"user's own")
    desktop.uninstall_launcher()
    assert mine.read_bytes() == b"user's own"


def test_the_command_round_trips_through_the_cli(xdg, stoker_home):
    import os

    env = dict(os.environ, XDG_DATA_HOME=str(xdg), STOKER_HOME=str(stoker_home))
    run = lambda *a: subprocess.run([sys.executable, "-m", "stoker", "desktop", *a, "--json"],  # noqa: E731
                                    env=env, capture_output=True, text=True, timeout=60)
    out = json.loads(run("install").stdout)
    assert any(f.endswith("applications/stoker.desktop") for f in out["files"])
    assert json.loads(run("status").stdout)["installed"] is True
    gone = json.loads(run("uninstall").stdout)
    assert set(gone["files"]) == set(out["files"]) and tree(xdg) == []


def test_desktop_install_elsewhere_says_what_to_do(monkeypatch, stoker_home):
    monkeypatch.setattr(desktop.sys, "platform", "darwin")
    with pytest.raises(desktop.DesktopError, match="Stoker.app"):
        desktop.install_launcher(CMD)


def test_launch_agent_written_where_launchd_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(autostart, "_launchctl", lambda action: calls.append(action) or True)
    said = autostart.set_autostart(True, ["/Applications/Stoker.app/Contents/MacOS/Stoker"], system="darwin")
    plist = tmp_path / "Library" / "LaunchAgents" / f"{APP_ID}.plist"
    assert said.done and str(plist) in said.sentence
    assert plist.read_bytes() == launch_agent_plist(("/Applications/Stoker.app/Contents/MacOS/Stoker",))
    assert plistlib.loads(plist.read_bytes())["RunAtLoad"] is True
    assert autostart.set_autostart(False, system="darwin").done and not plist.exists()
    assert calls == ["enable", "disable"]


def test_a_writer_that_cannot_write_says_so_in_one_sentence(tmp_path, monkeypatch):
    blocker = tmp_path / "Library"
    blocker.write_text("a file where a folder must be")
    monkeypatch.setenv("HOME", str(tmp_path))
    said = autostart.set_autostart(True, ["/x"], system="darwin")
    assert not said.done and said.sentence.startswith("Could not set up starting at login")
    assert "\n" not in said.sentence


class FakeWinreg(types.SimpleNamespace):
    """The winreg calls autostart makes, on a dict (real winreg exists only on Windows)."""

    def __init__(self):
        super().__init__(HKEY_CURRENT_USER="HKCU", KEY_SET_VALUE=2, REG_SZ=1, values={})
        fake = self

        class Key:
            def __init__(self, path):
                self.path = path

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        def CreateKeyEx(root, path, reserved, access):
            assert (root, reserved, access) == ("HKCU", 0, 2)
            return Key(path)

        def SetValueEx(key, name, reserved, kind, value):
            assert kind == 1
            fake.values[(key.path, name)] = value

        def DeleteValue(key, name):
            if (key.path, name) not in fake.values:
                raise FileNotFoundError(name)
            del fake.values[(key.path, name)]

        self.CreateKeyEx, self.SetValueEx, self.DeleteValue = CreateKeyEx, SetValueEx, DeleteValue


def test_run_key_value_written_and_removed(monkeypatch):
    fake = FakeWinreg()
    monkeypatch.setitem(sys.modules, "winreg", fake)
    cmd = [r"C:\Users\Ann B\AppData\Local\Programs\Stoker\Stoker.exe"]
    said = autostart.set_autostart(True, cmd, system="win32")
    assert said.done
    assert fake.values == {(r"Software\Microsoft\Windows\CurrentVersion\Run", "Stoker"): run_key_value(cmd)}
    assert fake.values[(autostart.RUN_KEY, "Stoker")] == r'"C:\Users\Ann B\AppData\Local\Programs\Stoker\Stoker.exe"'
    assert autostart.set_autostart(False, system="win32").done and fake.values == {}
    assert autostart.set_autostart(False, system="win32").done  # already gone: still fine
