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


def size_in_bytes(text: str) -> float | None:
    """`3.2 GiB` -> bytes (KB, MB … are decimal, KiB, MiB … binary); None when it is no size."""
    m = re.fullmatch(r"([\d.]+) ?([KMGT]?i?B)", text.strip(), re.IGNORECASE)
    if m is None:
        return None
    try:
        return float(m.group(1)) * _UNITS[m.group(2).upper()]
    except (KeyError, ValueError):
        return None


def _ollama_estimate(lines: Iterable[str]) -> tuple[float, int, float, int] | None:
    """(free memory with swap, its line's index, the host's share, its line's index) from
    Ollama's last `system memory` and `offload` lines; None when either is missing."""
    free: tuple[float, int] | None = None
    share: tuple[float, int] | None = None
    for i, raw in enumerate(lines):
        m = _OLLAMA_SYSTEM_MEMORY.search(raw)
        if m:
            f = size_in_bytes(m.group(1))
            swap = size_in_bytes(m.group(2)) if m.group(2) else 0.0
            if f is not None:
                free = (f + (swap or 0.0), i)
        m = _OLLAMA_OFFLOAD.search(raw)
        if m:
            full, partial = size_in_bytes(m.group(1)), size_in_bytes(m.group(2))
            if full is not None and partial is not None:
                share = (full - partial, i)
    if free is None or share is None:
        return None
    return free[0], free[1], share[0], share[1]


def host_share_over_free(lines: Iterable[str]) -> tuple[str, str] | None:
    """(the free-memory line, the estimate line) when Ollama's estimate puts more on the host
    than was free (with swap); None when either line is missing or the host's share fits."""
    text = tuple(lines)
    found = _ollama_estimate(text)
    if found is None or found[2] <= found[0]:
        return None
    return text[found[1]], text[found[3]]


# Ollama's estimate putting most of the free memory on the host: the runner it then starts
# may be killed for memory with no line of its own (ollama#10739: 57.4 GiB of the load on the
# host, 59.3 GiB free with swap; the maintainer read the kernel's kill from these two lines).
# The estimate is Ollama's forecast, not a failure, and the loads it leaves out (the runner's
# own process, a partial offload's CPU compute graph) make a share just under the free
# memory as telling as one over it; so this is a sign only, the cut a tenth under the free.
HOST_SHARE_TIGHT = 0.9


def host_share_near_free(lines: Iterable[str], share_of_free: float = HOST_SHARE_TIGHT) -> int | None:
    """The index of Ollama's estimate line when it puts at least `share_of_free` of the free
    system memory (with swap) on the host; None when either line is missing or it leaves more."""
    found = _ollama_estimate(lines)
    if found is None:
        return None
    free, _, share, at = found
    if free <= 0 or share < share_of_free * free:
        return None
    return at


# LM Studio's own load-error report (0.2.x, the JSON body of its "Failed to load model"
# dialog, as its users paste it: lmstudio-bug-tracker#14, llama-cpp-python#1556):
#   "title": "Failed to load model", "cause": "<llama.cpp's reason, or empty>",
#   "errorData": {"n_ctx": ..., "n_batch": ..., "n_gpu_layers": ...},
#   "data": {"memory": {"ram_capacity": "314.65 GB", "ram_unused": "316.65 KB"},
#            "gpu": {"type": ..., "vram_recommended_capacity": ..., "vram_unused": ...}, ...}
# `data` is the machine's state as the app took it when the load failed: `ram_capacity` the
# system memory in all, `ram_unused` the part of it still free (`vram_unused` the same for the
# GPU). LM Studio 0.2 is closed source and documents none of it; the meaning is read from the
# names, their pairing and the reports (#1556's unknown architecture left 26.74 of 31.91 GB
# unused: the figure is a snapshot, not zeroed by a failure). The report carries no figure of
# what the model needed (`"model": {}`), so the cut is against the total: free memory below a
# ten-thousandth of it is under the floor Linux keeps free for itself (the min watermark,
# vm.min_free_kbytes = sqrt(16 * RAM in kB): 16 MB of 16 GB, 71 MB of 314 GB, over 0.012 % of
# any machine up to 512 GB under either of the kernel's caps), which only allocations that
# are failing reach; so the system memory had run out when the load failed, whichever count
# "unused" is (free or available). #14's figure is a millionth of the total; a machine merely
# busy (page cache, other programs) keeps more free than the cut.
_LMSTUDIO_RAM_CAPACITY = re.compile(r'"ram_capacity"\s*:\s*"([\d.]+ ?[KMGT]?i?B)"')
_LMSTUDIO_RAM_UNUSED = re.compile(r'"ram_unused"\s*:\s*"([\d.]+ ?[KMGT]?i?B)"')
RAM_EXHAUSTED_SHARE = 1e-4
_SAME_OBJECT = 3  # lines apart: `ram_capacity` and `ram_unused` sit side by side in `memory`


def lmstudio_ram_exhausted(lines: Iterable[str], share: float = RAM_EXHAUSTED_SHARE) -> int | None:
    """The index of LM Studio's `"ram_unused"` line when its figure is under `share` of the
    `"ram_capacity"` beside it (the same line or a few lines away); None otherwise."""
    text = tuple(lines)
    for i, raw in enumerate(text):
        m = _LMSTUDIO_RAM_UNUSED.search(raw)
        if m is None:
            continue
        unused = size_in_bytes(m.group(1))
        near = text[max(0, i - _SAME_OBJECT): i + _SAME_OBJECT + 1]
        capacity = next((size_in_bytes(c.group(1)) for c in map(_LMSTUDIO_RAM_CAPACITY.search, near) if c), None)
        if unused is not None and capacity and unused < share * capacity:
            return i
    return None
