"""Keep a model's conversations across an unload: save its slots before it stops, restore them
before it is READY again.

The supervisor's EngineRunner calls `save` on the thread that stops an engine (after the
gateway closed its route, with nothing in flight, before the process is signalled) and
`restore` on a thread of its own once /health answers and before READY is published, so
the next turn finds its prefix in the cache instead of reading the whole chat again. Both
are bounded (SAVE_DEADLINE_S, RESTORE_DEADLINE_S) and never raise: a failed save only
means a cold start later, a failed or refused restore a cold start now, and each says so in
the log. A launch keeps conversations when its preparer says so (`keeps_conversations`,
llama-server launches) and Settings' `conversation_disk_gib` is above 0; the engine is then
started with `--slot-save-path`.

What to save, which saved slot fits a launch and what to drop for the disk budget are
stoker/engines/slot_keep.py's decisions; the HTTP is stoker/engines/slot_http.py's, the
files stoker/engines/slot_files.py's. This module decides nothing itself and never touches
engine state: the lifecycle stays stoker/fleet/lifecycle.py's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from stoker.base.store import SettingsStore
from stoker.engines import slot_files
from stoker.engines.launch import PreparedLaunch
from stoker.engines.slot_http import list_slots, slot_action
from stoker.engines.slot_keep import (
    SAVE_SUFFIX,
    KvKey,
    SlotNow,
    file_stem,
    kv_key,
    may_save,
    n_slots_of,
    restore_choice,
    slots_still_busy,
    slots_to_save,
    to_drop,
    what_differs,
)

log = logging.getLogger(__name__)

SLOT_SAVE_FLAG = "--slot-save-path"
# The disk always keeps this much free: a save never takes it below (the oldest saves go first).
DISK_RESERVE_BYTES = 5 * 2**30
LIST_TIMEOUT_S = 2.0
# A save must never hold an unload for long: past this the engine is stopped and the slots
# not yet saved start cold next time.
SAVE_DEADLINE_S = 8.0
# How long a save waits for a slot the engine has not freed yet (nothing is in flight when a
# save starts, so a busy slot is one whose answer was just sent: it is freed within moments).
SETTLE_S = 2.0
SETTLE_POLL_S = 0.05
# A restore holds READY: past this the model is marked ready with what was restored.
RESTORE_DEADLINE_S = 30.0
GIB = 2**30


def budget_from_settings() -> int:
    """Settings' conversation_disk_gib in bytes (its default when the file cannot be read)."""
    try:
        gib = SettingsStore().load().conversation_disk_gib
    except OSError:
        gib = 4.0
    return int(gib * GIB)


@dataclass(frozen=True)
class SlotDone:
    slot: int
    n_tokens: int | None
    n_bytes: int | None


