"""One llama-server process: spawn a LaunchSpec, capture its output, stop it, report its exit.

The engine runs in its own process group (a job object on Windows, best effort) so a stop
reaches anything it forked (ggml may fork gdb for a backtrace). Output goes to a rotating
log file in the log folder and to a ring buffer kept for diagnosis. A pid file per engine
lets the next Stoker stop engines a crashed Stoker left behind (`reap_orphans`), checked
against the process create time so a reused pid is never killed.
This module does not decide anything: when to start, stop or retry is core/lifecycle.py's.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import psutil

from stoker.core.argv import DROP_ENV_PREFIXES
from stoker.core.launch_spec import LaunchSpec
from stoker.core.lifecycle import EngineExit

LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3
RING_LINES = 400
POSIX = os.name == "posix"


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


class RotatingLog:
    """Append lines to a file, keeping `backups` older files of at most `max_bytes` each."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS):
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8", errors="replace")

    def write(self, line: str) -> None:
        if self._fh.tell() + len(line) + 1 > self.max_bytes:
            self._rotate()
        self._fh.write(line + "\n")
        self._fh.flush()

    def _rotate(self) -> None:
        self._fh.close()
        for i in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        if self.backups:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._fh = open(self.path, "w", encoding="utf-8", errors="replace")

    def close(self) -> None:
        self._fh.close()


_LINE_END = re.compile(rb"\r\n|\r|\n")


