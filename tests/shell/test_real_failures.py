"""Real failures of the real llama-server, each classified right by classify_exit.

Runs the CPU build and the demo model into: a truncated GGUF, a taken port, an unknown
flag, a binary without its shared libraries, a host OOM under an address-space limit and
a host OOM kill inside a memory cgroup (where this machine allows one), and a broken
drafter. Skips when no build is installed (see tests/conftest.py).
"""

from __future__ import annotations

import pytest

from stoker.diagnosis.classify import classify_exit
from stoker.diagnosis.exit_report import ExitReport
from tests.shell import real_failures as rf


def classify(cap: rf.Captured, **kw):
    report = ExitReport(exit_code=cap.exit_code, signal=cap.signal, signalled_by_us=False,
                        phase="starting", uptime_s=None, log_tail=cap.lines, backend="cpu",
                        oom_killed=cap.oom_killed, **kw)
    return classify_exit(report)


@pytest.fixture
def work(tmp_path):
    return tmp_path


def test_truncated_gguf_is_a_bad_model(engine_binary, demo_model, work):
    cap = rf.make_truncated_model(engine_binary, demo_model, work)
    assert cap.returncode == 1
    inc = classify(cap)
    assert inc.kind == "bad-model" and not inc.counts_as_strike


def test_taken_port(engine_binary, demo_model, work):
    cap = rf.make_port_in_use(engine_binary, demo_model, work)
    assert cap.returncode == 1
    inc = classify(cap)
    assert inc.kind == "port-in-use" and "couldn't bind" in inc.evidence
    assert not inc.counts_as_strike


def test_unknown_flag(engine_binary, demo_model, work):
    cap = rf.make_unknown_flag(engine_binary, demo_model, work)
    assert cap.returncode == 1
    inc = classify(cap)
    assert inc.kind == "bad-argument" and "--no-mmap" in inc.evidence


def test_binary_without_its_libraries(engine_binary, demo_model, work):
    cap = rf.make_missing_library(engine_binary, demo_model, work)
    assert cap.returncode == 127
    inc = classify(cap)
    assert inc.kind == "missing-library" and ".so" in inc.evidence
    assert inc.counts_as_strike and inc.recoverable_by == "next-build"


def test_host_oom_under_an_address_space_limit(engine_binary, demo_model, work):
    cap = rf.make_host_oom_rlimit(engine_binary, demo_model, work)
    assert cap.returncode == 1
    inc = classify(cap)
    assert inc.kind == "host-oom" and inc.recoverable_by == "smaller-plan"
    assert "insufficient memory" in inc.evidence or "failed to allocate" in inc.evidence


def test_host_oom_kill_in_a_memory_cgroup(engine_binary, demo_model, work):
    cap = rf.make_host_oom_cgroup(engine_binary, demo_model, work)
    if cap is None:
        pytest.skip("this machine does not let tests make a memory cgroup")
    assert cap.signal == "SIGKILL" and cap.oom_killed is True
    inc = classify(cap)
    assert inc.kind == "host-oom" and "out-of-memory killer" in inc.evidence
    # Without the cgroup's word for it, a silent SIGKILL still reads as the OOM killer.
    assert classify(rf.Captured(cap.name, cap.lines, cap.returncode, None)).kind == "host-oom"


def test_broken_drafter(engine_binary, demo_model, work):
    cap = rf.make_drafter_failure(engine_binary, demo_model, work)
    assert cap.returncode == 1
    inc = classify(cap, has_drafter=True)
    assert inc.kind == "drafter-failure" and inc.recoverable_by == "drop-drafter"
    assert not inc.counts_as_strike


def test_ldd_of_the_binary_copied_alone_is_a_missing_runtime_blocker(engine_binary, work):
    import shutil
    import subprocess

    from stoker.diagnosis.blockers import missing_runtime_from_ldd

    if shutil.which("ldd") is None:
        pytest.skip("no ldd on this machine")
    lonely = work / "lonely"
    lonely.mkdir()
    shutil.copy2(engine_binary, lonely / "llama-server")
    out = subprocess.run(["ldd", str(lonely / "llama-server")], capture_output=True, text=True).stdout
    b = missing_runtime_from_ldd(out)
    assert b is not None and b.kind == "missingRuntime"
    assert "libllama" in b.message and "stoker setup" in b.advice
    # The installed build, with its libraries beside it, has nothing missing.
    ok = subprocess.run(["ldd", str(engine_binary)], capture_output=True, text=True).stdout
    assert missing_runtime_from_ldd(ok) is None


def test_oom_watch_sees_the_kernel_kill(engine_binary, demo_model, work):
    import subprocess

    from stoker.diagnosis.oom_evidence import OomWatch

    group = rf.memory_cgroup(f"stoker-watch-{__import__('os').getpid()}", 300 * 1024 * 1024)
    if group is None:
        pytest.skip("this machine does not let tests make a memory cgroup")
    procs = str(group / "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(__import__("os").getpid()))

    try:
        argv = rf._argv(engine_binary, demo_model, rf.free_loopback_port(), "-c", rf.BIG_CTX)
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=rf._env(work), preexec_fn=join)
        watch = OomWatch(p.pid)
        assert watch.group == group
        assert p.wait(timeout=rf.TIMEOUT_S) == -9
        assert watch.killed_by_oom() is True
    finally:
        group.rmdir()


def test_oom_watch_of_a_process_that_ends_normally():
    import subprocess
    import sys

    from stoker.diagnosis.oom_evidence import OomWatch

    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])  # a peer that ends by itself
    watch = OomWatch(p.pid)
    p.wait()
    assert watch.killed_by_oom() in (False, None)
