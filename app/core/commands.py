"""What the UI and the CLI may ask of the supervisor: frozen command values.

They are put on the supervisor's queue (`Supervisor.submit`); only the supervisor thread
acts on them. Nothing here acts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stoker.core.overrides import ModelOverrides


@dataclass(frozen=True)
class StartModel:
    """A person's start: load this model (beside the others when it fits) and show it."""

    model_path: str | None = None  # None: the last used model, else the demo model


@dataclass(frozen=True)
class SwitchModel:
    """Load this model and unload the others (each once its requests in flight end)."""

    model_path: str


@dataclass(frozen=True)
class Stop:
    model_path: str | None = None  # None: every engine


@dataclass(frozen=True)
class Restart:
    reason: str = "asked by the user"
    model_path: str | None = None  # None: the focused model


@dataclass(frozen=True)
class LoadModel:
    """`stoker load ID`, the tray's Load: make it resident; `pin` True keeps it loaded."""

    model_path: str
    pin: bool | None = None  # None: leave the pin as it is


@dataclass(frozen=True)
class UnloadModel:
    """Stop taking requests for it and stop its engine once none is in flight."""

    model_path: str | None = None  # None: the focused model


@dataclass(frozen=True)
class PinModel:
    """A pinned model is never unloaded for idleness or for room, nor is its load cancelled."""

    model_path: str | None
    pinned: bool


@dataclass(frozen=True)
class EnsureModel:
    """The gateway needs this model resident: `answer(EnsureResult)` is called (on the
    supervisor thread) once it is READY or cannot be. `ticket` names this wait."""

    model_path: str
    ticket: object
    answer: Callable[[object], None]


@dataclass(frozen=True)
class CancelEnsure:
    """The request behind `ticket` has gone; with no waiter left an on-demand load stops."""

    ticket: object


@dataclass(frozen=True)
class ApplyOverrides:
    """New overrides for a model; the supervisor restarts the engine if it runs that model."""

    model_path: str
    overrides: ModelOverrides
    restart: bool = True


@dataclass(frozen=True)
class CancelRender:
    """Stop what this model's engine is working on. An engine that cannot cancel a request
    it started (sd-server mid-render) is stopped, as an expected exit: no incident, no
    strike, and the next request starts it again. Sent by the gateway when a client leaves
    mid-request and by the tray's Cancel."""

    model_path: str
    reason: str = "the request was cancelled"


@dataclass(frozen=True)
class LiftQuarantine:
    build_id: str


@dataclass(frozen=True)
class Shutdown:
    """Stop the engine cleanly and end the supervisor thread."""


Command = (StartModel | SwitchModel | Stop | Restart | LoadModel | UnloadModel | PinModel | EnsureModel
           | CancelEnsure | CancelRender | ApplyOverrides | LiftQuarantine | Shutdown)