class EngineProcess:
    """A started engine. Build it with `EngineProcess.start(...)`."""

    def __init__(self, spec: LaunchSpec, popen: subprocess.Popen, log: RotatingLog,
                 pid_file: Path | None, started_at: float):
        self.spec = spec
        self._popen = popen
        self._log = log
        self._pid_file = pid_file
        self.started_at = started_at  # unix time of the spawn
        self.ready_at: float | None = None
        self.stop_requested = False
        self._oom_watch = None
        self._cgroup = None  # the engine's own memory cgroup (memory_limit_bytes), removed at exit
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
              log_name: str = "engine.log") -> "EngineProcess":
        """Spawn the spec; raise OSError with a readable message when it cannot start at all."""
        from stoker.shell.paths import stoker_paths

        paths = stoker_paths()
        run_dir = run_dir or paths.run
        config_home = config_home or (paths.cache / "engine-config-home")
        env = engine_environment(spec, secrets or {}, config_home)
        log = RotatingLog(Path(log_dir) / log_name)
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(spec.argv)}")
        kwargs: dict = {}
        cgroup = None
        if POSIX:
            kwargs["start_new_session"] = True
            if spec.memory_limit_bytes:
                from stoker.shell.memory_cgroup import MemoryCgroup

                try:
                    cgroup = MemoryCgroup.create(spec.memory_limit_bytes)
                except OSError as exc:
                    log.write(f"=== could not start: {exc}")
                    log.close()
                    raise
                kwargs["preexec_fn"] = cgroup.enter_fn()
        else:
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP
        try:
            popen = subprocess.Popen(list(spec.argv), executable=spec.binary, env=env, cwd=spec.cwd,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, **kwargs)
        except (OSError, subprocess.SubprocessError) as exc:
            if cgroup is not None:
                cgroup.remove()
            log.write(f"=== could not start: {exc}")
            log.close()
            raise OSError(f"could not start {spec.binary}: {getattr(exc, 'strerror', None) or exc}") from exc
        started_at = time.time()
        oom_watch = None
        try:  # the memory cgroup must be read now: /proc/<pid>/cgroup goes with the process
            from stoker.shell.oom_evidence import OomWatch

            oom_watch = OomWatch(popen.pid)
        except (ImportError, OSError):
            pass
        if not POSIX:
            _assign_job_object(popen)
        pid_file = _write_pid_file(run_dir, popen.pid, spec.binary)
        proc = cls(spec, popen, log, pid_file, started_at)
        proc._oom_watch = oom_watch
        proc._cgroup = cgroup
        proc._cgroup_oom_kills = cgroup.oom_kills() if cgroup is not None else None
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
            for raw in lines:
                self._take(raw)
        if pending.rstrip(b"\r"):
            self._take(pending.rstrip(b"\r"))
        self._popen.stdout.close()

    def _take(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace")
        with self._ring_lock:
            self._ring.append(line)
        try:
            self._log.write(line)
        except (OSError, ValueError):
            pass  # a full disk must not take the engine down with it

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
        """SIGTERM the group, wait up to `grace_s`, then SIGKILL the group. Returns the exit code."""
        self.stop_requested = True
        if self._popen.poll() is None:
            _signal_group(self._popen, signal.SIGTERM if POSIX else signal.CTRL_BREAK_EVENT)
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
        if self._pid_file is not None:
            try:
                self._pid_file.unlink()
            except FileNotFoundError:
                pass
            self._pid_file = None


# ---------------------------------------------------------------------------- groups, pid files


def _signal_group(popen: subprocess.Popen, sig) -> None:
    if POSIX:
        try:
            os.killpg(popen.pid, sig)  # start_new_session made pid the group id
        except (ProcessLookupError, PermissionError):
            pass
    elif sig is None:
        popen.kill()  # TerminateProcess; the job object takes the children with it
    else:
        try:  # CTRL_BREAK_EVENT reaches the CREATE_NEW_PROCESS_GROUP group, read like SIGINT
            popen.send_signal(sig)
        except OSError:
            popen.kill()


def _assign_job_object(popen: subprocess.Popen) -> None:
    """Windows: put the engine in a job that dies with Stoker. Best effort, untested here."""
    try:
        import ctypes
        from ctypes import wintypes

        k32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        job = k32.CreateJobObjectW(None, None)

        class LIMIT(ctypes.Structure):  # JOBOBJECT_EXTENDED_LIMIT_INFORMATION, only LimitFlags set
            _fields_ = [("pad1", ctypes.c_int64 * 2), ("LimitFlags", wintypes.DWORD),
                        ("pad2", ctypes.c_byte * 140)]

        info = LIMIT()
        info.LimitFlags = 0x2000  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        k32.SetInformationJobObject(job, 9, ctypes.byref(info), ctypes.sizeof(info))
        k32.AssignProcessToJobObject(job, int(popen._handle))  # type: ignore[attr-defined]
        popen._stoker_job = job  # type: ignore[attr-defined]  # closing it would kill the engine
    except Exception:  # noqa: BLE001 - the group is the fallback; a missing job is not fatal
        pass


def _owner_identity() -> tuple[int, float]:
    me = psutil.Process()
    return me.pid, me.create_time()


def _write_pid_file(run_dir: Path, pid: int, binary: str) -> Path | None:
    try:
        create_time = psutil.Process(pid).create_time()
    except psutil.Error:
        return None
    owner_pid, owner_ct = _owner_identity()
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"engine-{pid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": pid, "create_time": create_time, "binary": str(binary),
                               "owner_pid": owner_pid, "owner_create_time": owner_ct}))
    os.replace(tmp, path)
    return path


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
        from stoker.shell.paths import stoker_paths

        run_dir = stoker_paths().run
    stopped = []
    for pid_file in sorted(Path(run_dir).glob("engine-*.json")) if Path(run_dir).is_dir() else []:
        try:
            info = json.loads(pid_file.read_text())
            pid, ct = int(info["pid"]), float(info["create_time"])
        except (OSError, ValueError, KeyError, TypeError):
            pid_file.unlink(missing_ok=True)
            continue
        owner = info.get("owner_pid")
        if owner and _same_process(int(owner), float(info.get("owner_create_time", 0))):
            continue  # its Stoker is alive and still owns it
        proc = _same_process(pid, ct)
        if proc is not None and _is_binary(proc, info.get("binary")):
            _stop_orphan(proc, grace_s)
            stopped.append(pid)
        pid_file.unlink(missing_ok=True)
    return tuple(stopped)


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

