"""Nobody in where they don't belong, in the gateway's own process (issue 21): a locked
keyring never opens the gateway, a web page cannot make Stoker load a model, and a flood
of half-sent connections cannot starve /health or stoker.log.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import keyring
import pytest

from stoker.base import secrets
from stoker.fleet import commands as cmd
from stoker.fleet.commands import Shutdown
from stoker.fleet.supervisor import FunctionPreparer
from stoker.gateway.rules import HEADER_TIMEOUT_S
from stoker.instance.instance import Instance
from tests.helpers.locking_keyring import FOLDER_ENV, LockingKeyring

from .test_faults import REPO, Stoker, home, run_args, status_json  # noqa: F401 (home: a fixture)

if sys.platform != "win32":
    import resource

CHAT = {"model": "smollm2-135m-instruct:q4_1", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}


def _never(model_path, attempt):
    raise AssertionError("nothing is loaded in this test")


never_prepare = FunctionPreparer(_never)


@pytest.fixture
def locking_keyring(tmp_path):
    before = keyring.get_keyring()
    backend = LockingKeyring(tmp_path / "keyring")
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


# ------------------------------------------------------------------ 1. the key never fails open


def test_a_keyring_that_locks_after_the_key_was_read_keeps_the_key(stoker_home, locking_keyring):
    secrets.set_api_key("s3cret-key")
    reads_before = locking_keyring.reads()
    instance = Instance(never_prepare, port=0).start()
    try:
        assert locking_keyring.reads() == reads_before + 1  # read once, at start
        assert httpx.get(instance.url + "/v1/models").status_code == 401
        locking_keyring.lock()
        instance.gateway.refresh_key()  # what a save in Settings does: this read fails
        assert locking_keyring.reads() == reads_before + 2
        for _ in range(3):
            keyless = httpx.get(instance.url + "/v1/models")
            assert keyless.status_code == 401, keyless.text
            assert httpx.post(instance.url + "/v1/chat/completions", json=CHAT).status_code == 401
        keyed = httpx.get(instance.url + "/v1/models", headers={"Authorization": "Bearer s3cret-key"})
        assert keyed.status_code == 200
        # the requests above were answered without a single read more: nothing polls the keyring
        assert locking_keyring.reads() == reads_before + 2
    finally:
        instance.supervisor.submit(Shutdown())
        instance.close()
        instance.supervisor.join(10)


@pytest.mark.usefixtures("home")
def test_a_keyring_locked_from_the_start_answers_503_with_a_sentence_and_never_prompts_again(
        demo_model, tmp_path):
    backend = LockingKeyring(tmp_path / "keyring")
    backend.set_password(secrets.SERVICE, secrets.API_KEY_ENTRY, "s3cret-key")
    backend.lock()
    env = {**os.environ, "PYTHON_KEYRING_BACKEND": "tests.helpers.locking_keyring.LockingKeyring",
           FOLDER_ENV: str(tmp_path / "keyring")}
    run = Stoker(*run_args(demo_model), env=env)
    try:
        run.wait_line("ready: ")
        url = status_json(env)["gateway"]["url"]
        reads = backend.reads()
        assert reads >= 1
        for _ in range(3):
            refused = httpx.post(url + "/v1/chat/completions", json=CHAT)
            assert refused.status_code == 503
            assert "keyring" in refused.json()["error"]["message"]
            assert httpx.get(url + "/v1/models").status_code == 503
        assert httpx.get(url + "/health").status_code == 200
        assert backend.reads() == reads  # answered three times over, read no more
    finally:
        run.close()


# ------------------------------------------------------------------ 2. no cross-site loads


class _Recorded:
    """Every command the gateway process hands the supervisor; a load is answered at once
    with a refusal, so nothing is really started."""

    def __init__(self, instance: Instance) -> None:
        self.commands: list = []
        self._submit = instance.supervisor.submit
        instance.supervisor.submit = self.submit

    def submit(self, command) -> None:
        self.commands.append(command)
        if isinstance(command, cmd.EnsureModel):
            command.answer(cmd.EnsureResult(error="not in this test"))
            return
        self._submit(command)

    def loads(self) -> list:
        return [c for c in self.commands if isinstance(c, cmd.EnsureModel | cmd.LoadModel | cmd.StartModel)]


def test_a_cross_site_no_cors_get_loads_nothing(stoker_home, demo_model):
    instance = Instance(never_prepare, port=0, extra_models=(str(demo_model),)).start()
    recorded = _Recorded(instance)
    try:
        page = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
        for path in ("/v1/chat/completions?model=" + CHAT["model"], "/props?model=" + CHAT["model"]):
            answer = httpx.get(instance.url + path, headers=page)
            assert answer.status_code == 403, answer.text
            assert "another web site" in answer.json()["error"]["message"]
        # Not from a page: a GET still never loads, and `?model=` outside a POST names nothing.
        assert httpx.get(instance.url + "/v1/chat/completions?model=" + CHAT["model"]).status_code == 405
        props = httpx.get(instance.url + "/props?model=" + CHAT["model"])
        assert props.status_code == 503 and "already loaded" in props.json()["error"]["message"]
        port = instance.url.rsplit(":", 1)[1]
        smuggled = httpx.get(instance.url + "/health", headers={"Host": f"localhost:{port}@evil.example"})
        assert smuggled.status_code == 403 and "loopback" in smuggled.json()["error"]["message"]
        assert recorded.loads() == []
        # the control: a client's POST does ask for the load
        assert httpx.post(instance.url + "/v1/chat/completions", json=CHAT).status_code == 503
        assert [type(c) for c in recorded.loads()] == [cmd.EnsureModel]
    finally:
        instance.supervisor.submit = recorded._submit
        instance.supervisor.submit(Shutdown())
        instance.close()
        instance.supervisor.join(10)


# ------------------------------------------------------------------ 3. the gateway can't be starved


def _run_with_open_file_limit(soft: int, hard: int, *args) -> subprocess.Popen:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.Popen([sys.executable, "-m", "stoker", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, preexec_fn=limit)


def _wait_ready(proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            if line.startswith("ready: "):
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    while not ready.wait(0.2):
        assert proc.poll() is None, "stoker run ended before it was ready"
        assert time.monotonic() < deadline, "stoker run was not ready in time"


def _half_sent(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    # Past the cap the gateway may drop an older half-sent one before it sent a byte: fine.
    with contextlib.suppress(ConnectionError):
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never the blank line
    return s


@pytest.mark.usefixtures("home")
@pytest.mark.skipif(sys.platform == "win32", reason="open-file limits are POSIX")
@pytest.mark.parametrize("hard", [None, 1024], ids=["soft-1024-raised", "hard-1024-capped"])
def test_1100_half_sent_connections_leave_health_answering_and_the_log_small(demo_model, stoker_home, hard):
    soft_here, hard_here = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft_here != resource.RLIM_INFINITY and soft_here < 1400:  # this test holds 1,100 sockets itself
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard_here), hard_here))
    hard_there = hard or hard_here
    proc = _run_with_open_file_limit(1024, hard_there, *run_args(demo_model))
    held: list[socket.socket] = []
    try:
        _wait_ready(proc)
        url = status_json()["gateway"]["url"]
        port = int(url.rsplit(":", 1)[1])
        log_file = stoker_home / "logs" / "stoker.log"
        before = log_file.stat().st_size
        for _ in range(1100):
            held.append(_half_sent(port))
        # A gateway out of descriptors never answers (accept fails, the request sits in the
        # backlog), so the timeout is the proof; it is generous because a busy machine is slow,
        # not wedged (CI once took 1.02 s here).
        health = httpx.get(url + "/health", timeout=10.0)
        assert health.status_code == 200
        # The held ones are dropped once their head is late: the first one sees the end.
        first = held[-1]
        first.settimeout(HEADER_TIMEOUT_S + 10)
        with contextlib.suppress(ConnectionResetError):  # dropped with a reset: also the end
            assert first.recv(1) == b""
        assert httpx.get(url + "/health", timeout=10.0).status_code == 200
        grown = log_file.stat().st_size - before
        assert grown < 100_000, f"stoker.log grew by {grown} bytes"
    finally:
        for s in held:
            s.close()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
