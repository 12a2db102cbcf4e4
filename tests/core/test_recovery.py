"""The OOM recovery ladder: each rung once, in order, bounded, pins honoured, with reasons."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from stoker.base.overrides import ModelOverrides
from stoker.diagnosis.classify import classify_exit
from stoker.diagnosis.exit_report import ExitReport
from stoker.fleet.recovery import MAX_ATTEMPTS, RecoveryInputs, next_recovery_step
from stoker.planning.plan import DrafterChoice, LaunchPlan
from stoker.planning.planner import PlanPolicy

NO_DRAFT = DrafterChoice("none", None, None, "no drafter for this model")


def plan(ctx=32768, kv="f16", ngl="all", n_cpu_moe=None, cpu_moe=False, drafter=NO_DRAFT) -> LaunchPlan:
    return LaunchPlan(model_path="/m.gguf", ctx=ctx, slots=1, kv_unified=True, kv_type_k=kv, kv_type_v=kv,
                      flash_attn="auto", gpu_layers=ngl, n_cpu_moe=n_cpu_moe, cpu_moe=cpu_moe,
                      swa_full=False, drafter=drafter, devices=(), decisions=())


def incident(kind_line, backend="cuda", code=1, sig=None, phase="starting", **kw):
    return classify_exit(ExitReport(code, sig, False, phase, 1.0, (kind_line,), backend, **kw))


CUDA_OOM = incident("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9.00 MiB on device 0: "
                    "cudaMalloc failed: out of memory")
HOST_OOM = incident("ggml_aligned_malloc: insufficient memory (attempted to allocate 1440.00 MB)", backend="cpu")


def apply(p: LaunchPlan, step) -> LaunchPlan:
    """What the planner would do with the step's overrides, for these tests."""
    o = step.overrides
    return replace(p, ctx=o.ctx or p.ctx, kv_type_k=o.kv_type_k or p.kv_type_k,
                   kv_type_v=o.kv_type_v or p.kv_type_v,
                   gpu_layers=o.gpu_layers if o.gpu_layers is not None else p.gpu_layers,
                   n_cpu_moe=o.n_cpu_moe if o.n_cpu_moe is not None else p.n_cpu_moe,
                   drafter=NO_DRAFT if o.spec_type == "none" else p.drafter)


NO_OVERRIDES = ModelOverrides()


def run_ladder(p, inc, user=NO_OVERRIDES, **kw):
    steps, ov = (), user
    while True:
        step = next_recovery_step(RecoveryInputs(p, ov, user, **kw), inc, steps)
        if step is None:
            return steps
        steps += (step,)
        p, ov = apply(p, step), step.overrides


def test_gpu_oom_at_start_goes_context_then_kv_then_layers_then_stops():
    steps = run_ladder(plan(), CUDA_OOM, n_layers=32)
    assert [s.rung for s in steps] == ["smaller-context", "cheaper-kv", "fewer-gpu-layers", "smaller-context"]
    assert steps[0].overrides.ctx == 16384 and steps[3].overrides.ctx == 8192
    assert (steps[1].overrides.kv_type_k, steps[1].overrides.kv_type_v) == ("q8_0", "q8_0")
    assert steps[2].overrides.gpu_layers == 24
    assert [s.attempt for s in steps] == [1, 2, 3, 4] and len(steps) == MAX_ATTEMPTS
    assert all(s.reason.endswith(".") for s in steps)
    assert "32,768" in steps[0].reason and "16,384" in steps[0].reason


def test_moe_gets_more_expert_offload():
    steps = run_ladder(plan(ctx=4096, kv="q4_0"), CUDA_OOM, n_layers=48, is_moe=True, min_ctx=4096)
    assert [s.rung for s in steps] == ["more-expert-offload"] * 4
    assert [s.overrides.n_cpu_moe for s in steps] == [12, 24, 36, 48]


def test_host_oom_at_start_never_touches_gpu_layers():
    steps = run_ladder(plan(ngl=None), HOST_OOM, n_layers=30)
    assert [s.rung for s in steps] == ["smaller-context", "cheaper-kv", "smaller-context", "cheaper-kv"]
    assert steps[-1].overrides.kv_type_k == "q4_0"


