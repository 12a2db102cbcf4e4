"""The OOM recovery ladder end to end: Supervisor + RealPreparer on the real engine.

The engine runs in a memory cgroup of its own (LaunchSpec.memory_limit_bytes) limited to
160 MiB, while the planner is told of a 64 GiB machine, so the first plan (the demo
model's full 8,192 context, an f16 KV cache of 180 MiB) really cannot fit: the kernel's
OOM killer ends the engine while it clears its KV cache. Measured here (b11434 CPU,
`-np 1`): peak cgroup usage 204 MiB at ctx 8,192 (OOM-killed under 160 MiB), 113 MiB at
ctx 4,096 (starts). The ladder's first rung halves the context and the model serves.
Skips where no memory cgroup can be made (not root, no writable cgroup tree).
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.diagnosis import memory_cgroup
from stoker.engines.process import EngineProcess
from stoker.fleet.commands import Shutdown, StartModel
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import Supervisor, SupervisorHooks, SupervisorOptions
from tests.shell.engine_helpers import chat, demo_spec, engine_key, engines_running

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(sys.platform != "linux" or not memory_cgroup.available(),
                                 reason="needs a writable memory cgroup (Linux, root or delegated v2)")]
MIB = 1024 * 1024
GIB = 1024 * MIB
LIMIT = 160 * MIB  # between ctx 4,096 (113 MiB peak) and ctx 8,192 (204 MiB peak)


def _install_own(engine_dir):
    from stoker.base.paths import stoker_paths

    root = stoker_paths().engines / "llama-server"
    root.mkdir(parents=True, exist_ok=True)
    (root / "b11434-cpu").symlink_to(engine_dir, target_is_directory=True)


def test_the_cgroup_limit_really_oom_kills_the_engine_and_leaves_no_group(engine_binary, demo_model,
                                                                          stoker_home, tmp_path):
    spec = dataclasses.replace(demo_spec(engine_binary, demo_model, ctx=8192), memory_limit_bytes=LIMIT)
    proc = EngineProcess.start(spec, log_dir=tmp_path, run_dir=tmp_path / "run")
    group = proc._cgroup.path
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.stop(grace_s=2)
    report = proc.exit_report()
    assert code == -9 and report.signal == 9 and report.oom_killed is True, proc.tail(5)
    assert not group.exists()


def _supervisor_on_a_claimed_big_machine(engine_dir, limit, launches):
    from stoker.engines.probe import probe_machine
    from stoker.fleet.launcher import RealPreparer
    from stoker.fleet.restart import RestartPolicy

    _install_own(engine_dir)
    real = probe_machine(str(engine_dir / "llama-server"))
    big = dataclasses.replace(real, ram_total_bytes=64 * GIB, ram_available_bytes=60 * GIB)
    prep = RealPreparer(cli_overrides=ModelOverrides(slots=1), machine=big, memory_limit_bytes=limit,
                        remember_last_model=False, startup_deadline_s=60)
    return Supervisor(prep, SupervisorOptions(policy=RestartPolicy(first_delay_s=0.2, factor=2.0, cap_s=2.0),
                                              stop_grace_s=5),
                      SupervisorHooks(on_launch=launches.append)).start()


def test_a_plan_that_cannot_fit_ends_ready_on_a_smaller_one(engine_dir, demo_model, stoker_home):
    launches = []
    sup = _supervisor_on_a_claimed_big_machine(engine_dir, LIMIT, launches)
    try:
        sup.submit(StartModel(str(demo_model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 60)
        assert ready is not None, ([(x.plan.ctx, x.plan.kv_type_k) for x in launches],
                                   [(i.kind, i.evidence, i.action) for i in sup.snapshot().incidents])
        plans = [(x.plan.ctx, x.plan.kv_type_k) for x in launches]
        assert plans == [(8192, "f16"), (4096, "f16")], plans
        assert all(x.spec.memory_limit_bytes == LIMIT for x in launches)
        assert ready.ctx == 4096
        # Each step is in the incidents: what killed it, and what the next attempt changes.
        oom = [i for i in ready.incidents if i.kind == "host-oom"]
        assert len(oom) == 1 == len(ready.incidents), ready.incidents
        assert "out-of-memory killer" in oom[0].evidence
        assert "retrying with context 4,096" in oom[0].action, oom[0].action
        assert any(b.kind == "outOfMemory" for b in ready.blockers), ready.blockers
        assert chat(ready.endpoint, key=engine_key(sup))
    finally:
        sup.submit(Shutdown())
        assert sup.join(30)
    assert engines_running(engine_dir / "llama-server") == []


def test_two_rungs_smaller_context_then_a_cheaper_kv_cache(engine_dir, demo_model, stoker_home):
    # 92 MiB: ctx 8,192 f16 (204 MiB peak) and ctx 4,096 f16 (113 MiB) are OOM-killed,
    # ctx 4,096 with a q8_0 KV cache (71 MiB) starts.
    launches = []
    sup = _supervisor_on_a_claimed_big_machine(engine_dir, 92 * MIB, launches)
    try:
        sup.submit(StartModel(str(demo_model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 60)
        plans = [(x.plan.ctx, x.plan.kv_type_k, x.plan.kv_type_v) for x in launches]
        assert ready is not None, (plans, [(i.kind, i.action) for i in sup.snapshot().incidents])
        assert plans == [(8192, "f16", "f16"), (4096, "f16", "f16"), (4096, "q8_0", "q8_0")], plans
        assert [i.kind for i in ready.incidents] == ["host-oom", "host-oom"], ready.incidents
        assert "retrying with context 4,096" in ready.incidents[0].action
        assert "retrying with a q8_0/q8_0 KV cache" in ready.incidents[1].action
        assert ready.ctx == 4096 and chat(ready.endpoint, key=engine_key(sup))
    finally:
        sup.submit(Shutdown())
        assert sup.join(30)
    assert engines_running(engine_dir / "llama-server") == []
