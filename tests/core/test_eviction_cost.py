"""Eviction that knows what a reload costs, and yielding memory to other applications: the
pure rules (stoker/fleet/residency.py) and the fleet reducer's MemoryRead, edge by edge."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from stoker.desktop.notifications import NoteHistory, decide_notifications
from stoker.fleet import fleet_state as f
from stoker.fleet.residency import (
    ESTIMATED_LOAD_BYTES_PER_S,
    GIB,
    AdmissionKind,
    FreeMemory,
    Resident,
    admit,
    eviction_order,
    reload_cost_per_byte,
    yield_to_desktop,
)
from stoker.fleet.snapshot import AppSnapshot, EngineState, YieldView
from stoker.fleet.status_report import status_lines, status_object

MIB = 1024 ** 2


def res(key, gib, reload_s=None, *, busy=False, pinned=False, last=None, beside=False, dev="CPU"):
    return Resident(key, key, ((dev, int(gib * GIB)),), busy=busy, pinned=pinned, last_used_at=last,
                    reload_s=reload_s, beside=beside)


def keys(rs):
    return [r.key for r in rs]


# ---------------------------------------------------------------------------- the order


def test_the_cheapest_reload_per_byte_goes_first_not_the_least_recently_used():
    # The big model is the least recently used, but a minute for 20 GiB (3 s/GiB) is dearer
    # than a second for 1 GiB (1 s/GiB): the small one goes first.
    big = res("big", 20, 60.0, last=10.0)
    small = res("small", 1, 1.0, last=90.0)
    assert keys(eviction_order([big, small])) == ["small", "big"]
    # A 20 GiB model that loads in 10 s (0.5 s/GiB) is cheaper per byte than one of 300 MiB in 1 s.
    fast_big = res("fast-big", 20, 10.0, last=90.0)
    emb = res("emb", 0.3, 1.0, last=10.0)
    assert keys(eviction_order([emb, fast_big])) == ["fast-big", "emb"]


def test_pinned_and_busy_models_are_never_candidates_however_cheap():
    rs = [res("pinned", 10, 0.1, pinned=True), res("busy", 10, 0.1, busy=True), res("idle", 1, 100.0)]
    assert keys(eviction_order(rs)) == ["idle"]
    assert keys(eviction_order(rs, tight=True)) == ["idle"]


def test_an_unmeasured_model_is_priced_by_its_bytes_and_keeps_lru_among_unmeasured_ones():
    unknown = res("unknown", 2)  # never measured: 2 GiB at 1 GiB/s, 1 s per GiB
    assert reload_cost_per_byte(unknown) == 1 / ESTIMATED_LOAD_BYTES_PER_S
    cheap = res("cheap", 2, 1.0)  # measured 0.5 s/GiB
    dear = res("dear", 2, 6.0)  # measured 3 s/GiB
    assert keys(eviction_order([dear, unknown, cheap])) == ["cheap", "unknown", "dear"]
    # Among unmeasured models the old order holds: never used first, then least recently used.
    rs = [res("a", 1, last=50.0), res("b", 8, last=10.0), res("c", 3, last=None)]
    assert keys(eviction_order(rs)) == ["c", "b", "a"]


def test_embedding_and_rerank_models_stay_beside_the_chat_model_unless_memory_is_tight():
    chat = res("chat", 8, 40.0)  # 5 s/GiB: dear
    emb = res("emb", 0.5, 1.0, beside=True)  # 2 s/GiB: cheaper, but it stays
    assert keys(eviction_order([chat, emb])) == ["chat", "emb"]
    assert keys(eviction_order([chat, emb], tight=True)) == ["emb", "chat"]


def test_a_model_that_frees_nothing_where_room_is_short_goes_last():
    gpu = res("gpu", 8, 80.0, dev="CUDA0")
    cpu = res("cpu", 1, 0.1)
    assert keys(eviction_order([cpu, gpu], pools=["CUDA0"])) == ["gpu", "cpu"]


def test_admission_evicts_the_cheapest_reload_per_byte_not_the_least_recently_used():
    budget = {"CPU": 10 * GIB}
    big = res("big", 6, 60.0, last=10.0)  # least recently used, 10 s/GiB
    cheap = res("cheap", 3, 1.5, last=90.0)  # 0.5 s/GiB
    d = admit("new", {"CPU": 3 * GIB}, budget, [big, cheap])
    assert d.kind is AdmissionKind.EVICT and d.evict == ("cheap",)
    assert "cheapest to load again first" in d.reason


def test_admission_takes_a_beside_model_only_when_every_chat_model_is_not_enough():
    budget = {"CPU": 10 * GIB}
    chat = res("chat", 4, 40.0)
    emb = res("emb", 1, 0.5, beside=True)
    d = admit("new", {"CPU": 6 * GIB}, budget, [chat, emb])
    assert d.evict == ("chat",)
    d = admit("new", {"CPU": int(9.5 * GIB)}, budget, [chat, emb])
    assert d.evict == ("chat", "emb")


@given(st.lists(st.tuples(st.integers(1, 64), st.none() | st.floats(0.1, 600), st.booleans(), st.booleans()),
                min_size=1, max_size=6))
def test_the_order_is_by_cost_per_byte_and_never_holds_a_busy_or_pinned_model(specs):
    rs = [res(f"m{i}", gib, reload, busy=busy, pinned=pinned)
          for i, (gib, reload, busy, pinned) in enumerate(specs)]
    order = eviction_order(rs)
    assert all(not r.busy and not r.pinned for r in order)
    assert len(order) == sum(1 for r in rs if not r.busy and not r.pinned)
    costs = [reload_cost_per_byte(r) for r in order]
    assert costs == sorted(costs)


# ---------------------------------------------------------------------------- yielding memory


def reading(free_gib, reserve_gib=2.0, pool="CPU", unified=False):
    return FreeMemory(((pool, int(free_gib * GIB)),), ((pool, int(reserve_gib * GIB)),), unified)


def test_nothing_goes_while_what_is_free_covers_the_reserve():
    assert yield_to_desktop([res("a", 4, 10.0)], reading(2.0)) is None
    assert yield_to_desktop([res("a", 4, 10.0)], reading(5.0)) is None


def test_a_squeeze_unloads_the_cheapest_idle_models_until_the_reserve_is_covered_again():
    rs = [res("dear", 6, 120.0), res("cheap", 1, 0.5), res("mid", 2, 4.0)]
    got = yield_to_desktop(rs, reading(0.5))  # 1.5 GiB short of a 2 GiB reserve
    assert got is not None
    assert [y.key for y in got.unload] == ["cheap", "mid"]  # 1 GiB is not enough, 3 GiB is
    assert got.short_by_pool == (("CPU", int(1.5 * GIB)),)
    assert got.unload[0].note == "memory is tight: cheap unloaded, 1.0 GiB, for other applications"


def test_a_busy_or_pinned_model_is_never_yielded_and_is_named_as_kept():
    rs = [res("busy", 6, 1.0, busy=True), res("pinned", 6, 1.0, pinned=True), res("idle", 1, 50.0)]
    got = yield_to_desktop(rs, reading(0.0))
    assert got is not None and [y.key for y in got.unload] == ["idle"]
    assert set(got.kept) == {"busy", "pinned"}


def test_models_already_stopping_count_as_memory_coming_back():
    rs = [res("a", 1, 1.0)]
    assert yield_to_desktop(rs, reading(1.0), freeing={"CPU": GIB}) is None
    got = yield_to_desktop(rs, reading(0.5), freeing={"CPU": GIB})
    assert got is not None and [y.key for y in got.unload] == ["a"]


def test_embedding_models_are_priced_like_any_other_when_memory_is_tight():
    rs = [res("chat", 8, 80.0), res("emb", 2, 1.0, beside=True)]
    got = yield_to_desktop(rs, reading(1.0))
    assert got is not None and [y.key for y in got.unload] == ["emb"]


def test_a_short_gpu_unloads_models_holding_that_gpu_not_ones_in_ram():
    rs = [res("ram", 4, 0.1), res("gpu", 4, 30.0, dev="CUDA0")]
    got = yield_to_desktop(rs, reading(0.2, 1.0, pool="CUDA0"))
    assert got is not None and [y.key for y in got.unload] == ["gpu"]


def test_on_unified_memory_every_device_s_bytes_come_out_of_ram():
    rs = [res("metal", 4, 10.0, dev="MTL0")]
    got = yield_to_desktop(rs, reading(0.5, unified=True))
    assert got is not None and [y.key for y in got.unload] == ["metal"]
    assert got.unload[0].freed_bytes == 4 * GIB


def test_a_pool_that_could_not_be_read_decides_nothing():
    rs = [res("gpu", 4, 1.0, dev="CUDA0")]
    assert yield_to_desktop(rs, FreeMemory((), (("CUDA0", GIB),))) is None


def test_the_size_in_the_note_is_mib_below_a_gib():
    got = yield_to_desktop([res("emb", 0.3, 1.0)], reading(1.9))
    assert got is not None and got.unload[0].note == "memory is tight: emb unloaded, 307 MiB, for other applications"


# ---------------------------------------------------------------------------- the fleet reducer


def member(state, key, gib, phase=EngineState.READY, **kw):
    m = state.member(key) or f.Member(key=key, model_id=key)
    return f._put(state, replace(m, phase=phase, bytes_by_device=(("CPU", int(gib * GIB)),), **kw))


def test_a_memory_reading_yields_the_idle_model_once_and_never_the_busy_one():
    state = member(member(f.FleetState(), "idle", 1, reload_s=1.0), "busy", 1, reload_s=0.1)
    u = (f.Usage("idle", 0, 10.0, True), f.Usage("busy", 1, 20.0, True))
    state, effects = f.step(state, f.MemoryRead(reading(0.5), u), 100.0)
    yields = [e for e in effects if isinstance(e, f.YieldMemory)]
    assert [y.key for y in yields] == ["idle"] and f.Publish() in effects
    assert yields[0].note == "memory is tight: idle unloaded, 1.0 GiB, for other applications"
    assert state.member("idle").unload_when_idle and not state.member("busy").unload_when_idle
    # The next reading, before the unload has freed anything, does not choose it again, and
    # counts its bytes as coming back: nothing else is asked of the busy model.
    state, effects = f.step(state, f.MemoryRead(reading(0.5), u), 101.0)
    assert not [e for e in effects if isinstance(e, f.YieldMemory)]


def test_a_yielded_model_is_not_reloaded_by_itself_its_next_request_loads_it():
    state = member(f.FleetState(), "a", 1, reload_s=1.0)
    state, _ = f.step(state, f.MemoryRead(reading(0.5), (f.Usage("a", 0, 10.0, True),)), 100.0)
    state, _ = f.step(state, f.PhaseChanged("a", EngineState.STOPPED), 101.0)
    state, effects = f.step(state, f.Tick(()), 102.0)
    assert not [e for e in effects if isinstance(e, f.StartEngine | f.PrepareAdmission)]
    state, effects = f.step(state, f.EnsureAsked("t", "a", "a"), 103.0)
    assert f.PrepareAdmission("a") in effects


def test_a_memory_reading_with_room_changes_nothing():
    state = member(f.FleetState(), "a", 1)
    after, effects = f.step(state, f.MemoryRead(reading(3.0), (f.Usage("a", 0, 10.0, True),)), 100.0)
    assert after == state and effects == ()


def test_the_measured_load_time_and_the_beside_flag_reach_the_residents():
    state = member(f.FleetState(), "a", 1)
    state, _ = f.step(state, f.PhaseChanged("a", EngineState.READY, (("CPU", GIB),), reload_s=2.5, beside=True), 1.0)
    [r] = f.residents(state, (), exclude=None)
    assert r.reload_s == 2.5 and r.beside


# ---------------------------------------------------------------------------- what a person sees


def test_a_yield_is_a_notification_and_a_status_line():
    y = YieldView(at=50.0, model_id="gemma-3-12b", freed_bytes=int(5.1 * GIB),
                  note="memory is tight: gemma-3-12b unloaded, 5.1 GiB, for other applications")
    before = AppSnapshot(seq=1, state=EngineState.READY)
    after = replace(before, seq=2, yielded=(y,))
    notes, _ = decide_notifications(before, after, NoteHistory(), 60.0)
    assert [(n.title, n.level) for n in notes] == [("Memory is tight", "warning")]
    assert notes[0].body.startswith("Memory is tight: gemma-3-12b unloaded, 5.1 GiB, for other applications.")
    again, _ = decide_notifications(after, replace(after, seq=3), NoteHistory(), 61.0)
    assert again == ()
    obj = status_object(after, 60.0)
    assert obj["yielded"][0]["note"] == y.note and obj["yielded"][0]["freed_bytes"] == y.freed_bytes
    assert f"yielded:   {y.note}" in status_lines(obj)


def test_a_yield_whose_close_is_not_confirmed_yet_is_asked_again_at_each_tick_with_its_note():
    state = member(f.FleetState(), "a", 1, reload_s=1.0)
    u = (f.Usage("a", 0, 10.0, True),)
    state, effects = f.step(state, f.MemoryRead(reading(0.5), u), 100.0)
    [first] = [e for e in effects if isinstance(e, f.YieldMemory)]
    _, effects = f.step(state, f.Tick(u), 100.1)
    assert [e for e in effects if isinstance(e, f.YieldMemory)] == [first]
    assert not [e for e in effects if isinstance(e, f.StopIfIdle)]
    # A request that asks for it again ends the yield: it stays, and nothing is told.
    state, _ = f.step(state, f.LoadAsked("a", "a"), 100.2)
    assert state.member("a").yielding is None and not state.member("a").unload_when_idle


def test_memory_short_with_only_busy_models_left_is_said_once_and_stops_nothing():
    state = member(f.FleetState(), "busy", 2, reload_s=1.0)
    u = (f.Usage("busy", 1, 10.0, True),)
    state, effects = f.step(state, f.MemoryRead(reading(0.5), u), 100.0)
    assert effects == (f.MemoryShort("memory is tight, and only busy could make room; busy or pinned, they stay"),)
    state, effects = f.step(state, f.MemoryRead(reading(0.4), u), 102.0)
    assert effects == ()  # the same: not said again
    state, effects = f.step(state, f.MemoryRead(reading(3.0), u), 104.0)
    assert effects == () and state.short_kept == ()
