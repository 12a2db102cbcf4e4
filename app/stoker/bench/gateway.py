"""`stoker bench gateway`: what Stoker's one endpoint adds, measured beside the engine's own port.

One run starts a real Instance (catalog + supervisor + gateway, as `stoker run` does) on the
real engine with 16 slots, and measures, side by side and interleaved so drift hits both
sides alike:

- added latency of a tiny non-streaming request (POST /tokenize), gateway vs the engine's
  private port, warm keep-alive, one connection each;
- added latency of Ollama's /api/generate (raw) and /api/chat, one token and not streamed,
  each beside the llama-server endpoint it is translated onto (/completion,
  /v1/chat/completions);
- streaming tokens/s (one SSE chunk per token, `ignore_eos` so both sides get the same
  count), gateway ÷ direct, with 1 stream and with 16 parallel streams;
- added delay per streamed chunk, with Stoker's other threads idle and with a busy "UI
  thread" (a pure-Python loop in Stoker's process, as the Qt thread would be; the gateway
  serves from its own process, stoker/gateway/child.py, so it does not share that GIL).
  Measured with a tap: for this part the engine is relaunched behind a
  byte relay (a LaunchPreparer wrapper points the route at the relay, the engine's argv
  keeps its own port), and each chunk's time at the relay is compared with its time at the
  client, through the gateway and, as the baseline, straight from the relay;
- upstream closed after a client disconnects: when the relay sees the gateway close its
  upstream connection, and when the engine's /slots shows the slot idle;
- time to first token on a cold model (loaded on demand by the request) minus the load
  time (spawn → READY, as the supervisor records it) and the warm direct TTFT;
- an idle model's process gone after its idle timeout (RealPreparer's `idle_timeout_s`).

The clients (and the relay) run in a child process, as a chat client would, so the
gateway's process holds only Stoker's threads and, when asked, the busy one.
Benchmarks are not timed tests: this prints figures beside their targets; it never fails
on a missed target, it says so.

Imports of aiohttp and the shell are inside functions: `stoker` builds every bench's
arguments at start-up, and no other command should pay for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import multiprocessing
import os
import statistics
import threading
import time

from aiohttp import ClientSession, ClientTimeout, TCPConnector

from stoker.base.overrides import ModelOverrides
from stoker.base.secrets import get_api_key
from stoker.engines.launch import AttemptContext, PreparedLaunch
from stoker.engines.process import free_loopback_port
from stoker.errors import UserError
from stoker.fleet import commands as cmd
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import SupervisorOptions
from stoker.instance.instance import Instance
from stoker.library.models import resolve_model

SCHEMA = 3  # 2: the gateway serves from its own process: `gateway_pid` added, `switch_interval_ms` gone
# 3: `ollama`: Ollama's /api/generate and /api/chat beside the engine endpoints they map onto
PROMPT = "Write a long story about a lighthouse keeper and the sea."
# (figure key, words, unit, comparison, target)
TARGETS = {
    "latency_added_p50_ms": ("added latency p50, POST /tokenize", "ms", "<=", 1.0),
    "latency_added_p99_ms": ("added latency p99, POST /tokenize", "ms", "<=", 5.0),
    "ollama_generate_added_p50_ms": ("added latency p50, /api/generate vs /completion", "ms", "<=", 1.0),
    "ollama_generate_added_p99_ms": ("added latency p99, /api/generate vs /completion", "ms", "<=", 5.0),
    "ollama_chat_added_p50_ms": ("added latency p50, /api/chat vs /v1/chat/completions", "ms", "<=", 1.0),
    "ollama_chat_added_p99_ms": ("added latency p99, /api/chat vs /v1/chat/completions", "ms", "<=", 5.0),
    "stream_ratio_1": ("tokens/s gateway / direct, 1 stream", "", ">=", 0.99),
    "stream_ratio_many": ("tokens/s gateway / direct, {n} streams", "", ">=", 0.98),
    "chunk_idle_p50_ms": ("added delay per chunk p50, UI thread idle", "ms", "<=", 0.5),
    "chunk_idle_p99_ms": ("added delay per chunk p99, UI thread idle", "ms", "<=", 5.0),
    "chunk_busy_p50_ms": ("added delay per chunk p50, UI thread busy", "ms", "<=", 0.5),
    "chunk_busy_p99_ms": ("added delay per chunk p99, UI thread busy", "ms", "<=", 5.0),
    "cold_overhead_ms": ("cold TTFT - (load + warm direct TTFT), median", "ms", "<=", 250.0),
    "disconnect_upstream_ms": ("upstream closed after client disconnect, worst", "ms", "<=", 50.0),
    "idle_gone_late_s": ("idle model's process gone after its timeout, worst", "s", "<=", 2.0),
}


def add_arguments(parser) -> None:
    parser.add_argument("--model", metavar="MODEL", help="model to serve (default: the demo model)")
    parser.add_argument("--engine", metavar="PATH", help="llama-server binary (default: the best build)")
    parser.add_argument("--iterations", type=int, default=1000, metavar="N",
                        help="non-streaming requests on each side (1000)")
    parser.add_argument("--ollama-iterations", type=int, default=300, metavar="N",
                        help="one-token requests on each side for each Ollama route (300)")
    parser.add_argument("--rounds", type=int, default=5, metavar="N",
                        help="streaming rounds on each side, for 1 and for the parallel streams (5)")
    parser.add_argument("--streams", type=int, default=16, metavar="N", help="parallel streams (16)")
    parser.add_argument("--tokens", type=int, default=64, metavar="N", help="tokens per stream (64)")
    parser.add_argument("--chunk-streams", type=int, default=6, metavar="N",
                        help="tapped streams on each side, idle and busy (6)")
    parser.add_argument("--disconnects", type=int, default=5, metavar="N", help="client disconnects (5)")
    parser.add_argument("--cold-runs", type=int, default=3, metavar="N", help="cold loads (3)")
    parser.add_argument("--idle-timeout", type=float, default=3.0, metavar="S",
                        help="idle timeout for the unload check, seconds (3)")
    parser.add_argument("--ctx-per-slot", type=int, default=256, metavar="N", help="context per slot (256)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="engine threads (default: the planner's choice; on a machine whose cores "
                             "are busy with other work, 1 keeps the engine's threads from waiting on "
                             "each other)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


# ====================================================================== the client process


class _Marks:
    """Counts the starts of SSE `data: ` fields in a byte stream read piece by piece
    (the relay and the client use the same rule, so the k-th mark is the same chunk)."""

    NEEDLE = b"data: "

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> int:
        buf = self._tail + data
        # The tail is shorter than the needle, so each match found here is a new one.
        self._tail = buf[-(len(self.NEEDLE) - 1):]
        return buf.count(self.NEEDLE)


class _Relay:
    """A byte relay in front of the engine: records when each `data: ` chunk came from the
    engine (per connection) and when the other side closed its connection."""

    def __init__(self) -> None:
        self.target_port: int | None = None
        self.marks: dict[int, list[float]] = {}
        self.closed: dict[int, float] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        server = self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return int(server.sockets[0].getsockname()[1])

    def reset(self) -> None:
        self.marks, self.closed = {}, {}

    async def _connection(self, creader, cwriter) -> None:
        cid = next(self._ids)
        try:
            ereader, ewriter = await asyncio.open_connection("127.0.0.1", self.target_port)
        except (OSError, TypeError):
            cwriter.close()
            return
        up = asyncio.create_task(self._up(creader, ewriter, cid))
        down = asyncio.create_task(self._down(ereader, cwriter, cid))
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for w in (ewriter, cwriter):
            w.close()

    async def _up(self, reader, writer, cid: int) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
        except OSError:
            pass
        self.closed[cid] = time.perf_counter()

    async def _down(self, reader, writer, cid: int) -> None:
        marks = _Marks()
        try:
            while data := await reader.read(65536):
                now = time.perf_counter()
                n = marks.feed(data)
                if n:
                    self.marks.setdefault(cid, []).extend([now] * n)
                writer.write(data)
        except OSError:
            pass


class _Clients:
    """The requests, on one asyncio loop in the child process: one keep-alive session per side."""

    def __init__(self) -> None:
        self.relay = _Relay()
        self._sessions: dict[str, ClientSession] = {}

    def session(self, side: str):

        if side not in self._sessions:
            self._sessions[side] = ClientSession(
                # Idle connections dropped before llama-server closes them (5 s), as the gateway does.
                connector=TCPConnector(limit=0, keepalive_timeout=2.0), timeout=ClientTimeout(total=600),
                auto_decompress=False)
        return self._sessions[side]

    async def close(self) -> None:
        for s in self._sessions.values():
            await s.close()

    async def latency(self, sides: list[dict], n: int) -> dict:
        """`n` POSTs on each side, interleaved (the order flips each iteration)."""
        out: dict[str, list[float]] = {s["name"]: [] for s in sides}
        for i in range(n):
            for side in (sides if i % 2 == 0 else list(reversed(sides))):
                session = self.session(side["name"] + "-latency")
                body = json.dumps(side["body"]).encode()
                t0 = time.perf_counter()
                async with session.post(side["url"], data=body, headers=side["headers"]) as r:
                    await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"{side['name']} answered {r.status} to {side['url']}")
                out[side["name"]].append(time.perf_counter() - t0)
        return out

    async def stream(self, side: dict, n: int, disconnect_after: int | None = None) -> dict:
        """`n` streams at once; per stream: when it was sent and when each chunk came."""
        session = self.session(side["name"])
        results = await asyncio.gather(*(self._one_stream(session, side, disconnect_after)
                                         for _ in range(n)))
        return {"streams": list(results)}

    async def _one_stream(self, session, side: dict, disconnect_after: int | None) -> dict:
        body = json.dumps(side["body"]).encode()
        marks, mark_times, events, buf = _Marks(), [], [], b""
        t0 = time.perf_counter()
        wall_offset = time.time() - t0  # wall clock = perf_counter + this, to compare with the parent
        closed_at = None
        async with session.post(side["url"], data=body, headers=side["headers"]) as r:
            if r.status != 200:
                raise RuntimeError(f"{side['name']} answered {r.status}: {(await r.read())[:300]!r}")
            async for chunk in r.content.iter_any():
                now = time.perf_counter()
                mark_times.extend([now] * marks.feed(chunk))
                buf += chunk
                while (i := buf.find(b"\n\n")) >= 0:
                    event, buf = buf[:i], buf[i + 2:]
                    if event.startswith(b"data: ") and event != b"data: [DONE]":
                        events.append(now)
                if disconnect_after is not None and len(events) >= disconnect_after:
                    closed_at = time.perf_counter()
                    r.close()  # the connection itself, as a client that goes away
                    break
        return {"sent": t0, "events": events, "marks": mark_times, "closed_at": closed_at,
                "wall_offset": wall_offset, "ended_wall": time.time()}

    async def tap(self, side: dict, n: int) -> dict:
        """`n` streams one after another, each chunk's client time minus its time at the relay."""
        delays: list[float] = []
        mismatched = 0
        for _ in range(n):
            self.relay.reset()
            got = (await self.stream(side, 1))["streams"][0]
            tapped = max(self.relay.marks.values(), key=len, default=[])
            if len(tapped) != len(got["marks"]):
                mismatched += 1
            delays += [c - t for c, t in zip(got["marks"], tapped, strict=False)]  # a short list is counted above
        return {"delays": delays, "mismatched": mismatched}

    async def disconnect(self, side: dict, slots_url: str, slots_headers: dict, n: int,
                         after: int) -> dict:
        """Leave a stream after `after` chunks; time the upstream close (relay) and the idle slot."""
        upstream, idle = [], []
        for _ in range(n):
            self.relay.reset()
            got = (await self.stream(side, 1, disconnect_after=after))["streams"][0]
            t_close = got["closed_at"]
            slot_idle = None
            session = self.session("slots")
            deadline = time.perf_counter() + 10
            while time.perf_counter() < deadline:
                async with session.get(slots_url, headers=slots_headers) as r:
                    slots = await r.json(content_type=None)
                if isinstance(slots, list) and not any(s.get("is_processing") for s in slots):
                    slot_idle = time.perf_counter()
                    break
                await asyncio.sleep(0.002)
            while time.perf_counter() < deadline:
                streamed = [cid for cid, m in self.relay.marks.items() if m]
                if streamed and all(cid in self.relay.closed for cid in streamed):
                    break
                await asyncio.sleep(0.002)
            streamed = [cid for cid, m in self.relay.marks.items() if m]
            closes = [self.relay.closed[c] for c in streamed if c in self.relay.closed]
            upstream.append(min(closes) - t_close if closes and t_close else None)
            idle.append(slot_idle - t_close if slot_idle and t_close else None)
        return {"upstream_closed_s": upstream, "slot_idle_s": idle}


