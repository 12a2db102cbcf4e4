"""`stoker bench residency`: what keeping a conversation across an unload saves.

The time to first token of the next turn of a ~3,000-token conversation (counted with the
engine's own /tokenize), measured three ways side by side in one run, on the real engine
and the real supervisor (RealPreparer's plan, one slot):

- warm: the model stayed loaded, its slot holds the conversation;
- restored: the model was unloaded (the supervisor saved its slot) and loaded again (the
  supervisor restored it before READY);
- cold: the same unload and load, with the saved slot deleted in between, as every swap
  was before Stoker kept conversations.

Each run first sends the first turn again, so the slot holds exactly that turn and its
answer before every measurement. The turn is sent with `max_tokens` 1 and not streamed, so
its wall time is the time to its first token. The figures are medians over `--runs`; the
ratios restored/cold and warm/cold are printed beside the issue's target (restored ≤ 0.25 ×
cold). Saved slots go to a folder of the bench's own, never the user's.

A benchmark, not a timed test: it says whether the target was met, it never fails on it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from stoker.base.overrides import ModelOverrides
from stoker.fleet import commands as cmd
from stoker.fleet.kv_keeper import KvKeeper
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import Supervisor, SupervisorOptions
from stoker.library.models import resolve_model

SCHEMA = 1
TARGET_RATIO = 0.25  # restored TTFT / cold TTFT, on the demo model
GIB = 2**30


def add_arguments(parser) -> None:
    parser.add_argument("--model", metavar="MODEL", help="model to serve (default: the demo model)")
    parser.add_argument("--engine", metavar="PATH", help="llama-server binary (default: the best build)")
    parser.add_argument("--tokens", type=int, default=3000, metavar="N",
                        help="tokens in the conversation up to the measured turn (3000)")
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="measurements of each kind (3)")
    parser.add_argument("--threads", type=int, metavar="N", help="engine threads (default: the planner's)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.model = resolve_model(args.model)
        ctx = max(4096, 1 << (args.tokens + 512).bit_length())
        overrides = ModelOverrides(ctx=ctx, slots=1, threads=args.threads)
        self.folder = Path(tempfile.mkdtemp(prefix="stoker-bench-residency-"))
        keeper = KvKeeper(folder=lambda: self.folder, budget_bytes=lambda: 4 * GIB)
        self.sup = Supervisor(RealPreparer(cli_overrides=overrides, engine=args.engine,
                                           remember_last_model=False, idle_timeout_s=0),
                              SupervisorOptions(stop_grace_s=10, kv_keeper=keeper))
        self.key = ""

    # -- the supervisor

    def load(self) -> float:
        """Load the model; seconds from the command to READY (a restore happens inside it)."""
        t0 = time.perf_counter()
        self.sup.submit(cmd.LoadModel(str(self.model)))
        snap = self.sup.wait_for(lambda s: any(e.state is EngineState.READY for e in s.engines), 300)
        if snap is None:
            raise RuntimeError("the model did not become ready within 300 s")
        self.key = next(e.model_path for e in snap.engines if e.state is EngineState.READY) or ""
        return time.perf_counter() - t0

    def unload(self) -> None:
        self.sup.submit(cmd.UnloadModel(self.key))
        if self.sup.wait_for(lambda s: not any(e.model_path == self.key for e in s.engines), 120) is None:
            raise RuntimeError("the model was not unloaded within 120 s")

    def post(self, path: str, body: dict) -> dict:
        route = self.sup.routes.route(self.key)
        if route is None:
            raise RuntimeError("the model has no route")
        resp = httpx.post(route.endpoint + path, json=body, timeout=900,
                          headers={"Authorization": f"Bearer {route.engine_key}"} if route.engine_key else {})
        resp.raise_for_status()
        return resp.json()

    # -- the conversation

    def count(self, messages: list[dict]) -> int:
        """Tokens of the prompt these messages make, by the engine's template and tokenizer."""
        prompt = self.post("/apply-template", {"messages": messages})["prompt"]
        return len(self.post("/tokenize", {"content": prompt, "add_special": True})["tokens"])

    def conversation(self) -> tuple[list[dict], list[dict]]:
        """A first turn and the next one, the next one ~`--tokens` long by the tokenizer."""
        def facts(n: int) -> str:
            return " ".join(f"Fact {i}: the number {i * 7} has the digits of {i * 7 + 3}." for i in range(n))

        def turns(n: int, answer: str) -> tuple[list[dict], list[dict]]:
            first = [{"role": "user", "content": facts(n) + " Which fact has the largest number?"}]
            return first, first + [{"role": "assistant", "content": answer},
                                   {"role": "user", "content": "And which has the smallest?"}]

        per_fact = (self.count(turns(40, "")[1]) - self.count(turns(20, "")[1])) / 20
        n = max(1, int(20 + (self.args.tokens - self.count(turns(20, "")[1]) - 16) / per_fact))
        first, _ = turns(n, "")
        answer = self.post("/v1/chat/completions", {"messages": first, "max_tokens": 16, "temperature": 0})
        return turns(n, answer["choices"][0]["message"]["content"])

    def next_turn(self, messages: list[dict]) -> dict:
        t0 = time.perf_counter()
        answer = self.post("/v1/chat/completions", {"messages": messages, "max_tokens": 1, "temperature": 0})
        timings = answer.get("timings") or {}
        return {"ttft_ms": (time.perf_counter() - t0) * 1000,
                "cached_tokens": answer["usage"]["prompt_tokens_details"]["cached_tokens"],
                "prompt_tokens": answer["usage"]["prompt_tokens"], "prompt_ms": timings.get("prompt_ms")}

    def first_turn_again(self, first: list[dict]) -> None:
        self.post("/v1/chat/completions", {"messages": first, "max_tokens": 16, "temperature": 0})

    # -- the run

    def run(self) -> dict:
        self.sup.start()
        try:
            first_load = self.load()
            first, second = self.conversation()
            tokens = self.count(second)
            runs = []
            for _ in range(self.args.runs):
                self.first_turn_again(first)
                warm = self.next_turn(second)
                self.first_turn_again(first)
                self.unload()
                saved = sum(p.stat().st_size for p in self.folder.iterdir() if p.suffix == ".bin")
                load_s = self.load()
                restored = {**self.next_turn(second), "load_s": load_s, "saved_bytes": saved}
                self.first_turn_again(first)
                self.unload()
                for p in self.folder.iterdir():  # the unload without a restore: as every swap was
                    p.unlink()
                load_s = self.load()
                cold = {**self.next_turn(second), "load_s": load_s}
                runs.append({"warm": warm, "restored": restored, "cold": cold})
        finally:
            self.sup.submit(cmd.Shutdown())
            self.sup.join(60)
            shutil.rmtree(self.folder, ignore_errors=True)
        return summarise(runs, model=self.model.name, tokens=tokens, first_load_s=first_load)


