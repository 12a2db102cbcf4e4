"""The exact files and registry values Stoker writes to appear in a launcher and to start at
login, on every OS (the generators are pure, so Linux CI checks the macOS and Windows ones)."""

from __future__ import annotations

import plistlib

import pytest

from stoker.integration.login_items import (
    APP_ID,
    desktop_entry,
    exec_line,
    launch_agent_plist,
    launch_command,
    launchctl_argv,
    launcher_icon_files,
    run_key_value,
)

LAUNCHER = """[Desktop Entry]
Type=Application
Name=Stoker
GenericName=Local model server
Comment=Local language models in the tray
Exec="/home/ann b/.local/bin/stoker-tray"
Icon=stoker
Terminal=false
Categories=Utility;
StartupNotify=false
Keywords=llama;llm;gguf;model;
"""


def test_launcher_desktop_entry_is_exact():
    assert desktop_entry(("/home/ann b/.local/bin/stoker-tray",)) == LAUNCHER


def test_autostart_entry_adds_only_the_autostart_keys():
    text = desktop_entry(("/opt/Stoker/stoker",), autostart=True)
    assert text == (LAUNCHER.replace('"/home/ann b/.local/bin/stoker-tray"', "/opt/Stoker/stoker")
                    + "X-GNOME-Autostart-enabled=true\nNoDisplay=true\n")


@pytest.mark.parametrize("args, line", [
    (["/usr/bin/stoker", "tray"], "/usr/bin/stoker tray"),
    (["/opt/my apps/stoker"], '"/opt/my apps/stoker"'),
    (["/x", "50%"], "/x 50%%"),  # % starts a field code
    (["/x", '$HOME"q'], '/x "\\\\$HOME\\\\"q"'),  # spec escape, then string-value escape
])
def test_exec_quoting_follows_the_desktop_entry_spec(args, line):
    assert exec_line(args) == line


def test_launch_agent_plist_is_exact():
    data = launch_agent_plist(("/Applications/Stoker.app/Contents/MacOS/Stoker",))
    assert data.decode() == """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
\t<key>KeepAlive</key>
\t<false/>
\t<key>Label</key>
\t<string>io.github.stoker.Stoker</string>
\t<key>LimitLoadToSessionType</key>
\t<string>Aqua</string>
\t<key>ProcessType</key>
\t<string>Interactive</string>
\t<key>ProgramArguments</key>
\t<array>
\t\t<string>/Applications/Stoker.app/Contents/MacOS/Stoker</string>
\t</array>
\t<key>RunAtLoad</key>
\t<true/>
</dict>
</plist>
"""
    venv = plistlib.loads(launch_agent_plist(("/Users/a/.local/pipx/venvs/stoker/bin/stoker-tray",)))
    assert venv["ProgramArguments"] == ["/Users/a/.local/pipx/venvs/stoker/bin/stoker-tray"]
    assert venv["Label"] == APP_ID and venv["RunAtLoad"] is True


def test_launchctl_enables_or_disables_for_the_users_gui_domain():
    assert launchctl_argv("enable", 501) == ("launchctl", "enable", f"gui/501/{APP_ID}")
    assert launchctl_argv("disable", 501) == ("launchctl", "disable", f"gui/501/{APP_ID}")
    with pytest.raises(ValueError):
        launchctl_argv("bootout", 501)


@pytest.mark.parametrize("command, value", [
    ((r"C:\Users\Ann B\pipx\venvs\stoker\Scripts\stoker-tray.exe",),
     r'"C:\Users\Ann B\pipx\venvs\stoker\Scripts\stoker-tray.exe"'),
    ((r"C:\Program Files\Stoker\Stoker.exe",), r'"C:\Program Files\Stoker\Stoker.exe"'),
    ((r"C:\Python311\python.exe", "-m", "stoker", "tray"), r'"C:\Python311\python.exe" -m stoker tray'),
    ((r"C:\S\stoker.exe", "tray", r"D:\my models\a.gguf"), r'"C:\S\stoker.exe" tray "D:\my models\a.gguf"'),
    ((r"C:\S\stoker.exe", 'say "hi"', "C:\\dir\\ x\\"), r'"C:\S\stoker.exe" "say \"hi\"" "C:\dir\ x\\"'),
])
def test_run_key_value_quotes_the_path(command, value):
    assert run_key_value(command) == value


def test_launch_command_prefers_bundle_then_gui_script():
    assert launch_command(True, "/opt/Stoker/stoker", None, None) == ("/opt/Stoker/stoker",)
    assert launch_command(False, "/v/bin/python", "/v/bin/stoker-tray", "/v/bin/stoker") == ("/v/bin/stoker-tray",)
    assert launch_command(False, "/v/bin/python", None, "/v/bin/stoker") == ("/v/bin/stoker", "tray")
    assert launch_command(False, "/v/bin/python", None, None) == ("/v/bin/python", "-m", "stoker", "tray")


def test_launcher_icons_cover_each_size_and_the_scalable_svg():
    files = launcher_icon_files((16, 512))
    assert files == (("icons/hicolor/16x16/stoker.png", "icons/hicolor/16x16/apps/stoker.png"),
                     ("icons/hicolor/512x512/stoker.png", "icons/hicolor/512x512/apps/stoker.png"),
                     ("icons/stoker.svg", "icons/hicolor/scalable/apps/stoker.svg"))
