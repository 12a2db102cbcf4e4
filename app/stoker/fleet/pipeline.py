"""The one planning pipeline: what `stoker plan`, the per-model dialog's preview and a launch plan.

All three used to assemble the planner's inputs themselves and drifted apart (a 2 GiB reserve
in the preview against Settings' 4 GiB at launch, no measured lines, no drafter). Now each
calls `plan_model` with the same inputs, read the same way: the memory reserve from Settings,
the model's drafter (the user's `draft_model`, else `<stem>.draft.gguf` beside it), the
drafters the ledger marks broken for this build, and the memory lines measured for this
model under this build. It reads files and decides nothing: `core.planner.plan_launch` does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import AppSettings, SettingsStore
from stoker.engines import measurements
from stoker.engines.identity import binary_identity
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.quarantine import is_drafter_broken
from stoker.fleet.residency import budget_machine
from stoker.library.gguf_io import load_summary
from stoker.library.models import list_models
from stoker.planning.machine import Machine
from stoker.planning.plan import Decision, LaunchPlan, PlanRefusal
from stoker.planning.planner import GIB, PlanPolicy, plan_launch

log = logging.getLogger(__name__)

# A drafter Stoker chooses by itself: `<model stem>.draft.gguf` beside the model.
DRAFT_SUFFIX = ".draft.gguf"


@dataclass(frozen=True)
class EngineChoice:
    """The build a plan is for (None binary: no build known, plan for the host alone)."""

    binary: str | None
    build_id: str | None = None
    why: str | None = None  # which build runs and why, for the plan's decisions


def auto_drafter(model: Path | str) -> str | None:
    """`<stem>.draft.gguf` beside the model when it is there, else None."""
    model = Path(model)
    candidate = model.with_name(model.name.removesuffix(".gguf") + DRAFT_SUFFIX)
    return str(candidate) if candidate.is_file() and candidate != model else None


def projector_of(model: Path | str) -> str | None:
    """The vision projector (mmproj) the model list names for this model: one beside it in
    its folder, or the one its store ships with it; None when it has none."""

    real = Path(model).resolve()
    try:
        found = list_models(with_summary=False, include_hidden=True)
    except OSError:
        return None
    for m in found:
        try:
            same = m.path.resolve() == real
        except OSError:
            continue
        if same:
            return m.mmproj
    return None


def policy_from_settings(settings) -> PlanPolicy:
    """The planner's policy with Settings' memory reserve (None settings: the default)."""
    reserve = None if settings is None else settings.memory_reserve_gib
    if not isinstance(reserve, (int, float)) or isinstance(reserve, bool) or reserve < 0:
        return PlanPolicy()
    return PlanPolicy(os_reserve_min_bytes=int(reserve * GIB))


def load_settings():
    """(AppSettings, problems): the saved settings with their problems, defaults when unreadable."""

    store = SettingsStore(stoker_paths().config)
    try:
        settings = store.load()
    except (OSError, ValueError) as exc:
        return AppSettings(), (*store.problems, f"Settings could not be read ({exc}); defaults are used.")
    return settings, tuple(store.problems)


def broken_drafters_for(build_id: str | None, binary: str | None) -> frozenset:
    """Drafter paths the ledger marks broken with this build (empty without a build)."""
    if not build_id or not binary:
        return frozenset()

    ledger, _ = LedgerStore.in_data_dir(stoker_paths().data).load()
    identity = binary_identity(binary)
    return frozenset(d.drafter_path for d in ledger.broken_drafters
                     if d.build_id == build_id
                     and is_drafter_broken(ledger, build_id, d.drafter_path, identity))


def measured_lines(model: Path | str, binary: str | None):
    """The memory lines measured for this model under this build, or None."""
    if not binary:
        return None

    try:
        return measurements.lookup(model, binary)
    except OSError:  # an unreadable store is a cache miss, never a reason not to plan
        return None


def memory_for_models(machine: Machine, policy: PlanPolicy, settings=None,
                      held_bytes: Mapping[str, int] | None = None,
                      memory_budget_bytes: int | None = None) -> Machine:
    """The machine a model is planned on: what Stoker's other resident engines hold added
    back (the gateway admits the plan beside them by its bytes), each pool capped at the
    memory budget for models (`memory_budget_bytes`, else Settings' model_memory_gib)."""
    cap_bytes = memory_budget_bytes
    if cap_bytes is None:
        cap = getattr(settings, "model_memory_gib", None)
        cap_bytes = int(cap * GIB) if isinstance(cap, (int, float)) and cap > 0 else None
    if not held_bytes and cap_bytes is None:
        return machine
    return budget_machine(machine, dict(held_bytes or {}), cap_bytes,
                          policy.os_reserve(machine.ram_total_bytes), policy.device_margin_bytes)


def plan_model(model: Path | str, machine: Machine, overrides: ModelOverrides, *,
               engine: EngineChoice, settings=None, policy: PlanPolicy | None = None,
               use_measured: bool = True, mmproj: str | None = None,
               broken_drafters: frozenset | None = None,
               held_bytes: Mapping[str, int] | None = None,
               memory_budget_bytes: int | None = None) -> LaunchPlan | PlanRefusal:
    """The plan for `model` on `machine`: the same inputs whoever asks.

    `policy` replaces the Settings policy only for a recovery step (a launch retried with
    more headroom); `use_measured` is False for a described machine (`--machine`), whose
    plan cannot use lines measured here. Raises OSError/GGUFError for an unreadable model.
    """

    summary = load_summary(model)
    policy = policy if policy is not None else policy_from_settings(settings)
    machine = memory_for_models(machine, policy, settings, held_bytes, memory_budget_bytes)
    draft_path = overrides.draft_model or auto_drafter(model)
    draft = None
    if draft_path and overrides.spec_type != "none":
        try:
            draft = load_summary(draft_path)
        except (OSError, ValueError) as exc:
            log.warning("the draft model %s could not be read: %s", draft_path, exc)
    if broken_drafters is None:
        broken_drafters = broken_drafters_for(engine.build_id, engine.binary)
    measured = measured_lines(model, engine.binary) if use_measured else None
    projector = load_summary(mmproj) if mmproj else None
    plan = plan_launch(summary, machine, overrides, policy, draft=draft, mmproj=projector,
                       measured=measured, broken_drafters=broken_drafters)
    if isinstance(plan, LaunchPlan) and engine.why:
        what = f"engine {engine.build_id}" if engine.build_id else "engine"
        plan = dataclasses.replace(plan, decisions=(Decision(what, engine.why),) + plan.decisions)
    return plan