def test_user_pins_are_never_changed():
    user = ModelOverrides(ctx=32768, kv_type_k="f16", kv_type_v="f16")
    steps = run_ladder(plan(), CUDA_OOM, user=user, n_layers=32)
    assert {s.rung for s in steps} == {"fewer-gpu-layers"}
    assert all(s.overrides.ctx == 32768 and s.overrides.kv_type_k == "f16" for s in steps)
    pinned_all = ModelOverrides(ctx=32768, kv_type_k="f16", kv_type_v="f16", gpu_layers=32)
    assert run_ladder(plan(), CUDA_OOM, user=pinned_all, n_layers=32) == ()


def test_nothing_left_to_shrink_gives_none():
    assert run_ladder(plan(ctx=2048, kv="q4_0", ngl=None), HOST_OOM) == ()


def test_host_oom_kill_while_serving_restarts_with_more_headroom():
    kill = classify_exit(ExitReport(None, "SIGKILL", False, "ready", 600.0, (), "cpu", oom_killed=True))
    step = next_recovery_step(RecoveryInputs(plan(), ModelOverrides(), phase="ready"), kill)
    assert step.rung == "more-headroom" and step.overrides == ModelOverrides()
    assert step.policy.os_reserve_fraction > PlanPolicy().os_reserve_fraction
    assert step.policy.os_reserve_min_bytes > PlanPolicy().os_reserve_min_bytes
    assert "while serving" in step.reason


def test_a_catalog_drafter_goes_first_and_a_forced_one_stays():
    draft = DrafterChoice("in", "draft-simple", "/models/tiny-draft.gguf", "the catalog pairs it")
    oom_with_drafter = incident("CUDA error: out of memory", code=None, sig="SIGABRT", has_drafter=True)
    step = next_recovery_step(RecoveryInputs(plan(drafter=draft), ModelOverrides(), n_layers=32), oom_with_drafter)
    assert step.rung == "drop-drafter" and step.overrides.spec_type == "none"
    assert "tiny-draft.gguf" in step.reason
    broken = incident("failed to load draft model, '/models/tiny-draft.gguf'", has_drafter=True)
    assert next_recovery_step(RecoveryInputs(plan(drafter=draft), ModelOverrides()), broken).rung == "drop-drafter"
    forced = replace(draft, status="forced")
    forced_broken = incident("failed to load draft model, '/d.gguf'", has_drafter=True, drafter_forced=True)
    assert next_recovery_step(RecoveryInputs(plan(drafter=forced), ModelOverrides()), forced_broken) is None


def test_non_memory_failures_have_no_recovery_step():
    port = incident("exiting due to HTTP server error")
    assert next_recovery_step(RecoveryInputs(plan(), ModelOverrides()), port) is None


@given(st.integers(min_value=2048, max_value=1 << 20), st.sampled_from(["f32", "f16", "q8_0", "q4_0"]),
       st.one_of(st.none(), st.integers(0, 200), st.just("all")), st.integers(1, 200))
def test_ladder_is_bounded_and_never_grows_anything(ctx, kv, ngl, layers):
    steps = run_ladder(plan(ctx=ctx, kv=kv, ngl=ngl), CUDA_OOM, n_layers=layers)
    assert len(steps) <= MAX_ATTEMPTS
    prev_ctx = ctx
    for s in steps:
        if s.overrides.ctx is not None:
            assert s.overrides.ctx <= prev_ctx and s.overrides.ctx >= 2048
            prev_ctx = s.overrides.ctx


def test_the_ladder_never_repeats_settings_already_tried():
    # The planner kept 8,192 although 4,096 was asked for (say its own floor): halving the
    # plan's context again would ask for 4,096 a second time, so the next rung is taken.
    first = next_recovery_step(RecoveryInputs(plan(ctx=8192), ModelOverrides()), HOST_OOM)
    assert first.rung == "smaller-context" and first.overrides.ctx == 4096
    again = next_recovery_step(RecoveryInputs(plan(ctx=8192), first.overrides), HOST_OOM, (first,))
    assert again.rung == "cheaper-kv" and again.overrides.ctx == 4096
    assert (again.overrides, again.policy) != (first.overrides, first.policy)


def test_the_context_never_goes_below_the_planners_floor():
    steps = run_ladder(plan(ctx=8192), HOST_OOM, min_ctx=PlanPolicy().min_ctx)
    assert [s.overrides.ctx for s in steps if s.rung == "smaller-context"] == [4096]
    assert all((s.overrides.ctx or 8192) >= PlanPolicy().min_ctx for s in steps)
