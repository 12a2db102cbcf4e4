"""The supervisor's residency edges on the real engine: a busy model is never evicted, a
queued or starting on-demand load is cancelled when its last waiter leaves, a pinned one is
not. Plans carry declared bytes so admission can be steered; the engines are real.

A "nothing happened" assertion never follows a sleep: the test moves the supervisor's clock
past the admission retry (so a decision it retries on a timer is due at once), then waits for
an acknowledgement that the supervisor has finished a whole pass after that (`settled`)."""

from __future__ import annotations

import sys
import time

import pytest

from stoker.engines.launch import PreparedLaunch
from stoker.fleet.commands import CancelEnsure, EnsureModel, PinModel, Shutdown
from stoker.fleet.fleet_state import ADMIT_RETRY_S
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import FunctionPreparer, Supervisor, SupervisorHooks, SupervisorOptions
from stoker.planning.plan import DeviceMemory, DrafterChoice, LaunchPlan
from tests.shell.engine_helpers import demo_spec, engines_running
from tests.shell.engine_helpers import wait_until as wait

pytestmark = pytest.mark.engine
MIB = 1024 ** 2
BUDGET = 1000 * MIB


def plan_of(mib: int, model: str) -> LaunchPlan:
    return LaunchPlan(model_path=model, ctx=1024, slots=1, kv_unified=False, kv_type_k="f16",
                      kv_type_v="f16", flash_attn="auto", gpu_layers=None, n_cpu_moe=None, cpu_moe=False,
                      swa_full=False, drafter=DrafterChoice("none", None, None, "none"),
                      devices=(DeviceMemory("CPU", BUDGET, mib * MIB, 0, 0),), decisions=())


