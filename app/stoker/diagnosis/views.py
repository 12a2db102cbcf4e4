"""What diagnosis tells a person, as values: an incident (an engine that ended badly) and a
blocker (what stops a GPU from being used). The fleet's snapshot carries them; diagnosis
makes them. Values only: nothing here reads a log, a file or the clock.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IncidentView:
    at: float  # unix time
    kind: str
    summary: str  # one line
    evidence: str | None
    advice: str
    action: str  # what Stoker did next
    model_path: str | None = None  # the model whose engine it was
    model_id: str | None = None


@dataclass(frozen=True)
class BlockerView:
    kind: str  # cudaBlocker | rocmBlocker | gpuUnused | missingRuntime | libraryConflict | outOfMemory
    message: str
    advice: str
