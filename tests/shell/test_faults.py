"""The fault matrix: Stoker under kill, hang, bad engines, bad settings, full and read-only
folders, races and a Qt that cannot start, on the real llama-server and the demo model.

Each row is a fault a hostile tester tried (issue 10) and what must hold afterwards:
1. kill -9 of Stoker (headless and tray): the engine is gone within 2 s.
2. a SIGSTOPped engine is killed within its health budget (3 probes 2 s apart; 15 s allowed)
   and replaced (the supervisor's half: marked); the reload is waited for, not timed.
3. `--engine` naming a non-executable copy, a copy without libllama.so, a script that exits 1:
   one sentence naming it, a non-zero exit, and no other build started (Stoker's own build
   is installed in the test home, so a silent substitution would have somewhere to go).
4. a corrupt settings file and bad override values: a sentence on stderr and in
   `stoker status --json` problems, and the launch goes on.
5. read-only and full config folders: one sentence, no traceback, every stored file
   byte-identical; Ctrl-C at any moment exits 0 and never reads as "no build".
6. (the header walk is tests/shell/test_gguf_fuzz.py)
7. (the planning pipeline is tests/shell/test_plan_pipeline.py)
8. two `stoker run` at once leave exactly one running; a second tray start asks the first
   to show its status window and exits 0; a Qt whose xcb plugin cannot load says which
   library to install and runs headless.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def stoker(*args, timeout=60, env=None):
    return subprocess.run([sys.executable, "-m", "stoker", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=env or os.environ.copy())


class Stoker:
    """A long-running `stoker …` subprocess; stdout and stderr lines collected apart."""

    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "stoker", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env or os.environ.copy())
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, sink), daemon=True)
                         for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, sink):
        for line in stream:
            sink.append(line.rstrip("\n"))

    def wait_line(self, prefix: str, timeout: float = 90, stream: str = "out") -> str:
        lines = self.out if stream == "out" else self.err
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(lines):
                if line.startswith(prefix) or (stream == "err" and prefix in line):
                    return line
            if self.proc.poll() is not None:
                self.drained()
                for line in list(lines):
                    if line.startswith(prefix) or (stream == "err" and prefix in line):
                        return line
                break
            time.sleep(0.05)  # paces the poll
        raise AssertionError(f"no line {prefix!r}; stdout: {self.out}; stderr: {self.err}")

    def drained(self, timeout: float = 30) -> None:
        """Once the process has ended: wait until both readers have read to the end of its
        output (the pipes close when it exits), so `out` and `err` hold every line."""
        for reader in self._readers:
            reader.join(timeout)
        assert not any(r.is_alive() for r in self._readers), "the output pipes never closed"

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.drained()


def status_json(env=None) -> dict:
    result = stoker("status", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_status(predicate, timeout=90, env=None) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        result = stoker("status", "--json", env=env)
        if result.returncode == 0:
            last = json.loads(result.stdout)
            if predicate(last):
                return last
        time.sleep(0.2)  # paces the poll
    raise AssertionError(f"status never matched; last: {last}")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.02)  # paces the poll
    return False


def engines_under(home: Path) -> list[psutil.Process]:
    """Any llama-server (whatever its binary) started under this STOKER_HOME."""
    found = []
    for proc in psutil.process_iter(["name", "status"]):
        try:
            if proc.info["name"] != "llama-server" or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("XDG_CONFIG_HOME", "").startswith(str(home)):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def home(stoker_home, engine_dir):
    """A test home with Stoker's own CPU build installed (what `stoker setup` leaves)."""
    own = stoker_home / "data" / "engines" / "llama-server"
    own.mkdir(parents=True)
    (own / engine_dir.name).symlink_to(engine_dir, target_is_directory=True)
    yield stoker_home
    for proc in engines_under(stoker_home):
        proc.kill()


def run_args(demo_model, *extra):
    return ("run", str(demo_model), "--headless", "--ctx", "1024", "--slots", "1", "--port", "0", *extra)


# ------------------------------------------------------------------ 1. orphans


