"""`stoker run [MODEL] [--headless]`: start Stoker's endpoint and load a model, in the foreground.

Without --headless it opens the tray app where the desktop has a system tray (with the
same model and overrides), else it runs headless as below.

Prints the endpoint (the gateway's fixed loopback URL, up before any model loads) and one
line per state change; more models load on demand through it. Ctrl-C (or
SIGTERM, or `stoker stop`) stops the engine and exits 0. A failed engine (refused plan,
crash loop) ends the command with exit code 1 and the reason. While it runs it answers
`stoker status` and `stoker stop` over the control channel, which also keeps a second
instance from starting. With no MODEL it runs the last used model, else the demo model.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from stoker.base.overrides import KV_CACHE_TYPES, ModelOverrides
from stoker.base.paths import stoker_paths, storage_sentence
from stoker.base.rpc_address import parse_workers
from stoker.engines.process import reap_orphans
from stoker.errors import UserError
from stoker.fleet.commands import Shutdown, StartModel
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import AppSnapshot, EngineState
from stoker.instance.control import AlreadyRunning, ControlServer
from stoker.instance.instance import GatewayError, Instance, gateway_port


def add_arguments(parser) -> None:
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="a GGUF path or a model name (default: the last used, else the demo model)")
    parser.add_argument("--headless", action="store_true",
                        help="no tray icon: print state changes to the terminal (the default where "
                             "this desktop has no system tray)")
    parser.add_argument("--ctx", type=int, metavar="N", help="total context in tokens")
    parser.add_argument("--slots", type=int, metavar="N", help="parallel request slots")
    parser.add_argument("--kv", choices=KV_CACHE_TYPES, metavar="TYPE",
                        help=f"KV cache type for K and V ({', '.join(KV_CACHE_TYPES)})")
    parser.add_argument("--engine", metavar="PATH", help="a llama-server binary (or its folder) to use")
    parser.add_argument("--startup-timeout", type=float, default=None, metavar="S",
                        help="seconds the engine may take to load before it counts as failed (default: "
                             "the engine's own, 180 for llama-server, 300 for sd-server, 600 for ds4)")
    parser.add_argument("--port", type=int, metavar="N",
                        help="the endpoint's loopback port (default: Settings' gateway_port, 7857; "
                             "0: any free port, printed)")
    parser.add_argument("--rpc", metavar="HOST:PORT,…",
                        help="RPC workers (`stoker worker` on other machines) to spread the model over "
                             "when it does not fit here (default: Settings' rpc_workers)")
    parser.add_argument("--memory-budget", type=float, metavar="GIB",
                        help="memory all loaded models together may use, in GiB (default: what the "
                             "machine has free, less the reserve)")


def cli_overrides(args) -> ModelOverrides | None:

    if args.ctx is not None and args.ctx < 256:
        raise UserError(f"--ctx {args.ctx} is too small; give at least 256 tokens.")
    if args.slots is not None and not 1 <= args.slots <= 64:
        raise UserError(f"--slots {args.slots} is out of range; give 1 to 64.")
    if args.ctx is None and args.slots is None and args.kv is None:
        return None
    return ModelOverrides(ctx=args.ctx, slots=args.slots, kv_type_k=args.kv, kv_type_v=args.kv)


class StatePrinter:
    """Prints one line per state change and per new incident (runs on the supervisor thread).

    States and the endpoint go to `out`; incidents, backoffs and failures go to `err`
    (stderr), where a script looks for what went wrong. Given only `out`, everything goes
    there.
    """

    def __init__(self, out=None, err=None):
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else (out if out is not None else sys.stderr)
        self.last_seq = 0
        self.last_state: EngineState | None = None
        # Incidents already in the ledger when this run began are the previous session's:
        # the first snapshot marks them seen, only later ones are printed. They are told apart
        # by identity (time, kind, summary, action), never by count: the snapshot keeps only
        # the last few, so a count stops growing once the window is full.
        self.seen: set[tuple] | None = None

    def __call__(self, snap: AppSnapshot) -> None:
        if snap.seq <= self.last_seq:
            return
        self.last_seq = snap.seq
        keys = [(i.at, i.kind, i.summary, i.action) for i in snap.incidents]
        if self.seen is None:
            self.seen = set(keys)
        for key, incident in zip(keys, snap.incidents, strict=True):
            if key not in self.seen:
                self._line(f"incident: {incident.summary} ({incident.kind}); {incident.action}",
                           self.err)
        self.seen = set(keys)
        if snap.state is self.last_state:
            return
        if self.last_state is None and snap.state is EngineState.STOPPED:
            self.last_state = snap.state  # the supervisor's first snapshot, before any start
            return
        self.last_state = snap.state
        if snap.state is EngineState.STARTING:
            self._line(f"starting: {snap.model_name or 'model'}"
                       + (f" ({snap.plan_summary})" if snap.plan_summary else ""))
        elif snap.state is EngineState.READY:
            name = snap.model_id or snap.model_name or "model"
            self._line(f"ready: {name} at {snap.endpoint}/v1  (pid {snap.pid})")
        elif snap.state is EngineState.BACKOFF:
            wait = "" if snap.next_retry_at is None else \
                f"; next try in {max(0.0, snap.next_retry_at - time.time()):.0f} s"
            self._line(f"backoff: {snap.last_error}{wait}", self.err)
        elif snap.state is EngineState.FAILED:
            self._line(f"failed: {snap.last_error}", self.err)
        else:
            self._line(snap.state.value)

    def _line(self, text: str, stream=None) -> None:
        print(text, file=stream or self.out, flush=True)


def _memory_budget_bytes(args) -> int | None:

    if args.memory_budget is None:
        return None
    if not args.memory_budget > 0:
        raise UserError(f"--memory-budget {args.memory_budget} must be a positive number of GiB.")
    return int(args.memory_budget * 1024 ** 3)


def _rpc_workers(args) -> tuple:

    if not args.rpc:
        return ()
    try:
        return parse_workers(args.rpc)
    except ValueError as exc:
        raise UserError(f"--rpc: {exc}.") from None


def run(args) -> int:

    overrides = cli_overrides(args)
    if args.port is not None and not 0 <= args.port < 65536:
        raise UserError(f"--port {args.port} is not a port number; give 1 to 65535 (0: any free one).")
    budget = _memory_budget_bytes(args)
    workers = _rpc_workers(args)

    def preparer() -> RealPreparer:
        return RealPreparer(cli_overrides=overrides, engine=args.engine,
                            startup_deadline_s=args.startup_timeout, memory_budget_bytes=budget,
                            rpc_workers=workers)

    if not args.headless:
        # The tray where this desktop has one; its fallback is this very command, headless.
        # Lazy for start-up time: Qt (PySide6) is imported only when the tray opens, never
        # for `stoker run --headless`.
        from stoker.desktop.app import run_tray

        args.headless = True
        return run_tray(args.model, headless=lambda: run(args), preparer=preparer(),
                        port=gateway_port(args.port))

    # Ctrl-C must mean "stop and exit 0" from the first instant, not only once the engine runs.
    stop_now: list[int] = []
    holder: dict = {}

    def on_signal(signum, frame):
        stop_now.append(signum)
        instance = holder.get("instance")
        if instance is not None:
            instance.supervisor.submit(Shutdown())

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            paths = stoker_paths().ensure()
        except OSError as exc:
            raise UserError(storage_sentence(exc)) from None
        return _run_headless(args, preparer, paths, holder, stop_now)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _run_headless(args, preparer, paths, holder: dict, stop_now: list) -> int:

    def answer(req: dict) -> dict:
        instance = holder.get("instance")
        if instance is None:
            return {"ok": False, "error": "Stoker is still starting; try again"}
        if req.get("op") == "show":
            return {"ok": False, "error": "this Stoker runs headless, so it has no status window; "
                                          "use `stoker status`"}
        return instance.answer(req)

    control = ControlServer(answer)
    try:
        control.claim()
    except AlreadyRunning as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(storage_sentence(exc)) from None
    instance = None
    try:
        reaped = reap_orphans(paths.run)
        if reaped:
            print(f"stopped {len(reaped)} engine(s) left behind by an earlier Stoker "
                  f"(pid {', '.join(map(str, reaped))})", flush=True)
        model_arg = args.model
        try:
            instance = Instance(preparer(), port=gateway_port(args.port),
                                extra_models=(model_arg,) if model_arg and os.path.isfile(model_arg) else ())
        except GatewayError as exc:
            raise UserError(str(exc)) from None
        sup = instance.supervisor
        sup.subscribe(StatePrinter())
        failed: list[AppSnapshot] = []
        served: list[bool] = []

        def end_if_the_asked_model_failed(s: AppSnapshot) -> None:
            # The model this command was asked to run failed before anything served: end the
            # foreground run (there is nobody to press "start again"). Once a model has
            # served, the endpoint stays up: a model that fails later answers 503 with its
            # reason while the others keep serving.
            if any(e.state is EngineState.READY for e in s.engines):
                served.append(True)
            if s.state is EngineState.FAILED and not failed and not served:
                failed.append(s)
                sup.submit(Shutdown())

        sup.subscribe(end_if_the_asked_model_failed)
        control.serve()
        if stop_now:  # Ctrl-C before anything started: nothing to stop
            return 0
        holder["instance"] = instance
        try:
            instance.start()
        except GatewayError as exc:
            raise UserError(str(exc)) from None
        print(f"endpoint: {instance.url}/v1  (OpenAI and Anthropic APIs; models by id: "
              f"GET {instance.url}/v1/models)", flush=True)
        sup.submit(StartModel(args.model))
        if stop_now:
            sup.submit(Shutdown())
        while not sup.join(0.2):
            pass
        if stop_now and not failed:
            return 0  # Ctrl-C / SIGTERM: a clean stop whatever state it met
        # A supervisor thread that died of a bug leaves a state other than STOPPED behind.
        return 1 if failed or sup.snapshot().state is not EngineState.STOPPED else 0
    finally:
        if instance is not None:
            instance.close()
        control.close()