class SteppedClock:
    """The wall clock with a hand the test can move forward: the supervisor and its routes
    read it, so a decision retried on a timer becomes due without the test waiting for it."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def make_retries_due(self) -> None:
        self.offset += ADMIT_RETRY_S + 0.1


@pytest.fixture
def clock():
    return SteppedClock()


@pytest.fixture
def sup(engine_binary, demo_model, stoker_home, clock):
    sizes = {"a": 600, "b": 600, "hang": 100}

    def prepare(model_path, attempt):
        if model_path == "hang":  # a start that never answers /health
            spec = demo_spec(engine_binary, demo_model, port=attempt.port)
            spec = type(spec)(**{**spec.__dict__, "binary": sys.executable,
                                 "argv": (sys.executable, "-c", "import time; time.sleep(60)")})  # a silent peer
        else:
            spec = demo_spec(engine_binary, demo_model, port=attempt.port)
        return PreparedLaunch(spec=spec, model_path=model_path, plan=plan_of(sizes[model_path], model_path),
                              backend="cpu", build_id="b11434-cpu", startup_deadline_s=60)

    s = Supervisor(FunctionPreparer(prepare), SupervisorOptions(stop_grace_s=3, clock=clock)).start()
    yield s
    s.submit(Shutdown())
    assert s.join(30)
    assert engines_running(engine_binary) == []


def ensure(s, model, ticket):
    got = []
    s.submit(EnsureModel(model_path=model, ticket=ticket, answer=got.append))
    return got


def settled(s, ticket) -> None:
    """Wait until the supervisor has finished a whole pass after every command sent so far.

    An EnsureModel for the READY model "a" is answered at the end of the pass that read it,
    after that pass's admission, idle unloads and cancels: a snapshot taken once it is answered
    shows whatever they decided. (The queue is FIFO, so every earlier command was acted on.)"""
    got = ensure(s, "a", ticket)
    assert wait(lambda: got, 30), "the supervisor never acknowledged the pass"
    assert got[0].route is not None


def states(s):
    return {e.model_path: (e.state, e.queued) for e in s.snapshot().engines}


def test_a_busy_model_is_never_evicted_the_load_waits_then_evicts_it(sup, clock):
    got_a = ensure(sup, "a", 1)
    assert wait(lambda: got_a and got_a[0].route)
    lease = sup.routes.acquire("a")  # a request in flight on a
    got_b = ensure(sup, "b", 2)
    assert wait(lambda: states(sup).get("b", (None, None))[1])  # queued, with its reason
    assert "waits for a" in states(sup)["b"][1]
    clock.make_retries_due()
    settled(sup, "ack")  # b's admission was decided again, with a still busy
    assert states(sup)["a"][0] is S.READY and not got_b  # a keeps serving; b still waits
    sup.routes.release(lease)
    assert wait(lambda: got_b and got_b[0].route)
    assert wait(lambda: "a" not in states(sup))  # a was unloaded to make room


def test_a_queued_load_is_cancelled_when_its_waiter_leaves(sup, clock):
    got_a = ensure(sup, "a", 1)
    assert wait(lambda: got_a and got_a[0].route)
    lease = sup.routes.acquire("a")
    ensure(sup, "b", 2)
    assert wait(lambda: states(sup).get("b", (None, None))[1])
    sup.submit(CancelEnsure(2))
    assert wait(lambda: "b" not in states(sup))
    sup.routes.release(lease)
    clock.make_retries_due()
    settled(sup, "ack")  # the pass after the release decided admission (nothing waits) and idleness
    assert list(states(sup)) == ["a"]  # b never loaded, a was not evicted for nobody


def test_a_starting_load_is_cancelled_unless_pinned(sup):
    got_a = ensure(sup, "a", "a")  # resident beside it (600 + 100 MiB fit): it acknowledges passes
    assert wait(lambda: got_a and got_a[0].route)
    ensure(sup, "hang", 1)
    assert wait(lambda: states(sup).get("hang", (None,))[0] is S.STARTING)
    sup.submit(CancelEnsure(1))
    assert wait(lambda: "hang" not in states(sup) or states(sup)["hang"][0] is S.STOPPED)
    ensure(sup, "hang", 2)
    assert wait(lambda: states(sup).get("hang", (None,))[0] is S.STARTING)
    sup.submit(PinModel("hang", True))
    sup.submit(CancelEnsure(2))
    settled(sup, "ack")  # the cancel was acted on (a stop would show STOPPING by now)
    assert states(sup)["hang"][0] is S.STARTING  # pinned: its load goes on


def test_new_overrides_apply_at_once_the_idle_timeout_and_the_hook(engine_binary, demo_model, stoker_home):
    """A new idle time needs no restart: the running model takes it the moment it is saved
    (the preparer's idle_timeout_for), and the instance hears of it to rescan the aliases."""
    from stoker.base.overrides import ModelOverrides
    from stoker.fleet.commands import ApplyOverrides, LoadModel

    def prepare(model_path, attempt):
        return PreparedLaunch(spec=demo_spec(engine_binary, demo_model, port=attempt.port),
                              model_path=model_path, plan=plan_of(100, model_path), backend="cpu",
                              build_id="b11434-cpu", startup_deadline_s=60)

    def idle_for(overrides):
        return overrides.idle_minutes * 60 / 100  # 0.6 s per "minute"

    told: list[str] = []
    s = Supervisor(FunctionPreparer(prepare, idle_timeout_for=idle_for), SupervisorOptions(stop_grace_s=3),
                   SupervisorHooks(on_overrides=told.append)).start()
    try:
        s.submit(LoadModel("a"))
        assert wait(lambda: states(s).get("a", (None,))[0] is S.READY)
        assert s.snapshot().engines[0].idle_timeout_s is None  # the launch said never
        s.submit(ApplyOverrides("a", ModelOverrides(idle_minutes=2), restart=False))
        assert wait(lambda: s.snapshot().engines and s.snapshot().engines[0].idle_timeout_s == 1.2, 5)
        assert told == ["a"]
        started = time.monotonic()
        assert wait(lambda: "a" not in states(s), 10), "the new idle time never unloaded the model"
        assert time.monotonic() - started < 1.2 + 2.0
    finally:
        s.submit(Shutdown())
        assert s.join(30)
    assert engines_running(engine_binary) == []