async def _serve(conn) -> None:
    loop = asyncio.get_running_loop()
    clients = _Clients()
    relay_port = await clients.relay.start()
    conn.send({"relay_port": relay_port})
    try:
        while True:
            msg = await loop.run_in_executor(None, conn.recv)
            op = msg.pop("op")
            if op == "quit":
                break
            try:
                if op == "relay_target":
                    clients.relay.target_port = msg["port"]
                    result = {}
                else:
                    result = await getattr(clients, op)(**msg)
                conn.send({"ok": result})
            except Exception as exc:
                conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        await clients.close()


def client_main(conn) -> None:
    """The child process's entry point (multiprocessing, spawn)."""
    asyncio.run(_serve(conn))


class ClientProcess:
    """The parent's handle on the client process: `call(op, **args)` → its answer."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=client_main, args=(child,), name="stoker-bench-clients",
                                 daemon=True)
        self._proc.start()
        child.close()
        if not self._conn.poll(60):
            raise RuntimeError("the benchmark's client process did not start")
        self.relay_port = self._conn.recv()["relay_port"]

    def call(self, op: str, **args):
        self._conn.send({"op": op, **args})
        answer = self._conn.recv()
        if "error" in answer:
            raise RuntimeError(f"{op} failed: {answer['error']}")
        return answer["ok"]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send({"op": "quit"})
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.terminate()
            self._proc.join(5)


# ====================================================================== the gateway's process


class TapPreparer:
    """The real preparer, with the route pointed at the relay while `tap_engine_port` is set.

    The engine then listens on `tap_engine_port` (its argv says so), and only `spec.port`,
    which the supervisor's health checks and the gateway's route use, becomes the relay's.
    Everything else is the RealPreparer's own: its hooks see the launch they made (the
    launch context travels inside the tapped launch).
    """

    def __init__(self, real: RealPreparer, relay_port: int) -> None:
        self.real = real
        self.relay_port = relay_port
        self.tap_engine_port: int | None = None

    def __call__(self, model_path: str | None, attempt: AttemptContext):

        port = self.tap_engine_port
        if port is None:
            return self.real(model_path, attempt)
        launch = self.real(model_path, dataclasses.replace(attempt, port=port))
        if not isinstance(launch, PreparedLaunch):
            return launch
        return dataclasses.replace(launch, spec=dataclasses.replace(launch.spec, port=self.relay_port))

    def after_exit(self, launch, incident, exit):
        return self.real.after_exit(launch, incident, exit)

    def after_ready(self, launch, lines) -> None:
        self.real.after_ready(launch, lines)

    def choose_model(self, model_path: str | None):
        return self.real.choose_model(model_path)

    def idle_timeout_for(self, overrides, current):
        return self.real.idle_timeout_for(overrides, current)

    def engine_health(self):
        return self.real.engine_health()

    def lift_quarantine(self, build_id: str) -> None:
        self.real.lift_quarantine(build_id)

    def watching_workers(self) -> bool:
        return self.real.watching_workers()

    def readmit_worker(self, endpoint: str) -> tuple[str, ...]:
        return self.real.readmit_worker(endpoint)


def _burn(stop: threading.Event) -> None:
    """A busy UI thread: pure Python, holding the GIL but for the interpreter's switches."""
    x = 0
    while not stop.is_set():
        for _ in range(10_000):
            x += 1


