"""Readiness: refused → 503 → 200, process exit, deadline; and the real engine's /health."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from stoker.base.paths import stoker_paths
from stoker.engines.health import probe_health, wait_ready
from stoker.engines.process import EngineProcess, free_loopback_port
from tests.shell.engine_helpers import demo_spec


class Alive:
    code = None

    def poll(self):
        return self.code


@pytest.fixture
def loading_server():
    """A server that answers 503 for the first `loading` requests, then 200, like llama-server."""
    state = {"loading": 3, "hits": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state["hits"] += 1
            self.send_response(503 if state["hits"] <= state["loading"] else 200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()


def test_unbound_port_is_none():
    assert probe_health(f"http://127.0.0.1:{free_loopback_port()}") is None


def test_waits_through_503_until_200(loading_server):
    endpoint, state = loading_server
    result = wait_ready(endpoint, Alive(), deadline_s=5, interval_s=0.01)
    assert result.ready and state["hits"] == 4 and result.last_status == 200


def test_deadline_while_loading(loading_server):
    endpoint, state = loading_server
    state["loading"] = 10**6
    result = wait_ready(endpoint, Alive(), deadline_s=0.2, interval_s=0.02)
    assert not result.ready and result.last_status == 503 and "within 0.2 s" in result.reason


def test_process_exit_ends_the_wait_at_once():
    dead = Alive()
    dead.code = 1
    t0 = time.monotonic()
    result = wait_ready(f"http://127.0.0.1:{free_loopback_port()}", dead, deadline_s=30)
    assert not result.ready and result.exit_code == 1 and time.monotonic() - t0 < 1


@pytest.mark.engine
def test_real_engine_becomes_ready(engine_binary, demo_model, stoker_home):
    spec = demo_spec(engine_binary, demo_model)
    proc = EngineProcess.start(spec, log_dir=stoker_paths().logs)
    try:
        result = wait_ready(spec.endpoint, proc, deadline_s=60)
        assert result.ready, result.reason
        assert probe_health(spec.endpoint) == 200
    finally:
        proc.stop(grace_s=2)
    assert probe_health(spec.endpoint) is None
