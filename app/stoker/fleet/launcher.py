"""The real LaunchPreparer: model → summary → machine → plan → argv, on the best engine build.

The supervisor calls it before every attempt (a restart may see less free memory and plan
smaller). It wires the modules other parts own: shell/models (which file), shell/gguf_io
(its header), shell/engines (which build), shell/probe (this machine), shell/store (saved
overrides and the last used model), shell/secrets (the API key), core/planner and
core/argv. They are imported when first needed so `stoker status` never pays for them.
Which build runs, which RPC workers take part and what earlier launches taught are its
collaborators' (stoker/fleet/build_choice.py, rpc_roster.py, launch_lessons.py).
It decides nothing itself; a problem comes back as a PreparationRefused sentence.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from secrets import token_urlsafe

from stoker.base import secrets
from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths, storage_sentence
from stoker.base.rpc_address import RpcWorker
from stoker.base.store import OverridesStore, SettingsStore, moved_aside_problems
from stoker.diagnosis.exit_report import Incident
from stoker.engines.argv import API_KEY_ENV, PER_LAUNCH_KEY
from stoker.engines.builds import EngineBuild
from stoker.engines.drivers import driver_for
from stoker.engines.drivers.inputs import BuildPick, EngineChoice, EngineDriver, PlanInputs
from stoker.engines.engine_exit import EngineExit
from stoker.engines.identity import binary_identity
from stoker.engines.kind import describe
from stoker.engines.launch import (
    AttemptContext,
    EngineHealth,
    ExitDecision,
    LaunchContext,
    PreparationRefused,
    PreparedLaunch,
)
from stoker.engines.probe import probe_machine
from stoker.engines.slot_keep import worth_keeping
from stoker.errors import UserError
from stoker.fleet.build_choice import BuildChooser
from stoker.fleet.launch_lessons import LaunchLessons
from stoker.fleet.pipeline import DRAFT_SUFFIX, auto_drafter, gather_plan_inputs, load_settings, projector_of
from stoker.fleet.quarantine import Ledger
from stoker.fleet.rpc_roster import RpcRoster
from stoker.library.gguf_io import load_summary
from stoker.library.models import resolve_model
from stoker.planning.plan import LaunchPlan, PlanRefusal

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
# A drafter Stoker chooses by itself (shell.planning.auto_drafter): `<model stem>.draft.gguf`
# beside the model. Only a file put there on purpose for this model counts, so a wrong
# vocabulary is the owner's choice, and it is still "chosen" (not forced): when it breaks a
# launch it is left out, not kept.
__all__ = ["DRAFT_SUFFIX", "RealPreparer", "auto_drafter", "merge_overrides"]


def merge_overrides(base: ModelOverrides | None, top: ModelOverrides | None) -> ModelOverrides:
    """`top`'s set fields over `base` (the CLI's --ctx beats a saved ctx)."""
    base = base or ModelOverrides()
    if top is None:
        return base
    changes = {f.name: getattr(top, f.name) for f in dataclasses.fields(ModelOverrides)
               if getattr(top, f.name) not in (None, ())}
    return dataclasses.replace(base, **changes)


class RealPreparer:
    """Callable `(model_path, attempt) -> PreparedLaunch | PreparationRefused`.

    It also answers the supervisor's hooks about what failures teach the next launch, through
    the collaborators that keep it: LaunchLessons (stoker/fleet/launch_lessons.py: strikes,
    quarantine and broken drafters in `<data>/quarantine.json`, the OOM recovery ladder, the
    measured memory lines at READY), BuildChooser (stoker/fleet/build_choice.py: which
    llama-server build runs) and RpcRoster (stoker/fleet/rpc_roster.py: which RPC workers
    the plan may use, which went away).

    `machine` (a core.machine.Machine) and `memory_limit_bytes` (a memory cgroup around the
    engine, Linux) are test knobs: planning for a machine claimed larger than the real
    limit makes a first plan that really cannot fit, so the recovery ladder runs on the
    real engine.

    `startup_deadline_s` (seconds) replaces the engine kind's own start-up deadline (180 s
    for llama-server, 600 for ds4, 300 for sd-server) when given (`--startup-timeout`).

    `idle_timeout_s` (seconds) beats the model's idle_minutes and Settings' default for
    every launch it prepares from then on (0: never unloaded, as idle_minutes 0 is): whole
    minutes are too coarse for tests and `stoker bench gateway`, which watch an idle model
    go. None leaves it to those two.
    """

    def __init__(self, *, cli_overrides: ModelOverrides | None = None, engine: str | None = None,
                 startup_deadline_s: float | None = None, remember_last_model: bool = True,
                 machine=None, memory_limit_bytes: int | None = None,
                 memory_budget_bytes: int | None = None, idle_timeout_s: float | None = None,
                 rpc_workers: tuple = (), clock: Callable[[], float] = time.time):
        self.cli_overrides = cli_overrides
        self.engine = engine
        self.startup_deadline_s = startup_deadline_s
        self.remember_last_model = remember_last_model
        self.machine = machine
        self.memory_limit_bytes = memory_limit_bytes
        self.memory_budget_bytes = memory_budget_bytes  # what all models together may use
        self.idle_timeout_s = idle_timeout_s  # seconds; see the docstring
        self.clock = clock
        # What failures and READY teach (ledger, recovery ladder) and which build runs.
        self._lessons = LaunchLessons(clock)
        self._builds = BuildChooser(engine, machine, self._lessons.load_ledger)
        self._settings_problems: tuple[str, ...] = ()
        self._override_problems: tuple[str, ...] = ()
        self._told: set[str] = set()
        # RPC workers (stoker/fleet/rpc_roster.py): `stoker run --rpc` beats Settings' rpc_workers;
        # one that went away is dropped from the next attempts until a person starts the
        # model again (or uses it again: readmit_worker).
        self._roster = RpcRoster(rpc_workers)

    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused:

        try:
            return self._prepare(model_path, attempt)
        except UserError as exc:
            return PreparationRefused(model_path, str(exc))
        except (OSError, ValueError) as exc:
            return PreparationRefused(model_path, f"could not prepare the launch: {exc}")

    def lift_quarantine(self, build_id: str) -> None:
        """The user's word: use this build again (saved, so a restart of Stoker keeps it)."""
        self._lessons.lift_quarantine(build_id)

    # -- steps

    def choose_model(self, model_path: str | None) -> Path:

        if model_path is None:
            last = SettingsStore(stoker_paths().config).load().last_model
            if last and Path(last).is_file():
                return Path(last)
        return resolve_model(model_path)

    def choose_engine(self, ledger: Ledger | None = None) -> EngineBuild:
        """The llama-server build to run (stoker/fleet/build_choice.py): the one the user
        named, else the best usable one neither quarantined nor blocked for this machine's
        GPUs; `engine_choice` says afterwards which build runs and why."""
        return self._builds.choose_engine(ledger)

    @property
    def engine_choice(self) -> str | None:
        """Which build runs and why (choose_engine); None after another kind's launch."""
        return self._builds.engine_choice

    def _settings(self):
        """The app settings (defaults when unreadable); their problems are kept for the snapshot."""
        settings, problems = load_settings()
        self._settings_problems = problems
        return settings

    def problems(self) -> tuple[str, ...]:
        """Every settings problem of this session, one sentence each: files moved aside and bad
        values in settings.json or overrides.json (the launch went on with the value named)."""

        found = (*moved_aside_problems(), *self._settings_problems, *self._override_problems)
        return tuple(dict.fromkeys(found))

    def _tell_problems(self) -> None:
        """Each problem once on stderr and in stoker.log (the logger does both)."""
        for problem in self.problems():
            if problem not in self._told:
                self._told.add(problem)
                log.warning("%s", problem)

    def idle_timeout_for(self, overrides: ModelOverrides, current: float | None) -> float | None:
        """The idle timeout new overrides give a model that is already running: it applies at
        once, with no restart (the supervisor's ApplyOverrides hook). `current` is not needed:
        the overrides and Settings decide it, as at a launch."""
        return self._idle_timeout_s(self._settings(), overrides)

    def _idle_timeout_s(self, settings, overrides: ModelOverrides) -> float | None:
        """Seconds without a request before the engine is stopped: this preparer's
        idle_timeout_s, else the model's own idle_minutes, else Settings' default; 0 means
        never (None)."""
        if self.idle_timeout_s is not None:
            return float(self.idle_timeout_s) if self.idle_timeout_s > 0 else None
        minutes = overrides.idle_minutes
        if minutes is None:
            minutes = getattr(settings, "idle_unload_minutes", None)
        return float(minutes * 60) if isinstance(minutes, int) and minutes > 0 else None

    def choose_build(self, driver: EngineDriver) -> EngineChoice:
        """The build a launch of this driver's plan runs: for llama-server the one
        `choose_engine` picks (named, else best usable and not quarantined), for the other
        kinds the first their driver finds. Raises UserError with the driver's sentence
        when there is none."""

        if driver.build_pick is BuildPick.LEDGER:
            build = self.choose_engine()
            return EngineChoice(build.binary, build.id, self.engine_choice, build.backend)
        self._builds.not_chosen()
        found = driver.default_build()
        if found is None:
            raise UserError(driver.missing_build())
        return found

    def plan_inputs(self, model: Path, *, held_bytes: Mapping[str, int], driver: EngineDriver, build: EngineChoice,
                    machine, settings, overrides: ModelOverrides, policy=None,
                    use_measured: bool = True, projector: str | None = None,
                    broken_drafters: frozenset[str] | None = None) -> PlanInputs:
        """The launch's PlanInputs (`stoker plan` and the dialog preview ask for the same ones):
        the model's projector, the RPC workers this driver takes, the bytes other residents
        hold and the budget, read by the one `gather_plan_inputs`."""

        workers = self.workers() if driver.uses_rpc_workers else ()
        return gather_plan_inputs(
            model, machine, overrides, driver=driver, build=build, settings=settings,
            held_bytes=held_bytes, memory_budget_bytes=self.memory_budget_bytes,
            rpc_workers=workers, projector=projector or projector_of(model), policy=policy,
            use_measured=use_measured, broken_drafters=broken_drafters)

    def machine_for(self, driver: EngineDriver, build: EngineChoice):
        """This machine as the build sees it (its `--list-devices` where the kind has one), plus
        the devices the RPC workers lend when the driver takes them."""

        machine = self.machine or probe_machine(build.binary if driver.lists_devices else None)
        workers = self.workers() if driver.uses_rpc_workers else ()
        if workers and build.binary:
            machine = self._roster.lend_devices(machine, build.binary, workers)
        return machine

    def driver_of(self, model: Path) -> EngineDriver:
        """The model's driver (its header says the kind; RPC workers make it the RPC engine's)."""

        return driver_for(load_summary(model), rpc_workers=self.workers())

    def _prepare(self, model_path: str | None, attempt: AttemptContext):

        paths = stoker_paths()
        settings = self._settings()
        model = self.choose_model(model_path)
        if not attempt.after_failure:
            self._roster.start_afresh()  # a person's start tries every worker again
        driver = self.driver_of(model)
        build = self.choose_build(driver)
        identity = binary_identity(build.binary) if build.binary else None
        machine = self.machine_for(driver, build)
        self._roster.planning_without(str(model))
        if attempt.overrides is not None:
            saved = attempt.overrides
        else:
            store = OverridesStore(paths.config)
            saved = store.get(model)
            self._override_problems = tuple(store.problems)
        self._tell_problems()
        user_overrides = merge_overrides(saved, self.cli_overrides)
        overrides, policy = user_overrides, None
        steps = self._lessons.recovery_steps(str(model), after_failure=attempt.after_failure)
        if steps:
            overrides, policy = steps[-1].overrides, steps[-1].policy
        inputs = self.plan_inputs(model, held_bytes=dict(attempt.held_bytes), driver=driver, build=build,
                                  machine=machine, settings=settings, overrides=overrides, policy=policy)
        plan = driver.plan(inputs)
        want = attempt.ctx_per_slot_at_least
        if want and isinstance(plan, LaunchPlan) and plan.ctx_per_slot < want:
            # A request asked for more context (Ollama's num_ctx): the same plan with that
            # context per slot, when it fits; otherwise the plan as it was (the request is clamped).
            wider = dataclasses.replace(overrides, ctx=want * (1 if plan.kv_unified else plan.slots),
                                        slots=plan.slots)
            wider_inputs = self.plan_inputs(model, held_bytes=dict(attempt.held_bytes), driver=driver,
                                            build=build, machine=machine, settings=settings, overrides=wider,
                                            policy=policy)
            widened = driver.plan(wider_inputs)
            if isinstance(widened, LaunchPlan):
                plan, overrides, inputs = widened, wider, wider_inputs
        if isinstance(plan, PlanRefusal):
            hint = f" Try: {plan.suggestions[0]}" if plan.suggestions else ""
            return PreparationRefused(str(model), plan.reason + hint)
        assert build.binary is not None  # choose_build found one
        spec = driver.launch_spec(plan, inputs, binary=build.binary, port=attempt.port, alias=attempt.model_id)
        gpu_env = self._builds.gpu_env(build.build_id)
        if gpu_env:
            spec = dataclasses.replace(spec, env=spec.env + gpu_env)
        if self.memory_limit_bytes:
            spec = dataclasses.replace(spec, memory_limit_bytes=self.memory_limit_bytes)
        secrets = self._secrets(spec)
        if self.remember_last_model and attempt.attempt == 0:

            try:
                SettingsStore(paths.config).update(last_model=str(model))
            except OSError as exc:  # the launch goes on; the stored settings stay as they were
                log.warning("could not remember the last used model: %s", storage_sentence(exc))
            except ValueError as exc:
                log.warning("could not remember the last used model: %s", exc)
        deadline = self.startup_deadline_s if self.startup_deadline_s is not None else \
            describe(driver.launch_kind).startup_deadline_s
        prepared = PreparedLaunch(spec=spec, model_path=str(model), plan=plan, build_id=build.build_id,
                                  backend=driver.launch_backend(plan, build), secrets=secrets,
                                  startup_deadline_s=deadline,
                                  idle_timeout_s=self._idle_timeout_s(settings, user_overrides),
                                  engine_key=dict(secrets).get(API_KEY_ENV), kind=driver.launch_kind,
                                  keeps_conversations=worth_keeping(
                                      saves_slots=describe(driver.launch_kind).saves_slots,
                                      sliding_window=bool(inputs.model.n_swa and any(inputs.model.swa_layers)),
                                      recurrent=any(inputs.model.recurrent_layers),
                                      swa_full=isinstance(plan, LaunchPlan) and plan.swa_full),
                                  # how it was made travels with it, for its own exit and READY
                                  context=LaunchContext(build.binary, identity, user_overrides, overrides,
                                                        inputs.policy, inputs.model.n_layer,
                                                        bool(inputs.model.n_expert))
                                  if driver.learns_from_exit else None)
        return prepared

    # -- RPC workers

    def workers(self) -> tuple[RpcWorker, ...]:
        """The workers this attempt may use: the command line's, else Settings', less those gone."""
        return self._roster.workers(self._settings)

    def watching_workers(self) -> bool:
        """Whether a worker was dropped, so the supervisor should look for it coming back."""
        return self._roster.watching()

    def readmit_worker(self, endpoint: str) -> tuple[str, ...]:
        """Let a dropped worker back in (the tray's "Use HOST:PORT again"); the model paths
        that were planned without it, for the supervisor to restart."""
        return self._roster.readmit(endpoint)

    # -- what failures and successes teach (the supervisor's hooks)

    def after_exit(self, launch: PreparedLaunch, incident: Incident, exit: EngineExit) -> ExitDecision:
        """A lost RPC worker first (re-plan without it), else strikes and quarantine, broken
        drafters, the OOM recovery ladder (stoker/fleet/launch_lessons.py)."""
        if launch.context is None or launch.plan is None:
            return ExitDecision()
        lost = self._roster.drop_lost(launch)
        if lost:
            names = ", ".join(w.endpoint for w in lost)
            return ExitDecision(action=f"re-planning without the RPC worker {names} and restarting; "
                                       "once it is back the tray offers to use it again", retry=True)
        return self._lessons.after_exit(launch, incident, exit)

    def after_ready(self, launch: PreparedLaunch, lines: Sequence[str]) -> None:
        """Record this launch's measured memory lines; remember a drafter the engine refused."""
        self._lessons.after_ready(launch, lines)

    def engine_health(self) -> EngineHealth:
        """Quarantined builds (from the saved ledger), builds blocked for this machine's GPUs,
        missing runtimes and the settings problems of this session, for the snapshot."""

        quarantined = self._lessons.quarantined()
        return EngineHealth(blockers=self._builds.blockers(), quarantined=quarantined,
                            problems=self.problems(),
                            workers_back=tuple(w.endpoint for w in self._roster.back()))

    @staticmethod
    def _secrets(spec) -> tuple[tuple[str, str], ...]:
        """Values for the spec's secret variables: a fresh random key for a per-launch one
        (only the gateway knows it), else the keyring entry's value."""

        out = []
        for env_name, entry in spec.secret_env:
            value = token_urlsafe(24) if entry == PER_LAUNCH_KEY else secrets.get_api_key(entry)
            if value:
                out.append((env_name, value))
        return tuple(out)
