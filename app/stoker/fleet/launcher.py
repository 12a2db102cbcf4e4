"""The real LaunchPreparer: model → summary → machine → plan → argv, on the best engine build.

The supervisor calls it before every attempt (a restart may see less free memory and plan
smaller). It wires the modules other parts own: shell/models (which file), shell/gguf_io
(its header), shell/engines (which build), shell/probe (this machine), shell/store (saved
overrides and the last used model), shell/secrets (the API key), core/planner and
core/argv. They are imported when first needed so `stoker status` never pays for them.
It decides nothing itself; a problem comes back as a PreparationRefused sentence.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from secrets import token_urlsafe

from stoker.base import secrets
from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths, storage_sentence
from stoker.base.rpc_address import parse_worker, parse_workers
from stoker.base.store import OverridesStore, SettingsStore, moved_aside_problems
from stoker.diagnosis.blockers import cuda_blocker, missing_runtime_from_ldd, rocm_visibility_env, rocm_visible_devices
from stoker.diagnosis.views import BlockerView
from stoker.engines.argv import API_KEY_ENV, PER_LAUNCH_KEY
from stoker.engines.builds import EngineBuild
from stoker.engines.drivers import driver_for
from stoker.engines.drivers.inputs import BuildPick, EngineChoice, EngineDriver, PlanInputs
from stoker.engines.find import discover_engines
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
from stoker.engines.probe import probe_machine, probe_workers, reachable
from stoker.engines.rpc import remaining_workers
from stoker.errors import UserError
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.pipeline import DRAFT_SUFFIX, auto_drafter, gather_plan_inputs, load_settings, projector_of
from stoker.fleet.quarantine import choose_build, is_quarantined, lift, mark_drafter_broken, record_strike
from stoker.fleet.recovery import CTX_FLOOR, RecoveryInputs, next_recovery_step
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


def _step_words(step) -> str:
    """"retrying with context 16,384" and the like: what the next attempt changes."""
    ov = step.overrides
    if step.rung == "smaller-context" and ov.ctx:
        return f"retrying with context {ov.ctx:,}"
    if step.rung == "cheaper-kv":
        return f"retrying with a {ov.kv_type_k}/{ov.kv_type_v} KV cache"
    if step.rung == "drop-drafter":
        return "retrying without the drafter"
    if step.rung == "more-headroom":
        return "restarting with more memory left free"
    return "retrying with a smaller plan"


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

    It also owns what failures teach about the next launch (the supervisor's hooks):
    strikes and quarantine of engine builds and broken (build, drafter) pairs in the
    ledger (`<data>/quarantine.json`), the OOM recovery ladder for the model being started,
    and the measured memory lines (`<data>/measurements.json`).

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
        self._lock = threading.Lock()
        # model path -> the recovery steps taken since a person last started it
        self._recovery: dict[str, tuple] = {}
        self._passed_over: tuple[tuple[str, str], ...] = ()
        self._missing_runtime: tuple[EngineBuild, ...] = ()
        self._build_blockers: tuple[BlockerView, ...] = ()  # cudaBlocker / rocmBlocker of builds passed over
        self._gpu_env: dict[str, tuple[tuple[str, str], ...]] = {}  # build id -> env (ROCm hiding)
        self.engine_choice: str | None = None  # which build runs and why (choose_engine)
        self._settings_problems: tuple[str, ...] = ()
        self._override_problems: tuple[str, ...] = ()
        self._told: set[str] = set()
        # RPC workers (stoker/engines/rpc.py): `stoker run --rpc` beats Settings' rpc_workers. A worker
        # that went away is dropped from the next attempts until a person starts the model
        # again (or uses it again: readmit_worker); while it is dropped and reachable,
        # engine_health says it is back.
        self.rpc_workers = tuple(rpc_workers)
        self._dropped_workers: tuple = ()
        self._planned_without: dict = {}  # dropped RpcWorker -> model paths planned without it
        self._worker_notes: tuple[str, ...] = ()

    def __call__(self, model_path: str | None, attempt: AttemptContext
                 ) -> PreparedLaunch | PreparationRefused:

        try:
            return self._prepare(model_path, attempt)
        except UserError as exc:
            return PreparationRefused(model_path, str(exc))
        except (OSError, ValueError) as exc:
            return PreparationRefused(model_path, f"could not prepare the launch: {exc}")

    # -- ledgers

    @staticmethod
    def _ledger_store():

        return LedgerStore.in_data_dir(stoker_paths().data)

    def _load_ledger(self):
        ledger, problems = self._ledger_store().load()
        for problem in problems:
            log.warning("%s", problem)
        return ledger

    def _save_ledger(self, ledger) -> None:
        """Save what a failure taught; a read-only or full data folder costs the memory of it
        across restarts of Stoker, never the launch (one sentence, no traceback)."""

        try:
            self._ledger_store().save(ledger)
        except OSError as exc:
            log.warning("could not save the engine ledger: %s", storage_sentence(exc))

    def lift_quarantine(self, build_id: str) -> None:
        """The user's word: use this build again (saved, so a restart of Stoker keeps it)."""

        with self._lock:
            self._ledger_store().save(lift(self._load_ledger(), build_id))

    # -- steps

    def choose_model(self, model_path: str | None) -> Path:

        if model_path is None:
            last = SettingsStore(stoker_paths().config).load().last_model
            if last and Path(last).is_file():
                return Path(last)
        return resolve_model(model_path)

    def choose_engine(self, ledger=None):
        """The build to run: the one the user named (`--engine`, or the engine path in
        Settings), else the best usable one that is not quarantined (the next in line:
        vendor GPU, then Vulkan, then CPU). A named build that cannot run is refused with
        its reason: falling back is only for builds Stoker chose itself. `engine_choice`
        says afterwards which build runs and why."""

        builds = discover_engines(self.engine) if self.engine else discover_engines()
        self._missing_runtime = tuple(b for b in builds if b.status == "missing-library")
        named = [b for b in builds if b.source == "configured"]
        if named:  # the user's own choice beats quarantine, and is never swapped silently
            build = named[0]
            where = "--engine" if self.engine else "the engine path in Settings"
            if not build.usable:
                raise UserError(f"the engine you named with {where}, {build.binary}, cannot run: "
                                f"{(build.status_reason or build.status).rstrip('.')}; fix it or "
                                f"name another build (no other build was started).")
            self._passed_over = ()
            self.engine_choice = f"{build.id}: the build you named with {where}"
            return build
        usable = [b for b in builds if b.usable]
        if not usable:
            why = f" ({builds[0].status_reason})" if builds and builds[0].status_reason else ""
            raise UserError(f"no usable llama-server build was found{why}; run `stoker setup` or "
                            "set the engine path in the settings.")
        ledger = ledger if ledger is not None else self._load_ledger()
        identities = {b.id: binary_identity(b.binary) for b in usable}
        blocked = self._gpu_blockers(usable)
        chosen, passed = choose_build(usable, ledger, identities, blocked=blocked)
        self._passed_over = tuple((b.id, why) for b, why in passed)
        if chosen is None:
            raise UserError("every llama-server build here is quarantined after start-up crashes ("
                            + "; ".join(why for _, why in self._passed_over)
                            + "); lift the quarantine in the tray or run `stoker setup --force`.")
        unusable = [b for b in builds if not b.usable]
        reasons = [f"{b.id} passed over: {why.rstrip('.')}" for b, why in passed]
        reasons += [f"{b.id} cannot run: {(b.status_reason or b.status).rstrip('.')}" for b in unusable]
        self.engine_choice = (f"{chosen.id}: chosen by Stoker, the best usable build here"
                              + (f" ({'; '.join(reasons)})" if reasons else ""))
        return chosen

    def _gpu_blockers(self, builds) -> dict[str, str]:
        """Builds this machine's GPUs cannot run, found before launch: a CUDA build newer
        than the driver (cudaBlocker), a ROCm build with no kernels for any AMD GPU here
        (rocmBlocker). AMD GPUs without kernels are hidden from a ROCm launch instead."""

        gpu_builds = [b for b in builds if b.backend in ("cuda", "rocm")]
        views: list[BlockerView] = []
        blocked: dict[str, str] = {}
        self._gpu_env = {}
        if not gpu_builds:
            self._build_blockers = ()
            return blocked
        machine = self.machine or probe_machine(None)
        nvidia = [d for d in machine.devices if d.driver_cuda_version]
        amd = [d for d in machine.devices if d.backend in ("rocm", "amd") or d.gfx_target]
        for b in gpu_builds:
            view = None
            if b.backend == "cuda" and nvidia:
                view = cuda_blocker(b.cuda_runtime, nvidia[0].driver_cuda_version)
            elif b.backend == "rocm" and amd:
                visible, view = rocm_visible_devices(b.gfx_targets, [d.gfx_target for d in amd])
                self._gpu_env[b.id] = rocm_visibility_env(visible, len(amd))
            if view is not None:
                blocked[b.id] = f"{view.message} {view.advice}"
                views.append(view)
        self._build_blockers = tuple(views)
        return blocked

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
        self.engine_choice = None
        self._passed_over, self._build_blockers = (), ()
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
            machine = self._with_workers(machine, build.binary, workers)
        return machine

    def driver_of(self, model: Path) -> EngineDriver:
        """The model's driver (its header says the kind; RPC workers make it the RPC engine's)."""

        return driver_for(load_summary(model), rpc_workers=self.workers())

    def _prepare(self, model_path: str | None, attempt: AttemptContext):

        paths = stoker_paths()
        settings = self._settings()
        model = self.choose_model(model_path)
        if not attempt.after_failure:
            self._dropped_workers = ()  # a person's start tries every worker again
            self._planned_without = {}
        driver = self.driver_of(model)
        build = self.choose_build(driver)
        identity = binary_identity(build.binary) if build.binary else None
        machine = self.machine_for(driver, build)
        for w in self._dropped_workers:  # what "Use it again" has to restart
            self._planned_without.setdefault(w, set()).add(str(model))
        if attempt.overrides is not None:
            saved = attempt.overrides
        else:
            store = OverridesStore(paths.config)
            saved = store.get(model)
            self._override_problems = tuple(store.problems)
        self._tell_problems()
        user_overrides = merge_overrides(saved, self.cli_overrides)
        overrides, policy = user_overrides, None
        with self._lock:
            if not attempt.after_failure:
                self._recovery.pop(str(model), None)  # a person's start begins afresh
            steps = self._recovery.get(str(model), ())
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
        if build.build_id and self._gpu_env.get(build.build_id):
            spec = dataclasses.replace(spec, env=spec.env + self._gpu_env[build.build_id])
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
                                  # how it was made travels with it, for its own exit and READY
                                  context=LaunchContext(build.binary, identity, user_overrides, overrides,
                                                        inputs.policy, inputs.model.n_layer,
                                                        bool(inputs.model.n_expert))
                                  if driver.learns_from_exit else None)
        return prepared

    # -- RPC workers

    def workers(self) -> tuple:
        """The workers this attempt may use: the command line's, else Settings', less those gone."""

        configured = self.rpc_workers
        if not configured:
            try:
                configured = parse_workers(getattr(self._settings(), "rpc_workers", ()) or ())
            except ValueError as exc:
                log.warning("Settings' rpc_workers: %s", exc)
                configured = ()
        return remaining_workers(configured, self._dropped_workers)

    def _with_workers(self, machine, binary: str, workers):
        """This machine plus the devices the reachable workers lend; the others are a note."""

        devices, gone, notes = probe_workers(binary, workers)
        self._worker_notes = notes
        for note in notes:
            log.warning("%s", note)
        if gone:
            self._dropped_workers = tuple(dict.fromkeys(self._dropped_workers + tuple(gone)))
        return dataclasses.replace(machine, devices=tuple(d for d in machine.devices if d.backend != "rpc")
                                   + devices, notes=machine.notes + notes)

    def _workers_lost(self, launch: PreparedLaunch) -> tuple:
        """The workers of this launch that no longer accept a connection."""

        plan = launch.plan
        used = parse_workers(list(plan.rpc_endpoints)) if isinstance(plan, LaunchPlan) else ()
        return tuple(w for w in used if not reachable(w))

    def watching_workers(self) -> bool:
        """Whether a worker was dropped, so the supervisor should look for it coming back."""
        return bool(self._dropped_workers)

    def workers_back(self) -> tuple:
        """Dropped workers that accept a connection again (the tray offers to use them)."""

        return tuple(w for w in self._dropped_workers if reachable(w, timeout_s=0.3))

    def readmit_worker(self, endpoint: str) -> tuple[str, ...]:
        """Let a dropped worker back in (the tray's "Use HOST:PORT again"); the model paths
        that were planned without it, for the supervisor to restart. Its devices are asked
        afresh at the next plan (probe_workers forgot them when it went away)."""

        try:
            worker = parse_worker(endpoint)
        except ValueError as exc:
            log.warning("Use the RPC worker again: %s", exc)
            return ()
        self._dropped_workers = tuple(w for w in self._dropped_workers if w != worker)
        return tuple(sorted(self._planned_without.pop(worker, ())))

    # -- what failures and successes teach (the supervisor's hooks)

    def after_exit(self, launch: PreparedLaunch, incident, exit) -> ExitDecision:
        """Strikes and quarantine, broken drafters, the OOM recovery ladder."""

        ctx = launch.context
        plan = launch.plan
        if ctx is None or plan is None:
            return ExitDecision()
        now = self.clock()
        if getattr(plan, "rpc_endpoints", ()):
            lost = self._workers_lost(launch)
            if lost:
                with self._lock:
                    self._dropped_workers = tuple(dict.fromkeys(self._dropped_workers + lost))
                names = ", ".join(w.endpoint for w in lost)
                return ExitDecision(action=f"re-planning without the RPC worker {names} and restarting; "
                                           "once it is back the tray offers to use it again", retry=True)
        drafter = getattr(plan, "drafter", None)
        if (incident.kind == "drafter-failure" and drafter is not None and drafter.draft_path
                and launch.build_id is not None):
            if drafter.status == "forced":
                return ExitDecision(action=f"kept {Path(drafter.draft_path).name}, the drafter set for "
                                           f"this model; it is the likely cause", retry=False)
            with self._lock:
                ledger = mark_drafter_broken(
                    self._load_ledger(), launch.build_id, drafter.draft_path, now, ctx.identity,
                    f"{incident.title} ({incident.evidence})")
                self._save_ledger(ledger)
            return ExitDecision(action=f"marked the drafter {Path(drafter.draft_path).name} broken with "
                                       f"{launch.build_id}; retrying without it", retry=True)
        if incident.counts_as_strike and launch.build_id:
            with self._lock:
                ledger, now_quarantined = record_strike(self._load_ledger(), launch.build_id,
                                                        ctx.identity, now, incident)
                self._save_ledger(ledger)
            if now_quarantined:
                return ExitDecision(action=f"quarantined {launch.build_id}; the next build in line "
                                           f"is used", retry=True)
            if is_quarantined(ledger, launch.build_id, ctx.identity):
                return ExitDecision()
            n = sum(1 for s in ledger.strikes if s.build_id == launch.build_id)
            return ExitDecision(action=f"strike {n} of 3 against {launch.build_id}", retry=True)
        if incident.recoverable_by in ("smaller-plan", "drop-drafter") and isinstance(plan, LaunchPlan):
            with self._lock:
                steps = self._recovery.get(launch.model_path, ())
            step = next_recovery_step(RecoveryInputs(
                plan=plan, overrides=ctx.overrides, user_overrides=ctx.user_overrides,
                policy=ctx.policy, phase=exit.phase, n_layers=ctx.n_layers, is_moe=ctx.is_moe,
                # the planner's own floor: a smaller context is one it would not keep anyway
                min_ctx=getattr(ctx.policy, "min_ctx", CTX_FLOOR)),
                incident, steps)
            if step is None:
                return ExitDecision(action="no smaller plan is left to try")
            with self._lock:
                self._recovery[launch.model_path] = steps + (step,)
            return ExitDecision(action=f"{_step_words(step)}: {step.reason}", retry=True)
        return ExitDecision()

    def after_ready(self, launch: PreparedLaunch, lines) -> None:
        """Record this launch's real buffers, so the next plan uses the measured line; remember
        a chosen drafter the engine refused, so the next launch does not load it for nothing."""

        driver = driver_for(launch.kind)
        if launch.plan is None:
            return
        lesson = driver.learn_at_ready(launch.model_path, launch.spec.binary, launch.plan, lines)
        if lesson.problem is not None:
            log.warning("%s", lesson.problem)
        elif lesson.measured_lines == 0:
            log.info("the %s start-up output had no complete memory report; nothing measured",
                     driver.description.binary_name)
        ctx = launch.context
        drafter = getattr(launch.plan, "drafter", None)
        if (lesson.drafter_dropped is not None and ctx is not None and drafter is not None
                and launch.build_id is not None):
            with self._lock:
                ledger = mark_drafter_broken(self._load_ledger(), launch.build_id, drafter.draft_path,
                                             self.clock(), ctx.identity,
                                             f"the engine started without it: {lesson.drafter_dropped}")
                self._save_ledger(ledger)

    def engine_health(self) -> EngineHealth:
        """Quarantined builds (from the saved ledger), builds blocked for this machine's GPUs,
        missing runtimes and the settings problems of this session, for the snapshot."""

        ledger = self._load_ledger()
        quarantined = tuple((q.build_id, q.why) for q in ledger.quarantined)
        blockers = list(self._build_blockers)
        for b in self._missing_runtime:
            ldd = "\n".join(f"{lib} => not found" for lib in b.missing_libraries)
            view = missing_runtime_from_ldd(ldd)
            if view is not None and view not in blockers:
                blockers.append(view)
        return EngineHealth(blockers=tuple(blockers), quarantined=quarantined,
                            problems=self.problems(),
                            workers_back=tuple(w.endpoint for w in self.workers_back()))

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
