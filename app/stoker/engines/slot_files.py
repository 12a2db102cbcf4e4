"""The saved conversations on disk: one engine state file per slot and its key beside it.

Each saved slot is `<cache>/kv-slots/NAME.bin` (written by the engine itself, through
`--slot-save-path`) and `NAME.json`, the sidecar that holds the whole key it was saved
under (stoker/engines/slot_keep.py KvKey), its slot and token count. The engine first
writes `NAME.saving`, which is renamed once it answered, so a save cut short never looks
like a good one. This module lists, renames, touches and deletes those files and says how
much the disk has free; it decides nothing (slot_keep does) and never talks to an engine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import write_json_atomic
from stoker.engines.slot_keep import SAVE_SUFFIX, KvKey, SavedSlot, key_from_json

PART_SUFFIX = ".saving"  # the engine's file while a save is under way
SIDECAR_SUFFIX = ".json"
# A .saving file this old belongs to no save under way any more (a stop cut it short).
STALE_PART_S = 600.0


def slot_folder() -> Path:
    """Where saved slots live (under STOKER_HOME when it is set), made on first use."""
    folder = stoker_paths().cache / "kv-slots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def list_saved(folder: Path) -> tuple[SavedSlot, ...]:
    """Every saved slot in `folder`, with broken ones (no readable sidecar, or an old
    .saving file) as entries whose key is None, so they are dropped first."""
    stems: dict[str, list[Path]] = {}
    now = time.time()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return ()
    for path in entries:
        name = path.name
        for suffix in (SAVE_SUFFIX, SIDECAR_SUFFIX, PART_SUFFIX):
            if name.endswith(suffix) and not name.startswith("."):
                if suffix == PART_SUFFIX and _age(path, now) < STALE_PART_S:
                    break  # a save under way: not ours to judge
                stems.setdefault(name[: -len(suffix)] + ("~part" if suffix == PART_SUFFIX else ""), []).append(path)
                break
    out = []
    for stem, paths in stems.items():
        size, used = 0, 0.0
        for p in paths:
            with contextlib.suppress(OSError):
                st = p.stat()
                size += st.st_size
                used = max(used, st.st_mtime)
        bin_path = folder / (stem + SAVE_SUFFIX)
        side = _sidecar(folder / (stem + SIDECAR_SUFFIX)) if not stem.endswith("~part") else None
        key = key_from_json(side.get("key")) if isinstance(side, dict) and bin_path.is_file() else None
        slot = side.get("slot") if isinstance(side, dict) else None
        n_tokens = side.get("n_tokens") if isinstance(side, dict) else None
        out.append(SavedSlot(name=stem, key=key, slot=slot if isinstance(slot, int) else None,
                             n_tokens=n_tokens if isinstance(n_tokens, int) else None,
                             size_bytes=size, used_at=used))
    return tuple(out)


def _sidecar(path: Path) -> object:
    """A sidecar's JSON, or None. Not read_json: a damaged sidecar must stay where it is, so the
    budget drops it with its .bin, instead of being moved aside and piling up."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except OSError:
        return 0.0


def finish_save(folder: Path, stem: str, key: KvKey, slot: int, n_tokens: int | None) -> None:
    """The engine has written NAME.saving: make it NAME.bin and write its sidecar (the
    sidecar last, so a .bin without one is never restored)."""
    with contextlib.suppress(FileNotFoundError):
        (folder / (stem + SIDECAR_SUFFIX)).unlink()
    os.replace(folder / (stem + PART_SUFFIX), folder / (stem + SAVE_SUFFIX))
    write_json_atomic(folder / (stem + SIDECAR_SUFFIX),
                      {"schema": 1, "key": key.as_json(), "slot": slot, "n_tokens": n_tokens})


def touch(folder: Path, stem: str) -> None:
    """Mark a saved slot as just used (it was restored), for least-recently-used dropping."""
    for suffix in (SAVE_SUFFIX, SIDECAR_SUFFIX):
        with contextlib.suppress(OSError):
            os.utime(folder / (stem + suffix))


def delete(folder: Path, stems: tuple[str, ...]) -> None:
    for stem in stems:
        base = stem.removesuffix("~part")
        suffixes = (PART_SUFFIX,) if stem.endswith("~part") else (SAVE_SUFFIX, SIDECAR_SUFFIX)
        for suffix in suffixes:
            with contextlib.suppress(FileNotFoundError):
                (folder / (base + suffix)).unlink()


def discard_part(folder: Path, stem: str) -> None:
    """A save that failed: its partial file goes at once."""
    with contextlib.suppress(OSError):
        (folder / (stem + PART_SUFFIX)).unlink()
