"""Give the memory this process has freed back to the system (glibc's `malloc_trim`), and keep
its threads from spreading it over many heap arenas (`mallopt(M_ARENA_MAX)`).

Why it exists: the supervisor's process allocates and frees in bursts from several threads
(a launch's planning, an engine's log and exit diagnosis, a reload's slot restore). glibc
keeps freed pages in its arenas, so across an hour of reloads and kills Stoker's RSS rose in
steps (issue 25's 60-minute soak: the main process 93 → 117 MiB) while Python's own heap
stayed flat (tracemalloc: 48.4 → 49.1 MiB over a 5-minute soak). `malloc_trim(0)` returns
the free pages of every arena; it takes well under a millisecond on this heap.

The trim alone left a slower climb: glibc gives each new thread a heap arena of its own (up
to eight per core), and the supervisor starts two threads per engine launch (its output
reader and its exit watcher). A block freed in one arena serves only the threads of that
arena, so over a soak the arenas held 20 MiB free beside 20 MiB in use and Stoker's RSS kept
rising (issue 25's 20-minute soak, `mallinfo2`: arenas 23 → 41 MiB, in use flat at 20 MiB).
`limit_heap_arenas` caps them at one: with the interpreter lock, Python's threads hardly
ever allocate at the same moment, so there is nothing for more arenas to win (same soak:
arenas flat at 24 MiB, 2.5-4 MiB free).

Elsewhere (macOS, Windows, musl) both do nothing: those allocators give memory back on their
own or offer no such call. `return_freed_heap` must not run on a hot path (it walks every
arena): call it after an engine's exit or readiness, never per request.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache

# glibc's malloc.h: mallopt's parameter for the most arenas the process may make.
_M_ARENA_MAX = -8


@cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt")):  # musl has no malloc_trim
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def limit_heap_arenas(most: int = 1) -> bool | None:
    """Let threads started from now on share `most` heap arenas (glibc's M_ARENA_MAX). Call it
    before starting threads: arenas made already stay. True when set, False when glibc
    refused, None where the C library has no such setting."""
    libc = _glibc()
    if libc is None:
        return None
    return bool(libc.mallopt(_M_ARENA_MAX, most))


def return_freed_heap() -> bool | None:
    """Hand freed heap pages back to the system. True when some were returned, False when
    there were none, None where the C library has no such call."""
    libc = _glibc()
    if libc is None:
        return None
    return bool(libc.malloc_trim(0))
