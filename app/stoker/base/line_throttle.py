"""How many copies of a repeated log line reach stoker.log: a flood must not rotate the
real history away.

A gateway starved of file descriptors once wrote 534,504 stderr lines in 25 s (89,084 of
them "Too many open files"), and Stoker copies the gateway's stderr into stoker.log, which
rotates at 2 MiB. `LineThrottle` lets the first few copies of a line through in each window
(lines that differ only in numbers count as one: addresses, ports, counts), caps all lines
in a window, and says how many it held back once the window is over. Pure: the clock is
passed in; it writes nothing itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WINDOW_S = 10.0
SAME_LINE_PER_WINDOW = 5
LINES_PER_WINDOW = 200

_NUMBERS = re.compile(r"\d+")


def line_shape(line: str) -> str:
    """The line with its numbers masked: what makes two lines "the same" here."""
    return _NUMBERS.sub("#", line)


@dataclass
class LineThrottle:
    window_s: float = WINDOW_S
    same_line: int = SAME_LINE_PER_WINDOW
    total: int = LINES_PER_WINDOW
    _started: float | None = None
    _written: int = 0
    _by_shape: dict[str, int] = field(default_factory=dict)
    _held: int = 0

    def offer(self, line: str, now: float) -> list[str]:
        """The lines to write now for `line` arriving at `now`: none, the line, or a note
        about the lines held back in the window that just ended, then the line."""
        out = self._roll(now)
        shape = line_shape(line)
        seen = self._by_shape.get(shape, 0)
        self._by_shape[shape] = seen + 1
        if seen >= self.same_line or self._written >= self.total:
            self._held += 1
            return out
        self._written += 1
        out.append(line)
        return out

    def flush(self, now: float) -> list[str]:
        """The note about held-back lines once their window is over (call it when idle)."""
        return self._roll(now)

    def _roll(self, now: float) -> list[str]:
        if self._started is not None and now - self._started < self.window_s:
            return []
        out = []
        if self._held:
            out.append(f"({self._held} repeated lines were left out of the log in the last "
                       f"{self.window_s:g} s)")
        self._started, self._written, self._by_shape, self._held = now, 0, {}, 0
        return out
