"""The macOS and Windows branches' parts that can run here, on Linux.

- Windows: the job structure is sized by ctypes for the platform (144 bytes on 64-bit, 112 on
  32-bit, what SetInformationJobObject checks), KILL_ON_JOB_CLOSE is set in it, every call's
  result is checked, and a failure ends the start instead of leaving the engine outside.
- macOS: exits are decoded with the host's own signal table (SIGBUS is 10 there), and the
  watchdog (a pipe whose EOF means Stoker died) kills the engine's group; it stands down
  after a clean stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from stoker.diagnosis.exit_codes import signal_name
from stoker.engines import process
from stoker.engines.process import (
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    Watchdog,
    WindowsJob,
    host_os,
    host_signal_name,
    job_structures,
)


def test_the_job_structure_matches_windows_sizes_on_both_pointer_widths():
    basic64, ext64 = job_structures(ctypes.c_uint64)
    basic32, ext32 = job_structures(ctypes.c_uint32)
    assert (ctypes.sizeof(basic64), ctypes.sizeof(ext64)) == (64, 144)
    assert (ctypes.sizeof(basic32), ctypes.sizeof(ext32)) == (48, 112)
    # LimitFlags sits after the two LARGE_INTEGERs on both
    assert basic64.LimitFlags.offset == basic32.LimitFlags.offset == 16
    assert ctypes.sizeof(process.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) == \
        (144 if ctypes.sizeof(ctypes.c_void_p) == 8 else 112)


class FakeApi:
    """Records the calls in order; each returns what the test chose (Windows: 0 is failure)."""

    def __init__(self, **results):
        self.calls, self.results, self.infos = [], results, []

    def _call(self, name, *args):
        self.calls.append(name)
        return self.results.get(name, 1 if name != "NtResumeProcess" else 0)

    def CreateJobObjectW(self, *a):
        return self._call("CreateJobObjectW") and 0xAB

    def SetInformationJobObject(self, handle, klass, info_ref, size):
        info = ctypes.cast(info_ref, ctypes.POINTER(process.JOBOBJECT_EXTENDED_LIMIT_INFORMATION)).contents
        self.infos.append((handle, klass, info.BasicLimitInformation.LimitFlags, size))
        return self._call("SetInformationJobObject")

    def AssignProcessToJobObject(self, job, proc):
        return self._call("AssignProcessToJobObject")

    def NtResumeProcess(self, proc):
        return self._call("NtResumeProcess")

    def CloseHandle(self, handle):
        return self._call("CloseHandle")

    @staticmethod
    def last_error():
        return 5


def test_the_job_kills_on_close_and_is_assigned_before_the_engine_runs():
    api = FakeApi()
    job = WindowsJob.create(api)
    assert api.infos == [(0xAB, 9, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
                          ctypes.sizeof(process.JOBOBJECT_EXTENDED_LIMIT_INFORMATION))]
    job.adopt_and_resume(1234)
    assert api.calls == ["CreateJobObjectW", "SetInformationJobObject", "AssignProcessToJobObject",
                         "NtResumeProcess"]
    assert process.WINDOWS_CREATION_FLAGS & process.CREATE_SUSPENDED  # created suspended
    job.close()
    assert api.calls[-1] == "CloseHandle" and job.handle is None


@pytest.mark.parametrize("failing, match", [
    ("CreateJobObjectW", "could not create a Windows job object"),
    ("SetInformationJobObject", "kill it with Stoker"),
])
def test_a_job_that_cannot_be_made_ends_the_start(failing, match):
    api = FakeApi(**{failing: 0})
    with pytest.raises(OSError, match=match):
        WindowsJob.create(api)
    if failing == "SetInformationJobObject":
        assert api.calls[-1] == "CloseHandle"  # nothing leaks


@pytest.mark.parametrize("failing, value, match", [
    ("AssignProcessToJobObject", 0, "could not put the engine in its job"),
    ("NtResumeProcess", -1073741823, "could not resume the engine"),
])
def test_an_engine_that_cannot_join_its_job_is_not_left_running(failing, value, match):
    job = WindowsJob.create(FakeApi(**{failing: value}))
    with pytest.raises(OSError, match=match):
        job.adopt_and_resume(1234)


def test_the_signal_table_is_the_hosts(monkeypatch):
    # Linux here: every name core decodes agrees with the host's own table.
    for number in (1, 2, 4, 6, 7, 8, 9, 10, 11, 13, 15):
        assert signal_name(number, host_os()) == host_signal_name(number) == signal.Signals(number).name
    # macOS numbering: what a SIGBUS (10 there) must read as once the host says darwin.
    monkeypatch.setattr(process.sys, "platform", "darwin")
    assert host_os() == "darwin"
    assert signal_name(10, host_os()) == "SIGBUS" and signal_name(30, host_os()) == "SIGUSR1"
    assert signal_name(7, host_os()) == "SIGEMT" and signal_name(12, host_os()) == "SIGSYS"


def test_windows_paths_make_no_posix_only_calls(monkeypatch):
    """On the Windows branch a stop uses TerminateProcess/CTRL_BREAK, never killpg/SIGKILL."""
    monkeypatch.setattr(process, "POSIX", False)
    monkeypatch.setattr(process.os, "killpg", lambda *a: pytest.fail("killpg on a Windows path"))
    calls = []

    class FakePopen:
        pid = 1

        def kill(self):
            calls.append("kill")

        def send_signal(self, sig):
            calls.append(("send_signal", sig))

    process._signal_group(FakePopen(), None)
    process._signal_group(FakePopen(), 1)
    assert calls == ["kill", ("send_signal", 1)]
    assert not process.needs_watchdog()  # a Windows engine is held by its job instead


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_macos_watchdog_kills_the_group_when_stoker_dies():
    code = ("import subprocess, time\n"
            "from stoker.engines.process import Watchdog\n"
            "p = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
            "w = Watchdog(p.pid)\n"
            "print(p.pid, w.pid, flush=True)\n"
            "time.sleep(60)\n")  # the owner stays up until the test kills it
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    engine, dog = map(int, owner.stdout.readline().split())
    try:
        assert psutil.pid_exists(engine)
        owner.kill()  # kill -9: no handler, no cleanup; only the kernel closes the pipe
        owner.wait()
        deadline = time.monotonic() + 2
        while not _gone(engine) and time.monotonic() < deadline:
            time.sleep(0.05)  # paces the poll
        assert _gone(engine)
    finally:
        for pid in (engine, dog):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_watchdog_stands_down_after_a_clean_stop():
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        dog = Watchdog(sleeper.pid)
        dog.stand_down()
        assert _gone(dog.pid)
        assert sleeper.poll() is None  # a clean stop tells it not to kill anything
    finally:
        sleeper.kill()
        sleeper.wait()