class KvKeeper:
    """Saves and restores one launch's slots; safe to call from any thread (it holds no state
    but its settings)."""

    def __init__(self, *, folder: Callable[[], Path] = slot_files.slot_folder,
                 budget_bytes: Callable[[], int] = budget_from_settings,
                 reserve_bytes: int = DISK_RESERVE_BYTES, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._folder = folder
        self._budget = budget_bytes
        self._reserve = reserve_bytes
        self._clock = clock
        self._sleep = sleep

    def with_slot_folder(self, launch: PreparedLaunch) -> PreparedLaunch:
        """The launch as it is spawned: with `--slot-save-path` when it keeps conversations."""
        if not launch.keeps_conversations or SLOT_SAVE_FLAG in launch.spec.argv or self._budget() <= 0:
            return launch
        try:
            folder = self._folder()
        except OSError as exc:
            log.warning("conversations will not be kept: the folder for them cannot be made (%s)", exc)
            return launch
        spec = replace(launch.spec, argv=launch.spec.argv + (SLOT_SAVE_FLAG, str(folder)))
        return replace(launch, spec=spec)

    def key_for(self, launch: PreparedLaunch) -> KvKey:
        model = _stat(launch.model_path)
        binary = _stat(launch.spec.binary)
        build = f"{launch.build_id or 'unknown'}|{binary[0]}|{binary[1]}"
        return kv_key(launch.spec.argv, model_path=os.path.realpath(launch.model_path), model_size=model[0],
                      model_mtime_ns=model[1], build=build)

    def save(self, launch: PreparedLaunch, model_id: str) -> tuple[SlotDone, ...]:
        """Save the used, idle slots of a running engine; the saves that worked."""
        if SLOT_SAVE_FLAG not in launch.spec.argv:
            return ()
        folder = self._folder()
        why = may_save(budget_bytes=self._budget(), free_bytes=slot_files.free_bytes(folder),
                       reserve_bytes=self._reserve)
        if why is not None:
            log.info("%s's conversation is not kept: %s", model_id, why)
            return ()
        endpoint, api_key = launch.spec.endpoint, launch.engine_key
        slots = self.settled_slots(lambda: list_slots(endpoint, api_key, timeout_s=LIST_TIMEOUT_S))
        if isinstance(slots, str):
            log.warning("%s's conversation is not kept: its slots could not be listed (%s)", model_id, slots)
            return ()
        busy = slots_still_busy(slots)
        if busy:
            log.warning("%s: slot(s) %s still busy after %.1f s were not saved; they will start cold",
                        model_id, ", ".join(map(str, busy)), SETTLE_S)
        wanted = slots_to_save(slots)
        if not wanted:
            return ()
        key, t0 = self.key_for(launch), self._clock()
        done: list[SlotDone] = []
        for slot in wanted:
            left = SAVE_DEADLINE_S - (self._clock() - t0)
            if left < 0.5:
                log.warning("%s: slot %d was not saved: the save ran out of time", model_id, slot)
                continue
            stem = file_stem(key, slot)
            answer = slot_action(endpoint, api_key, slot, "save", stem + slot_files.PART_SUFFIX, timeout_s=left)
            if not answer.ok:
                slot_files.discard_part(folder, stem)
                log.warning("%s: saving slot %d failed: %s; it will start cold", model_id, slot, answer.error)
                continue
            try:
                slot_files.finish_save(folder, stem, key, slot, answer.n_tokens)
            except OSError as exc:
                slot_files.discard_part(folder, stem)
                log.warning("%s: saving slot %d failed: %s; it will start cold", model_id, slot, exc)
                continue
            done.append(SlotDone(slot, answer.n_tokens, answer.n_bytes))
        if done:
            self._drop_for_budget(folder, key, tuple(file_stem(key, d.slot) for d in done))
            log.info("kept %s's conversation: %s in %.1f s", model_id, _slots_text(done), self._clock() - t0)
        return tuple(done)

    def settled_slots(self, fetch: Callable[[], tuple[SlotNow, ...] | str]) -> tuple[SlotNow, ...] | str:
        """The engine's slots once none is busy, or as they are after SETTLE_S (or the error
        text of a listing that failed)."""
        until = self._clock() + SETTLE_S
        slots = fetch()
        while not isinstance(slots, str) and slots_still_busy(slots) and self._clock() < until:
            self._sleep(SETTLE_POLL_S)
            slots = fetch()
        return slots

    def _drop_for_budget(self, folder: Path, key: KvKey, kept: tuple[str, ...]) -> None:
        """This launch's older saves of slots not saved now go (they are another
        conversation's), then the least recently used until the budget and the reserve hold."""
        saved = slot_files.list_saved(folder)
        stale = tuple(s.name for s in saved if s.key == key and s.name not in kept)
        slot_files.delete(folder, stale)
        saved = tuple(s for s in saved if s.name not in stale)
        drop = to_drop(saved, budget_bytes=self._budget(), free_bytes=slot_files.free_bytes(folder),
                       reserve_bytes=self._reserve, keep=frozenset(kept))
        if drop:
            slot_files.delete(folder, drop)
            log.info("dropped %d saved conversation slot(s), least recently used first, to stay within "
                     "the disk budget", len(drop))

    def restore(self, launch: PreparedLaunch, model_id: str) -> tuple[SlotDone, ...]:
        """Restore the slots saved under this launch's key into the starting engine; the
        restores that worked (none: a cold start, said in the log when something was there)."""
        if SLOT_SAVE_FLAG not in launch.spec.argv:
            return ()
        folder = self._folder()
        key, t0 = self.key_for(launch), self._clock()
        choice = restore_choice(slot_files.list_saved(folder), key, n_slots_of(launch.spec.argv))
        if not choice.restore:
            if choice.other_plan:
                saved_key = choice.other_plan[0].key
                reason = what_differs(saved_key, key) if saved_key is not None else "its key is unreadable"
                log.info("%s starts cold: its saved conversation does not fit this launch (%s)", model_id, reason)
            return ()
        done: list[SlotDone] = []
        for saved in choice.restore:
            slot = saved.slot if saved.slot is not None else 0
            left = RESTORE_DEADLINE_S - (self._clock() - t0)
            if left < 0.5:
                log.warning("%s: slot %d was not restored: the restore ran out of time; it starts cold",
                            model_id, slot)
                continue
            answer = slot_action(launch.spec.endpoint, launch.engine_key, slot, "restore",
                                 saved.name + SAVE_SUFFIX, timeout_s=left)
            if not answer.ok:
                log.warning("%s: restoring slot %d failed (%s); it starts cold", model_id, slot, answer.error)
                continue
            slot_files.touch(folder, saved.name)
            done.append(SlotDone(slot, answer.n_tokens, answer.n_bytes))
        if done:
            log.info("restored %s's conversation: %s in %.1f s", model_id, _slots_text(done), self._clock() - t0)
        return tuple(done)


def _slots_text(done: list[SlotDone]) -> str:
    parts = []
    for d in done:
        size = f", {d.n_bytes / 2**20:.0f} MiB" if d.n_bytes is not None else ""
        tokens = f"{d.n_tokens:,} tokens" if d.n_tokens is not None else "unknown tokens"
        parts.append(f"slot {d.slot} ({tokens}{size})")
    return ", ".join(parts)


def _stat(path: str) -> tuple[int | None, int | None]:
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    return st.st_size, st.st_mtime_ns


class Restores:
    """The restores under way, one thread each, so the supervisor's thread never waits on
    one: it asks `finished` on each pass and publishes READY once it says True."""

    def __init__(self, keeper: KvKeeper) -> None:
        self._keeper = keeper
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[int, threading.Event]] = {}  # engine key -> (pid, done)

    def finished(self, key: str, pid: int, launch: PreparedLaunch, model_id: str,
                 wake: Callable[[], None]) -> bool:
        """Called once the engine answers /health: True when READY may be published (nothing
        to restore, or the restore for this process is over); False while it runs (it is
        started on the first call, and `wake` is called when it ends)."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job[0] == pid:
                if not job[1].is_set():
                    return False
                del self._jobs[key]
                return True
            self._jobs.pop(key, None)  # a restore for a process that is gone
            if SLOT_SAVE_FLAG not in launch.spec.argv:
                return True
            done = threading.Event()
            self._jobs[key] = (pid, done)

        def run() -> None:
            try:
                self._keeper.restore(launch, model_id)
            except Exception:
                log.exception("restoring %s's conversation failed; it starts cold", model_id)
            done.set()
            wake()

        threading.Thread(target=run, name=f"stoker-restore-{pid}", daemon=True).start()
        return False

    def under_way(self, key: str, pid: int) -> bool:
        with self._lock:
            job = self._jobs.get(key)
            return job is not None and job[0] == pid and not job[1].is_set()
