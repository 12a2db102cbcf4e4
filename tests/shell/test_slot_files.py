"""The saved conversations on disk (stoker/engines/slot_files.py), and which launches keep
one at all (RealPreparer through stoker/engines/slot_keep.py worth_keeping)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.engines import slot_files
from stoker.engines.launch import AttemptContext, PreparedLaunch
from stoker.engines.slot_keep import kv_key, to_drop
from stoker.fleet.launcher import RealPreparer

KEY = kv_key(("x", "-c", "2048", "-np", "1"), model_path="/m.gguf", model_size=1, model_mtime_ns=2, build="b")


def test_a_finished_save_is_listed_with_its_key_and_a_broken_one_without(tmp_path):
    (tmp_path / "good.saving").write_bytes(b"x" * 100)
    slot_files.finish_save(tmp_path, "good", KEY, 0, 42)
    (tmp_path / "lonely.bin").write_bytes(b"y" * 10)  # a save whose sidecar never came
    (tmp_path / "bad.bin").write_bytes(b"z")
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "fresh.saving").write_bytes(b"p")  # a save under way: not listed
    old = tmp_path / "old.saving"
    old.write_bytes(b"q")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    listed = {s.name: s for s in slot_files.list_saved(tmp_path)}
    assert set(listed) == {"good", "lonely", "bad", "old~part"}
    good = listed["good"]
    assert good.key == KEY and good.slot == 0 and good.n_tokens == 42 and good.size_bytes > 100
    assert all(listed[n].key is None for n in ("lonely", "bad", "old~part"))
    # broken ones are dropped even with room to spare, and only they
    drop = to_drop(tuple(listed.values()), budget_bytes=1 << 30, free_bytes=None, reserve_bytes=0)
    assert set(drop) == {"lonely", "bad", "old~part"}
    slot_files.delete(tmp_path, drop)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.saving", "good.bin", "good.json"]


def test_a_restore_marks_the_save_as_just_used(tmp_path):
    (tmp_path / "a.saving").write_bytes(b"x")
    slot_files.finish_save(tmp_path, "a", KEY, 0, 1)
    for p in tmp_path.iterdir():
        os.utime(p, (1000, 1000))
    (before,) = slot_files.list_saved(tmp_path)
    slot_files.touch(tmp_path, "a")
    (after,) = slot_files.list_saved(tmp_path)
    assert before.used_at == 1000 and after.used_at > time.time() - 60


def test_the_slot_folder_is_under_stoker_home(stoker_home):
    assert slot_files.slot_folder() == Path(stoker_home).resolve() / "cache" / "kv-slots"
    assert slot_files.free_bytes(slot_files.slot_folder()) is not None


@pytest.mark.engine
def test_real_launches_keep_conversations_unless_the_engine_would_reread_them(
        engine_binary, demo_model, gemma_model, stoker_home):
    def prepare(model: Path, **overrides) -> PreparedLaunch:
        out = RealPreparer(engine=str(engine_binary), remember_last_model=False,
                           cli_overrides=ModelOverrides(ctx=2048, slots=1, **overrides))(
            str(model), AttemptContext(attempt=0, port=40321, log_dir=Path("/tmp"), overrides=None, last_exit=None))
        assert isinstance(out, PreparedLaunch), out
        return out

    assert prepare(demo_model).keeps_conversations
    assert not prepare(gemma_model).keeps_conversations  # sliding window, not kept whole
    assert prepare(gemma_model, swa_full=True).keeps_conversations
