"""The one planning pipeline: the inputs `stoker plan`, the per-model dialog's preview, pull
verdicts and a launch hand to `driver_for(model).plan(inputs)`.

They used to assemble the planner's inputs themselves and drifted apart (a 2 GiB reserve in
the preview and pull against Settings' 4 GiB at launch, no projector in the preview, no ds4
branch in `stoker plan`, a ds4 launch blind to what other residents hold). Now each calls
`gather_plan_inputs`, which reads them the same way: the memory reserve and budget from
Settings, the bytes other residents hold, the model's drafter (the user's `draft_model`,
else `<stem>.draft.gguf` beside it), the drafters the ledger marks broken for this build,
the projector, the RPC workers required and the lines measured for this model under this
build. It reads files and decides nothing: the engine kind's driver plans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.rpc_address import RpcWorker
from stoker.base.store import AppSettings, SettingsStore
from stoker.engines.drivers import driver_for
from stoker.engines.drivers.inputs import EngineChoice, EngineDriver, EnginePlan, PlanInputs
from stoker.engines.identity import binary_identity
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.quarantine import is_drafter_broken
from stoker.fleet.residency import budget_machine
from stoker.library.gguf_io import load_summary
from stoker.library.gguf_summary import ModelSummary
from stoker.library.models import list_models
from stoker.planning.machine import Machine
from stoker.planning.plan import PlanRefusal
from stoker.planning.planner import GIB, PlanPolicy
from stoker.planning.pull import OptionPlanner

log = logging.getLogger(__name__)

# A drafter Stoker chooses by itself: `<model stem>.draft.gguf` beside the model.
DRAFT_SUFFIX = ".draft.gguf"


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


def gather_plan_inputs(model: Path | str, machine: Machine, overrides: ModelOverrides, *,
                       driver: EngineDriver, build: EngineChoice, settings: AppSettings,
                       held_bytes: Mapping[str, int], memory_budget_bytes: int | None,
                       rpc_workers: tuple[RpcWorker, ...], projector: str | None,
                       policy: PlanPolicy | None = None, use_measured: bool = True,
                       broken_drafters: frozenset[str] | None = None,
                       header: ModelSummary | None = None) -> PlanInputs:
    """Everything a driver's `plan` reads, read the same way for whoever asks: the model's
    header, the machine with the other residents' bytes added back and capped at the
    budget, Settings' memory reserve, the drafter (the user's `draft_model`, else one
    beside the model), the drafters the ledger marks broken for this build, the projector,
    the RPC workers required, and the lines measured for this model under this build.

    Only a recovery step passes `policy` (a launch retried with more headroom); a described
    machine (`stoker plan --machine`) passes `use_measured=False` and no broken drafters,
    because what was measured here does not apply to it; a verdict on a file still on the
    hub passes its remote `header` (no file: nothing measured). Raises OSError/GGUFError
    for an unreadable model.
    """

    summary = header if header is not None else load_summary(model)
    size = None if header is not None else Path(model).stat().st_size
    policy = policy if policy is not None else policy_from_settings(settings)
    planned = memory_for_models(machine, policy, settings, held_bytes, memory_budget_bytes)
    draft_path = overrides.draft_model or (auto_drafter(model) if header is None else None)
    draft = None
    if draft_path and overrides.spec_type != "none":
        try:
            draft = load_summary(draft_path)
        except (OSError, ValueError) as exc:
            log.warning("the draft model %s could not be read: %s", draft_path, exc)
    if broken_drafters is None:
        broken_drafters = broken_drafters_for(build.build_id, build.binary)
    measured, ds4_measured = (driver.measured(str(model), build.binary) if use_measured and header is None
                              else (None, ()))
    return PlanInputs(
        kind=driver.kind, model_path=str(model), model=summary, model_bytes=size, machine=planned,
        overrides=overrides, policy=policy, build=build,
        held_bytes=tuple(sorted(held_bytes.items())), budget_bytes=memory_budget_bytes,
        projector_path=projector, projector=load_summary(projector) if projector else None,
        drafter_path=draft_path if draft is not None else None, drafter=draft,
        broken_drafters=frozenset(broken_drafters), rpc_workers=tuple(rpc_workers),
        measured=measured, ds4_measured=ds4_measured)


def plan_model(model: Path | str, machine: Machine, overrides: ModelOverrides, *,
               engine: EngineChoice, settings: AppSettings | None = None, use_measured: bool = True,
               held_bytes: Mapping[str, int] | None = None,
               memory_budget_bytes: int | None = None) -> EnginePlan | PlanRefusal:
    """`driver_for(model).plan(inputs)` with the inputs `gather_plan_inputs` reads (Settings
    when none are given, the model's own projector), for a caller that has a build already
    (tests, benchmarks)."""
    driver = driver_for(load_summary(model))
    settings = settings if settings is not None else load_settings()[0]
    projector = projector_of(model)
    inputs = gather_plan_inputs(model, machine, overrides, driver=driver, build=engine, settings=settings,
                                held_bytes=held_bytes or {}, memory_budget_bytes=memory_budget_bytes,
                                rpc_workers=(), projector=projector, use_measured=use_measured)
    return driver.plan(inputs)


def remote_planner(machine: Machine, settings: AppSettings) -> tuple[PlanPolicy, OptionPlanner]:
    """(Settings' policy, how pull verdicts plan an option from its remote header): its
    driver's plan with the inputs a launch gathers (Settings' reserve and budget, no
    residents, no build: a verdict is for this machine, not for one build)."""
    policy = policy_from_settings(settings)

    def plan(header: ModelSummary, name: str) -> object:
        driver = driver_for(header)
        inputs = gather_plan_inputs(name, machine, ModelOverrides(), driver=driver, build=EngineChoice(None),
                                    settings=settings, held_bytes={}, memory_budget_bytes=None,
                                    rpc_workers=(), projector=None, header=header)
        return driver.plan(inputs)

    return policy, plan
