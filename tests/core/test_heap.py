"""stoker/base/heap.py: freed heap pages go back to the system where the C library can, and
threads share one heap arena once limited."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stoker.base.heap import limit_heap_arenas, return_freed_heap


def _rss_anon_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_fragments_are_returned_on_linux() -> None:
    """Holes left between live blocks (every other 20 KB block freed: malloc's, too large for
    Python's small-object allocator, too small for a mmap of its own) stay in the process
    until trimmed."""
    return_freed_heap()
    blocks = [bytearray(20_000) for _ in range(8_000)]  # 160 MB from malloc's heap
    del blocks[::2]  # 80 MB of holes that glibc keeps
    before = _rss_anon_kib()
    assert return_freed_heap() is True
    after = _rss_anon_kib()
    assert before - after > 40 * 1024  # most of the 80 MiB came back
    del blocks


@pytest.mark.skipif(sys.platform.startswith("linux"), reason="elsewhere there is no call")
def test_elsewhere_it_says_unknown() -> None:
    assert return_freed_heap() is None


_ARENAS_SCRIPT = """
import ctypes, os, sys, tempfile, threading
from stoker.base.heap import limit_heap_arenas
if sys.argv[1] == "limited":
    assert limit_heap_arenas() is True
started, done = threading.Barrier(9), threading.Event()
def work():
    keep = [bytearray(2_000) for _ in range(50)]  # from malloc, in this thread's arena
    started.wait()
    done.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
started.wait()  # all eight alive and allocated at once
libc = ctypes.CDLL("libc.so.6")
libc.fdopen.restype = ctypes.c_void_p
with tempfile.TemporaryFile() as f:
    fp = libc.fdopen(os.dup(f.fileno()), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    f.seek(0)
    print(f.read().decode().count("<heap nr="))
done.set()
"""


def _arenas(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _ARENAS_SCRIPT, mode], capture_output=True, text=True,
                         timeout=60, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_threads_share_one_arena_once_limited() -> None:
    """Eight threads allocating at once get arenas of their own by default (a fresh process
    each: the limit is for the process's life), and share the main one once limited."""
    assert _arenas("default") > 2
    assert _arenas("limited") == 1


@pytest.mark.skipif(sys.platform.startswith("linux"), reason="elsewhere there is no setting")
def test_elsewhere_the_limit_says_unknown() -> None:
    assert limit_heap_arenas() is None
