"""What the snapshot says of a launch: its plan line, its facts, the top-level fields.

The supervisor publishes AppSnapshot values (stoker/fleet/snapshot.py); this module turns
a PreparedLaunch and a lifecycle state into their fields: ctx, slots and KV types from the
plan (or from the argv of a launch made by hand), the one-line plan summary the tray and
the CLI show, and the per-engine view. It must not decide anything, hold state or touch a
process: values in, values out (it reads nothing but its arguments).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.engines.ds4_launch import Ds4Plan, ds4_summary_line
from stoker.engines.kind import describe
from stoker.engines.launch import PreparedLaunch
from stoker.engines.sd_server import ImagePlan
from stoker.fleet.lifecycle import LifecycleState
from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView
from stoker.planning.plan import LaunchPlan, plan_summary_line


def argv_value(argv: tuple[str, ...], *names: str) -> str | None:
    for i, arg in enumerate(argv[:-1]):
        if arg in names:
            return argv[i + 1]
    return None


def launch_facts(launch: PreparedLaunch) -> dict:
    """ctx, slots and KV types of a launch: from its plan when there is one, else from its argv."""
    plan = launch.plan
    if isinstance(plan, (Ds4Plan, ImagePlan)):
        return {"ctx": plan.ctx if isinstance(plan, Ds4Plan) else None,
                "slots": describe(launch.kind).concurrency, "kv_type_k": None, "kv_type_v": None,
                "drafter_status": None, "drafter_reason": None,
                "plan_decisions": tuple((d.what, d.why) for d in plan.decisions)}
    if plan is not None:
        facts = {"ctx": plan.ctx, "slots": plan.slots, "kv_type_k": plan.kv_type_k,
                 "kv_type_v": plan.kv_type_v}
        facts["drafter_status"] = plan.drafter.status
        facts["drafter_reason"] = plan.drafter.reason
        facts["plan_decisions"] = tuple((d.what, d.why) for d in plan.decisions)
        return facts
    argv = launch.spec.argv
    ctx = argv_value(argv, "-c", "--ctx-size")
    slots = argv_value(argv, "-np", "--parallel")
    return {
        "ctx": int(ctx) if ctx and ctx.isdigit() and int(ctx) > 0 else None,
        "slots": int(slots) if slots and slots.lstrip("-").isdigit() and int(slots) > 0 else None,
        # f16 is the engine's own default when the argv names no cache type.
        "kv_type_k": argv_value(argv, "-ctk", "--cache-type-k") or "f16",
        "kv_type_v": argv_value(argv, "-ctv", "--cache-type-v") or "f16",
        "drafter_status": "none" if argv_value(argv, "--spec-type") in (None, "none") else "in",
        "drafter_reason": None,
        "plan_decisions": (),
    }


def plan_summary(launch: PreparedLaunch) -> str:
    """"context 8,192, 1 slot, KV f16/f16, ~18 tok/s decode, cpu": the plan line the tray and
    the CLI show (core's line for a planned launch; the argv's facts for a hand-made one)."""
    if isinstance(launch.plan, Ds4Plan):
        return ds4_summary_line(launch.plan)
    if isinstance(launch.plan, ImagePlan):
        return launch.plan.summary_line(launch.backend)
    if launch.plan is not None:
        return plan_summary_line(launch.plan, launch.backend)
    facts = launch_facts(launch)
    ctx, slots = facts["ctx"], facts["slots"]
    parts = [f"context {ctx:,}" if ctx else "context from the model"]
    if slots:
        parts.append(f"{slots} slot{'s' if slots != 1 else ''}")
    parts.append(f"KV {facts['kv_type_k']}/{facts['kv_type_v']}")
    if launch.backend:
        parts.append(launch.backend)
    return ", ".join(parts)


def build_snapshot(seq: int, st: LifecycleState, launch: PreparedLaunch | None,
                   incidents: tuple[IncidentView, ...], proc: object = None, *,
                   blockers: tuple[BlockerView, ...] = (),
                   quarantined: tuple[tuple[str, str], ...] = (),
                   drafter_note: tuple[str, str] | None = None) -> AppSnapshot:
    running = st.phase in (EngineState.STARTING, EngineState.READY, EngineState.STOPPING)
    model_path = launch.model_path if launch is not None else st.model_path
    fields: dict = {}
    if launch is not None:
        fields.update(launch_facts(launch))
        fields["plan_summary"] = plan_summary(launch)
        if drafter_note is not None:  # what the engine really did beats what the plan asked
            fields["drafter_status"], fields["drafter_reason"] = drafter_note
        fields["argv"] = launch.spec.argv
        fields["engine_build"] = launch.build_id
        fields["backend"] = launch.backend
    return AppSnapshot(
        seq=seq,
        state=st.phase,
        model_path=model_path,
        model_name=Path(model_path).name.removesuffix(".gguf") if model_path else None,
        endpoint=launch.spec.endpoint if launch is not None and running else None,
        pid=st.pid if running else None,
        started_at=st.ready_at if st.phase is EngineState.READY else None,
        restarts=st.restarts,
        next_retry_at=st.retry_at if st.phase is EngineState.BACKOFF else None,
        last_error=st.last_error,
        incidents=incidents,
        blockers=blockers,
        quarantined=quarantined,
        **fields,
    )


@dataclass(frozen=True)
class EngineFacts:
    """What the supervisor knows of one model's engine beside its launch, for its view."""

    model_id: str
    model_path: str | None
    state: LifecycleState
    pinned: bool
    queued: str | None
    in_flight: int
    last_used_at: float | None
    progress: str | None
    context_asked: tuple[int, str] | None = None  # a request's num_ctx: (tokens, what was done)


