"""The local control channel: `stoker status` / `stoker stop` ask the running instance.

POSIX: an AF_UNIX socket at <run>/control.sock (when that one is too long for a socket
address, a short one in $XDG_RUNTIME_DIR or a 0700 folder of this user's in the temp
folder). Windows (and `transport="tcp"`, used to test it here): a 127.0.0.1 TCP port
written with a random token to <run>/control.json; a request must carry the token, so
only someone who can read the user's data folder can ask.
Requests and answers are one JSON object per line: {"op": "status"} / {"op": "stop"}.
One instance at a time: `claim()` first takes an exclusive lock on <run>/instance.lock
(flock on POSIX, msvcrt.locking on Windows) and holds it for the process lifetime; the OS
drops it when the process dies, however it dies. Only the lock holder unlinks and binds the
socket, so two instances started at the same instant cannot both claim it (a check, unlink,
bind sequence could). The loser is told who runs, and where.
It only carries messages: what "stop" means is the handler's business.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import stat
import sys
import tempfile
import threading

if os.name == "nt":
    import msvcrt
else:
    import fcntl
from collections.abc import Callable
from pathlib import Path

from stoker.base.paths import stoker_paths

MAX_UNIX_PATH = 100  # sun_path is 104-108 bytes depending on the OS
MAX_REQUEST = 64 * 1024


class AlreadyRunning(Exception):
    """Another instance holds the control channel; the message says what to do."""

    def __init__(self, message: str, pid: int | None = None, status: dict | None = None):
        super().__init__(message)
        self.pid = pid
        self.status = status or {}


class InstanceLock:
    """An exclusive lock on a file, held until `release()` or the process ends."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    def acquire(self) -> bool:
        """True when this process now holds the lock; False when another one does."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if sys.platform == "win32":
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        if os.name != "nt":  # a Windows lock covers byte 0, which must not be rewritten
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder_pid(self) -> int | None:
        try:
            return int(self.path.read_text().strip() or "x")
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        if self._fd is not None:
            if sys.platform == "win32":
                try:
                    os.lseek(self._fd, 0, os.SEEK_SET)
                    msvcrt.locking(self._fd, msvcrt.LK_UNLCK, 1)
                except OSError:
                    pass
            os.close(self._fd)  # closing the descriptor drops a flock
            self._fd = None


def where_it_runs(status: dict) -> str:
    """" as a tray icon, serving http://…" and the like, from a status answer."""
    parts = []
    if status.get("tray_shown") is True:
        parts.append(" as a tray icon")
    elif status.get("tray_shown") is False:
        parts.append(" headless")
    if status.get("endpoint"):
        parts.append(f", serving {status.get('model') or 'a model'} at {status['endpoint']}/v1")
    return "".join(parts)


def _default_run_dir() -> Path:

    return stoker_paths().run


def default_transport() -> str:
    return "unix" if hasattr(socket, "AF_UNIX") and os.name == "posix" else "tcp"


def socket_path(run_dir: Path, *, create: bool = False) -> Path:
    """<run>/control.sock, or, when that path is too long for a socket address, a short one
    in a folder only this user can enter: $XDG_RUNTIME_DIR (0700 by its specification), else
    <tmp>/stoker-<uid> made 0700 (`create`, the server's side). A predictable name in the
    shared temp folder itself could be taken first by another user, who would then answer
    `stoker status` or receive `stoker stop`. Raises OSError with a sentence when the folder
    is not this user's alone."""
    path = Path(run_dir) / "control.sock"
    if len(os.fsencode(str(path))) <= MAX_UNIX_PATH:
        return path
    name = f"stoker-{hashlib.sha1(str(path).encode()).hexdigest()[:16]}.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _private_folder(Path(runtime)) and len(os.fsencode(str(Path(runtime) / name))) <= MAX_UNIX_PATH:
        return Path(runtime) / name
    folder = Path(tempfile.gettempdir()) / f"stoker-{os.getuid()}"
    if create:
        with contextlib.suppress(FileExistsError):  # checked just below, whoever made it
            folder.mkdir(mode=0o700)
    if not _private_folder(folder):
        raise OSError(f"{folder} is not a folder only you can use (another user may have made it), so "
                      "Stoker will not put its control socket there; remove it, set XDG_RUNTIME_DIR, or "
                      "choose a shorter STOKER_HOME")
    return folder / name


def _private_folder(folder: Path) -> bool:
    """A real folder (not a link), owned by this user, that no one else may enter."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _connect(run_dir: Path, transport: str, timeout: float) -> tuple[socket.socket, str | None]:
    """A connected socket and the token to send; raises OSError when nothing listens."""
    if transport == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(str(socket_path(run_dir)))
        except OSError:
            s.close()
            raise
        return s, None
    info_file = Path(run_dir) / "control.json"
    try:
        info = json.loads(info_file.read_text())
        port, token = int(info["port"]), str(info["token"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConnectionRefusedError(f"no control file at {info_file}") from exc
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s, token


def request(op: str, *, run_dir: Path | None = None, transport: str | None = None,
            timeout: float = 5.0, fields: dict | None = None) -> dict | None:
    """Ask the running instance; None when no instance is running."""
    run_dir = Path(run_dir or _default_run_dir())
    transport = transport or default_transport()
    try:
        s, token = _connect(run_dir, transport, timeout)
    except OSError:
        return None
    data = b""
    try:
        with s:
            msg = {**(fields or {}), "op": op}
            if token is not None:
                msg["token"] = token
            s.sendall(json.dumps(msg).encode() + b"\n")
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return json.loads(data) if data.endswith(b"\n") else None
    except (OSError, ValueError):
        return None  # an instance that is shutting down, or not a Stoker at all


class ControlServer:
    """Serve `handler(request) -> answer` on the control channel from a small thread."""

    def __init__(self, handler: Callable[[dict], dict], *, run_dir: Path | None = None,
                 transport: str | None = None):
        self._handler = handler
        self._run_dir = Path(run_dir or _default_run_dir())
        self._transport = transport or default_transport()
        self._sock: socket.socket | None = None
        self._token: str | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._lock = InstanceLock(self._run_dir / "instance.lock")

    def claim(self) -> ControlServer:
        """Take the instance lock and the channel, or raise AlreadyRunning naming who holds it."""
        self._run_dir.mkdir(parents=True, exist_ok=True)
        if not self._lock.acquire():
            answer = request("status", run_dir=self._run_dir, transport=self._transport, timeout=2.0)
            status = (answer or {}).get("status") or {}
            pid = status.get("instance_pid") or self._lock.holder_pid()
            who = f" (pid {pid})" if pid else ""
            raise AlreadyRunning(f"another Stoker instance is already running{who}"
                                 f"{where_it_runs(status)}; use `stoker status` to see it or "
                                 "`stoker stop` to stop it first", pid, status)
        try:
            self._bind()
        except BaseException:
            self._lock.release()
            raise
        return self

    def _bind(self) -> None:
        if self._transport == "unix":
            path = socket_path(self._run_dir, create=True)
            path.unlink(missing_ok=True)  # we hold the lock: whatever is there is stale
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            os.chmod(path, 0o600)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            self._token = secrets.token_hex(16)
            info = self._run_dir / "control.json"
            tmp = info.with_suffix(".tmp")
            tmp.write_text(json.dumps({"port": s.getsockname()[1], "token": self._token,
                                       "pid": os.getpid()}))
            os.replace(tmp, info)
        s.listen(8)
        s.settimeout(0.2)  # lets the serving thread notice close()
        self._sock = s

    def serve(self) -> ControlServer:
        if self._sock is None:
            self.claim()
        self._thread = threading.Thread(target=self._serve, name="stoker-control", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        while not self._closed.is_set():
            sock = self._sock
            if sock is None:  # close() got here first: it sets _sock to None
                break
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            with conn:
                try:
                    conn.settimeout(5)
                    self._answer(conn)
                except (OSError, ValueError):
                    continue  # a client that hung up or sent garbage must not stop the server

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        try:
            req = json.loads(data or b"{}")
            if not isinstance(req, dict):
                raise ValueError
        except ValueError:
            answer = {"ok": False, "error": "the request is not a JSON object"}
        else:
            if self._token is not None and req.get("token") != self._token:
                answer = {"ok": False, "error": "the control token does not match"}
            else:
                try:
                    answer = self._handler(req)
                except Exception as exc:
                    answer = {"ok": False, "error": f"the request failed: {exc}"}
        conn.sendall(json.dumps(answer).encode() + b"\n")

    def close(self) -> None:
        self._closed.set()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._thread is not None:
            self._thread.join(2)
        if self._lock.held:  # only the holder's files are ours to remove
            if self._transport == "unix":
                socket_path(self._run_dir).unlink(missing_ok=True)
            else:
                (self._run_dir / "control.json").unlink(missing_ok=True)
        self._lock.release()

    def __enter__(self) -> ControlServer:
        return self.serve()

    def __exit__(self, *exc) -> None:
        self.close()
