"""Which of a repository's quantisations to download: the planner's verdict on each, and the pick.

A Hugging Face GGUF repository holds one model in many quantisations (and split sets, and
a vision projector). Before a multi-gigabyte download this module turns the planner's
answer for each file into a verdict a person reads at a glance ("runs: 32k context, all
layers on the GPU" / "runs slowly: 12 of 48 layers fit" / "does not fit: …") and picks the
best quality that runs with the default context. Pure: the plans are made by the caller
(core.planner on the remote header, read by stoker/library/hf_hub.py), nothing here plans or reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from stoker.library.quant_options import QuantOption
from stoker.library.store_layouts import quant_rank
from stoker.planning.machine import Machine
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.planner import PlanPolicy, gib, machine_budgets


class Fit(StrEnum):
    RUNS = "runs"  # the default context (or the model's trained one), at full speed for this machine
    RUNS_SHORT = "runs with less context"  # fits, but with a smaller window than the default
    RUNS_SLOWLY = "runs slowly"  # some layers stay in RAM on a machine with a GPU
    DOES_NOT_FIT = "does not fit"
    UNKNOWN = "unknown"  # neither the header nor the size could be judged


# The order the pick prefers, after quality: a smaller window beats layers in RAM.
_FIT_ORDER = (Fit.RUNS, Fit.RUNS_SHORT, Fit.RUNS_SLOWLY)


@dataclass(frozen=True)
class FitVerdict:
    fit: Fit
    text: str  # the sentence shown beside the option
    ctx: int | None = None  # the context it would run with
    source: str = "header"  # header: planned from the file's own header; size: from its size and quant


def wanted_ctx(n_ctx_train: int | None, policy: PlanPolicy) -> int:
    return min(policy.default_ctx, n_ctx_train) if n_ctx_train else policy.default_ctx


def _k(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


_DEFAULT_POLICY = PlanPolicy()  # frozen: one shared default is safe


def verdict_of_plan(result: LaunchPlan | PlanRefusal, n_layers: int | None, n_ctx_train: int | None,
                    machine: Machine, policy: PlanPolicy = _DEFAULT_POLICY) -> FitVerdict:
    """The planner's answer for one option, as a verdict a person reads beside it."""
    if isinstance(result, PlanRefusal):
        return FitVerdict(Fit.DOES_NOT_FIT, f"does not fit: {result.reason}")
    per_slot = result.ctx_per_slot
    short = per_slot < wanted_ctx(n_ctx_train, policy)
    ctx_words = f"{_k(per_slot)} context"
    if not machine.gpus:
        where = "on the CPU"
    elif isinstance(result.gpu_layers, int) and n_layers is not None and result.gpu_layers < n_layers + 1:
        return FitVerdict(Fit.RUNS_SLOWLY, f"runs slowly: {result.gpu_layers} of {n_layers + 1} layers fit "
                          f"on the GPU ({ctx_words})", per_slot)
    elif result.cpu_moe or result.n_cpu_moe:
        where = "all layers on the GPU, some experts in RAM"
    else:
        where = "all layers on the GPU"
    if short:
        return FitVerdict(Fit.RUNS_SHORT, f"runs with less context: {ctx_words} (the default is "
                          f"{_k(wanted_ctx(n_ctx_train, policy))}), {where}", per_slot)
    return FitVerdict(Fit.RUNS, f"runs: {ctx_words}, {where}", per_slot)


def verdict_from_size(size_bytes: int | None, machine: Machine, policy: PlanPolicy = _DEFAULT_POLICY) -> FitVerdict:
    """When the header cannot be read: weights are about the file's size; context is not known.

    Says so in its text, since it cannot see the KV cache or the layer count.
    """
    if size_bytes is None:
        return FitVerdict(Fit.UNKNOWN, "unknown: neither its header nor its size could be read", source="size")
    budgets = machine_budgets(machine, policy)
    gpu = sum(p.budget for p in budgets.pools if p.is_gpu)
    total = sum(p.budget for p in budgets.pools)
    need = int(size_bytes * 1.1)  # weights plus a little room for context and compute
    note = f"(estimated from its {gib(size_bytes)} size; its header could not be read)"
    if need > total:
        return FitVerdict(Fit.DOES_NOT_FIT, f"does not fit: about {gib(need)} needed, {gib(total)} free {note}",
                          source="size")
    if machine.gpus and not machine.unified_memory and need > gpu:
        return FitVerdict(Fit.RUNS_SLOWLY, f"runs slowly: it is larger than graphics memory {note}", source="size")
    return FitVerdict(Fit.RUNS_SHORT, f"probably runs, context unknown {note}", source="size")


@dataclass(frozen=True)
class QuantPick:
    option: QuantOption
    verdict: FitVerdict
    reason: str  # why this one, one sentence


def pick_quant(judged: Sequence[tuple[QuantOption, FitVerdict]], asked: str | None = None,
               repo: str = "the repository") -> QuantPick | str:
    """The option asked for, else the best quality that runs with the default context.

    Falls back to the best that runs with less context, then to one that runs slowly;
    returns one sentence when nothing fits or the asked quantisation is not there.
    """
    if not judged:
        return f"{repo} has no GGUF model files."
    if asked:
        for option, verdict in judged:
            if asked.upper() in ((option.quant or "").upper(), option.label.upper()):
                return QuantPick(option, verdict, f"{option.label} as asked")
        have = ", ".join(o.label for o, _ in judged)
        return f"{repo} has no {asked} file; it has {have}."
    ordered = sorted(judged, key=lambda ov: quant_rank(ov[0].quant))
    for tier in _FIT_ORDER:
        for option, verdict in ordered:
            if verdict.fit is tier:
                better = [o.label for o, v in ordered if quant_rank(o.quant) < quant_rank(option.quant)]
                if tier is Fit.RUNS:
                    why = "the best quality that runs with the default context here"
                elif tier is Fit.RUNS_SHORT:
                    why = "the best quality that fits here, with less than the default context"
                else:
                    why = "the only kind that fits here, with some layers left in RAM"
                if better:
                    why += f" ({', '.join(better[:4])} {'does' if len(better) == 1 else 'do'} not)"
                return QuantPick(option, verdict, f"{option.label}: {why}")
    smallest = min(judged, key=lambda ov: ov[0].size_bytes or 0)
    return (f"no quantisation of {repo} fits this machine; even the smallest, {smallest[0].label}, "
            f"{smallest[1].text.removeprefix('does not fit: ')}.")
