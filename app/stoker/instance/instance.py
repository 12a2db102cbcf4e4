"""One running Stoker: the model catalog, the supervisor and the gateway, and what the
control channel may ask of them.

`stoker run` (headless) and the tray build the same Instance, so the endpoint, the names and
the answers to `stoker status / ps / load / unload` cannot differ between the two. The
gateway's sockets are bound before anything else starts: a taken port is GatewayError (one
sentence, exit 2), never a silent other port. The gateway itself serves from its own
process (stoker/gateway/process.py) so the UI thread cannot slow a stream. Must not print,
and never imports Qt or the CLI.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from stoker.base.heap import limit_heap_arenas
from stoker.base.secrets import get_api_key
from stoker.base.store import DEFAULT_GATEWAY_PORT, SettingsStore
from stoker.engines.launch import PreparedLaunch
from stoker.fleet import commands as cmd
from stoker.fleet.status_report import SCHEMA, running_status
from stoker.fleet.supervisor import Supervisor, SupervisorHooks, SupervisorOptions
from stoker.gateway.ollama_port import bind_ollama_port
from stoker.gateway.ollama_rules import OLLAMA_PORT
from stoker.gateway.process import GatewayProcess, RemoteRoutes
from stoker.gateway.server import GatewayConfig, GatewayError, bind_sockets
from stoker.library.catalog import ModelCatalog

__all__ = ["Instance", "GatewayError", "gateway_port"]

log = logging.getLogger(__name__)


def gateway_port(cli_port: int | None) -> int:
    """--port beats Settings' gateway_port, which defaults to 7857."""
    if cli_port is not None:
        return cli_port

    try:
        return SettingsStore().load().gateway_port
    except (OSError, ValueError):
        return DEFAULT_GATEWAY_PORT


def _cors_origins() -> tuple[str, ...]:

    try:
        return SettingsStore().load().cors_origins
    except (OSError, ValueError):
        return ()


def _ollama_port_wanted() -> bool:
    try:
        return SettingsStore().load().ollama_port
    except (OSError, ValueError):
        return False


def _shared_worker_command() -> cmd.ShareWorker | None:
    """Settings' "Share this machine as an RPC worker", as the command that starts it."""

    try:
        settings = SettingsStore().load()
    except (OSError, ValueError):
        return None
    if not settings.worker_enabled:
        return None
    return cmd.ShareWorker(settings.worker_host, settings.worker_port, settings.worker_cache,
                           allow_remote=settings.worker_allow_remote)


def _api_key() -> str | None:

    return get_api_key()


class Instance:
    def __init__(self, preparer, *, port: int, extra_models: tuple[str, ...] = (),
                 tray_shown: Callable[[], bool | None] = lambda: False,
                 on_stop: Callable[[], None] | None = None, ollama_port: int = OLLAMA_PORT,
                 options: SupervisorOptions | None = None,
                 on_launch: Callable[[PreparedLaunch], None] | None = None) -> None:
        self.catalog = ModelCatalog(tuple(str(m) for m in extra_models))
        # Bound first: the URL the supervisor reports is the one that really listens.
        sockets = bind_sockets(port, GatewayConfig(port).hosts)
        self.port = sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # Settings' "Also answer on Ollama's port": one more socket for the same gateway, or
        # the sentence why not, shown with the other settings problems.
        self.ollama_port_problem: str | None = None
        if _ollama_port_wanted():
            extra, self.ollama_port_problem = bind_ollama_port(ollama_port)
            sockets += extra
            if self.ollama_port_problem:
                log.warning("%s", self.ollama_port_problem)
        routes = RemoteRoutes()
        problems = (self.ollama_port_problem,) if self.ollama_port_problem else ()
        self.supervisor = Supervisor(
            preparer, replace(options or SupervisorOptions(), gateway_url=self.url, endpoint_problems=problems),
            SupervisorHooks(on_launch=on_launch, on_overrides=self._overrides_saved,
                            name_model=self.catalog.id_for), routes=routes)
        routes.wake = lambda: self.supervisor.submit(cmd.RouteAnswered())
        self.gateway = GatewayProcess(self.supervisor, self.catalog, routes,
                                      GatewayConfig(self.port, cors_origins=_cors_origins()),
                                      sockets=sockets, tray_shown=tray_shown, api_key=_api_key)
        self._tray_shown = tray_shown
        self._on_stop = on_stop or (lambda: self.supervisor.submit(cmd.Shutdown()))

    def start(self) -> Instance:
        # Before the gateway's link threads and the supervisor's start: each thread would get
        # a heap arena of its own and hold freed memory apart from the others' (base/heap.py;
        # issue 25's soak).
        limit_heap_arenas()
        self.catalog.refresh()
        self.gateway.start()  # the gateway process imports while the supervisor starts
        self.supervisor.start()
        try:
            self.gateway.wait_ready()
        except GatewayError:
            self.supervisor.submit(cmd.Shutdown())
            self.gateway.stop()
            raise
        share = _shared_worker_command()
        if share is not None:
            self.supervisor.submit(share)
        return self

    def close(self) -> None:
        self.gateway.stop()

    def _overrides_saved(self, model_path: str) -> None:
        """On the supervisor thread: a model's aliases may have changed, so rescan off it
        (the gateway process gets the new catalog as soon as it differs)."""
        threading.Thread(target=self.catalog.refresh, name="stoker-catalog", daemon=True).start()

    def status(self) -> dict:
        return running_status(self.supervisor.snapshot(), time.time(), instance_pid=os.getpid(),
                              tray_shown=self._tray_shown(), gateway_pid=self.gateway.pid)

    def model_path(self, name: str) -> str:
        """A control request's model name → its path: an id, an alias or a file."""
        entry = self.catalog.current.resolve(name) or self.catalog.refresh().resolve(name)
        if entry is not None:
            return entry.path
        candidate = Path(name).expanduser()
        if candidate.is_file():
            self.catalog.add(candidate)
            return str(candidate.resolve())
        closest = ", ".join(self.catalog.current.closest(name))
        raise LookupError(f"no model is called {name!r}; the closest: {closest}. "
                          "`stoker models` lists them all.")

    def answer(self, req: dict) -> dict:
        """The control channel's answers (on the control thread: only submits and reads)."""
        op = req.get("op")
        if op in ("status", "ps"):
            return {"ok": True, "schema": SCHEMA, "status": self.status()}
        if op == "stop":
            self._on_stop()
            return {"ok": True, "stopping": True}
        if op in ("load", "unload", "pin", "unpin"):
            name = req.get("model")
            if not isinstance(name, str) or not name:
                return {"ok": False, "error": f"`{op}` needs a model id; see `stoker models`."}
            try:
                path = self.model_path(name)
            except LookupError as exc:
                return {"ok": False, "error": str(exc)}
            ident = self.catalog.id_for(path) or name
            if op == "load":
                pin = req.get("pin") if isinstance(req.get("pin"), bool) else None
                self.supervisor.submit(cmd.LoadModel(path, pin=pin))
                return {"ok": True, "id": ident, "message": f"loading {ident}"}
            if op == "unload":
                self.supervisor.submit(cmd.UnloadModel(path))
                return {"ok": True, "id": ident,
                        "message": f"unloading {ident} once its requests in flight end"}
            self.supervisor.submit(cmd.PinModel(path, op == "pin"))
            return {"ok": True, "id": ident, "message": f"{ident} {'pinned' if op == 'pin' else 'unpinned'}"}
        return {"ok": False, "error": f"unknown request {op!r}; use status, ps, load, unload, pin or stop"}
