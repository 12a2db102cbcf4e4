"""Where the main process's memory sits, minute by minute, during `stoker bench soak`.

Runs the soak in this process (same arguments as `stoker bench soak`) and, at each of its RSS
samples, prints RssAnon, glibc's heap figures (`mallinfo2`: arenas' total, in use and free;
mmapped blocks), the count of Python's small-object arenas and the bytes in them, and the live
threads. Growth with Python's figures flat and glibc's free rising is the allocator holding
freed memory, not a leak of objects. Linux with glibc 2.33 or later only:
    STOKER_HOME=... python docs/measurements/soak_heap.py --minutes 20
    STOKER_HOME=... python docs/measurements/soak_heap.py --minutes 20 --arenas-as-before
(the second leaves glibc's heap arenas uncapped, as before `Instance.start` capped them.)
"""
import argparse
import ctypes
import os
import re
import sys
import tempfile
import threading

from heap_cycles import rss_anon_mib  # the script beside this one (run as a script, its folder is on the path)

from stoker.bench import soak
from stoker.instance import instance


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]


LIBC = ctypes.CDLL("libc.so.6")
LIBC.mallinfo2.restype = MallInfo2
MIB = 2**20


def python_arenas() -> tuple[int, int]:
    """(arenas, bytes in allocated blocks) from sys._debugmallocstats, which writes to fd 2."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode()
    arenas = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", text)
    used = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", text)
    if arenas is None or used is None:
        raise RuntimeError("sys._debugmallocstats printed no arena figures")
    return int(arenas.group(1).replace(",", "")), int(used.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    soak.add_arguments(parser)
    parser.add_argument("--arenas-as-before", action="store_true", help="do not cap glibc's heap arenas")
    args = parser.parse_args()
    if args.arenas_as_before:
        instance.limit_heap_arenas = lambda most=1: None
    sampled = soak._Soak.rss
    count = [0]

    def rss_with_heap(self, instance) -> dict:
        out = sampled(self, instance)
        count[0] += 1
        mi = LIBC.mallinfo2()
        arenas, used = python_arenas()
        print(f"sample {count[0]}: anon {rss_anon_mib():.1f} MiB | glibc arenas {mi.arena / MIB:.1f}, "
              f"in use {mi.uordblks / MIB:.1f}, free {mi.fordblks / MIB:.1f}, mmapped {mi.hblkhd / MIB:.1f} "
              f"| Python arenas {arenas} ({used / MIB:.1f} MiB in blocks) | threads {threading.active_count()}",
              flush=True)
        return out

    soak._Soak.rss = rss_with_heap  # type: ignore[method-assign]
    out = soak._Soak(args, soak._models(args)).run()
    print("counts", out["counts"], "growth", out["rss_growth"])


if __name__ == "__main__":
    main()
