"""What one catalogue entry is, and the list each family of wordings writes its entries into.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

B11434 = "llama.cpp b11434"
OLDER = "llama.cpp before b11434 (history)"


class Strength(Enum):
    """How much one matching line proves on its own."""

    DECISIVE = 3  # the line names the cause itself (an OOM, a missing library, a bad argument)
    STRONG = 2  # names a cause, but the same words also follow other causes (a CUDA error)
    WEAK = 1  # a sign only (an abort, a generic failure): never decides a kind alone


@dataclass(frozen=True)
class Entry:
    name: str  # stable id; the verdict and `stoker diagnose --json` cite it
    kind: str
    rank: int  # root-cause order: higher is nearer the cause
    strength: Strength
    source: str  # where the wording comes from
    proves: str  # what the line shows
    pattern: re.Pattern[str]


class Wordings:
    """The entries one family module writes, in the order written; its wordings of one message
    are joined into one pattern, case-blind unless `case` is set."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []

    def add(self, name: str, kind: str, rank: int, strength: Strength, source: str, proves: str,
            *patterns: str, case: bool = False) -> None:
        flags = 0 if case else re.IGNORECASE
        self._entries.append(Entry(name, kind, rank, strength, source, proves,
                                   re.compile("|".join(f"(?:{p})" for p in patterns), flags)))

    def entries(self) -> tuple[Entry, ...]:
        return tuple(self._entries)
