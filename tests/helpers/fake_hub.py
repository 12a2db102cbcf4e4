"""A local HTTP server in the Hugging Face hub's URL layout, for `stoker pull` tests.

It serves real files (the demo model, Gemma 3 270M) under the routes the real
huggingface_hub client calls: `GET /api/models/<repo>[/revision/<rev>]` (the file list with
LFS sha256 and sizes), and `HEAD`/`GET /<repo>/resolve/<rev>/<file>` with X-Repo-Commit,
ETag (the sha256), Content-Length and Range. Knobs make the faults a real download meets:
a connection cut after N bytes, a body held at a byte until the test
releases it (to interrupt a process at a known point, whatever the machine's speed), a
flipped byte. Every request is logged with its Range header so tests can see what was fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_sha_cache: dict[Path, str] = {}


def sha256_of(path: Path) -> str:
    if path not in _sha_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _sha_cache[path] = h.hexdigest()
    return _sha_cache[path]


@dataclass
class HubRepo:
    files: dict[str, Path]  # name in the repository -> file on disk
    texts: dict[str, bytes] = field(default_factory=dict)  # small non-LFS files (README.md)


@dataclass
class Knobs:
    cut_after: dict[str, int] = field(default_factory=dict)  # file -> cut the connection once after N bytes
    corrupt_at: dict[str, int] = field(default_factory=dict)  # file -> byte offset served flipped
    # A hostile hub: the commit it names, and the sha256 it states for a file (API and ETag).
    commit: str = COMMIT
    stated_sha256: dict[str, str] = field(default_factory=dict)
    # file -> serve downloads up to byte N of the file, then hold the rest until `FakeHub.release`
    hold_at: dict[str, int] = field(default_factory=dict)


class Barrier:
    """The point where the hub holds a body: `reached` is set once the held bytes are written,
    `released` is set by the test to let the rest go (or, after the client is gone, to end it)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.released = threading.Event()


class FakeHub:
    def __init__(self, repos: dict[str, HubRepo]):
        self.repos = repos
        self.knobs = Knobs()
        self.log: list[tuple[str, str, str | None]] = []  # (method, path, Range)
        self.barriers: dict[str, Barrier] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                hub._serve(self, body=True)

            def do_HEAD(self):
                hub._serve(self, body=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        for barrier in self.barriers.values():  # never leave a handler thread parked
            barrier.released.set()
        self.server.shutdown()
        self.server.server_close()

    def hold(self, name: str, at: int) -> Barrier:
        """Hold every download of `name` at byte `at` of the file until `release(name)`: a client
        that gives up on the held connection and asks again with a Range (huggingface_hub does
        after its read timeout on a slow machine) is held at the same byte, not served the rest."""
        self.knobs.hold_at[name] = at
        self.barriers[name] = Barrier()
        return self.barriers[name]

    def release(self, name: str) -> None:
        self.knobs.hold_at.pop(name, None)
        self.barriers[name].released.set()

    def body_gets(self, name: str) -> list[str | None]:
        """The Range headers of the GETs of `name` that asked for the rest of the file (a download,
        not a header read, which asks for a closed range)."""
        return [r for m, p, r in self.log if m == "GET" and p.endswith("/" + name) and (r is None or r.endswith("-"))]

    # -- routes

    def _serve(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = h.path.split("?", 1)[0]
        self.log.append((h.command, path, h.headers.get("Range")))
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
        if m:
            return self._info(h, m.group(1), body)
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            return self._file(h, m.group(1), m.group(3), body)
        self._error(h, 404, "EntryNotFound", "no such route")

    def _error(self, h, status: int, code: str, message: str) -> None:
        data = json.dumps({"error": message}).encode()
        h.send_response(status)
        h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _info(self, h, repo: str, body: bool) -> None:
        r = self.repos.get(repo)
        if r is None:
            return self._error(h, 404, "RepoNotFound", f"Repository {repo} not found")
        siblings = [{"rfilename": n, "size": p.stat().st_size, "blobId": sha256_of(p)[:40],
                     "lfs": {"size": p.stat().st_size, "sha256": self._sha(n, p), "pointerSize": 134}}
                    for n, p in r.files.items()]
        siblings += [{"rfilename": n, "size": len(t), "blobId": hashlib.sha1(t).hexdigest()}
                     for n, t in r.texts.items()]
        data = json.dumps({"id": repo, "modelId": repo, "sha": self.knobs.commit, "private": False, "gated": False,
                           "siblings": siblings, "tags": ["gguf"]}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)

    def _sha(self, name: str, path: Path) -> str:
        return self.knobs.stated_sha256.get(name) or sha256_of(path)

    def _file(self, h, repo: str, name: str, body: bool) -> None:
        r = self.repos.get(repo)
        if r is None:
            return self._error(h, 404, "RepoNotFound", f"Repository {repo} not found")
        if name not in r.files:
            return self._error(h, 404, "EntryNotFound", f"{name} does not exist")
        path = r.files[name]
        size = path.stat().st_size
        start, end = 0, size - 1
        rng = h.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng)
            start = int(m.group(1))
            end = min(size - 1, int(m.group(2))) if m.group(2) else size - 1
        h.send_response(206 if rng else 200)
        h.send_header("X-Repo-Commit", self.knobs.commit)
        h.send_header("ETag", f'"{self._sha(name, path)}"')
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(end - start + 1))
        if rng:
            h.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        h.end_headers()
        if not body:
            return
        whole_body = not rng or rng.endswith("-")
        cut = self.knobs.cut_after.pop(name, None) if whole_body else None
        held_at = self.knobs.hold_at.get(name) if whole_body else None
        hold = max(held_at - start, 0) if held_at is not None else None  # bytes of this body before it
        flip = self.knobs.corrupt_at.get(name)
        with open(path, "rb") as f:
            f.seek(start)
            pos = start
            while pos <= end:
                chunk = f.read(min(1 << 20, end - pos + 1))
                if flip is not None and pos <= flip < pos + len(chunk):
                    b = bytearray(chunk)
                    b[flip - pos] ^= 0xFF
                    chunk = bytes(b)
                if hold is not None and pos - start + len(chunk) > hold:
                    if not self._hold(h, name, chunk[: hold - (pos - start)]):
                        return
                    chunk, hold = chunk[hold - (pos - start):], None
                if cut is not None and pos - start + len(chunk) > cut:
                    h.wfile.write(chunk[: cut - (pos - start)])
                    h.wfile.flush()
                    h.close_connection = True
                    h.connection.shutdown(2)
                    return
                try:
                    h.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                pos += len(chunk)


    def _hold(self, h: BaseHTTPRequestHandler, name: str, head: bytes) -> bool:
        """Write `head`, signal the barrier, wait for the test's release; False if the client left."""
        barrier = self.barriers[name]
        try:
            h.wfile.write(head)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False
        finally:
            barrier.reached.set()
        barrier.released.wait()
        return True
