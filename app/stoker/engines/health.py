"""Is the engine ready? Poll llama-server's /health until 200, the process dies, or time runs out.

llama-server binds its port before loading: a refused connection means "not bound yet",
503 means "loading", 200 means ready; there is no error state, a failed load exits the
process. The poll interval is short because it adds directly to start-up time
(`stoker bench startup`). This module only observes; it never stops the process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import httpx

POLL_INTERVAL_S = 0.05


class _Pollable(Protocol):
    def poll(self) -> int | None: ...


@dataclass(frozen=True)
class ReadyResult:
    ready: bool
    waited_s: float
    reason: str  # "ready", "exited with code N", "not ready within N s"
    exit_code: int | None = None
    last_status: int | None = None  # the last HTTP status seen; None = never answered


def probe_health(endpoint: str, *, timeout_s: float = 0.5,
                 client: httpx.Client | None = None, path: str = "/health") -> int | None:
    """The HTTP status of GET `path` (llama-server's /health; another engine kind's own
    readiness path, stoker/engines/kind.py), or None when nothing answers (not bound, reset,
    timeout)."""
    url = endpoint.rstrip("/") + path
    try:
        if client is not None:
            return client.get(url, timeout=timeout_s).status_code
        return httpx.get(url, timeout=timeout_s).status_code
    except httpx.HTTPError:
        return None


def wait_ready(endpoint: str, proc: _Pollable, deadline_s: float, *,
               interval_s: float = POLL_INTERVAL_S, clock=time.monotonic) -> ReadyResult:
    """Block until /health says 200, `proc` exits, or `deadline_s` seconds pass."""
    t0 = clock()
    last = None
    with httpx.Client() as client:
        while True:
            code = proc.poll()
            if code is not None:
                return ReadyResult(False, clock() - t0, f"exited with code {code} before it was ready",
                                   exit_code=code, last_status=last)
            status = probe_health(endpoint, client=client, timeout_s=max(0.2, interval_s * 4))
            if status is not None:
                last = status
            if status == 200:
                return ReadyResult(True, clock() - t0, "ready", last_status=200)
            waited = clock() - t0
            if waited >= deadline_s:
                return ReadyResult(False, waited, f"not ready within {deadline_s:g} s",
                                   last_status=last)
            time.sleep(interval_s)
