"""`stoker plan` end to end: the real header walker, the demo model, machine files, JSON schema 1."""

from __future__ import annotations

import json
from pathlib import Path

from stoker.cli import main
from tests.helpers import gguf_fixtures as F

MACHINES = Path(__file__).resolve().parent / "data" / "machines"


def run_plan(capsys, *argv):
    rc = main(["plan", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_demo_plan_json_has_the_engine_kv_and_the_argv(demo_model, stoker_home, capsys):
    rc, out, _ = run_plan(capsys, demo_model, "--ctx", 4096, "--slots", 2, "--kv", "f16",
                          "--machine", MACHINES / "cpu-only-ram24g.json", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["kind"] == "plan"
    assert (doc["ctx"], doc["slots"], doc["kv_type_k"], doc["kv_type_v"]) == (4096, 2, "f16", "f16")
    (cpu,) = doc["memory"]["devices"]
    assert cpu["name"] == "CPU" and cpu["kv_bytes"] == 94_371_840
    assert cpu["total_bytes"] == cpu["weights_bytes"] + cpu["kv_bytes"] + cpu["compute_bytes"] + cpu["other_bytes"]
    assert cpu["total_bytes"] <= cpu["budget_bytes"]
    argv = doc["argv"]
    assert argv[1:3] == ["-lv", "4"]
    assert argv[argv.index("-c") + 1] == "4096" and argv[argv.index("-np") + 1] == "2"
    assert "-ngl" not in argv and "--no-mmap" not in argv
    assert doc["decisions"] and all(d["what"] and d["why"] for d in doc["decisions"])


def test_human_output_is_a_table_with_the_command(demo_model, stoker_home, capsys):
    rc, out, _ = run_plan(capsys, demo_model, "--machine", MACHINES / "cpu-only-ram24g.json")
    assert rc == 0
    assert "context" in out and "Decisions:" in out and "-lv 4" in out
    assert "budget" in out and "weights" in out


def test_moe_refusal_and_offload_on_described_machines(tmp_path, stoker_home, capsys):
    moe = F.qwen3moe_30b_a3b_q4_k_m(tmp_path / "q.gguf")
    rc, out, _ = run_plan(capsys, moe, "--machine", MACHINES / "rtx4070-12g-ram32g.json", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["gpu_layers"] == "all" and doc["n_cpu_moe"]
    assert "--n-cpu-moe" in doc["argv"] and "-ngl" in doc["argv"]
    rc, out, _ = run_plan(capsys, moe, "--machine", MACHINES / "macbook-m2-16g-unified.json", "--json")
    doc = json.loads(out)
    assert rc == 3 and doc["kind"] == "refusal" and doc["suggestions"]
    rc, _, err = run_plan(capsys, moe, "--machine", MACHINES / "macbook-m2-16g-unified.json")
    assert rc == 3 and "does not fit: needs" in err


def test_an_8b_on_the_rtx_4070_keeps_every_layer_and_shows_its_predicted_speed(tmp_path, stoker_home, capsys):
    llama = F.llama_8b_q4_k_m(tmp_path / "llama.gguf")
    rc, out, _ = run_plan(capsys, llama, "--machine", MACHINES / "rtx4070-12g-ram32g.json", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["gpu_layers"] == "all" and doc["kv_type_k"] == "q8_0" and doc["ctx"] == 65536
    speed = doc["decode_speed"]
    assert speed["tokens_per_s"] > 90 and speed["limited_by"] == "CUDA0"
    assert [r["device"] for r in speed["reads"]] == ["CUDA0"]
    assert speed["reads"][0]["bandwidth_bytes_per_s"] == 504_000_000_000
    rc, out, _ = run_plan(capsys, llama, "--machine", MACHINES / "rtx4070-12g-ram32g.json")
    assert rc == 0 and "predicted decode  ~" in out and "every layer kept on the GPU for a q8_0 cache" in out


def test_bad_flags_are_one_sentence(demo_model, stoker_home, capsys):
    rc, _, err = run_plan(capsys, demo_model, "--kv", "q3_k")
    assert rc == 2 and err.startswith("stoker: --kv must be one of")
    rc, _, err = run_plan(capsys, demo_model, "--machine", "/nonexistent.json")
    assert rc == 2 and "cannot read the machine file" in err


def test_bad_machine_file_is_one_sentence(demo_model, stoker_home, tmp_path, capsys):
    bad = tmp_path / "m.json"
    bad.write_text('{"os": "linux", "ram_total_gib": "lots"}')
    rc, _, err = run_plan(capsys, demo_model, "--machine", bad)
    assert rc == 2 and "ram_total_gib must be a non-negative number" in err


def test_plan_prefers_lines_measured_on_this_machine(demo_model, engine_binary, stoker_home, capsys,
                                                     monkeypatch):
    """Two recorded launches of the demo model under this build make a line; the next plan uses
    it and says so. A described machine (--machine) did not measure anything and stays estimated."""
    from dataclasses import replace

    from stoker.engines import measurements
    from stoker.engines.drivers.inputs import EngineChoice
    from stoker.engines.engine_log import parse_memory_report
    from stoker.fleet.launcher import RealPreparer

    # the build the plan is for: this one (the home has none installed)
    monkeypatch.setattr(RealPreparer, "choose_build", lambda self, driver: (
        EngineChoice(str(engine_binary), "b11434-cpu", None, "cpu")))
    flags = (demo_model, "--ctx", 4096, "--slots", 1, "--kv", "f16")
    rc, out, _ = run_plan(capsys, *flags, "--json")
    before = json.loads(out)
    assert rc == 0 and before["memory"]["estimate_source"] == "estimated"

    from stoker.planning.plan import AnalyticMemory

    (est,) = before["memory"]["devices"]  # a CPU-only estimated plan: its figures are the analytic ones
    assert est["kv_bytes"] == 4096 * 23040  # the demo model's f16 KV, which the estimate gets exactly

    class Settings:  # the plan's own settings, so the recorded line matches its lookup
        ctx, slots, kv_type_k, kv_type_v = 2048, before["slots"], before["kv_type_k"], before["kv_type_v"]
        flash_attn, kv_unified = before["flash_attn"], before["kv_unified"]
        ubatch = int(before["argv"][before["argv"].index("-ub") + 1]) if "-ub" in before["argv"] else 512
        analytic_devices = (AnalyticMemory("CPU", est["weights_bytes"], 2048 * 23040, est["compute_bytes"]),)

    logs = Path(__file__).resolve().parent / "data" / "engine_logs"
    real = parse_memory_report((logs / "smollm2-f16-np1-c2048.log").read_text().splitlines())
    # A second context whose KV the engine made 1 MiB larger than the analytic figure, so the
    # test can tell whether the plan was calibrated.
    kv_8192 = 8192 * 23040 + (1 << 20)
    other = replace(real, n_ctx=8192,
                    buffers=tuple(replace(b, bytes=kv_8192) if b.kind == "kv" else b for b in real.buffers))
    at_8192 = type("Settings", (Settings,), {"ctx": 8192, "analytic_devices": (
        AnalyticMemory("CPU", est["weights_bytes"], 8192 * 23040, est["compute_bytes"]),)})
    assert measurements.record_launch(demo_model, engine_binary, Settings, real) == 1
    assert measurements.record_launch(demo_model, engine_binary, at_8192, other) == 1
    line = measurements.lookup(demo_model, engine_binary).lines[0][1]

    rc, out, _ = run_plan(capsys, *flags, "--json")
    after = json.loads(out)
    assert rc == 0 and after["memory"]["estimate_source"] == "measured"
    (cpu,) = after["memory"]["devices"]
    assert cpu["kv_bytes"] == line.calibrated((est["weights_bytes"], est["kv_bytes"], est["compute_bytes"]))[1]
    assert est["kv_bytes"] < cpu["kv_bytes"] < est["kv_bytes"] + (1 << 20)
    assert any(d["what"] == "measured memory" for d in after["decisions"])

    rc, out, _ = run_plan(capsys, *flags)
    assert rc == 0 and "memory figures: measured on this machine" in out
    rc, out, _ = run_plan(capsys, *flags, "--machine", MACHINES / "cpu-only-ram24g.json")
    assert rc == 0 and "memory figures: estimated" in out

