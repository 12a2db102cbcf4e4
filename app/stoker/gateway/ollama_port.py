"""Settings' "Also answer on Ollama's port": the gateway listens on 127.0.0.1:11434 as well.

Many apps (the Ollama VS Code extension, Xcode's "Locally Hosted", n8n, scripts written for
Ollama) assume 127.0.0.1:11434 and offer no field for another port. With the switch on,
Stoker binds that port too when nothing else holds it and hands the socket to the gateway
process beside the main one, so every route (Ollama's and OpenAI's) answers there. When
Ollama itself runs there (GET /api/version answers as Ollama does), or another program
holds the port, nothing is bound and the one sentence why is returned for the tray and the
log. What the answer means is decided in stoker/gateway/ollama_rules.py; this module only
connects, asks and binds. Must not take the port from a program that holds it.
"""

from __future__ import annotations

import socket

import httpx

from stoker.gateway.ollama_rules import OLLAMA_PORT, ollama_port_refusal
from stoker.gateway.server import GatewayError, bind_sockets

PROBE_TIMEOUT_S = 1.0


def _who_answers(port: int) -> tuple[bool, dict | None]:
    """(something accepts connections on 127.0.0.1:port, its /api/version JSON or None)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError:
        return False, None
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/api/version", timeout=PROBE_TIMEOUT_S)
        body = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        body = None
    return True, body if isinstance(body, dict) else None


def bind_ollama_port(port: int = OLLAMA_PORT) -> tuple[list[socket.socket], str | None]:
    """The listening socket on 127.0.0.1:`port`, or no socket and the sentence why not."""
    held, version = _who_answers(port)
    refusal = ollama_port_refusal(port, held, version)
    if refusal is not None:
        return [], refusal
    try:
        return bind_sockets(port, ("127.0.0.1",)), None
    except GatewayError:
        return [], ollama_port_refusal(port, True, None)