def test_kill_9_of_headless_stoker_takes_the_engine_within_2_s(home, demo_model):
    run = Stoker(*run_args(demo_model))
    try:
        run.wait_line("ready: ")
        engine_pid = status_json()["pid"]
        run.proc.kill()
        run.proc.wait()
        assert gone_within(engine_pid, 2.0), "the engine outlived a kill -9 of Stoker"
    finally:
        run.close()
    assert engines_under(home) == []


def _tray_env():
    if not os.environ.get("DISPLAY"):
        pytest.skip("needs the test display with a tray host (python -m tests.xvfb_run)")
    env = os.environ.copy()
    env.pop("QT_QPA_PLATFORM", None)
    return env


def test_kill_9_of_the_tray_takes_the_engine_within_2_s(home, demo_model):
    env = _tray_env()
    tray = Stoker("tray", str(demo_model), "--port", "0", env=env)
    try:
        ready = wait_status(lambda s: s["state"] == "ready", env=env)
        assert ready["tray_shown"] is True, (tray.out, tray.err)
        tray.proc.kill()
        tray.proc.wait()
        assert gone_within(ready["pid"], 2.0), "the engine outlived a kill -9 of the tray"
    finally:
        tray.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_the_tray_quits_cleanly_on_sigterm_and_sighup(home, demo_model, sig):
    env = _tray_env()
    tray = Stoker("tray", str(demo_model), "--port", "0", env=env)
    try:
        ready = wait_status(lambda s: s["state"] == "ready", env=env)
        tray.proc.send_signal(sig)
        assert tray.proc.wait(30) == 0  # like Quit: the engine stopped, then a clean exit
        assert gone_within(ready["pid"], 1.0)
    finally:
        tray.close()
    assert engines_under(home) == []


# ------------------------------------------------------------------ 2. hang (the supervisor's half)


# The supervisor's own half of a hang is deciding it: HEALTH_FAILURES probes HEALTH_INTERVAL_S
# apart (3 x 2 s) go unanswered, then the engine is killed. That part is bounded here, with
# room for a probe's own timeout and a busy machine. The replacement's load is the machine's
# (it took past the old 12 s bound beside a CPU load, loaded run 10 of issue 24), so it is
# waited for, not timed.
HANG_DECIDED_WITHIN_S = 15.0


def test_a_sigstopped_engine_is_killed_within_its_health_budget_and_replaced(home, demo_model):
    run = Stoker(*run_args(demo_model))
    try:
        run.wait_line("ready: ")
        first = status_json()["pid"]
        t = time.monotonic()
        os.kill(first, signal.SIGSTOP)
        assert gone_within(first, HANG_DECIDED_WITHIN_S), \
            f"the stopped engine was still there {HANG_DECIDED_WITHIN_S:g} s later"
        killed_after = time.monotonic() - t
        again = wait_status(lambda s: s["state"] == "ready" and s["pid"] != first, timeout=120)
        assert again["restarts"] == 1
        print(f"\nhung engine killed {killed_after:.1f} s after SIGSTOP; its replacement READY "
              f"{time.monotonic() - t:.1f} s after it")
    finally:
        run.close()


# ------------------------------------------------------------------ 3. never substitute silently


def _broken_engine(kind: str, engine_dir: Path, tmp: Path) -> Path:
    folder = tmp / kind
    if kind == "script-exits-1":
        folder.mkdir()
        script = folder / "llama-server"
        script.write_text("#!/bin/sh\necho 'llama-server: cannot start here' >&2\nexit 1\n")
        script.chmod(0o755)
        return script
    shutil.copytree(engine_dir, folder, symlinks=True)
    if kind == "not-executable":
        (folder / "llama-server").chmod(0o644)
    elif kind == "no-libllama":
        for lib in folder.glob("libllama.so*"):
            lib.unlink()
    return folder / "llama-server"


