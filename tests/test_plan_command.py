"""`stoker plan` end to end: the real header walker, the demo model, machine files, JSON schema 1."""

from __future__ import annotations

import json
from pathlib import Path

from app.cli import main
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
