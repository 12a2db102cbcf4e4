"""Only the latency parts of `stoker bench gateway`: /tokenize and the two Ollama routes, each
beside the engine's own port, in about a minute instead of the whole bench's two.

For A/B runs of one change (README, "What did not move it"): run it alternately with and
without the change, on a quiet machine, and compare the added p50s it prints (milliseconds):

    STOKER_HOME=... python docs/measurements/gateway_latency.py --threads 1 --iterations 300 --ollama-iterations 300

Prints one JSON line: {"tokenize": added p50, "generate": [added p50, translation p50],
"chat": [added p50, translation p50]}. Takes `stoker bench gateway`'s options.
"""
import argparse
import json
import sys

from stoker.bench import gateway as bench


def main() -> None:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(sys.argv[1:])
    run = bench._Bench(args)
    # The bench's run() with the streaming, tap and cold parts left out (they are not latency).
    run.streaming = lambda: {"1": {"ttft_direct_ms": {"p50_ms": 1.0}, "ratio_median": 0},
                             str(args.streams): {"ratio_median": 0}}
    run.tapped = lambda: {"idle": {"added_p50_ms": 0, "added_p99_ms": 0},
                          "busy": {"added_p50_ms": 0, "added_p99_ms": 0},
                          "disconnect": {"upstream_closed_ms": {"max_ms": 0}}}
    run.cold_and_idle = lambda warm: {"overhead_median_ms": 0, "idle": {}}
    out = run.run()
    print(json.dumps({"tokenize": out["latency"]["added_p50_ms"],
                      **{k: [v["added_p50_ms"], v["translation_p50_ms"]] for k, v in out["ollama"].items()}}))


if __name__ == "__main__":  # the bench's client process is started with spawn
    main()
