"""stoker/base/heap.py: freed heap pages go back to the system where the C library can."""

from __future__ import annotations

import sys

import pytest

from stoker.base.heap import return_freed_heap


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
