"""While models are resident, read the free memory every WATCH_INTERVAL_S, off the supervisor thread.

Memory other applications take (a game, a browser, ComfyUI) used to be discovered by a
crash: the OS's OOM killer, or a driver failing an allocation. The supervisor asks this
watch when its next reading is due (a deadline it sleeps to, like a health probe), starts
one on a worker thread (nvidia-smi can take a while), and hands a finished reading to the
fleet as `fleet_state.MemoryRead`; the fleet decides what to unload
(stoker/fleet/residency.py `yield_to_desktop`). With no model resident nothing is read.

The reserve each pool keeps is the planner's: Settings' memory reserve (at least; 10 % of
the pool on a bigger one, stoker/planning/planner.py `PlanPolicy.os_reserve`) for RAM, read
again at every reading so a change in Settings counts at once, and the planner's device
margin for a GPU. So a model admitted by its plan leaves the reserve free, and falling
below it means something else grew.

It decides nothing: it schedules, reads and converts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from stoker.engines.free_memory import FreeReading, read_free_memory
from stoker.fleet.pipeline import load_settings, policy_from_settings
from stoker.fleet.residency import FreeMemory
from stoker.planning.planner import PlanPolicy

log = logging.getLogger(__name__)

# At least every 2 s (the bound): 1 s leaves time for the unload itself inside the
# 5 s a squeeze may take before the kernel or the driver acts.
WATCH_INTERVAL_S = 1.0


def reserve_policy() -> PlanPolicy:
    """The planner's policy with Settings' memory reserve, as a launch plans with it."""
    settings, _problems = load_settings()
    return policy_from_settings(settings)


def free_memory_of(reading: FreeReading, policy: PlanPolicy) -> FreeMemory:
    """A reading as the fleet decides on it: each pool's free bytes and the reserve it keeps."""
    free = tuple((p.name, p.free_bytes) for p in reading.pools)
    reserve = tuple((p.name, policy.os_reserve(p.total_bytes) if p.name == "CPU" else policy.device_margin_bytes)
                    for p in reading.pools)
    return FreeMemory(free_by_pool=free, reserve_by_pool=reserve, unified=reading.unified)


class MemoryWatch:
    """One reading at a time; its methods run on the supervisor thread."""

    def __init__(self, wake: Callable[[], None], *, interval_s: float = WATCH_INTERVAL_S,
                 read: Callable[[str | None], FreeReading] = read_free_memory,
                 policy: Callable[[], PlanPolicy] = reserve_policy) -> None:
        self._wake = wake
        self.interval_s = interval_s
        self._read = read
        self._policy = policy
        self._next_at: float | None = None
        self._reading: Future | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stoker-memory")

    def next_due(self, watching: bool, now: float) -> float | None:
        """When the next reading is due (None: nothing to watch, or one is in flight and its
        end wakes the supervisor)."""
        if not watching:
            self._next_at = None
            return None
        if self._reading is not None:
            return None
        return now if self._next_at is None else self._next_at

    def poll(self, watching: bool, gpu_binary: str | None, now: float) -> FreeMemory | None:
        """Start a due reading, or hand back a finished one (None: nothing new)."""
        if self._reading is not None:
            if not self._reading.done():
                return None
            future, self._reading = self._reading, None
            try:
                return future.result()
            except Exception:
                log.exception("reading the free memory failed")
                return None
        if not watching:
            self._next_at = None
            return None
        if self._next_at is not None and now < self._next_at:
            return None
        self._next_at = now + self.interval_s
        self._reading = self._pool.submit(self._read_now, gpu_binary)
        self._reading.add_done_callback(lambda _f: self._wake())
        return None

    def _read_now(self, gpu_binary: str | None) -> FreeMemory:
        return free_memory_of(self._read(gpu_binary), self._policy())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
