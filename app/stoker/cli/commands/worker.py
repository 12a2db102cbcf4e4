"""`stoker worker [--host ADDR] [--port N] [--cache]`: lend this machine's devices to an engine elsewhere.

Runs llama.cpp's rpc-server (built by `stoker setup --rpc`) in the foreground, restarted with
backoff when it stops (stoker/fleet/rpc_worker.py), and prints one status line per change. It binds
127.0.0.1 unless --host names another address, and then it also needs
--i-know-rpc-is-unauthenticated: RPC has no authentication and no encryption. Ctrl-C or
SIGTERM stops it.
"""

from __future__ import annotations

import signal
import sys
import threading

from stoker.base.rpc_address import DEFAULT_PORT
from stoker.engines.rpc import NO_AUTH_WARNING, is_loopback, worker_status_line
from stoker.errors import UserError
from stoker.fleet.rpc_worker import WorkerSupervisor, rpc_server_binary
from stoker.fleet.snapshot import EngineState


def add_arguments(parser) -> None:
    parser.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                        help="address to listen on (default 127.0.0.1; another one needs "
                             "--i-know-rpc-is-unauthenticated)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                        help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--cache", action="store_true",
                        help="keep received tensors in a local file cache, so a restarted engine "
                             "loads them from this disk instead of the network")
    parser.add_argument("--threads", type=int, metavar="N", help="CPU threads for this worker's CPU device")
    parser.add_argument("--log-allocations", action="store_true",
                        help="log every buffer the engine allocates here (GGML_RPC_DEBUG; verbose), "
                             "so `stoker bench rpc` can compare them with the plan")
    parser.add_argument("--i-know-rpc-is-unauthenticated", dest="allow_remote", action="store_true",
                        help="allow --host to be an address other machines can reach")


def run(args) -> int:

    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port} is not a port number; give 1 to 65535.")
    if args.threads is not None and args.threads < 1:
        raise UserError("--threads must be 1 or more.")
    if not is_loopback(args.host):
        if not args.allow_remote:
            raise UserError(f"--host {args.host} would let other machines reach this worker; "
                            f"{NO_AUTH_WARNING} Add --i-know-rpc-is-unauthenticated to bind it anyway.")
        print(f"warning: {NO_AUTH_WARNING}", file=sys.stderr, flush=True)
    binary = rpc_server_binary()
    if binary is None:
        raise UserError("rpc-server is not installed; run `stoker setup --rpc` first.")

    last: list[str] = []

    def on_status(st) -> None:
        lends = tuple(f"{d.name} ({d.free_bytes / 2**30:.1f} GiB free)" for d in st.devices
                      if d.free_bytes is not None)
        line = (worker_status_line(st.endpoint, st.state.value, st.pid, st.restarts, lends)
                + (f" ({st.last_error})" if st.last_error and st.state is not EngineState.READY else ""))
        if last != [line]:
            last[:] = [line]
            print(line, flush=True)

    sup = WorkerSupervisor(binary, args.host, args.port, cache=args.cache, threads=args.threads,
                           log_allocations=args.log_allocations, on_status=on_status)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        final = sup.run_until(stop)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if final is EngineState.FAILED:
        print(f"stoker: the worker on {sup.worker.endpoint} gave up: {sup.state.last_error}", file=sys.stderr)
        return 1
    return 0
