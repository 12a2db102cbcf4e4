"""The last lines of an engine log, read cheaply however large the file has grown.

The status window shows a live tail; reading a 5 MiB log from the start twice a second
would stall it, so only the last `max_bytes` are read. Knows nothing about what the lines
mean (that is core.diagnosis) and never writes.
"""

from __future__ import annotations

from pathlib import Path


def read_tail(path: Path | str, max_lines: int = 300, max_bytes: int = 256 * 1024
              ) -> tuple[str, ...]:
    """Up to `max_lines` last lines; () when the file is missing or unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read()
    except OSError:
        return ()
    lines = data.decode("utf-8", errors="replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first line was cut in the middle
    return tuple(lines[-max_lines:])


def newest_log(folder: Path | str) -> Path | None:
    """The most recently written *.log under `folder` (engine logs), or None."""
    root = Path(folder)
    if not root.is_dir():
        return None
    logs = [p for p in root.rglob("*.log") if p.is_file()]
    return max(logs, key=lambda p: p.stat().st_mtime_ns) if logs else None
