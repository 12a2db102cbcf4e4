"""A build's identity: the one definition of "this engine build" that every cache and ledger
is keyed to (the device-probe cache, the discovery caches, the quarantine ledger, measured
memory, the bandwidth cache).

One contract: `binary_identity(path)` is a hex digest that changes when the binary or the
ggml/llama libraries beside it change, or None when the binary cannot be read (missing,
unreadable), so no cache ever remembers a build that is not there. It reads files (stat and
the binary's first MiB); it never runs the binary.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def _engine_libraries(folder: Path) -> list[Path]:
    found: set[Path] = set()
    for pattern in ("libggml*.so*", "libggml*.dylib", "ggml*.dll", "libggml*.dll", "libllama*.so*",
                    "libllama*.dylib", "llama*.dll"):
        found.update(p for p in folder.glob(pattern) if p.is_file())
    return sorted(found)


def binary_identity(path: Path | str) -> str | None:
    """The resolved path, size and mtime_ns of the binary and of each library beside it, plus
    a hash of the binary's first MiB (so a binary replaced within the filesystem's mtime
    granularity still reads as new, and so does a backend library dropped over another);
    None when the binary cannot be read."""
    binary = Path(path).expanduser().resolve()
    try:
        with open(binary, "rb") as f:
            head = hashlib.sha256(f.read(1 << 20)).hexdigest()
    except OSError:
        return None
    parts: list = []
    for p in [binary, *_engine_libraries(binary.parent)]:
        try:
            st = p.stat()
            parts.append([str(p), st.st_size, st.st_mtime_ns])
        except OSError:
            parts.append([str(p), None, None])
    parts.append(head)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()
