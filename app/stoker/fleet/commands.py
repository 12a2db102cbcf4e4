"""What the UI and the CLI may ask of the supervisor: frozen command values.

They are put on the supervisor's queue (`Supervisor.submit`); only the supervisor thread
acts on them. Nothing here acts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from stoker.base.overrides import ModelOverrides
from stoker.base.rpc_address import DEFAULT_PORT
from stoker.engines.kind import EngineKind


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
class Route:
    """Where the gateway sends a model's requests while its engine is READY."""

    key: str  # the model's path
    endpoint: str  # the engine's private loopback URL
    engine_key: str | None  # Authorization for the engine; never shown
    pid: int
    kind: EngineKind = EngineKind.LLAMA_SERVER  # the gateway's cancel and request mapping read it


@dataclass(frozen=True)
class EnsureResult:
    """The answer to EnsureModel: a route, or the sentence why there is none."""

    route: Route | None = None
    error: str | None = None


@dataclass(frozen=True)
class EnsureModel:
    """The gateway needs this model resident: `answer(EnsureResult)` is called (on the
    supervisor thread) once it is READY or cannot be. `ticket` names this wait."""

    model_path: str | None
    ticket: Hashable
    answer: Callable[[EnsureResult], None]


@dataclass(frozen=True)
class CancelEnsure:
    """The request behind `ticket` has gone; with no waiter left an on-demand load stops."""

    ticket: Hashable


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
class KeepAlive:
    """A request's own idle timeout for its model (Ollama's `keep_alive`, `keep_alive` or
    `ttl` on the OpenAI routes): it replaces the Settings' one while the model stays resident.
    An unload right after the answer (keep_alive 0) is UnloadModel, not this."""

    model_path: str
    idle_timeout_s: float | None  # None: never unloaded for idleness


@dataclass(frozen=True)
class WidenContext:
    """A request needs `ctx_per_slot` tokens per slot (Ollama's `num_ctx`), more than the
    running plan gives: the model is planned again with it and reloaded when that plan
    fits; otherwise the plan stays. Either way the engine's view says what was decided
    (EngineView.context_asked), so the request can say so."""

    model_path: str
    ctx_per_slot: int


@dataclass(frozen=True)
class LiftQuarantine:
    build_id: str


@dataclass(frozen=True)
class ShareWorker:
    """Run this machine's RPC worker (rpc-server) for engines on other machines: Settings'
    "Share this machine as an RPC worker" and the tray's Start on the worker's line. A
    worker already running with other values is stopped and started with these."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    cache: bool = False  # rpc-server --cache
    allow_remote: bool = False  # a host other machines can reach needs this (no authentication)


@dataclass(frozen=True)
class StartWorker:
    """Start this machine's RPC worker again as it was last shared (the tray's Start on the
    worker's line); nothing when none was ever shared."""


@dataclass(frozen=True)
class StopWorker:
    """Stop this machine's RPC worker (it stays stopped until a ShareWorker)."""


@dataclass(frozen=True)
class UseWorkerAgain:
    """An RPC worker that went away is back (snapshot.workers_back): re-plan the models that
    were planned without it with it in again, and restart them."""

    endpoint: str  # HOST:PORT


@dataclass(frozen=True)
class RouteAnswered:
    """The gateway process answered about a route (closed, or busy): decide again now."""


@dataclass(frozen=True)
class Shutdown:
    """Stop the engine cleanly and end the supervisor thread."""


Command = (StartModel | SwitchModel | Stop | Restart | LoadModel | UnloadModel | PinModel | EnsureModel
           | CancelEnsure | CancelRender | ApplyOverrides | KeepAlive | WidenContext | LiftQuarantine
           | ShareWorker | StartWorker | StopWorker | UseWorkerAgain | RouteAnswered | Shutdown)
