"""The "Get a model…" dialog against a local hub-layout server (the real huggingface_hub client,
the real planner on each file's remote header): verdicts shown, the suggested file selected,
the download watched to the end, then run as a StartModel command. Screenshot:
artifacts/screenshots/get-model.png (copied to docs/screenshots for the README)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stoker.core.commands import StartModel
from tests.helpers.fake_hub import COMMIT, FakeHub, HubRepo, sha256_of

GEMMA = "stoker-test/gemma-3-270m-it-GGUF"


@pytest.fixture
def hub(stoker_home, demo_model, gemma_model, tmp_path, monkeypatch):
    repos = {GEMMA: HubRepo({"gemma-3-270m-it-Q4_K_M.gguf": gemma_model}),
             "stoker-test/SmolLM2-135M-Instruct-GGUF": HubRepo({"SmolLM2-135M-Instruct.Q4_1.gguf": demo_model})}
    with FakeHub(repos) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
        yield server


def test_get_a_model_shows_verdicts_downloads_and_runs(qtbot, hub, gemma_model, screenshots):
    from stoker.ui.bridge import SnapshotBridge
    from stoker.ui.services import Services
    from stoker.ui.settings import SettingsDialog

    commands, lines = [], []
    settings = SettingsDialog(Services(), SnapshotBridge(), commands.append, on_progress=lines.append)
    qtbot.addWidget(settings)
    qtbot.waitUntil(lambda: settings.pending == 0 if hasattr(settings, "pending") else True, timeout=30000)
    dialog = settings.open_get_model()
    dialog.repo.setText(f"https://huggingface.co/{GEMMA}")
    dialog.look.click()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=60000)
    assert dialog.error.text() == ""
    assert dialog.table.rowCount() == 1
    assert dialog.table.item(0, 0).text() == "Q4_K_M" and dialog.table.item(0, 1).text() == "241 MiB"
    assert dialog.table.item(0, 2).text() == "runs: 32k context, on the CPU"
    assert "suggested Q4_K_M: the best quality that runs with the default context here" in dialog.note.text()
    assert dialog.download.isEnabled()
    dialog.resize(820, 360)
    qtbot.wait(100)
    assert dialog.grab().save(str(screenshots / "get-model.png"))

    dialog.download.click()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=120000)
    assert dialog.error.text() == ""
    link = Path(os.environ["HF_HUB_CACHE"]) / f"models--{GEMMA.replace('/', '--')}" / "snapshots" / COMMIT / \
        "gemma-3-270m-it-Q4_K_M.gguf"
    assert dialog.downloaded == str(link) and sha256_of(link.resolve()) == sha256_of(gemma_model)
    assert any(line.startswith("Downloading gemma-3-270m-it-Q4_K_M.gguf: 241 MiB of 241 MiB") for line in lines)
    assert dialog.progress.value() == 1000 and dialog.run.isEnabled()
    assert dialog.grab().save(str(screenshots / "get-model-downloaded.png"))
    dialog.run.click()
    assert commands[-1] == StartModel(str(link))


def test_a_bad_repository_is_one_sentence_in_the_dialog(qtbot, hub):
    from stoker.ui.get_model import GetModelDialog
    from stoker.ui.services import Services

    dialog = GetModelDialog(Services(), lambda c: None)
    qtbot.addWidget(dialog)
    dialog.repo.setText("hf.co/stoker-test/no-such-repo")
    dialog.look.click()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=30000)
    assert "was not found" in dialog.error.text() and dialog.table.rowCount() == 0
    assert not dialog.download.isEnabled()
