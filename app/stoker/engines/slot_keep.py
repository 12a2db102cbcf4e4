"""What to keep of a llama-server's conversations across an unload: the pure decisions.

An unloaded engine's KV cache is gone, so the next turn of a long chat would read its whole
prompt again. Before a model leaves memory Stoker saves its used slots to disk
(`POST /slots/{id}?action=save`) and restores them on the next load, before READY. This
module decides, from values only: which slots are worth saving (`slots_to_save`), the key a
saved slot is filed under (model file, engine build, and the launch's KV settings read from
its argv, so a changed plan never restores an incompatible cache: `kv_key`), which saved
slots a new launch may restore and which were kept for another plan (`restore_choice`), and
what to drop for the disk budget, least recently used first (`to_drop`).

It must not touch files, the clock or the network: stoker/engines/slot_http.py talks to
the engine, stoker/engines/slot_files.py keeps the files, stoker/fleet/kv_keeper.py joins
them when an engine stops or starts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# The argv flags that change the layout of a slot's KV state (the engine refuses or
# misreads a cache saved under other ones), and the one name each is filed under.
_VALUE_FLAGS = {"-c": "ctx", "--ctx-size": "ctx", "-np": "slots", "--parallel": "slots",
                "-ctk": "kv_type_k", "--cache-type-k": "kv_type_k",
                "-ctv": "kv_type_v", "--cache-type-v": "kv_type_v",
                "-fa": "flash_attn", "--flash-attn": "flash_attn",
                "--mmproj": "mmproj", "-mm": "mmproj", "-md": "draft", "--model-draft": "draft"}
_SWITCH_FLAGS = {"-kvu": ("kv_unified", "on"), "--kv-unified": ("kv_unified", "on"),
                 "-no-kvu": ("kv_unified", "off"), "--no-kv-unified": ("kv_unified", "off"),
                 "--swa-full": ("swa_full", "on")}
SAVE_SUFFIX = ".bin"  # the engine's state file; its key sits beside it as NAME.json


@dataclass(frozen=True)
class KvKey:
    """What a saved slot can only be restored into: the same model file, the same engine
    build, the same KV settings."""

    model_path: str
    model_size: int | None  # None: the file could not be read (then nothing matches it)
    model_mtime_ns: int | None
    build: str  # the build's id and its binary's identity
    kv: tuple[tuple[str, str], ...]  # (setting, value) from the launch's argv, sorted

    def as_json(self) -> dict[str, object]:
        return {"model_path": self.model_path, "model_size": self.model_size,
                "model_mtime_ns": self.model_mtime_ns, "build": self.build, "kv": [list(p) for p in self.kv]}

    def digest(self) -> str:
        """A short name for file names; the sidecar keeps the whole key, which is what is compared."""
        text = json.dumps(self.as_json(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]


def key_from_json(data: object) -> KvKey | None:
    """A sidecar's key, or None when it is not one (an older or damaged sidecar)."""
    if not isinstance(data, Mapping):
        return None
    try:
        kv = tuple((str(a), str(b)) for a, b in data["kv"])
        size, mtime = data["model_size"], data["model_mtime_ns"]
        return KvKey(model_path=str(data["model_path"]), model_size=None if size is None else int(size),
                     model_mtime_ns=None if mtime is None else int(mtime), build=str(data["build"]), kv=kv)
    except (KeyError, TypeError, ValueError):
        return None


def kv_settings(argv: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The launch's KV settings, as its argv gives them (the last of a repeated flag wins,
    as in the engine); a flag not given is left out, so the engine's default is the value."""
    found: dict[str, str] = {}
    args = list(argv[1:])
    for i, arg in enumerate(args):
        flag, eq, inline = arg.partition("=")
        if flag in _VALUE_FLAGS:
            value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            found[_VALUE_FLAGS[flag]] = value
        elif arg in _SWITCH_FLAGS:
            name, value = _SWITCH_FLAGS[arg]
            found[name] = value
    return tuple(sorted(found.items()))


def kv_key(argv: Sequence[str], *, model_path: str, model_size: int | None, model_mtime_ns: int | None,
           build: str) -> KvKey:
    return KvKey(model_path=model_path, model_size=model_size, model_mtime_ns=model_mtime_ns, build=build,
                 kv=kv_settings(argv))


@dataclass(frozen=True)
class SlotNow:
    """One slot as the engine's GET /slots describes it."""

    slot: int
    n_tokens: int | None  # tokens in its cache; None: it has never served a request
    processing: bool


def slots_from_json(data: object) -> tuple[SlotNow, ...]:
    """GET /slots' answer as values; entries that are not slots are skipped."""
    if not isinstance(data, list):
        return ()
    out = []
    for item in data:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), int):
            continue
        n = item.get("n_prompt_tokens")
        out.append(SlotNow(slot=item["id"], n_tokens=n if isinstance(n, int) and not isinstance(n, bool) else None,
                           processing=bool(item.get("is_processing"))))
    return tuple(out)


