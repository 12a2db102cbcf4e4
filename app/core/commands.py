"""What the UI and the CLI may ask of the supervisor: frozen command values.

They are put on the supervisor's queue (`Supervisor.submit`); only the supervisor thread
acts on them. Nothing here acts.
"""

from __future__ import annotations

from dataclasses import dataclass

from stoker.core.overrides import ModelOverrides


@dataclass(frozen=True)
class StartModel:
    model_path: str | None = None  # None: the last used model, else the demo model


@dataclass(frozen=True)
class SwitchModel:
    model_path: str


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Restart:
    reason: str = "asked by the user"


@dataclass(frozen=True)
class ApplyOverrides:
    """New overrides for a model; the supervisor restarts the engine if it runs that model."""

    model_path: str
    overrides: ModelOverrides
    restart: bool = True


@dataclass(frozen=True)
class LiftQuarantine:
    build_id: str


@dataclass(frozen=True)
class Shutdown:
    """Stop the engine cleanly and end the supervisor thread."""


Command = StartModel | SwitchModel | Stop | Restart | ApplyOverrides | LiftQuarantine | Shutdown
