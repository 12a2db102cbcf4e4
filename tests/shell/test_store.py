"""Atomic JSON store: crashes keep the old file, corrupt files are moved aside and reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stoker.base import store
from stoker.base.overrides import ModelOverrides
from stoker.base.store import AppSettings, OverridesStore, SettingsStore, model_key, read_json, write_json_atomic

REPO = Path(__file__).resolve().parents[2]


def test_write_then_read_round_trip(tmp_path):
    path = tmp_path / "sub" / "x.json"
    write_json_atomic(path, {"a": 1, "b": ["é"]})
    assert read_json(path) == ({"a": 1, "b": ["é"]}, None)
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temp file left


def test_missing_file_is_not_a_problem(tmp_path):
    assert read_json(tmp_path / "nope.json") == (None, None)


def test_failed_rename_keeps_the_old_file_and_removes_the_temp(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    write_json_atomic(path, {"version": "old"})

    def boom(src, dst):
        raise OSError("disk went away")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError):
        write_json_atomic(path, {"version": "new"})
    assert json.loads(path.read_text()) == {"version": "old"}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_process_killed_between_write_and_rename_leaves_the_old_file(tmp_path):
    """A real crash: the child dies (os._exit) after the temp file is fsynced, before rename."""
    path = tmp_path / "settings.json"
    write_json_atomic(path, {"version": "old"})
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from stoker.base import store
        store.os.replace = lambda src, dst: os._exit(9)
        store.write_json_atomic({str(path)!r}, {{"version": "new"}})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=30)
    assert proc.returncode == 9, proc.stderr
    assert json.loads(path.read_text()) == {"version": "old"}
    leftovers = [p for p in tmp_path.iterdir() if p.name != "settings.json"]
    # The new content exists only in the orphaned temp file, never in settings.json.
    assert len(leftovers) == 1 and leftovers[0].name.startswith(".settings.json.")
    assert json.loads(leftovers[0].read_text()) == {"version": "new"}


def test_corrupt_file_is_moved_aside_reported_and_not_lost(tmp_path):
    path = tmp_path / "overrides.json"
    path.write_text('{"models": {broken')
    value, problem = read_json(path)
    assert value is None
    asides = list(tmp_path.glob("overrides.json.corrupt-*"))
    assert len(asides) == 1
    assert asides[0].read_text() == '{"models": {broken'
    assert not path.exists()
    assert str(path) in problem and str(asides[0]) in problem
    assert problem.count(". ") == 0 and problem.endswith(".")  # one sentence


def test_two_corruptions_in_one_second_keep_both(tmp_path):
    path = tmp_path / "s.json"
    for text in ("nope", "still nope"):
        path.write_text(text)
        read_json(path)
    assert sorted(p.read_text() for p in tmp_path.glob("s.json.corrupt-*")) == ["nope", "still nope"]


def test_wrong_top_level_type_counts_as_corrupt(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("[1, 2]")
    value, problem = read_json(path)
    assert value is None and "expected a JSON dict" in problem
    assert read_json(tmp_path / "s.json", expect=None) == (None, None)  # it was moved


# --- overrides ------------------------------------------------------------------------------------


def test_overrides_round_trip_keyed_by_resolved_path(tmp_path, monkeypatch):
    model = tmp_path / "models" / "m.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    s = OverridesStore(tmp_path / "config")
    assert s.get(model) == ModelOverrides()
    ov = ModelOverrides(ctx=8192, kv_type_k="q8_0", kv_type_v="q8_0", extra_args=("--jinja",))
    s.set(model, ov)
    monkeypatch.chdir(model.parent)
    assert s.get("m.gguf") == ov  # a relative path names the same model
    data = json.loads((tmp_path / "config" / "overrides.json").read_text())
    assert data["schema"] == 1
    assert data["models"][model_key(model)] == {"ctx": 8192, "kv_type_k": "q8_0", "kv_type_v": "q8_0",
                                                "extra_args": ["--jinja"]}
    assert s.all() == {model_key(model): ov}
    s.clear(model)
    assert s.all() == {}
    assert s.problems == []


def test_overrides_set_keeps_other_models(tmp_path):
    s = OverridesStore(tmp_path)
    s.set(tmp_path / "a.gguf", ModelOverrides(ctx=4096))
    s.set(tmp_path / "b.gguf", ModelOverrides(slots=2))
    assert OverridesStore(tmp_path).get(tmp_path / "a.gguf").ctx == 4096
    assert OverridesStore(tmp_path).get(tmp_path / "b.gguf").slots == 2


def test_invalid_stored_values_are_dropped_and_reported(tmp_path):
    key = model_key(tmp_path / "a.gguf")
    (tmp_path / "overrides.json").write_text(json.dumps({"schema": 1, "models": {key: {"ctx": 8192, "slots": -3}}}))
    s = OverridesStore(tmp_path)
    assert s.get(tmp_path / "a.gguf") == ModelOverrides(ctx=8192)
    assert len(s.problems) == 1 and "a.gguf" in s.problems[0] and "slots" in s.problems[0]


def test_set_over_a_corrupt_overrides_file_moves_it_aside_first(tmp_path):
    (tmp_path / "overrides.json").write_text("{not json")
    s = OverridesStore(tmp_path)
    s.set(tmp_path / "a.gguf", ModelOverrides(ctx=2048))
    (aside,) = tmp_path.glob("overrides.json.corrupt-*")
    assert aside.read_text() == "{not json"
    assert s.get(tmp_path / "a.gguf").ctx == 2048
    assert any("moved to" in p for p in s.problems)


# --- settings -----------------------------------------------------------------------------------


def test_settings_defaults_and_update(tmp_path):
    s = SettingsStore(tmp_path)
    assert s.load() == AppSettings()
    new = s.update(idle_unload_minutes=15, model_folders=("/models",), log_level="DEBUG")
    assert (new.idle_unload_minutes, new.model_folders, new.log_level) == (15, ("/models",), "debug")
    assert SettingsStore(tmp_path).load() == new
    assert json.loads((tmp_path / "settings.json").read_text())["schema"] == 1


def test_settings_update_rejects_bad_values_with_one_sentence(tmp_path):
    s = SettingsStore(tmp_path)
    with pytest.raises(ValueError, match=r"^Idle_unload_minutes must be a whole number"):
        s.update(idle_unload_minutes=-1)
    with pytest.raises(ValueError, match="not a Stoker setting"):
        s.update(colour="red")
    assert not (tmp_path / "settings.json").exists()


def test_settings_bad_stored_value_falls_back_and_unknown_keys_survive(tmp_path):
    (tmp_path / "settings.json").write_text(json.dumps(
        {"schema": 1, "memory_reserve_gib": "lots", "start_at_login": True, "future_key": {"x": 1}}))
    s = SettingsStore(tmp_path)
    loaded = s.load()
    assert loaded.memory_reserve_gib == 4.0 and loaded.start_at_login is True
    assert len(s.problems) == 1 and "memory_reserve_gib" in s.problems[0]
    s.update(last_model="/m.gguf")
    data = json.loads((tmp_path / "settings.json").read_text())
    assert data["future_key"] == {"x": 1} and data["last_model"] == "/m.gguf"


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions")
def test_unreadable_file_is_reported_and_left_in_place(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    path = tmp_path / "s.json"
    path.write_text("{}")
    path.chmod(0)
    value, problem = read_json(path)
    path.chmod(0o600)
    assert value is None and "permissions" in problem and path.exists()


def test_settings_get_with_default_folder_and_alias(stoker_home):
    s = SettingsStore()
    assert s.path == stoker_home / "config" / "settings.json"
    assert s.get("idle_unload_minutes") == 5 and s.get("engine_path") is None
    s.update(engine="/opt/llama/llama-server")
    assert SettingsStore().get("engine_path") == "/opt/llama/llama-server"
    with pytest.raises(KeyError):
        s.get("colour")


def test_the_disk_for_kept_conversations_is_a_number_of_gib_and_0_keeps_none(tmp_path):
    s = SettingsStore(tmp_path)
    assert s.load().conversation_disk_gib == 4.0
    assert s.update(conversation_disk_gib=0).conversation_disk_gib == 0.0
    assert s.update(conversation_disk_gib=12).conversation_disk_gib == 12.0
    for bad in (-1, "4", True, 5000):
        with pytest.raises(ValueError, match="onversation_disk_gib must be a number of GiB from 0"):
            s.update(conversation_disk_gib=bad)
    assert s.load().conversation_disk_gib == 12.0
