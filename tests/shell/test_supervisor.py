"""The supervisor thread on the real engine: start, chat, kill -9 → restart, stop, switch, refusal."""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest

from stoker.base.paths import stoker_paths
from stoker.engines.launch import PreparationRefused
from stoker.fleet.commands import Restart, Shutdown, StartModel, Stop
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import FunctionPreparer, Supervisor, SupervisorOptions, hand_made_preparer
from tests.shell.engine_helpers import chat, demo_spec, engines_running

pytestmark = pytest.mark.engine

FAST = RestartPolicy(first_delay_s=0.2, cap_s=1.0, budget_failures=3, budget_window_s=30)


@pytest.fixture
def supervised(engine_binary, demo_model, stoker_home):
    made = []

    def make(preparer=None, policy=FAST, **kwargs):
        preparer = preparer or hand_made_preparer(
            lambda model, port: demo_spec(engine_binary, demo_model, port=port),
            backend="cpu", build_id="b11434-cpu", startup_deadline_s=60)
        kwargs.setdefault("stop_grace_s", 3)
        sup = Supervisor(preparer, SupervisorOptions(policy=policy, **kwargs)).start()
        made.append(sup)
        return sup

    yield make
    for sup in made:
        sup.submit(Shutdown())
        assert sup.join(20), "the supervisor did not shut down"
    assert engines_running(engine_binary) == []


def test_start_chat_crash_restart_stop(supervised, engine_binary):
    sup = supervised()
    seen = []
    sup.subscribe(seen.append)
    sup.submit(StartModel())
    ready = sup.wait_for(lambda s: s.state is S.READY, 60)
    assert ready is not None, sup.snapshot()
    assert ready.endpoint.startswith("http://127.0.0.1:") and ready.pid
    assert (ready.backend, ready.ctx, ready.slots, ready.kv_type_k) == ("cpu", 1024, 1, "f16")
    assert ready.model_name == "SmolLM2-135M-Instruct.Q4_1"
    assert [p.pid for p in engines_running(engine_binary)] == [ready.pid]
    assert chat(ready.endpoint)

    os.kill(ready.pid, signal.SIGKILL)
    again = sup.wait_for(lambda s: s.state is S.READY and s.pid != ready.pid, 60)
    assert again is not None, sup.snapshot()
    assert again.restarts == 1 and len(again.incidents) == 1
    incident = again.incidents[0]
    assert "SIGKILL" in incident.summary or "signal 9" in incident.summary or incident.kind
    assert "restart" in incident.action
    assert chat(again.endpoint)
    states = [s.state for s in seen]
    assert S.BACKOFF in states and states.index(S.BACKOFF) > states.index(S.READY)
    assert [s.seq for s in seen] == sorted(set(s.seq for s in seen))  # strictly increasing
    # One incident ledger, in the data folder, with the model, the build and what Stoker did.
    logged = [json.loads(line) for line in
              (stoker_paths().data / "incidents.jsonl").read_text().splitlines()]
    assert "SIGKILL" in logged[0]["exit"] and logged[0]["model"] == ready.model_path
    assert "restart" in logged[0]["action"]
    assert not (stoker_paths().logs / "incidents.jsonl").exists()

    sup.submit(Stop())
    stopped = sup.wait_for(lambda s: s.state is S.STOPPED and s.seq > again.seq, 30)
    assert stopped is not None and stopped.pid is None and stopped.endpoint is None
    assert engines_running(engine_binary) == []


def test_user_restart_is_not_counted_as_a_crash(supervised):
    sup = supervised()
    sup.submit(StartModel())
    first = sup.wait_for(lambda s: s.state is S.READY, 60)
    sup.submit(Restart())
    second = sup.wait_for(lambda s: s.state is S.READY and s.pid != first.pid, 60)
    assert second is not None and second.restarts == 0 and second.incidents == ()


