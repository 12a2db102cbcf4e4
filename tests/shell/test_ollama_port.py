"""Settings' "Also answer on Ollama's port": off by default; on, the same gateway answers on
the extra port (Ollama's routes and the OpenAI ones); when Ollama itself (a stand-in that
answers /api/version as Ollama does) or another program holds the port, Stoker leaves it
alone and says why in one sentence among the snapshot's problems."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stoker.base.paths import stoker_paths
from stoker.base.store import SettingsStore
from stoker.engines.process import free_loopback_port
from stoker.fleet.commands import Shutdown
from stoker.instance.instance import Instance
from tests.shell.test_settings_reach import never_prepare


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def refused(port) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture
def instances():
    made = []

    def make(**kw):
        inst = Instance(never_prepare, port=0, **kw).start()
        made.append(inst)
        return inst

    yield make
    for inst in made:
        inst.supervisor.submit(Shutdown())
        inst.close()
        inst.supervisor.join(10)


class FakeOllama(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"version": "0.13.1"}).encode() if self.path == "/api/version" else b"{}"
        self.send_response(200 if self.path == "/api/version" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_off_by_default_and_on_the_same_gateway_answers_there(stoker_home, instances):
    port = free_loopback_port()
    off = instances(ollama_port=port)
    assert SettingsStore(stoker_paths().config).load().ollama_port is False
    assert refused(port) and off.ollama_port_problem is None
    SettingsStore(stoker_paths().config).update(ollama_port=True)
    on = instances(ollama_port=port)
    assert on.ollama_port_problem is None and on.url != f"http://127.0.0.1:{port}"
    assert get_json(f"http://127.0.0.1:{port}/api/version")["stoker"] is True
    assert get_json(f"http://127.0.0.1:{port}/api/tags") == get_json(on.url + "/api/tags")
    assert get_json(f"http://127.0.0.1:{port}/v1/models")["object"] == "list"
    # A second Stoker with the switch on finds the first one there and says so.
    second = instances(ollama_port=port)
    assert "Another Stoker already answers on 127.0.0.1:" in second.ollama_port_problem
    assert second.ollama_port_problem in second.supervisor.snapshot().problems


def test_refused_while_ollama_itself_or_another_program_holds_the_port(stoker_home, instances):
    SettingsStore(stoker_paths().config).update(ollama_port=True)
    ollama_itself = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
    threading.Thread(target=ollama_itself.serve_forever, daemon=True).start()
    port = ollama_itself.server_address[1]
    try:
        inst = instances(ollama_port=port)
        problem = inst.ollama_port_problem
        assert problem.startswith(f"Ollama itself (version 0.13.1) runs on 127.0.0.1:{port}, so Stoker does "
                                  "not listen there; quit Ollama")
        snap = inst.supervisor.wait_for(lambda s: problem in s.problems, 10)
        assert snap is not None, inst.supervisor.snapshot().problems
        assert get_json(f"http://127.0.0.1:{port}/api/version") == {"version": "0.13.1"}  # left alone
    finally:
        ollama_itself.shutdown()
        ollama_itself.server_close()

    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(4)
    try:
        inst = instances(ollama_port=other.getsockname()[1])
        assert inst.ollama_port_problem.startswith("Another program holds 127.0.0.1:")
    finally:
        other.close()
    with pytest.raises(urllib.error.URLError):
        get_json(f"http://127.0.0.1:{port}/api/version")
