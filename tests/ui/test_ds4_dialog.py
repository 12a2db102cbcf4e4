"""The per-model dialog on a ds4 model: its ds4 fields change the plan, the preview shows it.

Real Services (header walk, ds4 discovery, plan_ds4) on a deepseek4 GGUF whose data is a
sparse hole; the machine is a described 128 GiB Mac (ds4 needs Metal or CUDA) and the ds4
binary is the fake ds4-server, which discovery only has to find.
"""

from __future__ import annotations

from stoker.desktop.bridge import SnapshotBridge
from stoker.desktop.model_settings import ModelSettingsDialog
from stoker.desktop.services import Services
from stoker.engines.ds4_launch import Ds4Plan
from tests.shell.test_ds4_engine import ds4_model, install_fake, mac


def test_ds4_fields_change_the_preview(qtbot, stoker_home, tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_DS4_SERVER", str(install_fake(tmp_path / "ds4-build")))
    model = ds4_model(tmp_path / "DeepSeek-V4-Flash.gguf", 81)
    services = Services()
    services._machine = mac(128)
    dialog = ModelSettingsDialog(str(model), services, SnapshotBridge(), lambda c: None)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: not dialog.loading and dialog.previews_done >= 1, timeout=30_000)
    assert isinstance(dialog.last_preview, Ds4Plan) and dialog.last_preview.cache_gb == 56
    assert "SSD streaming, expert cache 56 GiB" in dialog.preview_state.text()

    done = dialog.previews_done
    dialog.inputs["ds4_cache_gb"].setText("20")
    qtbot.waitUntil(lambda: dialog.previews_done > done, timeout=30_000)
    assert dialog.last_preview.cache_gb == 20
    assert "expert cache 20 GiB" in dialog.preview_state.text()
    assert any(dialog.decisions.item(i).text().startswith("expert cache 20 GiB")
               for i in range(dialog.decisions.count()))

    done = dialog.previews_done
    box = dialog.inputs["ds4_ssd_streaming"]
    box.setCurrentIndex(box.findData(False))  # full residency: 81 GiB + 32 GiB headroom fit in 128 GiB
    qtbot.waitUntil(lambda: dialog.previews_done > done, timeout=30_000)
    assert not dialog.last_preview.ssd_streaming and dialog.last_preview.cache_gb is None
    assert "whole model in memory" in dialog.preview_state.text()
    assert "reserves 96.00 GiB (estimated)" in dialog.preview_state.text()  # nobody measured it: the floor
