"""One llama-server process: spawn a LaunchSpec, capture its output, stop it, report its exit.

The engine runs in its own process group so a stop reaches anything it forked (ggml may
fork gdb for a backtrace), and it dies with Stoker, whatever ends Stoker (kill -9 included):
- Linux: PR_SET_PDEATHSIG(SIGKILL) set in the child before exec, then the parent re-checked
  (a Stoker that died between fork and prctl would otherwise be missed). The signal fires
  when the *thread* that spawned the engine ends, so spawn from a thread that lives as long
  as the engine should (the supervisor's).
- Windows: a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE; the engine is created
  suspended, assigned, then resumed, so nothing it starts escapes the job. Every call is
  checked; a failure ends the start (the engine is never left running outside the job).
- macOS and other POSIX systems: a watchdog, a tiny Python process that holds the read end
  of a pipe whose write end only Stoker holds. Stoker's death (any death: the kernel closes
  its descriptors) is EOF on the pipe, and the watchdog kills the engine's group. It needs no
  kqueue and no polling, and a clean stop tells it to stand down first (so a later pid reuse
  is never hit).
Output goes to a rotating log file in the log folder and to a ring buffer kept for diagnosis.
A pending record is written before the engine is spawned (the engine carries its token in
its environment), then a pid file, so the next Stoker can stop an engine a crashed Stoker
left behind (`reap_orphans`, the second line of defence), checked against the process create
time so a reused pid is never killed.
This module does not decide anything: when to start, stop or retry is stoker/fleet/lifecycle.py's.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import secrets as token_source
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

from stoker.base.paths import private_folder, stoker_paths
from stoker.diagnosis.memory_cgroup import MemoryCgroup
from stoker.diagnosis.oom_evidence import OomWatch
from stoker.engines.argv import DROP_ENV_PREFIXES
from stoker.engines.engine_exit import EngineExit
from stoker.engines.engine_log import redact_secrets
from stoker.engines.launch_spec import LaunchSpec

LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3
RING_LINES = 400
# After each read of an engine's output, the reader waits this long so the next lines gather
# in the pipe: llama-server writes each of its ~50 lines per answered request on its own, and
# waking for each cost Stoker's process a wake-up and the interpreter lock per line. 10 ms is
# nothing to anything that reads the lines (the tail at an exit, a start's progress).
READ_GATHER_S = 0.01
POSIX = os.name == "posix"
LINUX = sys.platform.startswith("linux")
# The engine carries this variable with its pending record's token, so the reaper can find an
# engine whose pid file was never written.
TOKEN_ENV = "STOKER_ENGINE_TOKEN"
PR_SET_PDEATHSIG = 1


def host_os() -> str:
    """"linux", "darwin" or "windows": which signal table and exit-code forms apply to exits
    seen on this host (macOS numbers differ: SIGBUS is 10 there, SIGUSR1 is 30)."""
    if os.name == "nt":
        return "windows"
    return "darwin" if sys.platform == "darwin" else "linux"


def host_signal_name(number: int) -> str:
    """The host's own name for a signal number (signal.Signals), e.g. 10 -> SIGBUS on macOS."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def probe_process_kwargs() -> dict:
    """Popen arguments that put a probe (`--version`, `--list-devices`, ldd, the Qt check) in
    its own process group, so a Ctrl-C meant for Stoker cannot reach it and turn into "no build"."""
    if os.name == "nt":
        return {"creationflags": CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW}
    return {"start_new_session": True}


_prctl = None


def _linux_prctl():
    """libc's prctl, resolved in the parent: the child must not load libraries after fork."""
    global _prctl
    if _prctl is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _prctl = libc.prctl
        _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]
        _prctl.restype = ctypes.c_int
    return _prctl


def die_with_parent_fn(then=None):
    """A preexec function: the child asks the kernel for SIGKILL when its parent goes, then
    checks that the parent did not already go before the request took effect.

    Exit 125 in the child (before exec) when prctl fails or the parent is already gone.
    """
    prctl = _linux_prctl()
    parent = os.getpid()

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(125)
        if os.getppid() != parent:  # Stoker died between fork and prctl: nobody owns us
            os._exit(125)
        if then is not None:
            then()

    return preexec


