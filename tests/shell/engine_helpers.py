"""Helpers for tests that run the real llama-server on the demo model (not fixtures)."""

from __future__ import annotations

import psutil

from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.process import free_loopback_port
from tests.helpers.waiting import wait_until  # noqa: F401  (the engine tests import it from here)


def demo_spec(binary, model, *, ctx: int = 1024, port: int | None = None) -> LaunchSpec:
    """The small launch every engine test uses: one slot, a short context, no web UI."""
    port = port or free_loopback_port()
    binary = str(binary)
    argv = (binary, "-lv", "4", "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(ctx), "-np", "1", "--no-webui")
    return LaunchSpec(binary=binary, argv=argv, env=(), drop_env_prefixes=("LLAMA_ARG_", "LLAMA_API_KEY"),
                      secret_env=(), host="127.0.0.1", port=port)


def engines_running(binary, home: str | None = None) -> list[psutil.Process]:
    """Live llama-server processes from this binary started under this STOKER_HOME.

    Other helpers' tests may run the same binary at the same time; an engine Stoker starts
    carries XDG_CONFIG_HOME under its STOKER_HOME, which tells ours apart.
    """
    import os

    want = os.path.realpath(str(binary))
    home = os.path.realpath(home or os.environ.get("STOKER_HOME", "")) or None
    found = []
    for proc in psutil.process_iter(["exe", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = proc.info["cmdline"] or [""]
            exe = proc.info["exe"] or ""
            if want not in (os.path.realpath(exe) if exe else "",
                            os.path.realpath(cmd[0]) if cmd[0] else ""):
                continue
            if home is not None:
                config_home = proc.environ().get("XDG_CONFIG_HOME", "")
                if not os.path.realpath(config_home).startswith(home + os.sep):
                    continue
            found.append(proc)
        except psutil.Error:
            continue
    return found


def engine_key(sup) -> str | None:
    """The per-launch key of the supervisor's focused engine (for a test talking to it
    directly, behind the gateway's back)."""
    route = sup.routes.route(sup.snapshot().engines[0].model_path) if sup.snapshot().engines else None
    return route.engine_key if route else None


def chat(endpoint: str, text: str = "Say hi", key: str | None = None) -> str:
    import httpx

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    resp = httpx.post(endpoint + "/v1/chat/completions", timeout=60, headers=headers,
                      json={"messages": [{"role": "user", "content": text}], "max_tokens": 8})
    resp.raise_for_status()
    return resp.json()["choices"][0]["message"]["content"]