@pytest.mark.parametrize("kind, why", [
    ("not-executable", "is not executable"),
    ("no-libllama", "libllama.so"),
    ("script-exits-1", "exited with status 1"),
])
def test_a_named_engine_that_cannot_run_is_refused_not_replaced(home, demo_model, engine_dir,
                                                                tmp_path, kind, why):
    binary = _broken_engine(kind, engine_dir, tmp_path)
    result = stoker(*run_args(demo_model, "--engine", str(binary)), timeout=90)
    assert result.returncode != 0
    failed = [x for x in result.stderr.splitlines() if x.startswith("failed: ")]
    assert len(failed) == 1, result.stderr
    assert str(binary) in failed[0] and why in failed[0] and "--engine" in failed[0], failed
    assert "no other build was started" in failed[0]
    assert "Traceback" not in result.stderr and "ready:" not in result.stdout
    log = home / "logs" / "engine.log"
    assert not log.exists() or "starting:" not in log.read_text()  # nothing was spawned
    assert engines_under(home) == []


def test_an_engine_path_in_settings_that_cannot_run_is_refused_too(home, demo_model, engine_dir,
                                                                   tmp_path):
    binary = _broken_engine("script-exits-1", engine_dir, tmp_path)
    (home / "config").mkdir(exist_ok=True)
    (home / "config" / "settings.json").write_text(json.dumps({"schema": 1, "engine": str(binary)}))
    result = stoker(*run_args(demo_model), timeout=90)
    assert result.returncode != 0
    assert "the engine path in Settings" in result.stderr and str(binary) in result.stderr
    assert "ready:" not in result.stdout and engines_under(home) == []


def test_a_build_stoker_chose_says_which_and_why(home, demo_model):
    run = Stoker(*run_args(demo_model))
    try:
        run.wait_line("ready: ")
        status = status_json()
        assert status["engine_build"] == "b11434-cpu"
    finally:
        run.close()


# ------------------------------------------------------------------ 4. settings problems


def test_a_corrupt_settings_file_is_told_and_the_launch_goes_on(home, demo_model):
    config = home / "config"
    config.mkdir(exist_ok=True)
    (config / "settings.json").write_text('{"memory_reserve_gib": 4, oops')
    run = Stoker(*run_args(demo_model))
    try:
        run.wait_line("ready: ")
        line = run.wait_line("settings.json was not valid JSON", stream="err")
        assert "moved to" in line
        problems = status_json()["problems"]
        assert any("settings.json was not valid JSON" in p for p in problems), problems
    finally:
        run.close()
    assert list(config.glob("settings.json.corrupt-*"))
    assert "Traceback" not in "\n".join(run.err)
    log = (home / "logs" / "stoker.log").read_text()
    assert "settings.json was not valid JSON" in log


@pytest.mark.parametrize("value", ["abc", -5])
def test_a_bad_override_value_is_told_and_the_planned_value_used(home, demo_model, value):
    config = home / "config"
    config.mkdir(exist_ok=True)
    key = str(demo_model.resolve())
    (config / "overrides.json").write_text(json.dumps(
        {"schema": 1, "models": {key: {"ctx": value, "slots": 1}}}))
    run = Stoker("run", str(demo_model), "--headless", "--port", "0")
    try:
        run.wait_line("ready: ")
        line = run.wait_line("ctx must be a whole number", stream="err")
        assert repr(value) in line or str(value) in line
        assert "Stoker plans that value itself instead" in line
        status = status_json()
        assert any("ctx must be a whole number" in p for p in status["problems"]), status
        assert status["slots"] == 1 and status["ctx"] >= 256  # the good value kept, ctx planned
    finally:
        run.close()


# ------------------------------------------------------------------ 5. folders and tracebacks


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


@pytest.mark.skipif(not IS_ROOT or shutil.which("mount") is None, reason="needs root to mount a tmpfs")
@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_a_read_only_or_full_config_folder_is_one_sentence_and_loses_nothing(home, demo_model, fault):
    config = home / "config"
    _mount_tmpfs(config, "64k")
    try:
        (config / "settings.json").write_text(json.dumps(
            {"schema": 1, "memory_reserve_gib": 1.5, "last_model": None}, indent=2))
        (config / "overrides.json").write_text(json.dumps(
            {"schema": 1, "models": {str(demo_model.resolve()): {"slots": 1}}}))
        if fault == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(config)], check=True)
        else:
            fd = os.open(config / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 1024):
                    pass
            except OSError:
                pass  # ENOSPC: the folder is full now
            finally:
                os.close(fd)
        before = _snapshot(config)
        run = Stoker("run", str(demo_model), "--headless", "--ctx", "1024", "--port", "0")
        try:
            run.wait_line("ready: ")
            line = run.wait_line("could not remember the last used model", stream="err")
            why = "read-only" if fault == "read-only" else "full"
            assert why in line and str(config) in line, line
        finally:
            run.close()
        assert run.proc.returncode == 0
        assert not any("Traceback" in x for x in run.err), run.err
        assert _snapshot(config) == before  # every stored file byte-identical
    finally:
        subprocess.run(["umount", "-l", str(config)], check=False)


