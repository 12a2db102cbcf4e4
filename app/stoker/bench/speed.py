"""`stoker bench speed`: the planner's predicted decode speed beside the engine's measured one.

For the demo model and Gemma 3 270M on this machine's CPU, it first measures the CPU's figure
the way a plan gets it (stoker/engines/bandwidth.py: memory reads and the engine's decode rate on the
demo model, the slower of the two; cached, so plans made afterwards use it), then for each
model starts the real llama-server with the same threads, decodes `--n-predict` tokens
(/completion, greedy, ignore_eos) `--runs` times and takes the median
`timings.predicted_per_second`. The prediction is stoker/planning/speed.py's: bytes the model reads per
token (its weights, the tied output matrix, the KV cache over the prompt and half the new
tokens) over the CPU's figure. Printed: predicted, measured and predicted / measured.

The demo model is also the model the engine figure is measured on, so its ratio shows how
much two measurements of the same thing differ here; Gemma 3 270M (another architecture,
2.6x the bytes, a 262k vocabulary) is the out-of-sample check. Target: 0.75-1.33.
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

from stoker.base.paths import stoker_paths
from stoker.bench.memory import DEMO_FILE, _engine_binary, ensure_gemma
from stoker.engines.bandwidth import engine_decode_rate, measure_cpu_bandwidth
from stoker.errors import UserError
from stoker.library.gguf_io import load_summary
from stoker.planning import memory as mem
from stoker.planning import speed

TARGET = (0.75, 1.33)
CTX = 2048


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="engine threads (default: the engine's own default, as a launch uses)")
    parser.add_argument("--n-predict", type=int, default=128, metavar="N", help="tokens per request (128)")
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="measured requests per model (3)")
    parser.add_argument("--no-fetch", action="store_true",
                        help="do not download Gemma 3 270M when it is missing")


def predicted_tokens_per_s(summary, cpu_bytes_per_s: int | None, context_tokens: int) -> tuple[float | None, int]:
    """(predicted tok/s, bytes read per token) of a CPU-only decode, as a plan would say it."""

    placement = mem.place_layers(summary, None)
    kv = mem.kv_bytes(summary, ctx=CTX, slots=1, kv_unified=False)
    pred = speed.predict_decode(summary, placement, kv, {"CPU": cpu_bytes_per_s}, context_tokens)
    return pred.tokens_per_s, sum(r.bytes_per_token for r in pred.reads)


def run(args) -> int:

    if args.runs < 1 or args.n_predict < 8:
        raise UserError("--runs must be at least 1 and --n-predict at least 8.")
    paths = stoker_paths()
    binary = _engine_binary()
    demo = paths.models / DEMO_FILE
    if not demo.is_file():
        raise UserError(f"the demo model is missing ({demo}); run `stoker setup` first.")
    notes: list[str] = []
    models = [("SmolLM2-135M Q4_1", demo)]
    gemma, why = ensure_gemma(paths.models, paths.cache, fetch=not args.no_fetch)
    if gemma:
        models.append(("Gemma-3-270M Q4_K_M", gemma))
    else:
        notes.append(f"- {why}")
    say = (lambda s: None) if args.json else (lambda s: print(f"  {s} …", file=sys.stderr))
    say("measuring this CPU's decode bandwidth")
    cpu, reason = measure_cpu_bandwidth(binary, demo, threads=args.threads)
    figure = cpu.effective_bytes_per_s
    if figure is None:
        raise UserError(f"could not measure this CPU's bandwidth: {reason}.")
    rows: list[dict[str, Any]] = []
    for label, path in models:
        summary = load_summary(path)
        rates, prompt_n = [], 0
        for i in range(args.runs):
            say(f"decoding {args.n_predict} tokens with {label} ({i + 1}/{args.runs})")
            rate, p_n, why_not = engine_decode_rate(binary, path, threads=args.threads, n_predict=args.n_predict,
                                                    requests=1, ctx=CTX)
            if rate is None:
                notes.append(f"- {label}: {why_not}")
                continue
            rates.append(rate)
            prompt_n = p_n or prompt_n
        measured = statistics.median(rates) if rates else None
        predicted, per_token = predicted_tokens_per_s(summary, figure, prompt_n + args.n_predict // 2)
        ratio = predicted / measured if (predicted and measured) else None
        rows.append({"model": label, "bytes_per_token": per_token, "predicted_tokens_per_s": predicted,
                     "measured_tokens_per_s": measured, "measured_runs": rates, "ratio": ratio,
                     "in_target": ratio is not None and TARGET[0] <= ratio <= TARGET[1]})
    totals: dict[str, Any] = {"cpu_memory_read_bytes_per_s": cpu.memory_read_bytes_per_s,
               "cpu_engine_decode_bytes_per_s": cpu.engine_decode_bytes_per_s,
               "cpu_figure_bytes_per_s": figure, "threads": args.threads,
               "target": list(TARGET), "all_in_target": bool(rows) and all(r["in_target"] for r in rows)}
    if args.json:
        print(json.dumps({"schema": 1, "bench": "speed", "engine": binary, "rows": rows, "summary": totals,
                          "notes": notes}, indent=2))
        return 0
    gb = 1e9
    print(f"CPU figure: {figure / gb:.2f} GB/s, the slower of memory reads "
          f"{(cpu.memory_read_bytes_per_s or 0) / gb:.2f} GB/s and the engine's decode "
          f"{(cpu.engine_decode_bytes_per_s or 0) / gb:.2f} GB/s (threads: "
          f"{args.threads or 'engine default'})")
    print("")
    print("| model | bytes read / token | predicted tok/s | measured tok/s (median) | predicted / measured |")
    print("|---|---|---|---|---|")
    for r in rows:
        m, ratio = r["measured_tokens_per_s"], r["ratio"]
        measured_text = "-" if m is None else f"{m:.1f}"
        ratio_text = "-" if ratio is None else f"{ratio:.2f}"
        print(f"| {r['model']} | {r['bytes_per_token'] / 2**20:.1f} MiB | "
              f"{r['predicted_tokens_per_s']:.1f} | {measured_text} | {ratio_text} |")
    print("")
    print(f"Target: every ratio within {TARGET[0]}-{TARGET[1]}: {'met' if totals['all_in_target'] else 'NOT met'}.")
    for n in notes:
        print(n)
    return 0
