"""What a request may ask of its model's residency (Ollama's keep_alive and num_ctx, `ttl` on
the OpenAI routes), as supervisor commands on the real engine: KeepAlive replaces the idle
timer of a resident model and the idle unload follows it; WidenContext reloads with the
wider plan when the preparer gives one, keeps the plan (clamped) when it does not, and says
so for a model that is not running or whose plan already gives the context."""

from __future__ import annotations

import pytest

from stoker.engines.launch import PreparedLaunch
from stoker.fleet.commands import KeepAlive, Restart, Shutdown, StartModel, WidenContext
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import FunctionPreparer, Supervisor, SupervisorOptions
from tests.shell.engine_helpers import demo_spec, engines_running
from tests.shell.engine_helpers import wait_until as wait
from tests.shell.test_residency_supervisor import plan_of

pytestmark = pytest.mark.engine
FITS_UP_TO = 2048  # the stand-in planner's limit per slot


@pytest.fixture
def sup(engine_binary, demo_model, stoker_home):
    asked: list = []

    def prepare(model_path, attempt):
        asked.append(attempt.ctx_per_slot_at_least)
        want = attempt.ctx_per_slot_at_least
        ctx = want if want and want <= FITS_UP_TO else 1024
        plan = plan_of(100, model_path)
        plan = type(plan)(**{**plan.__dict__, "ctx": ctx})
        return PreparedLaunch(spec=demo_spec(engine_binary, demo_model, port=attempt.port), model_path=model_path,
                              plan=plan, backend="cpu", build_id="b11434-cpu", startup_deadline_s=60,
                              idle_timeout_s=600.0)

    s = Supervisor(FunctionPreparer(prepare), SupervisorOptions(stop_grace_s=3)).start()
    s.asked = asked
    yield s
    s.submit(Shutdown())
    assert s.join(30)
    assert engines_running(engine_binary) == []


def view(s, key="m"):
    return next((e for e in s.snapshot().engines if e.model_path == key), None)


def test_keep_alive_replaces_the_idle_timer_and_the_unload_follows_it(sup):
    sup.submit(KeepAlive("m", 1.0))  # not resident: nothing to change, nothing loaded
    sup.submit(StartModel("m"))
    assert wait(lambda: (v := view(sup)) is not None and v.state is S.READY)
    assert view(sup).idle_timeout_s == 600.0 and view(sup).ctx_per_slot == 1024 and view(sup).slots == 1
    sup.submit(KeepAlive("m", None))
    assert wait(lambda: view(sup).idle_timeout_s is None)
    sup.submit(KeepAlive("m", 1.0))
    assert wait(lambda: view(sup) is not None and view(sup).idle_timeout_s == 1.0)
    assert wait(lambda: view(sup) is None, timeout=15)  # unloaded for idleness after 1 s


def test_widen_context_reloads_clamps_or_says_why_not(sup):
    sup.submit(WidenContext("m", 4096))  # never started: no engine, nothing said or done
    sup.submit(StartModel("m"))
    assert wait(lambda: (v := view(sup)) is not None and v.state is S.READY)
    pid = view(sup).pid
    sup.submit(WidenContext("m", 512))
    assert wait(lambda: view(sup).context_asked == (512, "the plan already gives 1,024 tokens per slot"))
    sup.submit(WidenContext("m", 2048))
    assert wait(lambda: view(sup).context_asked is not None and view(sup).context_asked[0] == 2048)
    assert view(sup).context_asked[1] == "re-planned for 2,048 tokens per slot and reloaded"
    assert wait(lambda: view(sup).state is S.READY and view(sup).pid != pid and view(sup).ctx_per_slot == 2048)
    assert 2048 in sup.asked  # the preparer was asked for it
    pid = view(sup).pid
    sup.submit(WidenContext("m", 8192))
    assert wait(lambda: view(sup).context_asked is not None and view(sup).context_asked[0] == 8192)
    assert view(sup).context_asked[1].startswith("clamped to 2,048 tokens per slot: a plan with 8,192 does not fit")
    assert view(sup).pid == pid and view(sup).state is S.READY and view(sup).ctx_per_slot == 2048
    # A restart plans again with the context given before, not the one refused.
    sup.submit(Restart(model_path="m"))
    assert wait(lambda: view(sup).state is S.READY and view(sup).pid != pid)
    assert view(sup).ctx_per_slot == 2048
