"""EngineProcess against the real llama-server and the demo model: launch, chat, stop, crash, orphans."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from stoker.base.paths import stoker_paths
from stoker.engines.health import wait_ready
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.process import EngineProcess, RotatingLog, engine_environment, reap_orphans
from tests.helpers.waiting import wait_until
from tests.shell.engine_helpers import chat, demo_spec

pytestmark = pytest.mark.engine


@pytest.fixture
def started(engine_binary, demo_model, stoker_home):
    procs = []

    def start(spec=None):
        spec = spec or demo_spec(engine_binary, demo_model)
        proc = EngineProcess.start(spec, log_dir=stoker_paths().logs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop(grace_s=2)


def test_launch_chat_stop_leaves_nothing(started):
    proc = started()
    result = wait_ready(proc.spec.endpoint, proc, deadline_s=60)
    assert result.ready, result.reason
    proc.mark_ready(time.time())
    assert chat(proc.spec.endpoint)  # the model answers
    pid_files = list(stoker_paths().run.glob("engine-*.json"))
    assert [json.loads(p.read_text())["pid"] for p in pid_files] == [proc.pid]
    assert proc.stop(grace_s=5) == 0  # a loaded engine exits 0 on SIGTERM
    assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == "zombie"
    report = proc.exit_report()
    assert report.signalled_by_us and report.phase == "ready" and report.exit_code == 0
    assert any("listening on" in line for line in report.log_tail)
    assert list(stoker_paths().run.glob("engine-*.json")) == []
    log = (stoker_paths().logs / "engine.log").read_text()
    assert "model loaded" in log and "starting:" in log


def test_kill_9_reads_as_a_signal_we_did_not_send(started):
    proc = started()
    assert wait_ready(proc.spec.endpoint, proc, deadline_s=60).ready
    proc.mark_ready(time.time())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    report = proc.exit_report()
    assert report.signal == 9 and report.exit_code is None
    assert not report.signalled_by_us and report.phase == "ready"
    assert report.describe() == "the engine was ended by signal 9 while ready"
    # Where the memory cgroup is readable, a kill from outside is not taken for the OOM killer.
    assert report.oom_killed in (False, None)


def test_bad_argument_exits_1_and_wait_ready_says_so(started, engine_binary, demo_model):
    spec = demo_spec(engine_binary, demo_model)
    spec = LaunchSpec(**{**spec.__dict__, "argv": spec.argv + ("--no-mmap",)})
    proc = started(spec)
    result = wait_ready(spec.endpoint, proc, deadline_s=30)
    assert not result.ready and result.exit_code == 1
    report = proc.exit_report()
    assert report.phase == "starting" and report.exit_code == 1
    assert any("invalid argument: --no-mmap" in line for line in report.log_tail)


def test_missing_binary_is_one_clear_oserror(tmp_path, demo_model, stoker_home):
    spec = demo_spec(tmp_path / "no-such-llama-server", demo_model)
    with pytest.raises(OSError, match="could not start"):
        EngineProcess.start(spec, log_dir=tmp_path)


def test_environment_drops_inherited_engine_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "99")
    monkeypatch.setenv("KEEP_ME", "1")
    spec = LaunchSpec("b", ("b",), (("A", "1"),), ("LLAMA_ARG_",), (), "127.0.0.1", 1)
    env = engine_environment(spec, {"LLAMA_API_KEY": "k"}, tmp_path / "cfg")
    assert "LLAMA_ARG_CTX_SIZE" not in env and env["KEEP_ME"] == "1" and env["A"] == "1"
    assert env["LLAMA_API_KEY"] == "k" and env["XDG_CONFIG_HOME"] == str(tmp_path / "cfg")


def test_rotating_log_keeps_bounded_backups(tmp_path):
    log = RotatingLog(tmp_path / "e.log", max_bytes=100, backups=2)
    for i in range(50):
        log.write(f"line {i:03d} " + "x" * 20)
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["e.log", "e.log.1", "e.log.2"]
    assert all(p.stat().st_size <= 100 for p in tmp_path.iterdir())
    assert "line 049" in (tmp_path / "e.log").read_text()


def test_rotating_log_rotates_inside_a_batch_and_counts_what_was_there(tmp_path):
    """A batch (one read of the engine's output) rotates where a line would cross the bound,
    and a log reopened after a restart counts the bytes already in the file."""
    (tmp_path / "e.log").write_text("x" * 90 + "\n")
    log = RotatingLog(tmp_path / "e.log", max_bytes=100, backups=2)
    lines = [f"line {i:03d} " + "é" * 10 for i in range(12)]  # 30 bytes each with "\n"
    for start in range(0, 12, 5):
        log.write_lines(lines[start:start + 5])
    log.close()
    assert all(p.stat().st_size <= 100 for p in tmp_path.iterdir())
    # Three 30-byte lines to a file (bytes, not characters: "é" is two), the newest three files kept.
    assert [(tmp_path / n).read_text().splitlines() for n in ("e.log.2", "e.log.1", "e.log")] == \
        [lines[3:6], lines[6:9], lines[9:12]]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_engine_dies_with_its_stoker_and_the_reaper_cleans_up(engine_binary, demo_model, stoker_home,
                                                              tmp_path):
    """A child Python starts an engine and dies by SIGKILL: the engine goes with it (Linux:
    PR_SET_PDEATHSIG) within 2 s, and the next Stoker only removes the pid file."""
    run_dir = stoker_paths().run
    spec = demo_spec(engine_binary, demo_model)
    code = (
        "import sys,time; from pathlib import Path\n"
        "from stoker.engines.launch_spec import LaunchSpec\n"
        "from stoker.engines.process import EngineProcess\n"
        f"spec = LaunchSpec({spec.binary!r}, {spec.argv!r}, (), ('LLAMA_ARG_',), (), '127.0.0.1', {spec.port})\n"
        f"p = EngineProcess.start(spec, log_dir=Path({str(tmp_path)!r}))\n"
        "print(p.pid, flush=True); time.sleep(60)\n")  # the owner stays up until the test kills it
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    engine_pid = int(owner.stdout.readline())
    try:
        # While its Stoker lives, the engine is not an orphan.
        assert reap_orphans(run_dir, grace_s=2) == ()
        assert psutil.pid_exists(engine_pid)
        assert [p.name for p in run_dir.glob("engine-*.json")] == [f"engine-{engine_pid}.json"]
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 2.0
        while not _gone(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # paces the poll
        assert _gone(engine_pid), "the engine outlived its Stoker"
        assert reap_orphans(run_dir, grace_s=5) == ()
        assert list(run_dir.glob("engine-*.json")) == []
    finally:
        owner.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(engine_pid, signal.SIGKILL)


def _running_as(pid: int, binary: str, token: str) -> bool:
    from stoker.engines import process

    try:
        proc = psutil.Process(pid)
        return proc.name() == os.path.basename(binary) and proc.environ().get(process.TOKEN_ENV) == token
    except psutil.Error:
        return False


@pytest.mark.parametrize("record", ["pid-file", "pending"])
def test_reaper_stops_an_engine_left_behind(engine_binary, demo_model, stoker_home, record):
    """The second line of defence: an engine whose Stoker is gone (a pid file naming a dead
    owner, or only the pending record written before the spawn) is found and stopped."""
    from stoker.engines import process

    run_dir = stoker_paths().run
    run_dir.mkdir(parents=True)
    spec = demo_spec(engine_binary, demo_model)
    token = "feedc0de"
    engine = subprocess.Popen(list(spec.argv), executable=spec.binary, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, process.TOKEN_ENV: token})
    try:
        dead_owner = {"owner_pid": 2**22 - 7, "owner_create_time": 1.0}
        if record == "pending":
            info = {"pending": True, "token": token, "binary": spec.binary, **dead_owner}
            name = f"engine-pending-{token}.json"
        else:
            info = {"pid": engine.pid, "create_time": psutil.Process(engine.pid).create_time(),
                    "binary": spec.binary, **dead_owner}
            name = f"engine-{engine.pid}.json"
        (run_dir / name).write_text(json.dumps(info))
        # The reaper knows an engine by its binary's name and its token: wait for the exec.
        assert wait_until(lambda: _running_as(engine.pid, spec.binary, token), 30)
        assert reap_orphans(run_dir, grace_s=5) == (engine.pid,)
        engine.wait(timeout=5)
        assert list(run_dir.glob("engine-*.json")) == []
    finally:
        if engine.poll() is None:
            engine.kill()


def test_a_stopped_engine_is_killed_at_once(started):
    """SIGSTOP: a stopped process cannot act on SIGTERM, so stop() must not wait its grace."""
    proc = started()
    assert wait_ready(proc.spec.endpoint, proc, deadline_s=60).ready
    os.kill(proc.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5  # the stop is delivered asynchronously
    while psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)  # paces the poll
    t = time.monotonic()
    proc.stop(grace_s=10)
    assert time.monotonic() - t < 2.0
    assert proc.exit_report().signal == signal.SIGKILL


def test_stale_pid_file_of_a_reused_pid_is_ignored(stoker_home):
    """A pid file whose pid now belongs to another process (other create time) kills nothing."""
    run_dir = stoker_paths().run
    run_dir.mkdir(parents=True)
    me = psutil.Process()
    (run_dir / f"engine-{me.pid}.json").write_text(json.dumps(
        {"pid": me.pid, "create_time": me.create_time() - 1000, "binary": sys.executable,
         "owner_pid": 1, "owner_create_time": 0.0}))
    assert reap_orphans(run_dir) == ()
    assert list(run_dir.glob("engine-*.json")) == []


def test_a_failed_pid_file_write_leaves_the_engine_owned_and_drained(started, monkeypatch):
    """The pending record written before the spawn stays when the pid file cannot be written,
    and the output reader runs from the first instant, so the engine's pipe never fills."""
    from stoker.engines import process

    def fail(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(process, "_write_pid_file", fail)
    proc = started()
    pending = list(stoker_paths().run.glob("engine-pending-*.json"))
    assert len(pending) == 1 and json.loads(pending[0].read_text())["owner_pid"] == os.getpid()
    assert wait_ready(proc.spec.endpoint, proc, deadline_s=60).ready
    # Its output is being read: the reader thread reaches the "listening on" line on its own
    # time, after /health may already answer (a loaded run saw the line not yet read).
    assert wait_until(lambda: any("listening on" in line for line in proc.tail()), timeout=30)
    proc.stop(grace_s=5)
    assert list(stoker_paths().run.glob("engine-*.json")) == []


def test_no_record_means_no_engine(engine_binary, demo_model, stoker_home, monkeypatch):
    from stoker.engines import process

    def fail(*a, **k):
        raise OSError(30, "Read-only file system", str(stoker_paths().run))

    monkeypatch.setattr(process, "_write_pending_record", fail)
    from tests.shell.engine_helpers import engines_running

    with pytest.raises(OSError, match="could not record the engine"):
        EngineProcess.start(demo_spec(engine_binary, demo_model), log_dir=stoker_paths().logs)
    assert engines_running(engine_binary) == []  # nothing was spawned under this home


def test_no_part_of_the_engines_key_reaches_its_log_and_the_log_folder_is_private(engine_binary, demo_model,
                                                                                  stoker_home):
    """llama-server prints `api_keys: ****` and the key's last four characters at start."""
    key = "per-launch-key-zq9X"
    proc = EngineProcess.start(demo_spec(engine_binary, demo_model), secrets={"LLAMA_API_KEY": key},
                               log_dir=stoker_paths().logs)
    try:
        result = wait_ready(proc.spec.endpoint, proc, deadline_s=60)
        assert result.ready, result.reason
    finally:
        proc.stop(grace_s=5)
    log = (stoker_paths().logs / "engine.log").read_text()
    assert "api_keys: (set; not logged)" in log  # the engine's own line, seen and redacted
    assert "zq9X" not in log and key not in log and "****" not in log
    assert not any("zq9X" in line for line in proc.tail())
    assert oct(stoker_paths().logs.stat().st_mode & 0o777) == "0o700"
