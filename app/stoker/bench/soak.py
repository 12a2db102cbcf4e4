"""`stoker bench soak --minutes N`: clients over two resident models, with unloads and kills.

Each fault on its own (an engine killed, the gateway process killed, a model unloaded) is
tested elsewhere; this runs them mixed over time, as a new user's machine would see them.
One run starts a real Instance (catalog + supervisor + gateway process, as `stoker run`
does) with the demo model and Gemma 3 270M both resident, and:

- 8 clients (half of them streamed) send short chats through the gateway to the two models,
  from a process of their own so Stoker's RSS is Stoker's alone;
- on a schedule: `unload` of one model (as `stoker unload` asks it), kill -9 of one model's
  engine, kill -9 of the gateway's own process;
- every request is counted as answered, failed beside a kill (it overlapped the window after
  a kill of its own model's engine, or of the gateway process) or unexplained. An unload is
  no excuse: it stops a model once its requests end, so a failure beside one is
  unexplained;
- Stoker's RSS (its own process + the gateway process) is printed at the start and the end,
  and sampled every minute between (`rss_samples`): a growth that levels off and a leak end
  alike, only the series tells them apart.

All traffic goes to loopback; the run stops itself after N minutes (each request has a
timeout, so it ends within a bounded time after that). It never fails on a target; it prints
the counts beside it (0 unexplained, RSS growth under 5 %).

Imports of aiohttp and the fleet are inside functions: `stoker` builds every bench's
arguments at start-up, and no other command should pay for them.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from stoker.base.applog import configure_logging
from stoker.base.paths import stoker_paths
from stoker.base.secrets import get_api_key
from stoker.bench.memory import ensure_gemma
from stoker.errors import UserError
from stoker.fleet import commands as cmd
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import SupervisorOptions
from stoker.instance.instance import Instance
from stoker.library.models import resolve_model

SCHEMA = 1
PROMPTS = ("Say hello in five words.", "Name a colour.", "Count to five.", "What is 2 + 2?",
           "Give me one word that rhymes with sea.")
REQUEST_TIMEOUT_S = 120.0
RSS_GROWTH_TARGET = 0.05
# RSS is also sampled this often during the run: a growth that levels off (caches warming)
# and one that goes on (a leak) end alike, and only the series tells them apart.
RSS_SAMPLE_EVERY_S = 60.0


def add_arguments(parser) -> None:
    parser.add_argument("--minutes", type=float, default=60.0, metavar="N", help="how long to run (60)")
    parser.add_argument("--clients", type=int, default=8, metavar="N",
                        help="clients, half of them streamed, spread over the two models (8)")
    parser.add_argument("--unload-every", type=float, default=60.0, metavar="S",
                        help="unload one of the models (alternating) this often (60 s)")
    parser.add_argument("--engine-kill-every", type=float, default=240.0, metavar="S",
                        help="kill -9 one model's engine (alternating) this often (240 s)")
    parser.add_argument("--gateway-kill-every", type=float, default=480.0, metavar="S",
                        help="kill -9 the gateway process this often (480 s)")
    parser.add_argument("--kill-window", type=float, default=10.0, metavar="S",
                        help="a request that failed within this long after a kill is put down to it (10 s)")
    parser.add_argument("--engine", metavar="PATH", help="llama-server binary (default: the best build)")
    parser.add_argument("--second-model", metavar="PATH",
                        help="the second model (default: Gemma 3 270M, downloaded when missing)")
    parser.add_argument("--no-fetch", action="store_true",
                        help="do not download Gemma 3 270M when it is missing")
    parser.add_argument("--seed", type=int, default=1, help="the clients' think times (1)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


class Fault(Enum):
    UNLOAD = "unload"
    ENGINE_KILL = "engine kill"
    GATEWAY_KILL = "gateway kill"


class Outcome(Enum):
    ANSWERED = "answered"
    BESIDE_KILL = "failed beside a kill"
    UNEXPLAINED = "unexplained"


@dataclass(frozen=True)
class FaultAt:
    at: float  # seconds since the start
    fault: Fault
    model: int | None  # index into the two models; None for the gateway


@dataclass(frozen=True)
class Request:
    client: int
    model: int
    streamed: bool
    started: float  # seconds since the start
    ended: float
    ok: bool
    detail: str  # "" when answered; else the status and the first words of the error


def schedule(minutes: float, unload_every: float, engine_kill_every: float,
             gateway_kill_every: float) -> tuple[FaultAt, ...]:
    """The faults of a run: unloads from half an interval in, engine kills from half theirs,
    the gateway's from half its own, each kind alternating between the two models. Nothing
    in the last 20 s, so the last requests show that everything came back."""
    end = minutes * 60 - 20
    out: list[FaultAt] = []
    for every, fault in ((unload_every, Fault.UNLOAD), (engine_kill_every, Fault.ENGINE_KILL),
                         (gateway_kill_every, Fault.GATEWAY_KILL)):
        if every <= 0:
            continue
        t, n = every / 2, 0
        while t < end:
            out.append(FaultAt(t, fault, None if fault is Fault.GATEWAY_KILL else n % 2))
            t, n = t + every, n + 1
    return tuple(sorted(out, key=lambda f: f.at))


def classify(req: Request, faults: tuple[FaultAt, ...], window_s: float) -> Outcome:
    """Answered; failed beside a kill (of its own model's engine, or of the gateway) that
    came while it ran or at most `window_s` before it started; or unexplained."""
    if req.ok:
        return Outcome.ANSWERED
    for f in faults:
        if f.fault is Fault.UNLOAD or (f.fault is Fault.ENGINE_KILL and f.model != req.model):
            continue
        if f.at <= req.ended + 1.0 and req.started <= f.at + window_s:
            return Outcome.BESIDE_KILL
    return Outcome.UNEXPLAINED


# ---------------------------------------------------------------------- the clients' process


def _clients_main(url: str, model_ids: list[str], api_key: str | None, clients: int, until: float,
                  t0: float, seed: int, out) -> None:
    """In a process of its own: `clients` loops of short chats until `until` (wall clock)."""
    import asyncio

    async def main() -> list[Request]:
        import aiohttp

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
            runs = [_client(session, url, model_ids, i, until, t0, random.Random(seed * 1000 + i))
                    for i in range(clients)]
            done = await asyncio.gather(*runs)
        return [r for rs in done for r in rs]

    out.put([asdict(r) for r in asyncio.run(main())])


async def _client(session, url: str, model_ids: list[str], i: int, until: float, t0: float,
                  rng: random.Random) -> list[Request]:
    import asyncio

    model, streamed = i % 2, (i // 2) % 2 == 1
    done: list[Request] = []
    while time.time() < until:
        started = time.time()
        ok, detail = await _one_chat(session, url, model_ids[model], streamed, rng.choice(PROMPTS))
        done.append(Request(i, model, streamed, started - t0, time.time() - t0, ok, detail))
        await asyncio.sleep(rng.uniform(0.5, 2.0))
    return done


async def _one_chat(session, url: str, model_id: str, streamed: bool, prompt: str) -> tuple[bool, str]:
    """(answered, why not): a streamed answer counts only when it ends with [DONE] and
    carried no error event."""

    import aiohttp

    body = {"model": model_id, "messages": [{"role": "user", "content": prompt}], "max_tokens": 16,
            "stream": streamed}
    try:
        async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
            if resp.status != 200:
                text = (await resp.text())[:200]
                return False, f"HTTP {resp.status}: {_error_message(text)}"
            if not streamed:
                answer = await resp.json()
                return (True, "") if answer.get("choices") else (False, "no choices in the answer")
            finished = False
            async for raw in resp.content:
                line = raw.decode("utf-8", "replace").strip()
                if line == "data: [DONE]":
                    finished = True
                elif line.startswith("data: ") and '"error"' in line:
                    return False, f"stream error event: {_error_message(line[6:])}"
            return (True, "") if finished else (False, "the stream ended without [DONE]")
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"[:200]


def _error_message(text: str) -> str:
    try:
        return str(json.loads(text)["error"]["message"])[:160]
    except (ValueError, KeyError, TypeError):
        return text[:160]


# ---------------------------------------------------------------------- Stoker's side


def _rss(pid: int | None) -> int | None:
    import psutil

    if pid is None:
        return None
    try:
        return psutil.Process(pid).memory_info().rss
    except (psutil.Error, OSError):
        return None


class _Soak:
    def __init__(self, args, models: tuple[Path, Path]) -> None:
        self.args = args
        self.models = models
        self.faults_done: list[FaultAt] = []
        self.notes: list[str] = []

    def keys_ready(self, snap) -> dict[str, int | None]:

        return {e.model_path: e.pid for e in snap.engines if e.state is EngineState.READY and e.model_path}

    def wait_both(self, sup, timeout: float) -> bool:
        return sup.wait_for(lambda s: all(k in self.keys_ready(s) for k in self.keys), timeout) is not None

    def rss(self, instance) -> dict:
        main, gw = _rss(os.getpid()), _rss(instance.gateway.pid)
        total = main + gw if main is not None and gw is not None else None
        return {"main_bytes": main, "gateway_bytes": gw, "total_bytes": total}

    def fault(self, instance, f: FaultAt) -> None:

        sup = instance.supervisor
        if f.fault is Fault.UNLOAD and f.model is not None:
            sup.submit(cmd.UnloadModel(self.keys[f.model]))  # what `stoker unload` submits
        elif f.fault is Fault.ENGINE_KILL and f.model is not None:
            pid = self.keys_ready(sup.snapshot()).get(self.keys[f.model])
            if pid is None:
                self.notes.append(f"- at {f.at:.0f} s the engine of {self.ids[f.model]} was not running; "
                                  "nothing was killed")
                return
            _kill(pid)
        else:
            pid = instance.gateway.pid
            if pid is None:
                self.notes.append(f"- at {f.at:.0f} s the gateway process was being restarted; nothing "
                                  "was killed")
                return
            _kill(pid)
        self.faults_done.append(f)

    def run(self) -> dict:

        a = self.args
        configure_logging("info")  # stoker.log, as `stoker run` writes it: what the faults left there is read below
        # idle_timeout_s=0: nothing is unloaded for idleness; only the schedule unloads.
        preparer = RealPreparer(engine=a.engine, remember_last_model=False, idle_timeout_s=0)
        instance = Instance(preparer, port=0, extra_models=tuple(str(m) for m in self.models),
                            options=SupervisorOptions(stop_grace_s=5)).start()
        ctx = multiprocessing.get_context("spawn")
        clients = None
        sampling_done = threading.Event()
        try:
            sup = instance.supervisor
            self.keys = [os.path.realpath(m) for m in self.models]
            self.ids = [instance.catalog.id_for(k) or Path(k).stem for k in self.keys]
            for k in self.keys:
                sup.submit(cmd.LoadModel(k))
            if not self.wait_both(sup, 180):
                raise RuntimeError("the two models did not both become ready within 180 s")
            rss_start = self.rss(instance)
            log_from = _log_size()
            faults = schedule(a.minutes, a.unload_every, a.engine_kill_every, a.gateway_kill_every)
            t0 = time.time()
            until = t0 + a.minutes * 60
            samples: list[dict] = []

            def sample_rss() -> None:
                while not sampling_done.wait(RSS_SAMPLE_EVERY_S) and time.time() < until:
                    samples.append({"at_s": round(time.time() - t0), **self.rss(instance)})

            sampler = threading.Thread(target=sample_rss, name="stoker-soak-rss", daemon=True)
            results = ctx.Queue()
            clients = ctx.Process(target=_clients_main, name="stoker-soak-clients",
                                  args=(instance.url, self.ids, get_api_key(), a.clients, until, t0,
                                        a.seed, results), daemon=True)
            clients.start()
            sampler.start()
            for f in faults:
                if _sleep_until(t0 + f.at, clients):
                    self.fault(instance, f)
            requests = [Request(**r) for r in _results(results, clients, until + REQUEST_TIMEOUT_S + 60)]
            clients.join(30)
            recovered = self.wait_both(sup, 60)
            rss_end = self.rss(instance)
            tracebacks = _tracebacks_since(log_from)
        finally:
            sampling_done.set()
            if clients is not None and clients.is_alive():
                clients.kill()
            instance.close()
            instance.supervisor.submit(cmd.Shutdown())
            instance.supervisor.join(30)
        return self.report(requests, rss_start, rss_end, recovered, tracebacks, samples)

    def report(self, requests: list[Request], rss_start: dict, rss_end: dict, recovered: bool,
               tracebacks: int | None, samples: list[dict]) -> dict:
        a = self.args
        done = tuple(self.faults_done)
        rows = []
        for r in requests:
            rows.append({**asdict(r), "outcome": classify(r, done, a.kill_window).value})
        counts = {o.value: sum(1 for r in rows if r["outcome"] == o.value) for o in Outcome}
        growth = None
        if rss_start["total_bytes"] and rss_end["total_bytes"]:
            growth = rss_end["total_bytes"] / rss_start["total_bytes"] - 1
        return {"schema": SCHEMA, "bench": "soak", "minutes": a.minutes, "clients": a.clients,
                "models": self.ids, "requests": len(rows), "counts": counts,
                "faults": [{"at_s": round(f.at, 1), "fault": f.fault.value,
                            "model": None if f.model is None else self.ids[f.model]} for f in done],
                "rss_start": rss_start, "rss_end": rss_end, "rss_growth": growth, "rss_samples": samples,
                "both_ready_at_end": recovered, "log_tracebacks": tracebacks,
                "unexplained": [r for r in rows if r["outcome"] == Outcome.UNEXPLAINED.value],
                "beside_kill": [r for r in rows if r["outcome"] == Outcome.BESIDE_KILL.value],
                "notes": self.notes}


def _results(results, clients, deadline: float) -> list[dict]:
    """The clients' records, or RuntimeError when their process ended without sending them."""
    import queue

    while time.time() < deadline:
        try:
            return results.get(timeout=5)
        except queue.Empty:
            if not clients.is_alive():
                raise RuntimeError(f"the clients' process ended (exit {clients.exitcode}) without its "
                                   "results") from None
    raise RuntimeError("the clients did not finish in time")


def _log_path() -> Path:

    return stoker_paths().logs / "stoker.log"


def _log_size() -> int:
    try:
        return _log_path().stat().st_size
    except OSError:
        return 0


def _tracebacks_since(offset: int) -> int | None:
    """Tracebacks stoker.log got during the run (None: it was rotated meanwhile, or unreadable)."""
    try:
        with open(_log_path(), "rb") as f:
            if f.seek(0, 2) < offset:
                return None
            f.seek(offset)
            return f.read().count(b"Traceback (most recent call last)")
    except OSError:
        return None


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _sleep_until(at: float, clients) -> bool:
    """Wait for the wall-clock time `at`; False when the clients have ended first."""
    while True:
        left = at - time.time()
        if left <= 0:
            return True
        clients.join(min(left, 1.0))
        if not clients.is_alive():
            return False


def print_report(out: dict) -> None:
    mib = 1 << 20
    c = out["counts"]
    print(f"stoker bench soak: {out['minutes']:g} min, {out['clients']} clients (half streamed) over "
          f"{' and '.join(out['models'])}")
    kinds: dict[str, int] = {}
    for f in out["faults"]:
        kinds[f["fault"]] = kinds.get(f["fault"], 0) + 1
    print("faults: " + (", ".join(f"{n} x {k}" for k, n in kinds.items()) or "none"))
    print()
    print(f"{'requests':<28}{out['requests']:>8}")
    for key in ("answered", "failed beside a kill", "unexplained"):
        print(f"{key:<28}{c[key]:>8}")
    print()
    for label, key in (("RSS at start", "rss_start"), ("RSS at end", "rss_end")):
        r = out[key]
        parts = [f"{(r[k] or 0) / mib:.1f} MiB" if r[k] is not None else "unknown"
                 for k in ("main_bytes", "gateway_bytes", "total_bytes")]
        print(f"{label:<14} main {parts[0]:>10}   gateway {parts[1]:>10}   together {parts[2]:>10}")
    series = [f"{s['total_bytes'] / mib:.1f}" if s["total_bytes"] is not None else "?"
              for s in out["rss_samples"]]
    if series:
        print(f"RSS together every {RSS_SAMPLE_EVERY_S:g} s (MiB): {' '.join(series)}")
    growth = out["rss_growth"]
    if growth is not None:
        verdict = "met" if growth < RSS_GROWTH_TARGET else "MISSED"
        print(f"RSS growth     {growth * 100:+.2f} %  (target < {RSS_GROWTH_TARGET * 100:g} %: {verdict})")
    verdict = "met" if c["unexplained"] == 0 else "MISSED"
    print(f"unexplained    {c['unexplained']}  (target 0: {verdict})")
    tracebacks = out["log_tracebacks"]
    print(f"tracebacks in stoker.log during the run: {'unknown (rotated)' if tracebacks is None else tracebacks}")
    if not out["both_ready_at_end"]:
        print("both models were NOT ready again at the end")
    for r in out["unexplained"][:20]:
        print(f"  unexplained: client {r['client']} model {out['models'][r['model']]} "
              f"{'streamed' if r['streamed'] else 'plain'} {r['started']:.1f}-{r['ended']:.1f} s: {r['detail']}")
    for note in out["notes"]:
        print(note)


def _models(args) -> tuple[Path, Path]:

    demo = resolve_model(None)
    if args.second_model:
        second = Path(args.second_model).expanduser()
        if not second.is_file():
            raise UserError(f"{second} is not a file; give the second model's GGUF file.")
        return demo, second
    paths = stoker_paths()
    gemma, why = ensure_gemma(paths.models, paths.cache, fetch=not args.no_fetch)
    if gemma is None:
        raise UserError(f"{why}; or give --second-model.")
    return demo, gemma


def run(args) -> int:

    if args.minutes <= 0:
        raise UserError("--minutes must be more than 0.")
    if args.clients < 2:
        raise UserError("--clients must be at least 2 (one per model).")
    if args.kill_window <= 0:
        raise UserError("--kill-window must be more than 0 seconds.")
    models = _models(args)
    try:
        out = _Soak(args, models).run()
    except RuntimeError as exc:
        raise UserError(f"the soak stopped: {exc}") from None
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_report(out)
    return 0

