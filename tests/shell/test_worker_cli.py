"""`stoker worker` refuses what it must before anything runs: a reachable bind without the flag."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def worker(*args):
    return subprocess.run([sys.executable, "-m", "stoker", "worker", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=30, env=os.environ.copy())


def test_a_non_loopback_bind_needs_the_explicit_flag_and_says_why(stoker_home):
    r = worker("--host", "0.0.0.0", "--port", "50999")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "no authentication and no encryption" in r.stderr and "SSH tunnel" in r.stderr
    assert "--i-know-rpc-is-unauthenticated" in r.stderr


def test_without_the_rpc_build_it_says_how_to_get_it(stoker_home):
    r = worker("--port", "50999")
    assert r.returncode != 0 and "stoker setup --rpc" in r.stderr and "Traceback" not in r.stderr
    r = worker("--host", "0.0.0.0", "--port", "50999", "--i-know-rpc-is-unauthenticated")
    assert "warning: RPC has no authentication" in r.stderr and "stoker setup --rpc" in r.stderr
