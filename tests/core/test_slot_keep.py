"""The pure decisions of keeping a conversation across an unload (stoker/engines/slot_keep.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.engines.slot_keep import (
    KvKey,
    SavedSlot,
    SlotNow,
    file_stem,
    key_from_json,
    kv_key,
    kv_settings,
    may_save,
    n_slots_of,
    restore_choice,
    slots_from_json,
    slots_still_busy,
    slots_to_save,
    to_drop,
    what_differs,
    worth_keeping,
)
from stoker.fleet.kv_keeper import SETTLE_S, KvKeeper

ARGV = ("llama-server", "-lv", "4", "-m", "/m/demo.gguf", "--port", "1234", "-c", "4096", "-np", "1",
        "-kvu", "-ctk", "f16", "-ctv", "f16", "-fa", "auto", "--no-webui", "--slot-save-path", "/s")
GIB = 2**30


def key(argv=ARGV, *, size=100, mtime=5, build="b11434-cpu|1|2", path="/m/demo.gguf") -> KvKey:
    return kv_key(argv, model_path=path, model_size=size, model_mtime_ns=mtime, build=build)


def saved(name, k: KvKey | None, *, slot=0, size=10, used=0.0) -> SavedSlot:
    return SavedSlot(name=name, key=k, slot=slot, n_tokens=100, size_bytes=size, used_at=used)


def test_the_kv_settings_are_read_from_the_argv_and_nothing_else_is():
    assert kv_settings(ARGV) == (("ctx", "4096"), ("flash_attn", "auto"), ("kv_type_k", "f16"),
                                 ("kv_type_v", "f16"), ("kv_unified", "on"), ("slots", "1"))
    # the port, the log level and the slot folder change per launch and are not in the key
    other_port = tuple("9999" if a == "1234" else a for a in ARGV)
    assert key(other_port) == key()


def test_long_flags_inline_values_and_the_last_repeat_win_as_in_the_engine():
    argv = ("x", "--ctx-size=2048", "--cache-type-k", "q8_0", "-ctk", "q4_0", "--no-kv-unified", "--swa-full")
    assert dict(kv_settings(argv)) == {"ctx": "2048", "kv_type_k": "q4_0", "kv_unified": "off", "swa_full": "on"}
    assert kv_settings(("x", "-c")) == (("ctx", ""),)  # a flag with its value missing: still told apart


def test_another_kv_type_context_or_slot_count_is_another_key():
    base = key()
    for flag, value in (("-ctk", "q8_0"), ("-c", "8192"), ("-np", "2")):
        argv = list(ARGV)
        argv[argv.index(flag) + 1] = value
        assert key(tuple(argv)) != base and key(tuple(argv)).digest() != base.digest()
    assert key(size=101) != base and key(mtime=6) != base and key(build="b1|1|2") != base


def test_a_key_survives_its_sidecar_and_a_damaged_sidecar_is_no_key():
    k = key()
    assert key_from_json(k.as_json()) == k
    assert key_from_json(key(size=None, mtime=None).as_json()) == key(size=None, mtime=None)
    for bad in (None, [], {}, {"model_path": "x"}, {**k.as_json(), "kv": 3}, {**k.as_json(), "model_size": "a"}):
        assert key_from_json(bad) is None


def test_the_file_stem_has_no_path_separator_and_names_the_slot():
    stem = file_stem(key(), 3)
    assert "/" not in stem and "\\" not in stem and stem.endswith("-slot3")


def test_only_used_idle_slots_are_saved():
    data = [{"id": 0, "n_ctx": 4096, "is_processing": False, "n_prompt_tokens": 2978},
            {"id": 1, "n_ctx": 4096, "is_processing": False},  # never used
            {"id": 2, "is_processing": True, "n_prompt_tokens": 50},  # busy
            {"id": 3, "is_processing": False, "n_prompt_tokens": 0},  # empty
            {"id": "4"}, "junk"]
    slots = slots_from_json(data)
    assert [s.slot for s in slots] == [0, 1, 2, 3]
    assert slots_to_save(slots) == (0,)
    assert slots_from_json({"error": "x"}) == () and slots_to_save(()) == ()
    assert slots_from_json([{"id": 0, "n_prompt_tokens": True}])[0].n_tokens is None


def test_a_busy_slot_is_named_whatever_its_cache():
    slots = slots_from_json([{"id": 0, "is_processing": True, "n_prompt_tokens": 40},
                             {"id": 1, "is_processing": False, "n_prompt_tokens": 9},
                             {"id": 2, "is_processing": True}])
    assert slots_still_busy(slots) == (0, 2)
    assert slots_still_busy(()) == ()


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_a_save_waits_for_the_slot_its_answer_just_left():
    # the engine frees a slot only after sending its answer: the first listing can find it busy
    clock = _Clock()
    answers = iter([slots_from_json([{"id": 0, "is_processing": True, "n_prompt_tokens": 40}])] * 3
                   + [slots_from_json([{"id": 0, "is_processing": False, "n_prompt_tokens": 48}])])
    keeper = KvKeeper(budget_bytes=lambda: 1, clock=clock, sleep=clock.sleep)
    slots = keeper.settled_slots(lambda: next(answers))
    assert not isinstance(slots, str) and slots_to_save(slots) == (0,)
    assert 0 < clock.now < SETTLE_S


def test_a_save_stops_waiting_for_a_busy_slot_after_the_settle_time():
    clock = _Clock()
    calls = []

    def busy():
        calls.append(clock.now)
        return slots_from_json([{"id": 0, "is_processing": True, "n_prompt_tokens": 40}])
    keeper = KvKeeper(budget_bytes=lambda: 1, clock=clock, sleep=clock.sleep)
    slots = keeper.settled_slots(busy)
    assert not isinstance(slots, str) and slots_still_busy(slots) == (0,)
    assert SETTLE_S <= clock.now < SETTLE_S + 0.1 and len(calls) > 2
    # a listing that fails is returned at once, not retried
    clock.now = 0.0
    assert keeper.settled_slots(lambda: "connection refused") == "connection refused" and clock.now == 0.0


def test_a_launch_restores_only_its_own_key_in_slot_order_and_names_the_others():
    k = key()
    other_kv = key(tuple("q8_0" if a == "f16" else a for a in ARGV))
    choice = restore_choice([saved("b", k, slot=1), saved("a", k, slot=0), saved("c", other_kv),
                             saved("d", key(path="/m/other.gguf")), saved("e", None)], k, n_slots=2)
    assert [s.name for s in choice.restore] == ["a", "b"]
    assert [s.name for s in choice.other_plan] == ["c"]  # another model's saves are not this one's business
    # a slot the launch does not have, and a model file that could not be read, restore nothing
    assert restore_choice([saved("a", k, slot=1)], k, n_slots=1).restore == ()
    assert [s.name for s in restore_choice([saved("a", k, slot=1)], k, n_slots=None).restore] == ["a"]
    nofile = key(size=None, mtime=None)
    assert restore_choice([saved("a", nofile)], nofile, n_slots=1).restore == ()


def test_what_differs_says_why_in_words():
    k = key()
    q8 = key(tuple("q8_0" if a == "f16" else a for a in ARGV))
    assert what_differs(k, q8) == "the KV settings changed (kv_type_k f16 → q8_0, kv_type_v f16 → q8_0)"
    assert what_differs(k, key(mtime=9)) == "the model file has changed since"
    assert what_differs(k, key(build="b2|1|2")) == "it was saved by another engine build"


def test_slot_count():
    assert n_slots_of(ARGV) == 1
    assert n_slots_of(("x",)) is None and n_slots_of(("x", "-np", "-1")) is None
    assert n_slots_of(("x", "-np", "auto")) is None


def test_nothing_is_dropped_within_the_budget_and_with_the_disk_free():
    items = [saved("a", key(), size=GIB, used=1), saved("b", key(), size=GIB, used=2)]
    assert to_drop(items, budget_bytes=2 * GIB, free_bytes=100 * GIB, reserve_bytes=5 * GIB) == ()
    assert to_drop([], budget_bytes=0, free_bytes=0, reserve_bytes=5 * GIB) == ()


def test_over_the_budget_the_least_recently_used_go_first_and_the_new_save_last():
    items = [saved("new", key(), size=GIB, used=0), saved("old", key(), size=GIB, used=1),
             saved("mid", key(), size=GIB, used=5)]
    assert to_drop(items, budget_bytes=2 * GIB, free_bytes=None, reserve_bytes=0, keep=frozenset({"new"})) == ("old",)
    assert to_drop(items, budget_bytes=GIB, free_bytes=None, reserve_bytes=0,
                   keep=frozenset({"new"})) == ("old", "mid")
    # a budget smaller than the save itself drops it too: the budget is never exceeded
    assert to_drop(items, budget_bytes=GIB // 2, free_bytes=None, reserve_bytes=0,
                   keep=frozenset({"new"})) == ("old", "mid", "new")


def test_broken_saves_always_go_and_go_first():
    items = [saved("ok", key(), size=GIB, used=0), saved("broken", None, size=1, used=9)]
    assert to_drop(items, budget_bytes=10 * GIB, free_bytes=None, reserve_bytes=0) == ("broken",)
    assert to_drop(items, budget_bytes=GIB // 2, free_bytes=None, reserve_bytes=0) == ("broken", "ok")


def test_the_free_disk_reserve_is_kept_even_within_the_budget():
    items = [saved("a", key(), size=GIB, used=1), saved("b", key(), size=GIB, used=2)]
    assert to_drop(items, budget_bytes=100 * GIB, free_bytes=4 * GIB, reserve_bytes=5 * GIB) == ("a",)
    assert to_drop(items, budget_bytes=100 * GIB, free_bytes=2 * GIB, reserve_bytes=5 * GIB) == ("a", "b")


@given(st.lists(st.tuples(st.integers(0, 10 * GIB), st.floats(0, 1e6), st.booleans()), max_size=12),
       st.integers(0, 40 * GIB), st.one_of(st.none(), st.integers(0, 40 * GIB)), st.integers(0, 20 * GIB))
def test_what_is_left_always_fits_the_budget_and_the_reserve_when_it_can(rows, budget, free, reserve):
    items = [saved(f"s{i}", key() if ok else None, size=size, used=used) for i, (size, used, ok) in enumerate(rows)]
    drop = set(to_drop(items, budget_bytes=budget, free_bytes=free, reserve_bytes=reserve))
    left = [s for s in items if s.name not in drop]
    assert sum(s.size_bytes for s in left) <= budget
    assert all(s.key is not None for s in left)
    if free is not None and left:
        freed = sum(s.size_bytes for s in items if s.name in drop)
        assert free + freed >= reserve
    # least recently used first: nothing left is older than something dropped (broken ones aside)
    dropped_ok = [s for s in items if s.name in drop and s.key is not None]
    if dropped_ok and left:
        assert max(s.used_at for s in dropped_ok) <= min(s.used_at for s in left)


def test_a_save_is_not_tried_with_no_budget_or_a_full_disk():
    assert may_save(budget_bytes=GIB, free_bytes=50 * GIB, reserve_bytes=5 * GIB) is None
    assert may_save(budget_bytes=GIB, free_bytes=None, reserve_bytes=5 * GIB) is None
    assert "off" in may_save(budget_bytes=0, free_bytes=50 * GIB, reserve_bytes=5 * GIB)
    assert "kept free" in may_save(budget_bytes=GIB, free_bytes=5 * GIB, reserve_bytes=5 * GIB)


def test_slot_now_is_a_value():
    assert SlotNow(0, 5, False) == SlotNow(0, 5, False)


def test_sliding_window_and_recurrent_models_keep_nothing_the_engine_would_reread():
    assert worth_keeping(saves_slots=True, sliding_window=False, recurrent=False, swa_full=False)
    assert not worth_keeping(saves_slots=False, sliding_window=False, recurrent=False, swa_full=False)
    assert not worth_keeping(saves_slots=True, sliding_window=True, recurrent=False, swa_full=False)
    assert worth_keeping(saves_slots=True, sliding_window=True, recurrent=False, swa_full=True)
    assert not worth_keeping(saves_slots=True, sliding_window=False, recurrent=True, swa_full=True)
