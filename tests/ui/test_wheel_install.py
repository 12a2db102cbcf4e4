"""The wheel a user would get from PyPI: built from this checkout, installed into a fresh venv
outside the source tree, and run from there (`--version`, `inspect`, the tray with its icons).

Nothing may come from the checkout: the commands run with the venv's own scripts, from a
folder outside the clone, with PYTHONPATH cleared, and the test checks that `stoker` is
imported from the venv's site-packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from stoker.base.store import SettingsStore

# Building the wheel and a pip install into a fresh venv come first (up to 20 minutes on a cold cache).
pytestmark = [pytest.mark.engine, pytest.mark.ui, pytest.mark.timeout(1800)]
REPO = Path(__file__).resolve().parents[2]

ICON_CHECK = """
import sys
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv[:1])
import stoker
from stoker.desktop.tray_view import TRAY_STATES
from stoker.desktop.icons import app_icon, render_pixmap, state_icon
for state in TRAY_STATES:
    for panel in ("light", "dark"):
        img = render_pixmap(state, panel, 22).toImage()
        assert sum(1 for x in range(22) for y in range(22) if img.pixelColor(x, y).alpha()) > 40, state
        assert not state_icon(state, panel).isNull()
assert len(app_icon().availableSizes()) >= 9
print(stoker.__path__[0])
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy of the tracked tree, so build leftovers (build/, *.egg-info) never reach the wheel.
    src = out / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((REPO / rel).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    (found,) = out.glob("stoker-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
    r = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return root


def test_the_wheel_holds_the_package_and_its_icons_and_no_top_level_app(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"stoker", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    assert "app" not in tops
    shipped = {str(p.relative_to(REPO / "app")) for p in (REPO / "app" / "stoker" / "resources").rglob("*")
               if p.is_file() and p.suffix in (".svg", ".png")}
    assert len(shipped) >= 20 and shipped <= set(names)  # every icon travels in the wheel
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"[gui_scripts]\nstoker-tray = stoker.cli:tray_main" in entry_points


def run_installed(venv, *args, env, timeout=60):
    return subprocess.run([str(venv / "bin" / "stoker"), *args], cwd=env["HOME_DIR"], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_installed_stoker_runs_outside_the_checkout(venv, demo_model, engine_binary, tmp_path):
    home = tmp_path / "stoker-home"
    SettingsStore(home / "config").update(engine=str(engine_binary))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(STOKER_HOME=str(home), HOME_DIR=str(tmp_path))

    version = run_installed(venv, "--version", env=env)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("stoker 0.") and "unknown" not in version.stdout

    inspect = run_installed(venv, "inspect", str(demo_model), "--json", env=env)
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["summary"]["architecture"] == "llama"

    icons = subprocess.run([str(venv / "bin" / "python"), "-c", ICON_CHECK], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert icons.returncode == 0, icons.stderr
    assert Path(icons.stdout.strip()).is_relative_to(venv) and not Path(icons.stdout.strip()).is_relative_to(REPO)

    # The tray through the gui-scripts entry, for a few seconds under the test display.
    tray = subprocess.Popen([str(venv / "bin" / "stoker-tray"), "--port", "0"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        status = None
        end = time.monotonic() + 60
        while time.monotonic() < end:
            r = run_installed(venv, "status", "--json", env=env)
            if r.returncode == 0 and json.loads(r.stdout).get("tray_shown") is True:
                status = json.loads(r.stdout)
                break
            assert tray.poll() is None, tray.communicate()[1]
            time.sleep(0.3)  # paces the poll
        assert status is not None, "the installed tray never showed its icon"
        time.sleep(3)  # a soak, not a wait: a crash in a later repaint of its icons would show here
        assert tray.poll() is None
        assert run_installed(venv, "stop", env=env).returncode == 0
        out, err = tray.communicate(timeout=60)
    finally:
        if tray.poll() is None:
            tray.kill()
            tray.communicate()
    assert tray.returncode == 0, err
    assert "Traceback" not in err and "reinstall Stoker" not in err