def slots_to_save(slots: Iterable[SlotNow]) -> tuple[int, ...]:
    """The slots worth saving: used (tokens in the cache) and idle. A busy one is left out:
    the engine would hold the save until it finishes, and a stop does not wait for that."""
    return tuple(sorted(s.slot for s in slots if not s.processing and s.n_tokens is not None and s.n_tokens > 0))


def slots_still_busy(slots: Iterable[SlotNow]) -> tuple[int, ...]:
    """The slots the engine still marks busy. Right after an answer it prints the timings and
    only then frees the slot (b11434 server-context.cpp: send_final_response, then
    slot.release()), so a save that follows the answer at once can find its slot busy."""
    return tuple(sorted(s.slot for s in slots if s.processing))


@dataclass(frozen=True)
class SavedSlot:
    """One saved slot on disk: `name` is its file stem (NAME.bin beside NAME.json)."""

    name: str
    key: KvKey | None  # None: no readable sidecar (a save cut short): dropped first
    slot: int | None
    n_tokens: int | None
    size_bytes: int  # the .bin and its sidecar together
    used_at: float  # when it was last saved or restored


def file_stem(key: KvKey, slot: int) -> str:
    """The name the engine saves a slot under (no path separators: the engine refuses them)."""
    return f"{key.digest()}-slot{slot}"


@dataclass(frozen=True)
class RestoreChoice:
    restore: tuple[SavedSlot, ...]  # these slots, in slot order
    other_plan: tuple[SavedSlot, ...]  # saved for this model under another build or KV settings


def restore_choice(saved: Iterable[SavedSlot], key: KvKey, n_slots: int | None) -> RestoreChoice:
    """Which saved slots a launch with `key` may restore: only those saved under the very
    same key, into a slot the launch has (`n_slots` None: unknown, any slot id)."""
    restore, other = [], []
    for s in saved:
        if s.key is None or s.slot is None or s.key.model_path != key.model_path:
            continue
        if s.key == key and key.model_size is not None and (n_slots is None or s.slot < n_slots):
            restore.append(s)
        else:
            other.append(s)
    return RestoreChoice(tuple(sorted(restore, key=lambda s: s.slot or 0)), tuple(other))


def n_slots_of(argv: Sequence[str]) -> int | None:
    """How many slots a launch has, when its argv says (`-np N`); None: the engine decides."""
    value = dict(kv_settings(argv)).get("slots")
    try:
        n = int(value) if value is not None else None
    except ValueError:
        return None
    return n if n is not None and n > 0 else None


def to_drop(saved: Iterable[SavedSlot], *, budget_bytes: int, free_bytes: int | None,
            reserve_bytes: int, keep: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The saved slots to delete so the rest fit `budget_bytes` and the disk keeps
    `reserve_bytes` free: broken saves first, then the least recently used. `keep` (the
    save just made) goes last, and only if the budget cannot hold even it."""
    items = list(saved)
    order = sorted(items, key=lambda s: (s.name in keep, s.key is not None, s.used_at, s.name))
    total = sum(s.size_bytes for s in items)
    free = free_bytes
    drop: list[str] = []
    for s in order:
        over_budget = total > budget_bytes
        short_of_disk = free is not None and free < reserve_bytes
        if not (over_budget or short_of_disk or s.key is None):
            break
        drop.append(s.name)
        total -= s.size_bytes
        if free is not None:
            free += s.size_bytes
    return tuple(drop)


def may_save(*, budget_bytes: int, free_bytes: int | None, reserve_bytes: int) -> str | None:
    """None when a save may be tried, else the reason it is not (for the log)."""
    if budget_bytes <= 0:
        return "keeping conversations is off (its disk budget is 0)"
    if free_bytes is not None and free_bytes <= reserve_bytes:
        return (f"the disk has {free_bytes / 2**30:.1f} GiB free, no more than the "
                f"{reserve_bytes / 2**30:.1f} GiB kept free")
    return None


def what_differs(saved: KvKey, now: KvKey) -> str:
    """Why a saved slot does not fit this launch, in words for the log."""
    if (saved.model_size, saved.model_mtime_ns) != (now.model_size, now.model_mtime_ns):
        return "the model file has changed since"
    if saved.build != now.build:
        return "it was saved by another engine build"
    old, new = dict(saved.kv), dict(now.kv)
    changed = [f"{name} {old.get(name, 'default')} → {new.get(name, 'default')}"
               for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    return "the KV settings changed (" + ", ".join(changed) + ")" if changed else "its key differs"


def worth_keeping(*, saves_slots: bool, sliding_window: bool, recurrent: bool, swa_full: bool) -> bool:
    """Whether a launch's conversations are worth saving at all. llama-server b11434 re-reads
    the whole prompt of a restored slot whose model has sliding-window layers (unless the
    plan keeps the full window, `--swa-full`) or recurrent state: that memory only rolls
    back through its context checkpoints, which a slot's saved file does not hold
    ("forcing full prompt re-processing due to lack of cache data"). Saving those would cost
    disk and stop time for nothing."""
    if not saves_slots or recurrent:
        return False
    return swa_full or not sliding_window
