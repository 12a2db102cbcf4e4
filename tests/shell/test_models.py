"""The model library: split sets, vision projectors, bad files, added folders, resolve_model."""

from __future__ import annotations

import json

import pytest

from stoker.cli import main
from stoker.errors import UserError
from stoker.library import models as md
from tests.conftest import TEST_HOME
from tests.shell.test_ds4_engine import install_fake


def touch(path, size=10):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def test_split_sets_are_listed_once_and_projectors_are_attached(tmp_path):
    touch(tmp_path / "big" / "Big-Q4-00001-of-00003.gguf", 100)
    touch(tmp_path / "big" / "Big-Q4-00002-of-00003.gguf", 100)
    touch(tmp_path / "big" / "Big-Q4-00003-of-00003.gguf", 50)
    touch(tmp_path / "vis" / "gemma-3-4b-it-Q4_K_M.gguf")
    touch(tmp_path / "vis" / "mmproj-gemma-3-4b-it-f16.gguf")
    touch(tmp_path / ".hidden" / "skip.gguf")
    touch(tmp_path / "notes.txt")
    found = md.scan_folder(tmp_path, "test", with_summary=False)
    assert [m.name for m in found] == ["Big-Q4-00001-of-00003.gguf", "gemma-3-4b-it-Q4_K_M.gguf"]
    big, vis = found
    assert big.split_parts == 3 and big.size_bytes == 250 and big.vision_projector is None
    assert vis.vision_projector == tmp_path / "vis" / "mmproj-gemma-3-4b-it-f16.gguf"


def test_projector_goes_to_the_model_whose_name_it_shares(tmp_path):
    touch(tmp_path / "qwen2-vl-7b-Q4.gguf")
    touch(tmp_path / "llava-1.6-Q4.gguf")
    touch(tmp_path / "mmproj-llava-1.6-f16.gguf")
    touch(tmp_path / "mmproj-qwen2-vl-7b-f16.gguf")
    found = {m.name: m.vision_projector.name for m in md.scan_folder(tmp_path, "t", with_summary=False)}
    assert found == {"llava-1.6-Q4.gguf": "mmproj-llava-1.6-f16.gguf",
                     "qwen2-vl-7b-Q4.gguf": "mmproj-qwen2-vl-7b-f16.gguf"}


def test_a_malformed_file_is_listed_with_its_reason(stoker_home):
    library = stoker_home / "data" / "models"
    touch(library / "broken.gguf", 64)
    (m,) = md.list_models(folders=())
    assert m.summary is None and m.error and m.error.endswith(".")


def test_added_folders_come_from_settings(stoker_home, tmp_path):
    extra = tmp_path / "extra"
    touch(extra / "a.gguf")
    (stoker_home / "config").mkdir()
    (stoker_home / "config" / "settings.json").write_text(json.dumps({"model_folders": [str(extra)]}))
    (m,) = md.list_models(with_summary=False)
    assert m.origin == "folder" and m.folder == extra and m.name == "a.gguf"


def test_resolve_model_by_path_name_and_demo(stoker_home, tmp_path):
    library = stoker_home / "data" / "models"
    demo = touch(library / md.DEMO_MODEL_NAME)
    other = touch(library / "Qwen3-0.6B-Q8_0.gguf")
    assert md.resolve_model(None) == demo
    assert md.resolve_model(str(other)) == other
    assert md.resolve_model("qwen3-0.6b-q8_0") == other
    assert md.resolve_model("Qwen3") == other
    with pytest.raises(UserError, match="stoker models"):
        md.resolve_model("llama-70b")
    touch(library / "Qwen3-4B-Q4.gguf")
    with pytest.raises(UserError, match="several models"):
        md.resolve_model("qwen3")


def test_resolve_model_without_demo_says_run_setup(stoker_home):
    with pytest.raises(UserError, match="stoker setup"):
        md.resolve_model(None)


@pytest.mark.engine
def test_models_command_lists_the_real_demo_model(stoker_home, demo_model, capsys):
    library = stoker_home / "data" / "models"
    library.mkdir(parents=True)
    (library / demo_model.name).symlink_to(demo_model)
    touch(library / "broken.gguf", 64)
    assert main(["models", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == 2
    rows = {r["name"]: r for r in out["models"]}
    demo = rows[demo_model.name]
    assert demo["architecture"] == "llama" and demo["n_layer"] == 30 and demo["file_type"] == "Q4_1"
    assert demo["size_bytes"] == 98362432 and demo["error"] is None
    assert rows["broken.gguf"]["error"]
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct.Q4_1" in text and "broken.gguf:" in text


@pytest.mark.engine
def test_engines_command_json(stoker_home, engine_dir, capsys, monkeypatch):
    from stoker.engines.setup import install_build

    flags = tuple(json.loads((engine_dir / "manifest.json").read_text())["cmake_flags"])
    install_build(engine_dir, "cpu", flags, stoker_home / "data" / "engines" / "llama-server")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("STOKER_SD_SERVER", raising=False)
    engines = TEST_HOME / "data" / "engines"
    # the RPC and image builds of the test home, found as Stoker's own; a ds4-server by setting
    for kind in ("rpc", "sd-server"):
        if not (engines / kind).is_dir():
            pytest.skip(f"no {kind} build under {engines}; run `stoker setup --rpc --image` there")
        (stoker_home / "data" / "engines" / kind).symlink_to(engines / kind, target_is_directory=True)
    ds4 = install_fake(stoker_home / "ds4-build")
    monkeypatch.setenv("STOKER_DS4_SERVER", str(ds4))
    assert main(["engines", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == 1
    first = out["engines"][0]
    assert first["id"] == "b11434-cpu" and first["selected"] and first["build"] == 11434
    assert first["kind"] == "llama-server" and first["usable"] and first["backend"] == "cpu"
    by_kind = {}
    for row in out["engines"]:
        by_kind.setdefault(row["kind"], []).append(row)
    assert set(by_kind) == {"llama-server", "rpc-server", "sd-server", "ds4"}
    (rpc,) = by_kind["rpc-server"]
    assert rpc["id"] == "b11434-cpu-rpc" and rpc["usable"] and rpc["path"].endswith("/rpc-server")
    (sd,) = by_kind["sd-server"]
    assert sd["id"].startswith("sd-") and sd["backend"] == "cpu" and sd["usable"]
    (found,) = by_kind["ds4"]
    assert found["path"] == str(ds4) and found["source"] == "configured" and found["usable"]
    assert main(["engines"]) == 0
    text = capsys.readouterr().out
    assert "b11434-cpu" in text and "rpc-server" in text and "sd-server" in text and str(ds4) in text
    assert "Not installed" not in text
