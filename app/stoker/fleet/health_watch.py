"""Is a READY engine still answering? The one periodic thing the supervisor does.

A crash is noticed the moment the process ends (the supervisor waits on it); a hang is
not, so each READY engine is asked /health every `interval_s`, off the supervisor thread,
and again HEALTH_RETRY_S after a probe that got no answer; `failures` failures in a row
mean it hangs. llama-server answers /health from its HTTP thread in milliseconds even while
it generates, so a hung engine is noticed within about 7 s of its last answer. An engine
that takes one request at a time (ds4, sd-server) is not asked while it works on one: it may
not answer then, and that is no hang. A finished probe wakes the supervisor (`wake`), so
between probes it sleeps. The start-up readiness poll (`ready_status`) shares the client.
It decides nothing about the lifecycle: it reports how long an engine has been silent.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from stoker.engines.drivers import driver_for
from stoker.engines.health import probe_health
from stoker.engines.kind import EngineKind, describe

HEALTH_INTERVAL_S = 2.0
HEALTH_RETRY_S = 1.0
HEALTH_FAILURES = 3
HEALTH_TIMEOUT_S = 1.0
STARTING_TIMEOUT_S = 0.5  # one readiness poll while starting


@dataclass
class _Watch:
    next_at: float | None = None
    silent_since: float | None = None
    failed: int = 0
    probe: Future | None = None


class HealthProber:
    """Per-engine probe schedules; its methods run on the supervisor thread."""

    def __init__(self, wake: Callable[[], None], *, interval_s: float = HEALTH_INTERVAL_S,
                 failures: int = HEALTH_FAILURES) -> None:
        self._wake = wake
        self.interval_s = interval_s
        self.failures = failures
        self._watches: dict[str, _Watch] = {}
        self._http: httpx.Client | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="stoker-health")

    def _client(self) -> httpx.Client:
        if self._http is None:
            # Made after the first spawn (it costs tens of ms), so it overlaps the model load.
            self._http = httpx.Client()
        return self._http

    def ready_status(self, endpoint: str, kind: EngineKind) -> int | None:
        """One readiness poll of a starting engine, on this thread (it is what READY waits for)."""
        return probe_health(endpoint, client=self._client(), timeout_s=STARTING_TIMEOUT_S,
                            path=describe(kind).readiness_path)

    def forget(self, key: str) -> None:
        """The engine is stopping or gone: no probe is due, an answer in flight is ignored."""
        self._watches.pop(key, None)

    def next_due(self, key: str) -> float | None:
        """When `check` is next due for this READY engine: at once for one not yet watched
        (its first check schedules the probes), None while a probe is in flight (its end
        wakes the supervisor)."""
        watch = self._watches.get(key)
        if watch is None or watch.next_at is None:
            return 0.0
        if watch.probe is not None:
            return None
        return watch.next_at

    def check(self, key: str, endpoint: str, kind: EngineKind, *, working: bool,
              now: float) -> float | None:
        """Start a due probe or read a finished one; the seconds it has been silent once it
        counts as hung (then its schedule is cleared), else None. `working`: a request is in
        flight on this engine."""
        watch = self._watches.setdefault(key, _Watch())
        if describe(kind).concurrency == 1 and working:
            # Not asked while it works; looked at again after an interval, and probed then
            # if it is idle by then.
            self._watches[key] = _Watch(next_at=now + self.interval_s)
            return None
        if watch.probe is not None:
            if not watch.probe.done():
                return None
            try:
                status = watch.probe.result()
            except Exception:
                status = None
            watch.probe = None
            if driver_for(kind).is_ready(status):
                watch.failed, watch.silent_since = 0, None
            else:
                watch.failed += 1
                if watch.failed >= self.failures:
                    silent = now - (watch.silent_since or now)
                    self._watches.pop(key, None)
                    return silent
                watch.next_at = min(watch.next_at or now, now + HEALTH_RETRY_S)
        if watch.next_at is None:
            watch.next_at = now + self.interval_s
            watch.failed, watch.silent_since = 0, None
            return None
        if now < watch.next_at:
            return None
        watch.next_at = now + self.interval_s
        if watch.failed == 0:
            watch.silent_since = now
        timeout = min(HEALTH_TIMEOUT_S, max(0.5, self.interval_s / 2))
        watch.probe = self._pool.submit(probe_health, endpoint, client=self._client(), timeout_s=timeout,
                                        path=describe(kind).readiness_path)
        watch.probe.add_done_callback(lambda _f: self._wake())
        return None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._http is not None:
            self._http.close()
