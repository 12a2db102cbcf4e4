"""`stoker bench gateway` runs every part on the real engine and reports each figure beside its
target (the structure is checked here, never the timings: benchmarks are not timed tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.bench.gateway import TARGETS
from tests.shell.engine_helpers import engines_running

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]


def test_a_tiny_run_reports_every_figure(engine_binary, demo_model, stoker_home):
    result = subprocess.run(
        [sys.executable, "-m", "stoker", "bench", "gateway", "--json", "--model", str(demo_model),
         "--engine", str(engine_binary), "--iterations", "5", "--ollama-iterations", "3", "--rounds", "1",
         "--streams", "2", "--tokens", "4", "--chunk-streams", "1", "--disconnects", "1", "--cold-runs", "1",
         "--idle-timeout", "1", "--ctx-per-slot", "256", "--threads", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env=os.environ.copy())
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["schema"] == 3 and out["bench"] == "gateway"
    assert out["gateway_pid"] not in (None, out["stoker_pid"])  # the gateway serves from its own process
    assert out["model"] == "smollm2-135m-instruct:q4_1" and out["slots"] == 2
    argv = out["argv"]
    assert argv[argv.index("-np") + 1] == "2" and argv[argv.index("-t") + 1] == "1"
    figures = {f["key"]: f for f in out["figures"]}
    assert set(figures) == set(TARGETS)
    for f in figures.values():  # every figure measured, judged against its own target
        assert isinstance(f["value"], float), f
        op, target = TARGETS[f["key"]][2], TARGETS[f["key"]][3]
        assert f["verdict"] == ("pass" if (f["value"] <= target if op == "<=" else f["value"] >= target)
                                else "fail")
    lat = out["latency"]
    assert lat["direct"]["n"] == lat["gateway"]["n"] == 5
    assert lat["added_p50_ms"] == pytest.approx(lat["gateway"]["p50_ms"] - lat["direct"]["p50_ms"])
    for route, paths in (("generate", ["/completion", "/api/generate"]),
                         ("chat", ["/v1/chat/completions", "/api/chat"])):
        o = out["ollama"][route]
        assert o["paths"] == paths and o["direct"]["n"] == o["gateway"]["n"] == o["passed_through"]["n"] == 3
        assert o["added_p50_ms"] == pytest.approx(o["gateway"]["p50_ms"] - o["direct"]["p50_ms"])
    for n in ("1", "2"):
        s = out["streaming"][n]
        # ignore_eos: both sides stream the same number of chunks (4 tokens and the final one)
        assert s["tokens_per_round"]["direct"] == s["tokens_per_round"]["gateway"] == int(n) * 5
        assert s["ratio_median"] == pytest.approx(s["gateway_tokens_per_s"][0] / s["direct_tokens_per_s"][0])
    for ui in ("idle", "busy"):
        c = out["chunk_delay"][ui]
        assert c["through_gateway"]["n"] >= 5 and c["baseline_relay_to_client"]["n"] >= 5
    assert out["disconnect"]["missed"] == 0 and out["disconnect"]["slot_idle_ms"]["n"] == 1
    cold = out["cold"]
    run = cold["runs"][0]
    assert run["load_s"] > 0 and run["ttft_s"] > run["load_s"]
    assert cold["idle"]["idle_timeout_in_snapshot_s"] == 1.0
    # never before its timeout (less a little: the client sees the end just after the gateway)
    assert cold["idle"]["gone_after_last_request_s"] >= 0.9
    assert engines_running(engine_binary) == []


def test_bad_counts_are_one_sentence(stoker_home):
    result = subprocess.run([sys.executable, "-m", "stoker", "bench", "gateway", "--rounds", "0"],
                            cwd=REPO, capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert result.returncode != 0 and "--rounds must be at least 1." in result.stderr
    assert "Traceback" not in result.stderr
