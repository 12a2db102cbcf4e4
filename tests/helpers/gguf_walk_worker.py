"""A worker for the header fuzz test: summarise each GGUF path read from stdin under a memory limit.

It first summarises a reference file (so every code path and import is warm), then caps its
own address space (RLIMIT_AS) at what it uses now plus the reference header's size plus
64 MiB, the bound the header walk promises, and answers one JSON line per path: the outcome
("summary", "refused" with the message, or "crash" with the exception), and the CPU and wall
seconds it took.
"""

from __future__ import annotations

import json
import resource
import sys
import time

from stoker.library.gguf_io import GGUFError, read_gguf_header
from stoker.library.gguf_summary import summarise

BUDGET = 64 << 20


def vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def main() -> None:
    reference, header_bytes = sys.argv[1], int(sys.argv[2])
    summarise(read_gguf_header(reference))
    limit = vm_size() + header_bytes + BUDGET
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(json.dumps({"ready": True, "limit": limit}), flush=True)
    for line in sys.stdin:
        path = line.strip()
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            summarise(read_gguf_header(path))
            out = {"outcome": "summary"}
        except GGUFError as exc:
            out = {"outcome": "refused", "message": str(exc)}
        except BaseException as exc:
            out = {"outcome": "crash", "message": f"{type(exc).__name__}: {exc!r}"[:500]}
        out["cpu_s"] = time.process_time() - cpu
        out["wall_s"] = time.perf_counter() - wall
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
