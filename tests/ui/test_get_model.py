"""The "Get a model…" dialog against a local hub-layout server (the real huggingface_hub client,
the real planner on each file's remote header): verdicts shown, the suggested file selected,
the download watched to the end, then run as a StartModel command. Screenshot:
artifacts/screenshots/get-model.png (copied to docs/screenshots for the README)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stoker.fleet.commands import StartModel
from tests.helpers.fake_hub import COMMIT, FakeHub, HubRepo, sha256_of

GEMMA = "stoker-test/gemma-3-270m-it-GGUF"
SMOL = "stoker-test/SmolLM2-135M-Instruct-GGUF"


@pytest.fixture
def hub(stoker_home, demo_model, demo_q8_model, gemma_model, tmp_path, monkeypatch):
    repos = {GEMMA: HubRepo({"gemma-3-270m-it-Q4_K_M.gguf": gemma_model}),
             SMOL: HubRepo({"SmolLM2-135M-Instruct.Q4_1.gguf": demo_model,
                            "SmolLM2-135M-Instruct.Q8_0.gguf": demo_q8_model})}
    with FakeHub(repos) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
        yield server


def test_get_a_model_shows_verdicts_downloads_and_runs(qtbot, hub, demo_q8_model, screenshots):
    from stoker.desktop.bridge import SnapshotBridge
    from stoker.desktop.services import Services
    from stoker.desktop.settings import SettingsDialog

    commands, lines = [], []
    settings = SettingsDialog(Services(), SnapshotBridge(), commands.append, on_progress=lines.append)
    qtbot.addWidget(settings)
    # Its own background loads must land before the widgets go away at the end of the test.
    qtbot.waitUntil(lambda: settings.pending == 0, timeout=60000)
    dialog = settings.open_get_model()
    dialog.repo.setText(f"https://huggingface.co/{SMOL}")
    dialog.look.click()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=60000)
    assert dialog.error.text() == ""
    rows = [[dialog.table.item(r, c).text() for c in range(3)] for r in range(dialog.table.rowCount())]
    assert rows == [["Q8_0", "138 MiB", "runs: 8k context, on the CPU"],
                    ["Q4_1", "94 MiB", "runs: 8k context, on the CPU"]]
    assert "suggested Q8_0: the best quality that runs with the default context here" in dialog.note.text()
    assert dialog.table.selectionModel().selectedRows()[0].row() == 0 and dialog.download.isEnabled()
    dialog.resize(820, 360)
    qtbot.wait(100)
    assert dialog.grab().save(str(screenshots / "get-model.png"))

    dialog.download.click()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=120000)
    assert dialog.error.text() == ""
    link = Path(os.environ["HF_HUB_CACHE"]) / f"models--{SMOL.replace('/', '--')}" / "snapshots" / COMMIT / \
        "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert dialog.downloaded == str(link) and sha256_of(link.resolve()) == sha256_of(demo_q8_model)
    assert any(line.startswith("Downloading SmolLM2-135M-Instruct.Q8_0.gguf: 138 MiB of 138 MiB") for line in lines)
    assert dialog.progress.value() == 1000 and dialog.run.isEnabled()
    assert dialog.grab().save(str(screenshots / "get-model-downloaded.png"))
    dialog.run.click()
    assert commands[-1] == StartModel(str(link))


def test_a_bad_repository_is_one_sentence_in_the_dialog(qtbot, hub):
    from stoker.desktop.get_model import GetModelDialog
    from stoker.desktop.services import Services

    dialog = GetModelDialog(Services(), lambda c: None)
    qtbot.addWidget(dialog)
    dialog.repo.setText("hf.co/stoker-test/no-such-repo")
    dialog.look.click()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=30000)
    assert "was not found" in dialog.error.text() and dialog.table.rowCount() == 0
    assert not dialog.download.isEnabled()