def summarise(runs: list[dict], *, model: str, tokens: int, first_load_s: float) -> dict:
    def median(kind: str, field: str) -> float | None:
        values = [r[kind][field] for r in runs if r[kind].get(field) is not None]
        return statistics.median(values) if values else None

    out: dict = {"schema": SCHEMA, "model": model, "conversation_tokens": tokens, "runs": runs,
                 "first_load_s": first_load_s, "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
    for kind in ("warm", "restored", "cold"):
        out[kind] = {"ttft_ms": median(kind, "ttft_ms"), "cached_tokens": median(kind, "cached_tokens"),
                     "load_s": median(kind, "load_s")}
    cold = out["cold"]["ttft_ms"]
    out["restored_over_cold"] = out["restored"]["ttft_ms"] / cold if cold else None
    out["warm_over_cold"] = out["warm"]["ttft_ms"] / cold if cold else None
    ratio = out["restored_over_cold"]
    out["target_met"] = None if ratio is None else ratio <= TARGET_RATIO
    return out


def render(r: dict) -> str:
    lines = [f"stoker bench residency: {r['model']}, the next turn of a {r['conversation_tokens']:,}-token "
             f"conversation (median of {len(r['runs'])}; {r['cpus']} CPUs, load average {r['load_average']:.1f})",
             "",
             f"{'':28}{'TTFT ms':>10}{'cached tokens':>15}{'load s':>9}{'÷ cold':>9}"]
    words = {"warm": "warm (still loaded)", "restored": "unloaded, then restored", "cold": "unloaded, not restored"}
    for kind in ("warm", "restored", "cold"):
        k = r[kind]
        ratio = k["ttft_ms"] / r["cold"]["ttft_ms"] if r["cold"]["ttft_ms"] else None
        load = f"{k['load_s']:.2f}" if k["load_s"] is not None else "-"
        lines.append(f"{words[kind]:28}{k['ttft_ms']:>10.0f}{k['cached_tokens']:>15,.0f}{load:>9}"
                     f"{ratio:>9.3f}")
    met = r["target_met"]
    lines += ["", f"restored / cold = {r['restored_over_cold']:.3f} (target <= {TARGET_RATIO}: "
                  f"{'met' if met else 'NOT met'}); warm / cold = {r['warm_over_cold']:.3f}"]
    return "\n".join(lines)


def run(args) -> int:
    bench = Bench(args)
    result = bench.run()
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0
