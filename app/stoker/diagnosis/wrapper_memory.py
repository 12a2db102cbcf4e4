"""A wrapper's own memory estimate, read from its log: whether the host's share of a load was
larger than the system memory free before it. Pure: lines in, the two deciding lines out.
It must not decide a kind; classify.py weighs it against the failing line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Ollama's own memory lines before it starts the runner (server.go / llm/memory.go, 0.3 to
# 0.11): `msg="system memory" total="15.9 GiB" free="3.2 GiB" free_swap="0 B"` and its
# estimate `msg=offload ... layers.model=41 layers.offload=12 ... memory.required.full="9.6 GiB"
# memory.required.partial="4.9 GiB"` (`msg="offload to cuda"` before 0.5): `full` is the whole
# load, `partial` the share it put on the GPUs, so what is left is the host's share.
_OLLAMA_SYSTEM_MEMORY = re.compile(r'msg="system memory".*?\bfree="([\d.]+ ?[KMGT]?i?B)"'
                                   r'(?:.*?\bfree_swap="([\d.]+ ?[KMGT]?i?B)")?')
_OLLAMA_OFFLOAD = re.compile(r'msg="?offload\b.*?memory\.required\.full="([\d.]+ ?[KMGT]?i?B)"'
                             r'.*?memory\.required\.partial="([\d.]+ ?[KMGT]?i?B)"')
_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _bytes(text: str) -> float | None:
    m = re.fullmatch(r"([\d.]+) ?([KMGT]?i?B)", text.strip(), re.IGNORECASE)
    if m is None:
        return None
    try:
        return float(m.group(1)) * _UNITS[m.group(2).upper()]
    except (KeyError, ValueError):
        return None


def host_share_over_free(lines: Iterable[str]) -> tuple[str, str] | None:
    """(the free-memory line, the estimate line) when Ollama's estimate puts more on the host
    than was free (with swap); None when either line is missing or the host's share fits."""
    free: float | None = None
    share: float | None = None
    free_line = share_line = ""
    for raw in lines:
        m = _OLLAMA_SYSTEM_MEMORY.search(raw)
        if m:
            f = _bytes(m.group(1))
            swap = _bytes(m.group(2)) if m.group(2) else 0.0
            if f is not None:
                free, free_line = f + (swap or 0.0), raw
        m = _OLLAMA_OFFLOAD.search(raw)
        if m:
            full, partial = _bytes(m.group(1)), _bytes(m.group(2))
            if full is not None and partial is not None:
                share, share_line = full - partial, raw
    if free is None or share is None or share <= free:
        return None
    return free_line, share_line
