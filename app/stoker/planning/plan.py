"""The values a launch plan is made of: decisions with reasons, memory per device.

`stoker/planning/planner.py` makes them, `stoker/engines/argv.py` turns a plan into an argv, the CLI and the
UI render them. Values only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stoker.planning.speed import DecodeSpeed, speed_text


@dataclass(frozen=True)
class Decision:
    """One choice the planner made, said so a person can read it."""

    what: str  # e.g. "context 32768"
    why: str  # e.g. "65,536 does not fit beside 2 slots; 32,768 is the largest that does"


@dataclass(frozen=True)
class DeviceMemory:
    name: str  # "CPU" for host RAM, else the engine's device name ("CUDA0")
    budget_bytes: int  # what the plan may use on it (free minus reserve/margin)
    weights_bytes: int
    kv_bytes: int  # KV cache + recurrent state
    compute_bytes: int  # compute + output buffers
    other_bytes: int = 0  # drafter, mmproj, ds4 expert cache, prompt cache …

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes + self.other_bytes


@dataclass(frozen=True)
class AnalyticMemory:
    """The analytic estimate for one engine device (before unified memory folds CPU into the
    GPU pool), kept on the plan so the launch that runs it can record what the engine took
    beside what the estimate said, even when the plan's own figures were calibrated."""

    name: str
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int


@dataclass(frozen=True)
class DrafterChoice:
    status: str  # none | in | left-out | forced | broken
    spec_type: str | None
    draft_path: str | None
    reason: str  # always a sentence, also for "none"
    draft_max: int | None = None
    resident_bytes: int | None = None
    sampling: str | None = None  # --spec-draft-sampling: greedy | probabilistic; None: engine default


@dataclass(frozen=True)
class LaunchPlan:
    model_path: str
    ctx: int  # total context (-c)
    slots: int  # -np
    kv_unified: bool
    kv_type_k: str
    kv_type_v: str
    flash_attn: str  # on | off | auto
    gpu_layers: int | str | None  # None: leave the engine's default (CPU builds)
    n_cpu_moe: int | None
    cpu_moe: bool
    swa_full: bool
    drafter: DrafterChoice
    devices: tuple[DeviceMemory, ...]
    decisions: tuple[Decision, ...]
    estimate_source: str = "estimated"  # estimated | measured
    threads: int | None = None
    batch: int | None = None
    ubatch: int | None = None
    mmproj_path: str | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    ds4: object | None = None  # core.ds4 residency plan, when the engine is ds4
    # --cache-ram in MiB: host RAM the server may keep for its prompt cache (engine default
    # 8192). None leaves the engine's default; the planner sizes it from what is left over.
    cache_ram_mib: int | None = None
    # Per engine device, the analytic weights/KV/compute for these settings (stoker/planning/measured.py
    # calibrates against them); empty when the plan was not made by the planner.
    analytic_devices: tuple[AnalyticMemory, ...] = ()
    # RPC workers (stoker/engines/rpc.py): the `--rpc` endpoints, in the engine's device order (RPC0,
    # RPC1 …), and the --tensor-split proportions over every offload device in that order
    # (the RPC devices, then this machine's GPUs). Empty: no worker is used.
    rpc_endpoints: tuple[str, ...] = ()
    tensor_split: tuple[int, ...] = ()
    # Predicted batch-1 decode speed at a short context (stoker/planning/speed.py); None when the plan
    # was not made by the planner.
    decode_speed: DecodeSpeed | None = None

    @property
    def ctx_per_slot(self) -> int:
        return self.ctx if self.kv_unified else self.ctx // max(1, self.slots)


@dataclass(frozen=True)
class PlanRefusal:
    """Why no launch fits, what it would need, and what to try instead."""

    model_path: str
    reason: str  # one sentence: "needs 9.1 GiB, 6.2 GiB is free"
    needed_bytes: int | None
    available_bytes: int | None
    suggestions: tuple[str, ...]
    decisions: tuple[Decision, ...] = ()


def plan_summary_line(plan: LaunchPlan, backend: str | None = None) -> str:
    """The tray's one line for a plan: `context 16,384, 1 slot, KV q8_0/q8_0, all layers on
    the GPU, ~45 tok/s decode[, cuda]`, so two plans can be compared at a glance."""
    parts = [f"context {plan.ctx:,}", f"{plan.slots} slot{'s' if plan.slots != 1 else ''}",
             f"KV {plan.kv_type_k}/{plan.kv_type_v}"]
    if plan.gpu_layers == "all":
        parts.append("all layers on the GPU" + (f", experts of {plan.n_cpu_moe} blocks in RAM"
                                                 if plan.n_cpu_moe else ", experts in RAM" if plan.cpu_moe else ""))
    elif isinstance(plan.gpu_layers, int) and plan.gpu_layers > 0:
        parts.append(f"{plan.gpu_layers} layers on the GPU")
    if plan.decode_speed is not None:
        parts.append(speed_text(plan.decode_speed))
    if backend:
        parts.append(backend)
    return ", ".join(parts)
