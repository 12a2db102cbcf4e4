"""`stoker inspect` and `stoker bench inspect` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO


def stoker(*args, home):
    env = dict(os.environ, STOKER_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "stoker", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_inspect_demo_model_table(demo_model, stoker_home):
    r = stoker("inspect", str(demo_model), home=stoker_home)
    assert r.returncode == 0, r.stderr
    rows = {line.split("  ", 2)[1].strip(): line.split("  ", 2)[2].strip()
            for line in r.stdout.splitlines()[1:]}
    assert rows["architecture"] == "llama"
    assert rows["layers"] == "30" and rows["heads"] == "9" and rows["KV heads"] == "3"
    assert rows["trained context"] == "8192" and rows["file type"] == "Q4_1"
    assert rows["parameters"] == "134.5 M" and rows["vocabulary"] == "49152"


def test_inspect_json_is_versioned(demo_model, stoker_home):
    r = stoker("inspect", str(demo_model), "--json", home=stoker_home)
    data = json.loads(r.stdout)
    assert data["schema"] == 1
    s = data["summary"]
    assert (s["architecture"], s["n_layer"], s["n_ctx_train"]) == ("llama", 30, 8192)
    assert s["n_head_kv"] == [3] * 30 and s["weights_bytes"] > 0


def test_inspect_errors_are_one_sentence(tmp_path, stoker_home):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 100)
    for target, words in ((tmp_path / "missing.gguf", "does not exist"), (bad, "GGUF magic"),
                          (tmp_path, "is a folder")):
        r = stoker("inspect", str(target), home=stoker_home)
        assert r.returncode == 2 and r.stdout == ""
        assert words in r.stderr and r.stderr.count("\n") == 1


def test_bench_inspect_prints_ratios(demo_model, stoker_home):
    r = stoker("bench", "inspect", "--model", str(demo_model), "--runs", "2", home=stoker_home)
    assert r.returncode == 0, r.stderr
    assert "OS page cache is warm" in r.stdout
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith((demo_model.name, "header-only"))]
    assert len(lines) == 2
    for ln in lines:
        ours, reader, ratio = _numbers(ln)
        assert reader > ours > 0 and ratio >= 1  # GGUFReader decodes the whole vocabulary


def _numbers(line):
    """stoker ms, GGUFReader ms and the speed-up from one bench row."""
    cells = line.split()
    ratio_at = next(i for i, c in enumerate(cells) if c.endswith("x") and c[:-1].isdigit())
    return float(cells[ratio_at - 2]), float(cells[ratio_at - 1]), int(cells[ratio_at][:-1])