def _q(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def _dist_ms(values: list[float]) -> dict:
    ms = [v * 1000 for v in values]
    return {"n": len(ms), "p50_ms": _q(ms, 50), "p90_ms": _q(ms, 90), "p99_ms": _q(ms, 99),
            "max_ms": max(ms) if ms else None, "mean_ms": statistics.fmean(ms) if ms else None}


def _tokens_per_s(batch: dict) -> tuple[float, int]:
    streams = batch["streams"]
    tokens = sum(len(s["events"]) for s in streams)
    start = min(s["sent"] for s in streams)
    end = max(s["events"][-1] for s in streams if s["events"])
    return tokens / (end - start), tokens


class _Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.launched_at: dict[str, float] = {}  # model key → when its engine was last spawned
        self.notes: list[str] = []

    # -- helpers on the gateway's side

    def on_launch(self, launch) -> None:
        """The supervisor's hook, called just before it spawns the engine."""
        self.launched_at[os.path.realpath(launch.model_path)] = time.time()

    def view(self):
        return next((e for e in self.sup.snapshot().engines if e.model_path == self.key), None)

    def wait_ready(self, timeout_s: float = 300):

        snap = self.sup.wait_for(lambda s: any(
            e.model_path == self.key and e.state in (EngineState.READY, EngineState.FAILED)
            for e in s.engines), timeout_s)
        view = self.view()
        if snap is None or view is None or view.state is not EngineState.READY:
            why = view.last_error if view is not None else "it did not start in time"
            raise RuntimeError(f"the model did not become ready: {why}")
        return view

    def wait_unloaded(self, timeout_s: float = 60) -> None:

        pid = self.view().pid if self.view() else None
        self.sup.submit(self.cmd.UnloadModel(self.key))
        if self.sup.wait_for(lambda s: not any(
                e.model_path == self.key and e.state is not EngineState.STOPPED for e in s.engines),
                timeout_s) is None:
            raise RuntimeError("the model did not unload")
        if pid is not None:
            self.wait_gone(pid, timeout_s)

    @staticmethod
    def wait_gone(pid: int, timeout_s: float) -> float | None:
        """When the process `pid` was seen gone (exited or a zombie), or None."""
        import psutil

        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    return time.time()
            except psutil.NoSuchProcess:
                return time.time()
            time.sleep(0.01)
        return None

    def direct(self, name: str = "direct", port: int | None = None) -> dict:
        route = self.sup.routes.route(self.key)
        if route is None:
            raise RuntimeError("the model has no route: it is not ready")
        url = f"http://127.0.0.1:{port}" if port else route.endpoint
        headers = {"Content-Type": "application/json"}
        if route.engine_key:
            headers["Authorization"] = f"Bearer {route.engine_key}"
        return {"name": name, "url": url, "headers": headers}

    def gateway(self) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        assert self.instance is not None  # started before any request is measured
        return {"name": "gateway", "url": self.instance.url, "headers": headers}

    def stream_body(self, tokens: int) -> dict:
        return {"model": self.model_id, "prompt": PROMPT, "max_tokens": tokens, "temperature": 0,
                "stream": True, "ignore_eos": True, "cache_prompt": False}

    @staticmethod
    def at(side: dict, path: str, body: dict) -> dict:
        return {**side, "url": side["url"] + path, "body": body}

    # -- the parts

    def latency(self) -> dict:
        body = {"model": self.model_id, "content": "Hello, world"}
        sides = [self.at(self.direct(), "/tokenize", body), self.at(self.gateway(), "/tokenize", body)]
        self.clients.call("latency", sides=sides, n=min(50, self.args.iterations))  # warm-up
        got = self.clients.call("latency", sides=sides, n=self.args.iterations)
        d, g = _dist_ms(got["direct"]), _dist_ms(got["gateway"])
        return {"direct": d, "gateway": g, "added_p50_ms": g["p50_ms"] - d["p50_ms"],
                "added_p99_ms": g["p99_ms"] - d["p99_ms"]}

    def ollama_latency(self) -> dict:
        """Ollama's /api/generate (raw) and /api/chat, one token, not streamed, each beside the
        llama-server endpoint it is translated onto: what the translation and the gateway add."""
        greedy = {"temperature": 0, "seed": 1}
        messages = [{"role": "user", "content": "Hello"}]
        pairs = {
            "generate": ("/api/generate", {"model": self.model_id, "prompt": "Hello", "raw": True, "stream": False,
                                           "options": {"num_predict": 1, **greedy}},
                         "/completion", {"prompt": "Hello", "n_predict": 1, "stream": False, **greedy}),
            "chat": ("/api/chat", {"model": self.model_id, "messages": messages, "stream": False,
                                   "options": {"num_predict": 1, **greedy}},
                     "/v1/chat/completions", {"model": self.model_id, "messages": messages, "max_tokens": 1,
                                              "stream": False, **greedy}),
        }
        n = self.args.ollama_iterations
        out = {}
        for name, (ollama_path, ollama_body, engine_path, engine_body) in pairs.items():
            # The same engine request passed through the gateway as it is, too: what the
            # translation adds beyond the pass-through, on a machine too busy for absolutes.
            passed = {**self.at(self.gateway(), engine_path, {"model": self.model_id, **engine_body}),
                      "name": "passed"}
            sides = [self.at(self.direct(), engine_path, engine_body),
                     self.at(self.gateway(), ollama_path, ollama_body), passed]
            self.clients.call("latency", sides=sides, n=min(20, n))  # warm-up
            got = self.clients.call("latency", sides=sides, n=n)
            d, g, p = _dist_ms(got["direct"]), _dist_ms(got["gateway"]), _dist_ms(got["passed"])
            out[name] = {"direct": d, "gateway": g, "passed_through": p,
                         "added_p50_ms": g["p50_ms"] - d["p50_ms"], "added_p99_ms": g["p99_ms"] - d["p99_ms"],
                         "translation_p50_ms": g["p50_ms"] - p["p50_ms"], "paths": [engine_path, ollama_path]}
        return out

    def streaming(self) -> dict:
        body = self.stream_body(self.args.tokens)
        sides = [self.at(self.direct(), "/v1/completions", body),
                 self.at(self.gateway(), "/v1/completions", body)]
        out = {}
        for n in (1, self.args.streams):
            for side in sides:  # warm-up: connections and the engine's batch path
                self.clients.call("stream", side=side, n=n)
            rates: dict[str, list[float]] = {"direct": [], "gateway": []}
            ttft: dict[str, list[float]] = {"direct": [], "gateway": []}
            ratios, tokens = [], {}
            for r in range(self.args.rounds):
                got = {}
                for side in (sides if r % 2 == 0 else list(reversed(sides))):
                    batch = self.clients.call("stream", side=side, n=n)
                    rate, tokens[side["name"]] = _tokens_per_s(batch)
                    got[side["name"]] = rate
                    rates[side["name"]].append(rate)
                    ttft[side["name"]] += [s["events"][0] - s["sent"] for s in batch["streams"]
                                           if s["events"]]
                ratios.append(got["gateway"] / got["direct"])
            if tokens.get("direct") != tokens.get("gateway"):
                self.notes.append(f"with {n} streams the two sides got different chunk counts: {tokens}")
            out[str(n)] = {"streams": n, "tokens_per_round": tokens,
                           "direct_tokens_per_s": rates["direct"], "gateway_tokens_per_s": rates["gateway"],
                           "ratios": ratios, "ratio_median": statistics.median(ratios),
                           "ttft_direct_ms": _dist_ms(ttft["direct"]),
                           "ttft_gateway_ms": _dist_ms(ttft["gateway"])}
        return out

    def tapped(self) -> dict:
        """Chunk delays (idle and busy UI thread) and disconnects, with the engine behind the relay."""

        engine_port = free_loopback_port()
        self.clients.call("relay_target", port=engine_port)
        self.preparer.tap_engine_port = engine_port
        try:
            self.sup.submit(self.cmd.Restart(reason="benchmark: behind the tap", model_path=self.key))
            deadline = time.time() + 120
            while time.time() < deadline:  # the old route closes first, then the tapped one opens
                route = self.sup.routes.route(self.key)
                if route is not None and route.endpoint.endswith(f":{self.clients.relay_port}"):
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError("the model did not come back behind the tap")
            self.wait_ready()
            body = self.stream_body(self.args.tokens)
            via_relay = self.at(self.direct("relay", self.clients.relay_port), "/v1/completions", body)
            via_gateway = self.at(self.gateway(), "/v1/completions", body)
            for side in (via_relay, via_gateway):
                self.clients.call("tap", side=side, n=1)  # warm-up
            out: dict = {}
            for ui in ("idle", "busy"):
                stop = threading.Event()
                burner = threading.Thread(target=_burn, args=(stop,), name="bench-busy-ui", daemon=True)
                if ui != "idle":
                    burner.start()
                try:
                    delays: dict[str, list[float]] = {"relay": [], "gateway": []}
                    mismatched = 0
                    for i in range(self.args.chunk_streams):
                        for side in ((via_relay, via_gateway) if i % 2 == 0 else (via_gateway, via_relay)):
                            got = self.clients.call("tap", side=side, n=1)
                            delays[side["name"]] += got["delays"]
                            mismatched += got["mismatched"]
                finally:
                    stop.set()
                    if burner.is_alive():
                        burner.join(5)
                if mismatched:
                    self.notes.append(f"{mismatched} tapped streams ({ui}) had different chunk counts "
                                      "at the relay and the client; their common chunks were used")
                base, through = _dist_ms(delays["relay"]), _dist_ms(delays["gateway"])
                out[ui] = {"baseline_relay_to_client": base, "through_gateway": through,
                           "added_p50_ms": through["p50_ms"] - base["p50_ms"],
                           "added_p99_ms": through["p99_ms"] - base["p50_ms"]}
            long_body = self.stream_body(max(self.args.ctx_per_slot - 32, 64))
            slots = self.direct("slots", engine_port)
            got = self.clients.call("disconnect", side=self.at(self.gateway(), "/v1/completions", long_body),
                                    slots_url=slots["url"] + "/slots", slots_headers=slots["headers"],
                                    n=self.args.disconnects, after=4)
            up = [v for v in got["upstream_closed_s"] if v is not None]
            idle = [v for v in got["slot_idle_s"] if v is not None]
            if len(up) < self.args.disconnects:
                self.notes.append(f"{self.args.disconnects - len(up)} disconnects saw no upstream close "
                                  "within 10 s")
            out["disconnect"] = {"upstream_closed_ms": _dist_ms(up), "slot_idle_ms": _dist_ms(idle),
                                 "missed": self.args.disconnects - len(up)}
            return out
        finally:
            self.preparer.tap_engine_port = None

    def cold_and_idle(self, warm_ttft_s: float) -> dict:
        runs, idle = [], {}
        body = self.stream_body(8)
        side = self.at(self.gateway(), "/v1/completions", body)
        for i in range(self.args.cold_runs):
            last = i == self.args.cold_runs - 1
            self.wait_unloaded()
            if last:
                self.real_preparer.idle_timeout_s = self.args.idle_timeout
            got = self.clients.call("stream", side=side, n=1)["streams"][0]
            ttft = got["events"][0] - got["sent"]
            view = self.view()
            spawned = self.launched_at.get(self.key)
            if view is None or view.ready_at is None or spawned is None:
                raise RuntimeError("the cold load left no READY time to measure")
            load = view.ready_at - spawned
            sent_wall = got["sent"] + got["wall_offset"]
            first_wall = got["events"][0] + got["wall_offset"]
            runs.append({"ttft_s": ttft, "load_s": load, "overhead_s": ttft - (load + warm_ttft_s),
                         # where the time went: planning and admission before the spawn, the
                         # engine's start, then READY → the first token through the gateway
                         "request_to_spawn_s": spawned - sent_wall,
                         "ready_to_first_token_s": first_wall - view.ready_at})
            if last:
                pid = view.pid
                gone = self.wait_gone(pid, self.args.idle_timeout + 30) if pid else None
                idle = {"timeout_s": self.args.idle_timeout, "idle_timeout_in_snapshot_s": view.idle_timeout_s,
                        "gone_after_last_request_s": gone - got["ended_wall"] if gone else None}
                idle["late_s"] = (idle["gone_after_last_request_s"] - self.args.idle_timeout
                                  if gone else None)
        overheads = [r["overhead_s"] for r in runs]
        return {"runs": runs, "warm_direct_ttft_ms": warm_ttft_s * 1000,
                "overhead_median_ms": statistics.median(overheads) * 1000,
                "overhead_max_ms": max(overheads) * 1000, "idle": idle}

    # -- the whole run

    def run(self) -> dict:

        a = self.args
        self.cmd = cmd
        model = resolve_model(a.model)
        overrides = ModelOverrides(ctx=a.ctx_per_slot * a.streams, slots=a.streams, threads=a.threads)
        # idle_timeout_s=0: never unloaded while measuring; the idle check sets its own.
        self.real_preparer = RealPreparer(cli_overrides=overrides, engine=a.engine,
                                          remember_last_model=False, idle_timeout_s=0)
        self.api_key = get_api_key()
        self.clients = ClientProcess()
        self.instance = None
        try:
            self.preparer = TapPreparer(self.real_preparer, self.clients.relay_port)
            self.instance = Instance(self.preparer, port=0, extra_models=(str(model),),
                                     on_launch=self.on_launch, options=SupervisorOptions(stop_grace_s=5)).start()
            self.sup = self.instance.supervisor
            self.sup.submit(cmd.StartModel(str(model)))
            taken = self.sup.wait_for(lambda s: any(e.model_path for e in s.engines), 60)
            if taken is None:
                raise RuntimeError("the supervisor did not take the model")
            self.key = next(e.model_path for e in taken.engines if e.model_path)
            view = self.wait_ready()
            self.model_id = view.model_id
            first_load = view.ready_at - self.launched_at[self.key]
            snap = self.sup.snapshot()
            facts = {"model": self.model_id, "engine_build": view.engine_build, "ctx": view.ctx,
                     "slots": a.streams, "argv": list(snap.argv), "first_load_s": first_load,
                     "cpus": os.cpu_count(), "load_average_at_start": _load_average(),
                     "gateway_pid": self.instance.gateway.pid, "stoker_pid": os.getpid()}
            latency = self.latency()
            ollama = self.ollama_latency()
            streaming = self.streaming()
            warm_ttft = streaming["1"]["ttft_direct_ms"]["p50_ms"] / 1000
            tapped = self.tapped()
            cold = self.cold_and_idle(warm_ttft)
        finally:
            if self.instance is not None:
                self.instance.close()
                self.instance.supervisor.submit(cmd.Shutdown())
                self.instance.supervisor.join(30)
            self.clients.close()
        figures = {
            "latency_added_p50_ms": latency["added_p50_ms"],
            "latency_added_p99_ms": latency["added_p99_ms"],
            "ollama_generate_added_p50_ms": ollama["generate"]["added_p50_ms"],
            "ollama_generate_added_p99_ms": ollama["generate"]["added_p99_ms"],
            "ollama_chat_added_p50_ms": ollama["chat"]["added_p50_ms"],
            "ollama_chat_added_p99_ms": ollama["chat"]["added_p99_ms"],
            "stream_ratio_1": streaming["1"]["ratio_median"],
            "stream_ratio_many": streaming[str(a.streams)]["ratio_median"],
            "chunk_idle_p50_ms": tapped["idle"]["added_p50_ms"],
            "chunk_idle_p99_ms": tapped["idle"]["added_p99_ms"],
            "chunk_busy_p50_ms": tapped["busy"]["added_p50_ms"],
            "chunk_busy_p99_ms": tapped["busy"]["added_p99_ms"],
            "cold_overhead_ms": cold["overhead_median_ms"],
            "disconnect_upstream_ms": tapped["disconnect"]["upstream_closed_ms"]["max_ms"],
            "idle_gone_late_s": cold["idle"].get("late_s"),
        }
        facts["load_average_at_end"] = _load_average()
        return {"schema": SCHEMA, "bench": "gateway", **facts,
                "figures": [_figure(k, v, a.streams) for k, v in figures.items()],
                "latency": latency, "ollama": ollama, "streaming": streaming,
                "chunk_delay": {k: v for k, v in tapped.items() if k != "disconnect"},
                "disconnect": tapped["disconnect"], "cold": cold, "notes": self.notes}


def _load_average() -> float | None:
    """The 1-minute load average (None where the OS has none): a busy machine widens every
    distribution here, so the report says how busy it was."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _figure(key: str, value: float | None, streams: int) -> dict:
    words, unit, op, target = TARGETS[key]
    if value is None:
        verdict = "not measured"
    elif op == "<=":
        verdict = "pass" if value <= target else "fail"
    else:
        verdict = "pass" if value >= target else "fail"
    return {"key": key, "figure": words.format(n=streams), "value": value, "unit": unit,
            "target": f"{op} {target:g}{(' ' + unit) if unit else ''}", "verdict": verdict}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ms":
        return f"{value:.2f} ms" if abs(value) < 100 else f"{value:.0f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.3f}"


def print_report(out: dict) -> None:
    print(f"stoker bench gateway: {out['model']} on {out['engine_build']}, {out['slots']} slots, "
          f"ctx {out['ctx']}; first load {out['first_load_s']:.2f} s")
    print(f"{out['cpus']} CPUs; load average {out['load_average_at_start']} at the start, "
          f"{out['load_average_at_end']} at the end")
    print(f"{'figure':52}{'measured':>12}  {'target':<12}verdict")
    for f in out["figures"]:
        print(f"{f['figure']:52}{_fmt(f['value'], f['unit']):>12}  {f['target']:<12}{f['verdict']}")
    lat = out["latency"]
    print()
    print(f"POST /tokenize, {lat['direct']['n']} each, interleaved, keep-alive (ms):")
    for side in ("direct", "gateway"):
        d = lat[side]
        print(f"  {side:8} p50 {d['p50_ms']:.3f}  p90 {d['p90_ms']:.3f}  p99 {d['p99_ms']:.3f}  "
              f"max {d['max_ms']:.3f}")
    for o in out["ollama"].values():
        print(f"POST {o['paths'][1]} beside {o['paths'][0]} (direct, and passed through the gateway), one token, "
              f"{o['direct']['n']} each, interleaved (ms); the translation adds {o['translation_p50_ms']:.2f} ms p50:")
        for side in ("direct", "gateway", "passed_through"):
            d = o[side]
            print(f"  {side:14} p50 {d['p50_ms']:.3f}  p90 {d['p90_ms']:.3f}  p99 {d['p99_ms']:.3f}  "
                  f"max {d['max_ms']:.3f}")
    for n, s in out["streaming"].items():
        print(f"streaming, {n} stream(s), {s['tokens_per_round']} chunks per round: tokens/s direct "
              + " ".join(f"{v:.0f}" for v in s["direct_tokens_per_s"]) + "; gateway "
              + " ".join(f"{v:.0f}" for v in s["gateway_tokens_per_s"])
              + f"; TTFT p50 direct {s['ttft_direct_ms']['p50_ms']:.1f} ms, gateway "
              f"{s['ttft_gateway_ms']['p50_ms']:.1f} ms")
    for ui, c in out["chunk_delay"].items():
        b, g = c["baseline_relay_to_client"], c["through_gateway"]
        print(f"chunk delay, UI thread {ui}, tap → client (ms): straight p50 {b['p50_ms']:.3f} "
              f"p99 {b['p99_ms']:.3f}; through the gateway p50 {g['p50_ms']:.3f} p99 {g['p99_ms']:.3f} "
              f"max {g['max_ms']:.3f} ({g['n']} chunks)")
    d = out["disconnect"]
    print(f"client disconnect → upstream closed (ms): p50 {_fmt(d['upstream_closed_ms']['p50_ms'], 'ms')}, "
          f"worst {_fmt(d['upstream_closed_ms']['max_ms'], 'ms')}; → engine slot idle: p50 "
          f"{_fmt(d['slot_idle_ms']['p50_ms'], 'ms')}, worst {_fmt(d['slot_idle_ms']['max_ms'], 'ms')}")
    c = out["cold"]
    print(f"cold loads (warm direct TTFT {c['warm_direct_ttft_ms']:.1f} ms): TTFT = request → spawn "
          "(plan, admission) + spawn → READY + READY → first token:")
    for r in c["runs"]:
        print(f"  {r['ttft_s'] * 1000:.0f} ms = {r['request_to_spawn_s'] * 1000:.0f} + "
              f"{r['load_s'] * 1000:.0f} + {r['ready_to_first_token_s'] * 1000:.0f} ms")
    idle = c["idle"]
    if idle.get("gone_after_last_request_s") is not None:
        print(f"idle timeout {idle['timeout_s']:g} s: the engine was gone "
              f"{idle['gone_after_last_request_s']:.2f} s after its last request ended")
    busy = [f for f in out["figures"] if f["key"].startswith("chunk_busy") and f["verdict"] == "fail"]
    if busy:
        print(f"The busy UI thread's rows miss their target. The gateway serves from its own process "
              f"(pid {out['gateway_pid']}), so it shares no interpreter lock with that thread: what is left "
              f"is CPU time, on {out['cpus']} CPUs with the busy thread holding one of them.")
    for note in out["notes"]:
        print(f"note: {note}")


def run(args) -> int:

    for name in ("iterations", "ollama_iterations", "rounds", "streams", "tokens", "chunk_streams", "disconnects",
                 "cold_runs"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1.")
    if args.idle_timeout <= 0:
        raise UserError("--idle-timeout must be more than 0 seconds.")
    if args.threads is not None and args.threads < 1:
        raise UserError("--threads must be at least 1.")
    if args.ctx_per_slot < 128:
        raise UserError("--ctx-per-slot must be at least 128.")
    try:
        out = _Bench(args).run()
    except RuntimeError as exc:
        raise UserError(f"the gateway benchmark stopped: {exc}") from None
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_report(out)
    return 0
