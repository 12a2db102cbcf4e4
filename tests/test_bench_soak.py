"""`stoker bench soak`'s own decisions: the fault schedule and what a failed request is put down to."""

from __future__ import annotations

from stoker.bench.soak import Fault, FaultAt, Outcome, Request, classify, schedule


def test_the_schedule_alternates_models_leaves_the_last_20_s_quiet_and_skips_a_kind_set_to_0():
    faults = schedule(5, unload_every=60, engine_kill_every=240, gateway_kill_every=0)
    assert [(f.at, f.fault, f.model) for f in faults] == [
        (30, Fault.UNLOAD, 0), (90, Fault.UNLOAD, 1), (120, Fault.ENGINE_KILL, 0), (150, Fault.UNLOAD, 0),
        (210, Fault.UNLOAD, 1), (270, Fault.UNLOAD, 0)]
    assert all(f.at < 5 * 60 - 20 for f in faults)


def _failed(model: int, started: float, ended: float) -> Request:
    return Request(client=0, model=model, streamed=True, started=started, ended=ended, ok=False, detail="502")


def test_a_failure_is_put_down_to_a_kill_of_its_own_engine_or_of_the_gateway_and_never_to_an_unload():
    kill0 = (FaultAt(100.0, Fault.ENGINE_KILL, 0),)
    assert classify(_failed(0, 95, 101), kill0, 10) is Outcome.BESIDE_KILL  # killed under it
    assert classify(_failed(0, 105, 106), kill0, 10) is Outcome.BESIDE_KILL  # within the window after
    assert classify(_failed(0, 111, 112), kill0, 10) is Outcome.UNEXPLAINED  # long after
    assert classify(_failed(0, 80, 90), kill0, 10) is Outcome.UNEXPLAINED  # before it
    assert classify(_failed(1, 99, 101), kill0, 10) is Outcome.UNEXPLAINED  # the other model's engine
    assert classify(_failed(1, 99, 101), (FaultAt(100.0, Fault.GATEWAY_KILL, None),), 10) is Outcome.BESIDE_KILL
    assert classify(_failed(0, 99, 101), (FaultAt(100.0, Fault.UNLOAD, 0),), 10) is Outcome.UNEXPLAINED
    ok = Request(client=0, model=0, streamed=False, started=99, ended=101, ok=True, detail="")
    assert classify(ok, kill0, 10) is Outcome.ANSWERED
