"""What to try after an out-of-memory failure (or a broken drafter): the recovery ladder.

At start: leave a catalog drafter out first (cheapest memory to give back), then halve the
context, then a cheaper KV cache type (f16 -> q8_0 -> q4_0), then more expert offload
(MoE) or fewer GPU layers (dense), going round the rungs again while tries are left; at
most MAX_ATTEMPTS tries, each with a reason sentence. Values the user pinned are never
changed: a rung that would need to is skipped. A host OOM kill while serving restarts
with more headroom (a larger OS reserve) instead.

Pure: it returns adjusted overrides (and planner policy); the supervisor re-plans with
core.planner.plan_launch and records each step with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from stoker.base.overrides import ModelOverrides
from stoker.diagnosis.classify import OOM_KINDS
from stoker.diagnosis.exit_report import Incident
from stoker.planning.plan import LaunchPlan
from stoker.planning.planner import GIB, PlanPolicy

MAX_ATTEMPTS = 4
CTX_FLOOR = 2048  # below this a chat model is not worth running; the ladder stops here
CTX_ALIGN = 256  # llama-server rounds -c up to a multiple of 256
CHEAPER_KV = {"f32": "q8_0", "f16": "q8_0", "bf16": "q8_0", "q8_0": "q4_0", "q5_1": "q4_0",
              "q5_0": "q4_0"}
HEADROOM_STEP = 0.10  # of RAM, added to the OS reserve per host-OOM kill while serving
HEADROOM_MAX_FRACTION = 0.5
START_RUNGS = ("smaller-context", "cheaper-kv", "offload")
GPU_OOM_KINDS = frozenset(OOM_KINDS - {"host-oom"})


@dataclass(frozen=True)
class RecoveryInputs:
    plan: LaunchPlan  # the plan of the launch that failed
    overrides: ModelOverrides  # the overrides that launch used (the user's + earlier steps)
    user_overrides: ModelOverrides = field(default_factory=ModelOverrides)  # pinned: never changed
    policy: PlanPolicy = field(default_factory=PlanPolicy)
    phase: str = "starting"  # when it failed: starting | ready
    n_layers: int | None = None  # the model's repeating layers, for GPU-layer steps
    is_moe: bool = False
    min_ctx: int = CTX_FLOOR


@dataclass(frozen=True)
class RecoveryStep:
    rung: str  # drop-drafter | smaller-context | cheaper-kv | more-expert-offload | fewer-gpu-layers | more-headroom
    overrides: ModelOverrides  # re-plan with these
    policy: PlanPolicy  # and this policy
    reason: str  # one sentence for the incident log and the plan's decisions
    attempt: int  # 1-based


def _n(x: int) -> str:
    return f"{x:,}"


def _drop_drafter(inp: RecoveryInputs, incident: Incident, attempt: int) -> RecoveryStep | None:
    d = inp.plan.drafter
    if d.status != "in" or inp.user_overrides.draft_model or inp.user_overrides.spec_type:
        return None
    name = (d.draft_path or d.spec_type or "the drafter").replace("\\", "/").rsplit("/", 1)[-1]
    ov = replace(inp.overrides, spec_type="none", draft_model=None)
    why = ("it broke the launch with this engine build" if incident.kind == "drafter-failure"
           else "the launch ran out of memory and the drafter's is the cheapest to give back")
    return RecoveryStep("drop-drafter", ov, inp.policy, f"Leaving the drafter {name} out: {why}.", attempt)


def _smaller_context(inp: RecoveryInputs, incident: Incident, attempt: int) -> RecoveryStep | None:
    if inp.user_overrides.ctx is not None:
        return None
    ctx = inp.plan.ctx
    new = max(inp.min_ctx, (ctx // 2) // CTX_ALIGN * CTX_ALIGN)
    if new >= ctx:
        return None
    return RecoveryStep("smaller-context", replace(inp.overrides, ctx=new), inp.policy,
                        f"Out of memory with a context of {_n(ctx)} tokens; trying {_n(new)}.", attempt)


def _cheaper_kv(inp: RecoveryInputs, incident: Incident, attempt: int) -> RecoveryStep | None:
    if inp.user_overrides.kv_type_k is not None or inp.user_overrides.kv_type_v is not None:
        return None
    k, v = inp.plan.kv_type_k, inp.plan.kv_type_v
    new_k = CHEAPER_KV.get(k)
    # A quantized V cache needs flash attention; with it pinned off only K gets cheaper.
    new_v = v if inp.overrides.flash_attn == "off" else CHEAPER_KV.get(v, v)
    if new_k is None and new_v == v:
        return None
    new_k = new_k or k
    ov = replace(inp.overrides, kv_type_k=new_k, kv_type_v=new_v)
    return RecoveryStep("cheaper-kv", ov, inp.policy,
                        f"Out of memory with a {k}/{v} KV cache; trying {new_k}/{new_v}, which takes "
                        "about half the memory per token.", attempt)


def _offload(inp: RecoveryInputs, incident: Incident, attempt: int) -> RecoveryStep | None:
    if incident.kind not in GPU_OOM_KINDS:
        return None
    u, plan = inp.user_overrides, inp.plan
    layers = inp.n_layers
    if inp.is_moe:
        if u.n_cpu_moe is not None or plan.cpu_moe or layers is None:
            return None
        now = plan.n_cpu_moe or 0
        new = min(layers, now + max(1, layers // 4))
        if new <= now:
            return None
        return RecoveryStep("more-expert-offload", replace(inp.overrides, n_cpu_moe=new), inp.policy,
                            f"Out of graphics memory; keeping the experts of {new} of {layers} layers "
                            f"in system memory (was {now}).", attempt)
    if u.gpu_layers is not None:
        return None
    on_gpu = plan.gpu_layers if isinstance(plan.gpu_layers, int) and plan.gpu_layers >= 0 else layers
    if on_gpu is None or layers is None:
        return None
    on_gpu = min(on_gpu, layers)
    new = max(0, on_gpu - max(1, layers // 4))
    if new >= on_gpu:
        return None
    return RecoveryStep("fewer-gpu-layers", replace(inp.overrides, gpu_layers=new), inp.policy,
                        f"Out of graphics memory with {on_gpu} of {layers} layers on the GPU; trying {new}.",
                        attempt)


_RUNG_FN = {"smaller-context": _smaller_context, "cheaper-kv": _cheaper_kv, "offload": _offload}
_RUNG_OF = {"smaller-context": "smaller-context", "cheaper-kv": "cheaper-kv",
            "more-expert-offload": "offload", "fewer-gpu-layers": "offload"}


def _more_headroom(inp: RecoveryInputs, attempt: int) -> RecoveryStep | None:
    p = inp.policy
    fraction = round(min(HEADROOM_MAX_FRACTION, p.os_reserve_fraction + HEADROOM_STEP), 4)
    if fraction <= p.os_reserve_fraction:
        return None
    policy = replace(p, os_reserve_fraction=fraction, os_reserve_min_bytes=p.os_reserve_min_bytes + GIB)
    return RecoveryStep("more-headroom", inp.overrides, policy,
                        f"The system ran out of memory while serving; the restart keeps "
                        f"{fraction:.0%} of RAM (at least {policy.os_reserve_min_bytes // GIB} GiB) free "
                        f"for the system instead of {p.os_reserve_fraction:.0%}.", attempt)


def next_recovery_step(inputs: RecoveryInputs, incident: Incident, attempts: tuple[RecoveryStep, ...] = ()
                       ) -> RecoveryStep | None:
    """The next thing to try, or None: not recoverable, nothing left to change, or out of tries."""
    if len(attempts) >= MAX_ATTEMPTS:
        return None
    attempt = len(attempts) + 1
    how = getattr(incident, "recoverable_by", None)
    if how == "drop-drafter":
        step = _drop_drafter(inputs, incident, attempt)
        if step is not None or incident.kind == "drafter-failure":
            return step
        how = "smaller-plan" if incident.kind in OOM_KINDS else None
    if how != "smaller-plan" or incident.kind not in OOM_KINDS:
        return None
    if incident.kind == "host-oom" and inputs.phase == "ready":
        return _more_headroom(inputs, attempt)
    last = next((_RUNG_OF[a.rung] for a in reversed(attempts) if a.rung in _RUNG_OF), None)
    start = (START_RUNGS.index(last) + 1) if last else 0
    # A step whose settings were already tried (the planner may not have applied them, so
    # the failed plan looks like its predecessor) would only fail again: skip to the next rung.
    tried = {(inputs.overrides, inputs.policy)} | {(a.overrides, a.policy) for a in attempts}
    for i in range(len(START_RUNGS)):
        rung = START_RUNGS[(start + i) % len(START_RUNGS)]
        step = _RUNG_FN[rung](inputs, incident, attempt)
        if step is not None and (step.overrides, step.policy) not in tried:
            return step
    return None