def test_bad_argument_fails_at_once_without_a_retry_loop(supervised, engine_binary, demo_model):
    def broken(model, port):
        spec = demo_spec(engine_binary, demo_model, port=port)
        return type(spec)(**{**spec.__dict__, "argv": spec.argv + ("--no-mmap",)})

    sup = supervised(hand_made_preparer(broken, startup_deadline_s=30))
    sup.submit(StartModel())
    failed = sup.wait_for(lambda s: s.state is S.FAILED, 30)
    assert failed is not None, sup.snapshot()
    assert failed.restarts == 0 and len(failed.incidents) == 1
    assert failed.incidents[0].kind == "bad-argument"
    assert "--no-mmap" in (failed.incidents[0].evidence or ""), failed.incidents


def test_crash_loop_ends_failed_after_the_budget(supervised, engine_binary, demo_model):
    """An engine killed from outside every time it starts: retried, then given up."""
    def spec_for(model, port):
        return demo_spec(engine_binary, demo_model, port=port)

    sup = supervised(hand_made_preparer(spec_for, startup_deadline_s=30))
    killer_seen = set()

    def kill_each_new_engine(snap):
        if snap.pid and snap.pid not in killer_seen:
            killer_seen.add(snap.pid)
            os.kill(snap.pid, signal.SIGKILL)

    sup.subscribe(kill_each_new_engine)
    sup.submit(StartModel())
    failed = sup.wait_for(lambda s: s.state is S.FAILED, 30)
    assert failed is not None, sup.snapshot()
    assert failed.restarts == 2 and len(failed.incidents) == 3
    assert "failed 3 times" in failed.last_error


def test_refused_preparation_fails_with_its_sentence(supervised):
    sup = supervised(FunctionPreparer(
        lambda model, attempt: PreparationRefused(model, "the model needs 9 GiB, 2 are free")))
    sup.submit(StartModel("/nowhere.gguf"))
    failed = sup.wait_for(lambda s: s.state is S.FAILED, 10)
    assert failed.last_error == "the model needs 9 GiB, 2 are free"
    assert failed.incidents[-1].summary == failed.last_error


def test_hung_engine_is_killed_and_restarted(supervised):
    """SIGSTOP freezes the engine: /health stops answering, the supervisor replaces it."""
    sup = supervised(health_interval_s=0.2, health_failures=3, stop_grace_s=1)
    sup.submit(StartModel())
    first = sup.wait_for(lambda s: s.state is S.READY, 60)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        again = sup.wait_for(lambda s: s.state is S.READY and s.pid != first.pid, 60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.pid, signal.SIGCONT)
    assert again is not None, sup.snapshot()
    assert again.restarts == 1 and "stopped answering" in again.incidents[-1].summary
    assert chat(again.endpoint)


def test_snapshot_says_when_the_engine_left_the_drafter_out():
    from stoker.engines.launch import PreparedLaunch
    from stoker.engines.launch_spec import LaunchSpec
    from stoker.fleet.lifecycle import LifecycleState
    from stoker.fleet.supervisor import build_snapshot, drafter_left_out_by_engine
    from stoker.planning.plan import DrafterChoice, LaunchPlan

    drafter = DrafterChoice("in", "draft-simple", "/m/x.draft.gguf", "found beside the model")
    plan = LaunchPlan(model_path="/m/x.gguf", ctx=1024, slots=1, kv_unified=False, kv_type_k="f16",
                      kv_type_v="f16", flash_attn="auto", gpu_layers=None, n_cpu_moe=None, cpu_moe=False,
                      swa_full=False, drafter=drafter, devices=(), decisions=())
    spec = LaunchSpec(binary="b", argv=("b",), env=(), drop_env_prefixes=(), secret_env=(),
                      host="127.0.0.1", port=1)
    launch = PreparedLaunch(spec=spec, model_path="/m/x.gguf", plan=plan, build_id="b11434-cpu",
                            backend="cpu")
    line = ("E srv    load_model: failed to initialize speculative decoding context: "
            "draft model vocab type must match target model to use speculation")
    note = drafter_left_out_by_engine(("I start", line), launch)
    assert note == ("left-out", "the engine started without x.draft.gguf: draft model vocab type must "
                                "match target model to use speculation")
    assert drafter_left_out_by_engine(("I start",), launch) is None
    snap = build_snapshot(1, LifecycleState(phase=S.READY), launch, (), None, drafter_note=note)
    assert (snap.drafter_status, snap.drafter_reason) == note
