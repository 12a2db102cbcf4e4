"""Helpers for tests that run the real llama-server on the demo model (not fixtures)."""

from __future__ import annotations

import psutil

from app.core.launch_spec import LaunchSpec
from app.shell.process import free_loopback_port


def demo_spec(binary, model, *, ctx: int = 1024, port: int | None = None) -> LaunchSpec:
    """The small launch every engine test uses: one slot, a short context, no web UI."""
    port = port or free_loopback_port()
    binary = str(binary)
    argv = (binary, "-lv", "4", "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(ctx), "-np", "1", "--no-webui")
    return LaunchSpec(binary=binary, argv=argv, env=(), drop_env_prefixes=("LLAMA_ARG_", "LLAMA_API_KEY"),
                      secret_env=(), host="127.0.0.1", port=port)


def engines_running(binary) -> list[psutil.Process]:
    """llama-server processes started from this binary that are still alive."""
    import os

    want = os.path.realpath(str(binary))
    found = []
    for proc in psutil.process_iter(["exe", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = proc.info["cmdline"] or [""]
            exe = proc.info["exe"] or ""
            if want in (os.path.realpath(exe) if exe else "", os.path.realpath(cmd[0]) if cmd[0] else ""):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def chat(endpoint: str, text: str = "Say hi") -> str:
    import httpx

    resp = httpx.post(endpoint + "/v1/chat/completions", timeout=60,
                      json={"messages": [{"role": "user", "content": text}], "max_tokens": 8})
    resp.raise_for_status()
    return resp.json()["choices"][0]["message"]["content"]