def ctx_per_slot(launch: PreparedLaunch) -> int | None:
    """The context one request may use: the plan's per slot, else -c over --parallel."""
    if isinstance(launch.plan, LaunchPlan):
        return launch.plan.ctx_per_slot
    facts = launch_facts(launch)
    ctx, slots = facts.get("ctx"), facts.get("slots")
    return ctx // max(1, slots or 1) if ctx else None


def engine_view(facts: EngineFacts, launch: PreparedLaunch | None) -> EngineView:
    """One model's line in the snapshot (snapshot.engines)."""
    phase = facts.state.phase
    running = phase in (EngineState.STARTING, EngineState.READY, EngineState.STOPPING)
    ctx = launch_facts(launch).get("ctx") if launch is not None else None
    return EngineView(
        model_id=facts.model_id, model_path=facts.model_path or (launch.model_path if launch else None),
        state=phase, pid=facts.state.pid if running else None,
        endpoint=launch.spec.endpoint if launch is not None and running else None,
        plan_summary=plan_summary(launch) if launch is not None else None,
        bytes_by_device=bytes_by_device(launch), in_flight=facts.in_flight,
        last_used_at=facts.last_used_at if phase is EngineState.READY else None,
        ready_at=facts.state.ready_at, pinned=facts.pinned, restarts=facts.state.restarts,
        last_error=facts.state.last_error, queued=facts.queued,
        idle_timeout_s=launch.idle_timeout_s if launch is not None else None,
        engine_build=launch.build_id if launch else None,
        backend=launch.backend if launch else None, ctx=ctx,
        slots=launch_facts(launch).get("slots") if launch is not None else None,
        ctx_per_slot=ctx_per_slot(launch) if launch is not None else None,
        context_asked=facts.context_asked,
        engine_kind=launch.kind.value if launch else None,
        progress=facts.progress if phase in (EngineState.STARTING, EngineState.READY) else None,
        can_cancel=bool(launch is not None and phase is EngineState.READY and facts.in_flight
                        and not describe(launch.kind).cancellable_in_engine))


def bytes_by_device(launch: PreparedLaunch | None) -> tuple[tuple[str, int], ...]:
    """The plan's total bytes per device (nothing known for a launch without a plan)."""
    plan = launch.plan if launch is not None else None
    if plan is None:
        return ()
    return tuple((d.name, d.total_bytes) for d in plan.devices)


def merged_blockers(*groups: tuple[BlockerView, ...]) -> tuple[BlockerView, ...]:
    out: list[BlockerView] = []
    for group in groups:
        for b in group:
            if b not in out:
                out.append(b)
    return tuple(out)
