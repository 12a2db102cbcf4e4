"""`stoker diagnose` prints the right kind for every fixture log, as text and as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.cli import main

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
CASES = json.loads((LOGS / "cases.json").read_text())


def exit_args(case: dict) -> list[str]:
    if case["exit_code"] is not None:
        return ["--exit-code", str(case["exit_code"])]
    if case["signal"]:
        return ["--signal", case["signal"]]
    return []


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_names_the_kind_of_each_real_log(name, capsys):
    case = CASES[name]
    argv = ["diagnose", str(LOGS / f"{name}.log"), *exit_args(case), "--phase", case["phase"], "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == 2
    assert out["kind"] == case["kind"]
    assert out["title"] and out["advice"] and out["evidence"]
    assert out["rule"]  # the order rule, exit rule or log rule that decided


def test_json_carries_the_evidence_lines_and_the_deciding_rule(tmp_path, capsys):
    log = tmp_path / "metal.log"
    log.write_text("ggml_metal_graph_compute: command buffer 0 failed with status 5\n"
                   "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\n"
                   "GGML_ASSERT(false) failed\n")
    assert main(["diagnose", str(log), "--signal", "SIGABRT", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the runner-up is the command buffer's failure, a GPU error: the allocation explains it
    assert out["kind"] == "metal-oom" and out["rule"] == "device-lost-is-the-allocation"
    kinds = [e["kind"] for e in out["evidence_lines"]]
    assert kinds == ["gpu-error", "metal-oom", "assertion-failed"]
    assert all(e["entry"] and e["source"] and e["strength"] in ("decisive", "strong", "weak")
               for e in out["evidence_lines"])
    assert out["candidates"] == []


def test_json_names_both_candidates_of_a_conflict(tmp_path, capsys):
    log = tmp_path / "conflict.log"
    log.write_text("error: invalid argument: --cache-type-k q9\n"
                   "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000 MiB on device 0: "
                   "cudaMalloc failed: out of memory\n")
    assert main(["diagnose", str(log), "--exit-code", "1", "--backend", "cuda", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "unknown" and out["rule"] == "conflict"
    assert sorted(out["candidates"]) == ["bad-argument", "gpu-oom"]


def test_text_output_for_a_host_oom_kill(capsys):
    assert main(["diagnose", str(LOGS / "host-oom-cgroup.log"), "--signal", "9"]) == 0
    out = capsys.readouterr().out
    assert "kind:     host-oom" in out
    assert "out-of-memory killer" in out and "advice:" in out


def test_phase_is_read_from_the_log_when_not_given(capsys):
    main(["diagnose", str(LOGS / "cuda-oom-runtime.log"), "--signal", "SIGABRT", "--json"])
    assert json.loads(capsys.readouterr().out)["phase"] == "ready"


def test_log_jsonl_lines_are_unwrapped(tmp_path, capsys):
    log = tmp_path / "engine.jsonl"
    log.write_text('{"type":"log","time":5,"level":"error","msg":"error: invalid argument: --draft\\n"}\n')
    main(["diagnose", str(log), "--exit-code", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "bad-argument" and out["evidence"] == "error: invalid argument: --draft"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "stoker", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2])


def test_a_missing_file_is_one_sentence_and_a_nonzero_exit(tmp_path):
    p = run_cli("diagnose", str(tmp_path / "nope.log"))
    assert p.returncode != 0
    assert p.stderr.strip().count("\n") == 0
    assert "no log file" in p.stderr and "Traceback" not in p.stderr


def test_a_bad_exit_code_is_one_sentence(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("")
    p = run_cli("diagnose", str(log), "--exit-code", "lots")
    assert p.returncode != 0 and "not a number" in p.stderr and "Traceback" not in p.stderr


WILD = Path(__file__).resolve().parents[1] / "data" / "wild"


@pytest.mark.parametrize("name,kind", [
    ("llama.cpp-23163.log", "stale-library"),   # symbol lookup error, no exit given
    ("ollama-6554.log", "missing-library"),     # Ollama's `exit status 0xc0000135` in its message
    ("llama.cpp-20509.log", "host-oom"),        # systemd's OOM-killer lines after a normal line
    ("rknn-llm-276.log", "system-too-old"),     # GLIBC_2.34 not found
])
def test_the_new_kinds_from_a_wild_log_alone(name, kind, capsys):
    assert main(["diagnose", str(WILD / name), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == kind and out["title"] and out["advice"]


def test_the_backend_flag_settles_a_gpu_oom_the_log_leaves_open(capsys):
    main(["diagnose", str(WILD / "llama.cpp-2968.log"), "--json"])
    open_ = json.loads(capsys.readouterr().out)
    assert open_["kind"] == "cuda-oom" and "does not say which" in open_["title"]
    main(["diagnose", str(WILD / "llama.cpp-2968.log"), "--backend", "rocm", "--json"])
    assert json.loads(capsys.readouterr().out)["kind"] == "rocm-oom"