def end_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM a short-lived helper process (a probe, a bench's bare engine), then kill it
    if it has not gone within `grace_s`; returns once it is reaped."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_engine_env(config_home: Path | None = None, *, drop=DROP_ENV_PREFIXES,
                     base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment any llama-server Stoker runs starts from (launch, probes, benches).

    Inherited LLAMA_ARG_* (applied before the engine's own CLI), an API key and AIP_*
    (which can override --port) are dropped. With `config_home`, XDG_CONFIG_HOME/APPDATA
    point at that empty folder so no llama.cpp config.ini applies.
    """
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(tuple(drop))}
    if getattr(sys, "frozen", False):
        # A PyInstaller bundle points the loader path at its own libraries (libstdc++,
        # libgomp…) and keeps the user's in *_ORIG; the engine must get the user's.
        for var in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):
            original = env.pop(f"{var}_ORIG", None)
            if original is not None:
                env[var] = original
            else:
                env.pop(var, None)
    if config_home is not None:
        Path(config_home).mkdir(parents=True, exist_ok=True)
        env["XDG_CONFIG_HOME"] = str(config_home)
        if not POSIX:
            env["APPDATA"] = str(config_home)
    env["GGML_NO_BACKTRACE"] = "1"  # a backtrace via gdb delays an abort by seconds
    return env


def engine_environment(spec: LaunchSpec, secrets: Mapping[str, str], config_home: Path) -> dict:
    """The clean engine environment (dropping the spec's prefixes), plus its env and secrets."""
    env = clean_engine_env(config_home, drop=spec.drop_env_prefixes)
    env.update(dict(spec.env))
    env["XDG_CONFIG_HOME"] = str(config_home)  # the spec only carries a marker for it
    env.update(secrets)
    return env


# The watchdog (macOS, other non-Linux POSIX): blocks on the pipe; EOF without the stand-down
# byte means Stoker died, so the engine's group is killed. argv: pgid.
WATCHDOG_CODE = r"""
import os, signal, sys
pgid = int(sys.argv[1])
try:
    data = os.read(0, 1)
except OSError:
    data = b""
if data != b"x":
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class Watchdog:
    """Kills an engine's process group when Stoker dies (see the module docstring)."""

    def __init__(self, pgid: int):
        python = helper_python()
        if python is None:  # needs_watchdog() is False then: a frozen bundle has no Python to run it in
            raise RuntimeError("the watchdog needs a Python interpreter, and a frozen bundle has none")
        read_end, write_end = os.pipe()
        self._write_end: int | None = write_end
        try:
            self._proc = subprocess.Popen(
                [python, "-I", "-S", "-c", WATCHDOG_CODE, str(pgid)], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                close_fds=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)  # a later engine must not keep it open

    @property
    def pid(self) -> int:
        return self._proc.pid

    def stand_down(self) -> None:
        """The engine is stopped and reaped: the watchdog leaves without killing anything."""
        if self._write_end is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._write_end, b"x")
        os.close(self._write_end)
        self._write_end = None
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


def helper_python() -> str | None:
    """An interpreter that runs `-c CODE` for a small helper process, or None in a frozen
    bundle, whose sys.executable is Stoker itself (it would parse `-c` as a command)."""
    return None if getattr(sys, "frozen", False) else sys.executable


def needs_watchdog() -> bool:
    """POSIX without PR_SET_PDEATHSIG (macOS, BSDs); STOKER_FORCE_WATCHDOG=1 tests it on Linux.
    A frozen bundle has no Python to run the watchdog in: there the reaper at the next start
    is the only line of defence."""
    return POSIX and (not LINUX or os.environ.get("STOKER_FORCE_WATCHDOG") == "1") \
        and helper_python() is not None


class RotatingLog:
    """Append lines to a file, keeping `backups` older files of at most `max_bytes` each.

    The size is counted here rather than asked of the file: a text file's tell() flushes,
    so asking per line cost a write(2) per line, and llama-server at `-lv 4` prints about
    50 lines for each request it answers. A batch of lines (what one read of the engine's
    output brought) is written with one flush
    (docs/measurements/engine_log_cpu.py: the reader's CPU per request)."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS):
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        private_folder(path.parent)
        self._fh = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - held open; close() closes it
        self._size = self._fh.tell()  # append mode: the end of what is there

    def write(self, line: str) -> None:
        self.write_lines((line,))

    def write_lines(self, lines: Sequence[str]) -> None:
        text = "\n".join(lines) + "\n"
        n = len(text.encode("utf-8", errors="replace"))
        if self._size + n <= self.max_bytes:  # the usual case: the batch fits, one write
            self._fh.write(text)
            self._size += n
        else:
            for line in lines:
                n = len(line.encode("utf-8", errors="replace")) + 1
                if self._size + n > self.max_bytes and self._size:
                    self._rotate()
                self._fh.write(line + "\n")
                self._size += n
        self._fh.flush()

    def _rotate(self) -> None:
        self._fh.close()
        for i in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        if self.backups:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._fh = open(self.path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 - as in __init__
        self._size = 0

    def close(self) -> None:
        self._fh.close()


_LINE_END = re.compile(rb"\r\n|\r|\n")


class EngineProcess:
    """A started engine. Build it with `EngineProcess.start(...)`."""

    def __init__(self, spec: LaunchSpec, popen: subprocess.Popen, log: RotatingLog,
                 pid_file: Path | None, started_at: float, hidden: tuple[str, ...] = ()):
        self.spec = spec
        self._hidden = hidden  # secret values handed to the engine: never written to its log
        self._popen = popen
        self._log = log
        self._pid_file = pid_file
        self.started_at = started_at  # unix time of the spawn
        self.ready_at: float | None = None
        self.stop_requested = False
        self._oom_watch: OomWatch | None = None
        self._job: WindowsJob | None = None  # Windows: the job object; closing it kills the engine
        self._watchdog: Watchdog | None = None
        self._pending: Path | None = None  # kept when the pid file could not be written
        self._cgroup: MemoryCgroup | None = None  # the engine's own memory cgroup (memory_limit_bytes), removed at exit
        self._cgroup_oom_kills: int | None = None  # its counter at spawn
        self._oom_at_exit: bool | None = None  # read before the group is removed
        self._ring: collections.deque[str] = collections.deque(maxlen=RING_LINES)
        self._ring_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name=f"engine-output-{popen.pid}",
                                        daemon=True)
        self._reader.start()

    # -- starting

    @classmethod
    def start(cls, spec: LaunchSpec, *, secrets: Mapping[str, str] | None = None,
              log_dir: Path, run_dir: Path | None = None, config_home: Path | None = None,
              log_name: str = "engine.log") -> EngineProcess:
        """Spawn the spec; raise OSError with a readable message when it cannot start at all."""

        paths = stoker_paths()
        run_dir = run_dir or paths.run
        config_home = config_home or (paths.cache / "engine-config-home")
        env = engine_environment(spec, secrets or {}, config_home)
        token = token_source.token_hex(8)
        env[TOKEN_ENV] = token
        log = RotatingLog(Path(log_dir) / log_name)
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(spec.argv)}")
        try:  # before the engine exists: an engine nobody can find must never run
            pending = _write_pending_record(run_dir, token, spec.binary)
        except OSError as exc:
            log.write(f"=== could not start: {exc}")
            log.close()
            raise OSError(f"could not record the engine in {run_dir} ({exc.strerror or exc}); "
                          "check that the data folder is writable and not full.") from exc
        kwargs: dict = {}
        cgroup = None
        job = None
        if POSIX:
            kwargs["start_new_session"] = True
            if spec.memory_limit_bytes:

                try:
                    cgroup = MemoryCgroup.create(spec.memory_limit_bytes)
                except OSError as exc:
                    log.write(f"=== could not start: {exc}")
                    log.close()
                    pending.unlink(missing_ok=True)
                    raise
            enter = cgroup.enter_fn() if cgroup is not None else None
            kwargs["preexec_fn"] = die_with_parent_fn(enter) if LINUX else enter
        else:
            try:
                job = WindowsJob.create(_windows_api())
            except OSError as exc:
                log.write(f"=== could not start: {exc}")
                log.close()
                pending.unlink(missing_ok=True)
                raise
            kwargs["creationflags"] = WINDOWS_CREATION_FLAGS
        try:
            popen = subprocess.Popen(list(spec.argv), executable=spec.binary, env=env, cwd=spec.cwd,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, **kwargs)
        except (OSError, subprocess.SubprocessError) as exc:
            if cgroup is not None:
                cgroup.remove()
            if job is not None:
                job.close()
            pending.unlink(missing_ok=True)
            log.write(f"=== could not start: {exc}")
            log.close()
            raise OSError(f"could not start {spec.binary}: {getattr(exc, 'strerror', None) or exc}") from exc
        started_at = time.time()
        if job is not None:
            try:  # created suspended: it runs only once it is inside the job
                job.adopt_and_resume(int(popen._handle))  # type: ignore[attr-defined]
            except OSError as exc:
                popen.kill()
                popen.wait()
                job.close()
                pending.unlink(missing_ok=True)
                log.write(f"=== could not start: {exc}")
                log.close()
                raise
        # From here on the engine runs: its output is read at once, so a pipe never fills.
        proc = cls(spec, popen, log, None, started_at, hidden=tuple(v for v in (secrets or {}).values() if v))
        proc._job = job
        proc._cgroup = cgroup
        proc._cgroup_oom_kills = cgroup.oom_kills() if cgroup is not None else None
        if needs_watchdog():
            try:
                proc._watchdog = Watchdog(popen.pid)
            except OSError as exc:
                log.write(f"=== no watchdog ({exc}); the pid file is the only guard")
        # The memory cgroup must be read now: /proc/<pid>/cgroup goes with the process.
        with contextlib.suppress(OSError):
            proc._oom_watch = OomWatch(popen.pid)
        try:
            proc._pid_file = _write_pid_file(run_dir, popen.pid, spec.binary, token)
        except OSError as exc:  # the pending record (token in its environment) still names it
            log.write(f"=== could not write the pid file ({exc}); the pending record stays")
            proc._pending = pending
        else:
            pending.unlink(missing_ok=True)
        return proc

    # -- output

    def _read(self) -> None:
        """Lines end at `\n`, `\r\n` or a lone `\r`: sd-server and ds4 repaint their progress
        with `\r` and print a newline only when a render or prefill ends, so a readline()
        loop would hold every step back until the last one."""
        assert self._popen.stdout is not None
        fd = self._popen.stdout.fileno()
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 65536)  # whatever is there now, not a whole line
            except OSError:
                break
            if not chunk:
                break
            pending += chunk
            # A `\r` at the very end may be the first half of `\r\n`: keep it for the next chunk.
            cut = len(pending) - 1 if pending.endswith(b"\r") else len(pending)
            *lines, rest = _LINE_END.split(pending[:cut])
            pending = rest + pending[cut:]
            if lines:
                self._take(lines)
            time.sleep(READ_GATHER_S)
        if pending.rstrip(b"\r"):
            self._take([pending.rstrip(b"\r")])
        self._popen.stdout.close()

    def _take(self, raws: list[bytes]) -> None:
        """The lines of one read, redacted, kept and logged together (one pass, one lock, one flush)."""
        lines = redact_secrets(b"\n".join(raws).decode("utf-8", errors="replace"), self._hidden).split("\n")
        with self._ring_lock:
            self._ring.extend(lines)
        with contextlib.suppress(OSError, ValueError):  # a full disk must not take the engine down with it
            self._log.write_lines(lines)

    def tail(self, n: int = RING_LINES) -> tuple[str, ...]:
        with self._ring_lock:
            lines = tuple(self._ring)
        return lines[-n:]

    # -- state

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        """The return code once the process has ended (negative = signal on POSIX), else None."""
        code = self._popen.poll()
        if code is not None:
            self._cleanup()
        return code

    def mark_ready(self, at: float) -> None:
        self.ready_at = at

    def stop(self, grace_s: float = 10.0) -> int:
        """SIGTERM (with SIGCONT) the group, wait up to `grace_s`, then SIGKILL the group.

        A stopped (SIGSTOP, T state) engine cannot act on SIGTERM, so it gets SIGKILL at once;
        SIGCONT goes with every SIGTERM so an engine stopped after this check still wakes up
        to handle it. Returns the exit code.
        """
        self.stop_requested = True
        if self._popen.poll() is None:
            if POSIX and is_stopped(self._popen.pid):
                _signal_group(self._popen, signal.SIGKILL)
            else:
                if sys.platform == "win32":
                    _signal_group(self._popen, signal.CTRL_BREAK_EVENT)
                else:
                    _signal_group(self._popen, signal.SIGTERM)
                if POSIX:
                    _signal_group(self._popen, signal.SIGCONT)
            try:
                self._popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self._popen, signal.SIGKILL if POSIX else None)
                self._popen.wait(timeout=10)
        # Anything the engine forked shares its group; do not leave it behind.
        if POSIX:
            _signal_group(self._popen, signal.SIGKILL)
        self._cleanup()
        return self._popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._popen.wait(timeout=timeout)
        self._cleanup()
        return code

    def exit_report(self, now: float | None = None) -> EngineExit:
        """What ended the process; call after poll() returned a code."""
        code = self._popen.returncode
        now = time.time() if now is None else now
        self._reader.join(timeout=1.0)  # the last lines carry the reason
        sig = -code if code is not None and code < 0 else None
        oom = None
        if sig is not None and self._oom_at_exit is not None and not self.stop_requested:
            oom = self._oom_at_exit
        elif sig is not None and self._oom_watch is not None and not self.stop_requested:
            try:
                oom = self._oom_watch.killed_by_oom()
            except OSError:
                oom = None
        return EngineExit(
            pid=self.pid,
            exit_code=None if sig is not None else code,
            signal=sig,
            signalled_by_us=self.stop_requested,
            phase="ready" if self.ready_at is not None else "starting",
            uptime_s=max(0.0, now - self.started_at),
            ready_for_s=None if self.ready_at is None else max(0.0, now - self.ready_at),
            log_tail=self.tail(60),
            oom_killed=oom,
        )

    def _cleanup(self) -> None:
        if self._cgroup is not None:
            # The group goes with the engine, so its OOM counter is read first.
            after = self._cgroup.oom_kills()
            if after is not None and self._cgroup_oom_kills is not None:
                self._oom_at_exit = after > self._cgroup_oom_kills
            self._cgroup.remove()
            self._cgroup = None
        if self._watchdog is not None:
            self._watchdog.stand_down()
            self._watchdog = None
        if self._job is not None:
            self._job.close()  # the engine has ended; this only frees the handle
            self._job = None
        if self._pending is not None:
            self._pending.unlink(missing_ok=True)
            self._pending = None
        if self._pid_file is not None:
            with contextlib.suppress(FileNotFoundError):
                self._pid_file.unlink()
            self._pid_file = None


# ---------------------------------------------------------------------------- groups, pid files


def _signal_group(popen: subprocess.Popen, sig) -> None:
    if POSIX:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, sig)  # start_new_session made pid the group id
    elif sig is None:
        popen.kill()  # TerminateProcess; the job object takes the children with it
    else:
        try:  # CTRL_BREAK_EVENT reaches the CREATE_NEW_PROCESS_GROUP group, read like SIGINT
            popen.send_signal(sig)
        except OSError:
            popen.kill()


def is_stopped(pid: int) -> bool:
    """True when the process is in the stopped (T) state: SIGSTOP, a debugger, Ctrl-Z."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


# ---------------------------------------------------------------------------- Windows job object

CREATE_SUSPENDED = 0x00000004
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
WINDOWS_CREATION_FLAGS = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9


def job_structures(size_t=ctypes.c_size_t):
    """(JOBOBJECT_BASIC_LIMIT_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION) laid out for a
    platform whose SIZE_T / ULONG_PTR is `size_t` (the running one by default). LARGE_INTEGER
    is 64-bit everywhere and DWORD 32-bit; ctypes aligns like the platform's C compiler, so
    the extended structure is 144 bytes on 64-bit Windows and 112 on 32-bit, as
    SetInformationJobObject checks (the old hand-padded 160-byte copy made it fail)."""

    class IO_COUNTERS(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint64) for name in (
            "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
            "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]

    class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
        _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64),
                    ("PerJobUserTimeLimit", ctypes.c_int64),
                    ("LimitFlags", ctypes.c_uint32),
                    ("MinimumWorkingSetSize", size_t),
                    ("MaximumWorkingSetSize", size_t),
                    ("ActiveProcessLimit", ctypes.c_uint32),
                    ("Affinity", size_t),
                    ("PriorityClass", ctypes.c_uint32),
                    ("SchedulingClass", ctypes.c_uint32)]

    class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
        _fields_ = [("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
                    ("IoInfo", IO_COUNTERS),
                    ("ProcessMemoryLimit", size_t),
                    ("JobMemoryLimit", size_t),
                    ("PeakProcessMemoryUsed", size_t),
                    ("PeakJobMemoryUsed", size_t)]

    return JOBOBJECT_BASIC_LIMIT_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION


JOBOBJECT_BASIC_LIMIT_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION = job_structures()


class WindowsApi:
    """The four kernel32/ntdll calls the job needs, plus the last error; tests pass a fake."""

    def __init__(self):
        k32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        ntdll = ctypes.WinDLL("ntdll")  # type: ignore[attr-defined]
        handle = ctypes.c_void_p
        self.CreateJobObjectW = k32.CreateJobObjectW
        self.CreateJobObjectW.argtypes, self.CreateJobObjectW.restype = [ctypes.c_void_p, ctypes.c_wchar_p], handle
        self.SetInformationJobObject = k32.SetInformationJobObject
        self.SetInformationJobObject.argtypes = [handle, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
        self.SetInformationJobObject.restype = ctypes.c_int
        self.AssignProcessToJobObject = k32.AssignProcessToJobObject
        self.AssignProcessToJobObject.argtypes, self.AssignProcessToJobObject.restype = [handle, handle], ctypes.c_int
        self.CloseHandle = k32.CloseHandle
        self.CloseHandle.argtypes, self.CloseHandle.restype = [handle], ctypes.c_int
        # Popen keeps no thread handle, so the whole suspended process is resumed at once.
        self.NtResumeProcess = ntdll.NtResumeProcess
        self.NtResumeProcess.argtypes, self.NtResumeProcess.restype = [handle], ctypes.c_long

    @staticmethod
    def last_error() -> int:
        return ctypes.get_last_error()  # type: ignore[attr-defined]


def _windows_api() -> WindowsApi:
    return WindowsApi()


class WindowsJob:
    """A job object that kills every process in it when its last handle closes (Stoker's
    death closes it). Each call is checked; a failure is an OSError naming the call."""

    def __init__(self, api, handle):
        self._api, self.handle = api, handle

    @classmethod
    def create(cls, api) -> WindowsJob:
        handle = api.CreateJobObjectW(None, None)
        if not handle:
            raise OSError(f"could not create a Windows job object for the engine (error {api.last_error()})")
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not api.SetInformationJobObject(handle, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                                           ctypes.byref(info), ctypes.sizeof(info)):
            err = api.last_error()
            api.CloseHandle(handle)
            raise OSError(f"could not make the engine's job kill it with Stoker (error {err})")
        return cls(api, handle)

    def adopt_and_resume(self, process_handle: int) -> None:
        """Assign the suspended engine to the job, then let it run."""
        if not self._api.AssignProcessToJobObject(self.handle, process_handle):
            raise OSError(f"could not put the engine in its job object (error {self._api.last_error()})")
        status = self._api.NtResumeProcess(process_handle)
        if status != 0:
            raise OSError(f"could not resume the engine (NTSTATUS 0x{status & 0xFFFFFFFF:08X})")

    def close(self) -> None:
        if self.handle:
            self._api.CloseHandle(self.handle)
            self.handle = None


def _owner_identity() -> tuple[int, float]:
    me = psutil.Process()
    return me.pid, me.create_time()


def _write_record(path: Path, record: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(record))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_pending_record(run_dir: Path, token: str, binary: str) -> Path:
    """Written before the spawn: owner and token, so an engine is findable from its first instant."""
    owner_pid, owner_ct = _owner_identity()
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"engine-pending-{token}.json"
    _write_record(path, {"pending": True, "token": token, "binary": str(binary),
                         "owner_pid": owner_pid, "owner_create_time": owner_ct, "at": time.time()})
    return path


def _write_pid_file(run_dir: Path, pid: int, binary: str, token: str | None = None) -> Path | None:
    try:
        create_time = psutil.Process(pid).create_time()
    except psutil.Error:
        return None
    owner_pid, owner_ct = _owner_identity()
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"engine-{pid}.json"
    _write_record(path, {"pid": pid, "create_time": create_time, "binary": str(binary),
                         "owner_pid": owner_pid, "owner_create_time": owner_ct, "token": token})
    return path


def _find_by_token(token: str, binary: str | None) -> list[psutil.Process]:
    """Processes running `binary` whose environment carries this engine token."""
    name = os.path.basename(binary) if binary else None
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if name and proc.info.get("name") != name:
                continue
            if proc.environ().get(TOKEN_ENV) == token:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _same_process(pid: int, create_time: float) -> psutil.Process | None:
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) < 0.01:
            return proc
    except psutil.Error:
        pass
    return None


def reap_orphans(run_dir: Path | None = None, grace_s: float = 5.0) -> tuple[int, ...]:
    """Stop engines whose Stoker is gone; return their pids. Live owners' engines are left alone."""
    if run_dir is None:

        run_dir = stoker_paths().run
    stopped = []
    for pid_file in sorted(Path(run_dir).glob("engine-*.json")) if Path(run_dir).is_dir() else []:
        try:
            info = json.loads(pid_file.read_text())
            owner = info.get("owner_pid")
            if owner and _same_process(int(owner), float(info.get("owner_create_time", 0))):
                continue  # its Stoker is alive and still owns it
            if info.get("pending"):
                procs = _find_by_token(str(info["token"]), info.get("binary"))
            else:
                proc = _same_process(int(info["pid"]), float(info["create_time"]))
                procs = [proc] if proc is not None and _is_binary(proc, info.get("binary")) else []
        except (OSError, ValueError, KeyError, TypeError):
            pid_file.unlink(missing_ok=True)
            continue
        for proc in procs:
            _stop_orphan(proc, grace_s)
            stopped.append(proc.pid)
        pid_file.unlink(missing_ok=True)
    return tuple(dict.fromkeys(stopped))


def _is_binary(proc: psutil.Process, binary: str | None) -> bool:
    if not binary:
        return False
    try:
        exe = proc.exe()
    except psutil.Error:
        exe = ""
    try:
        argv0 = (proc.cmdline() or [""])[0]
    except psutil.Error:
        argv0 = ""
    want = os.path.realpath(binary)
    return want in (os.path.realpath(exe) if exe else "", os.path.realpath(argv0) if argv0 else "")


def _stop_orphan(proc: psutil.Process, grace_s: float) -> None:
    try:
        if POSIX:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                proc.terminate()
        else:
            proc.terminate()
        proc.wait(timeout=grace_s)
    except psutil.TimeoutExpired:
        try:
            if POSIX:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.wait(timeout=5)
        except (psutil.Error, ProcessLookupError, PermissionError):
            pass
    except psutil.Error:
        pass