def test_a_reader_that_leaves_the_pipe_early_gets_no_sentence_and_no_traceback(tmp_path):
    """`stoker bench diagnose | head` closes the pipe before the output ends. That is no fault
    of Stoker's folders, so Stoker says nothing and exits as SIGPIPE would have ended it."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: that write fails, every time
    try:
        done = subprocess.run([sys.executable, "-m", "stoker", "bench", "diagnose"], cwd=REPO,
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                              env={**os.environ, "STOKER_HOME": str(tmp_path)})
    finally:
        os.close(write_end)
    assert done.stderr == "", done.stderr  # before: "could not write one of its folders: Broken pipe"
    assert done.returncode == 141


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.25, 0.6, 1.2])
def test_ctrl_c_at_any_moment_exits_0_and_never_reads_as_no_build(home, demo_model, after_s):
    """From the moment Stoker's own code runs (its instance lock exists; before that the
    interpreter itself is still starting): engine discovery, its probes, the start, READY."""
    run = Stoker(*run_args(demo_model))
    lock = home / "data" / "run" / "instance.lock"
    deadline = time.monotonic() + 30
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.005)  # paces the poll
    time.sleep(after_s)  # the moment of the Ctrl-C after the lock appears: what this test varies
    run.proc.send_signal(signal.SIGINT)
    assert run.proc.wait(30) == 0, (run.out, run.err)
    run.drained()
    assert not any("no usable llama-server" in x or "Traceback" in x for x in run.err), run.err
    assert engines_under(home) == []


# ------------------------------------------------------------------ 8. one instance, Qt


def test_two_runs_started_together_leave_exactly_one(home, demo_model):
    a, b = Stoker(*run_args(demo_model)), Stoker(*run_args(demo_model))
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (
                a.proc.poll() is not None or b.proc.poll() is not None):
            time.sleep(0.1)  # paces the poll
        loser, winner = (a, b) if a.proc.poll() is not None else (b, a)
        assert loser.proc.wait(5) == 2
        loser.drained()
        assert any("another Stoker instance is already running" in x for x in loser.err), loser.err
        winner.wait_line("ready: ")
        assert winner.proc.poll() is None
        assert len(engines_under(home)) == 1
    finally:
        a.close()
        b.close()


def test_a_second_tray_shows_the_first_ones_status_window(home, demo_model):
    env = _tray_env()
    tray = Stoker("tray", str(demo_model), "--port", "0", env=env)
    try:
        wait_status(lambda s: s["state"] == "ready", env=env)
        second = stoker("tray", "--port", "0", env=env)
        assert second.returncode == 0, second.stderr
        assert "status window is open now" in second.stdout
        cli = stoker(*run_args(demo_model), env=env)
        assert cli.returncode == 2 and "as a tray icon" in cli.stderr, cli.stderr
    finally:
        tray.close()


def test_qt_that_cannot_load_xcb_names_the_library_and_runs_headless(home, demo_model, tmp_path):
    env = _tray_env()
    fake = tmp_path / "fakelib"
    fake.mkdir()
    (fake / "libxcb-cursor.so.0").write_bytes(b"")  # the loader meets a broken copy first
    env["LD_LIBRARY_PATH"] = f"{fake}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    run = Stoker("run", str(demo_model), "--ctx", "1024", "--port", "0", env=env)
    try:
        line = run.wait_line("libxcb-cursor.so.0", stream="err")
        assert "install libxcb-cursor0" in line and "Running headless" in line
        run.wait_line("ready: ")  # and then headless, as `stoker run --headless`
        assert status_json(env)["tray_shown"] is False
    finally:
        run.close()
    assert run.proc.returncode == 0
