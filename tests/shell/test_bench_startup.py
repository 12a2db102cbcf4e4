"""`stoker bench startup` runs both sides on the real engine and reports a versioned ratio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shell.engine_helpers import engines_running

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]


def test_one_run_reports_both_sides(engine_binary, demo_model, stoker_home):
    result = subprocess.run(
        [sys.executable, "-m", "stoker", "bench", "startup", "--runs", "1", "--json", "--ctx", "512",
         "--model", str(demo_model), "--engine", str(engine_binary)],
        cwd=REPO, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["schema"] == 1 and out["bench"] == "startup" and len(out["stoker_s"]) == 1
    assert out["bare_s"][0] > 0 and out["ratio"] == out["stoker_median_s"] / out["bare_median_s"]
    assert out["argv"][0] == str(engine_binary) and "-c" in out["argv"]
    assert engines_running(engine_binary) == []
