"""Strikes, quarantine by binary identity, the fallback line, broken drafters, JSON round trip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.diagnosis.classify import classify_exit
from stoker.diagnosis.exit_report import ExitReport
from stoker.engines.builds import EngineBuild
from stoker.fleet.quarantine import (
    Ledger,
    choose_build,
    forget_broken_drafter,
    is_drafter_broken,
    is_quarantined,
    ledger_from_json,
    ledger_to_json,
    lift,
    mark_drafter_broken,
    record_strike,
)


def crash(lines=(), sig="SIGSEGV", code=None):
    return classify_exit(ExitReport(code, sig, False, "starting", 1.0, tuple(lines), "cuda"))


SEGV = crash()
PORT = crash(["E srv  llama_server: exiting due to HTTP server error"], sig=None, code=1)
BAD_MODEL = crash(["E llama_model_load: error loading model: missing tensor 'x'"], sig=None, code=1)
BAD_ARG = crash(["error: invalid argument: --no-mmap"], sig=None, code=1)


def strike_n(ledger, n, t0=0.0, step=10.0, identity="id1", incident=SEGV, build="b1-cuda"):
    flags = []
    for i in range(n):
        ledger, q = record_strike(ledger, build, identity, t0 + i * step, incident)
        flags.append(q)
    return ledger, flags


def test_three_startup_crashes_in_the_window_quarantine_the_build():
    ledger, flags = strike_n(Ledger(), 3)
    assert flags == [False, False, True]
    assert is_quarantined(ledger, "b1-cuda", "id1")
    assert "3 times" in ledger.quarantined[0].why


def test_strikes_outside_the_window_do_not_add_up():
    ledger, flags = strike_n(Ledger(), 3, step=400.0)
    assert flags == [False, False, False]
    assert not is_quarantined(ledger, "b1-cuda", "id1")


def test_port_model_and_argument_failures_are_never_strikes():
    for inc in (PORT, BAD_MODEL, BAD_ARG):
        ledger, flags = strike_n(Ledger(), 5, incident=inc)
        assert flags == [False] * 5 and ledger == Ledger()


def test_a_replaced_binary_starts_clean_and_is_not_quarantined():
    ledger, _ = strike_n(Ledger(), 3, identity="old")
    assert is_quarantined(ledger, "b1-cuda", "old")
    assert not is_quarantined(ledger, "b1-cuda", "new")
    ledger, _ = strike_n(Ledger(), 2, identity="old")
    ledger, q = record_strike(ledger, "b1-cuda", "new", 30.0, SEGV)
    assert not q and len([s for s in ledger.strikes if s.identity == "new"]) == 1
    assert all(s.identity == "new" for s in ledger.strikes)


def test_lift_lets_the_user_try_again():
    ledger, _ = strike_n(Ledger(), 3)
    ledger = lift(ledger, "b1-cuda")
    assert not is_quarantined(ledger, "b1-cuda", "id1")
    assert ledger.strikes == ()


def B(id_, backend):
    return EngineBuild(id=id_, binary=f"/e/{id_}/llama-server", source="own", backend=backend)


def test_choose_build_follows_cuda_vulkan_cpu_past_quarantine():
    builds = (B("cpu", "cpu"), B("vk", "vulkan"), B("cu", "cuda"))
    ids = {"cpu": "i0", "vk": "i1", "cu": "i2"}
    chosen, passed = choose_build(builds, Ledger(), ids)
    assert chosen.id == "cu" and passed == ()
    ledger, _ = strike_n(Ledger(), 3, build="cu", identity="i2")
    chosen, passed = choose_build(builds, ledger, ids)
    assert chosen.id == "vk"
    assert passed[0][0].id == "cu" and passed[0][1].startswith("quarantined:")
    ledger, _ = strike_n(ledger, 3, build="vk", identity="i1")
    chosen, passed = choose_build(builds, ledger, ids)
    assert chosen.id == "cpu" and [b.id for b, _ in passed] == ["cu", "vk"]


def test_choose_build_rocm_then_vulkan_and_blockers_pass_over():
    builds = (B("ro", "rocm"), B("vk", "vulkan"), B("cpu", "cpu"))
    chosen, passed = choose_build(builds, Ledger(), {}, blocked={"ro": "no kernels for gfx1031"})
    assert chosen.id == "vk" and passed == ((builds[0], "no kernels for gfx1031"),)


def test_all_unusable_gives_none():
    builds = (B("cpu", "cpu"),)
    ledger, _ = strike_n(Ledger(), 3, build="cpu", identity=None)
    why = "quarantined: " + ledger.quarantined[0].why
    assert choose_build(builds, ledger, {"cpu": None}) == (None, ((builds[0], why),))


def test_broken_drafter_pairs():
    ledger = mark_drafter_broken(Ledger(), "b1-cuda", "/d.gguf", 5.0, identity="i1")
    assert is_drafter_broken(ledger, "b1-cuda", "/d.gguf", "i1")
    assert not is_drafter_broken(ledger, "b1-cpu", "/d.gguf", "i1")
    assert not is_drafter_broken(ledger, "b1-cuda", "/other.gguf", "i1")
    assert not is_drafter_broken(ledger, "b1-cuda", "/d.gguf", "i2")  # binary replaced
    assert not is_drafter_broken(forget_broken_drafter(ledger, "b1-cuda", "/d.gguf"), "b1-cuda", "/d.gguf")
    # A broken drafter's crash is not a strike against the build.
    drafter_crash = classify_exit(ExitReport(None, "SIGSEGV", False, "starting", 1.0, (), "cuda",
                                             has_drafter=True))
    assert record_strike(Ledger(), "b1-cuda", "i1", 0.0, drafter_crash) == (Ledger(), False)


def test_json_round_trip_and_malformed_entries():
    ledger, _ = strike_n(Ledger(), 2)
    ledger = mark_drafter_broken(ledger, "b1-cuda", "/d.gguf", 1.0)
    ledger, _ = strike_n(ledger, 3, build="b2-vk", identity="x")
    back, problems = ledger_from_json(ledger_to_json(ledger))
    assert back == ledger and problems == ()
    bad = ledger_to_json(ledger)
    bad["strikes"].append({"nope": 1})
    back, problems = ledger_from_json(bad)
    assert back == ledger and len(problems) == 1
    assert ledger_from_json([1, 2])[0] == Ledger()


@given(st.lists(st.floats(min_value=0, max_value=10_000), min_size=1, max_size=12))
def test_never_quarantined_with_fewer_than_three_strikes_in_any_window(times):
    ledger, ever = Ledger(), False
    for t in sorted(times):
        ledger, q = record_strike(ledger, "b", "i", t, SEGV)
        if q:
            recent = [x for x in sorted(times) if t - 600 <= x <= t]
            assert len(recent) >= 3
            ever = True
    assert ever == is_quarantined(ledger, "b", "i")
