"""Measured load times on disk: `<data>/load_times.json`, the last few spawn → READY times per
(model file, engine build).

Eviction weighs what a model costs to load again against the bytes it frees
(stoker/fleet/residency.py `eviction_order`): a 20 GB model that takes a minute to load is
worth keeping over a 300 MB one that takes a second. The cost is this file's figure: the
median of the last MAX_TIMES loads of that exact file with that exact build, so one load
from a cold disk cache (or one beside a busy neighbour) does not decide alone. Like the
memory lines (stoker/engines/measurements.py), a time is only true for the file and the
build it was taken with: each entry carries both identities and is dropped on read as soon
as either no longer matches.

It keeps numbers and says whether they still hold; it decides nothing about eviction.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import read_json, write_json_atomic
from stoker.engines.identity import binary_identity
from stoker.engines.measurements import model_identity

SCHEMA = 1
MAX_TIMES = 5  # the newest win: a load today says more than one a month ago


def store_path() -> Path:
    return stoker_paths().data / "load_times.json"


def _identity(model_path: str) -> str | None:
    try:
        return model_identity(model_path)
    except OSError:
        return None


def _entries() -> list[dict]:
    value, _problem = read_json(store_path())  # a torn file is moved aside: this is a cache
    if not isinstance(value, dict) or value.get("schema") != SCHEMA or not isinstance(value.get("entries"), list):
        return []
    return [e for e in value["entries"] if isinstance(e, dict)]


def _matches(entry: dict, mid: str | None, bid: str | None) -> bool:
    return mid is not None and bid is not None and entry.get("model_identity") == mid \
        and entry.get("build_identity") == bid


def record_load(model_path: str, binary: str, seconds: float) -> float | None:
    """Add one measured load; returns the figure eviction now uses (the median), or None
    when the file or the build cannot be identified (nothing is kept for them). Entries
    whose file or build changed are dropped as the file is written again."""
    mid, bid = _identity(model_path), binary_identity(binary)
    if mid is None or bid is None or not seconds > 0:
        return None
    keep, times = [], [round(seconds, 3)]
    identities: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for e in _entries():
        m, b = str(e.get("model_path")), str(e.get("binary"))
        if (m, b) not in identities:
            identities[(m, b)] = (_identity(m), binary_identity(b))
        if not _matches(e, *identities[(m, b)]):
            continue  # the file or the build changed: its times describe something gone
        if _matches(e, mid, bid):
            times = [t for t in e.get("seconds", ()) if isinstance(t, (int, float))] + times
            continue
        keep.append(e)
    times = times[-MAX_TIMES:]
    keep.append({"model_path": str(Path(model_path).resolve()), "binary": str(Path(binary).resolve()),
                 "model_identity": mid, "build_identity": bid, "seconds": times})
    write_json_atomic(store_path(), {"schema": SCHEMA, "entries": keep})
    return statistics.median(times)


def load_seconds(model_path: str, binary: str) -> float | None:
    """The median measured load time of this file with this build; None: never measured."""
    mid, bid = _identity(model_path), binary_identity(binary)
    for e in _entries():
        if _matches(e, mid, bid):
            times = [float(t) for t in e.get("seconds", ()) if isinstance(t, (int, float)) and t > 0]
            return statistics.median(times) if times else None
    return None
