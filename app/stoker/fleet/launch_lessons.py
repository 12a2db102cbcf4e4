"""What a launch's end and its READY teach the next launch of the same model.

RealPreparer (stoker/fleet/launcher.py) hands the supervisor's after_exit and after_ready
hooks here, and asks before each launch which recovery step the model is on. This module
keeps what those lessons are made of: strikes, quarantine and broken (build, drafter) pairs
in the ledger on disk (`<data>/quarantine.json`, stoker/fleet/ledger.py), the OOM recovery
steps taken per model (in memory: a restart of Stoker begins afresh), and the measured
memory lines the engine's driver records at READY. The decisions are the pure modules'
(stoker/fleet/quarantine.py, stoker/fleet/recovery.py); this module carries them out under
one lock, because the supervisor thread and a person's "lift the quarantine" may meet.

It must not choose a build or plan a launch (stoker/fleet/build_choice.py and the drivers
do), and it knows nothing of RPC workers: a worker a launch lost is the preparer's
(stoker/fleet/rpc_roster.py), asked before these lessons are.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from stoker.base.paths import stoker_paths, storage_sentence
from stoker.diagnosis.exit_report import Incident
from stoker.engines.drivers import driver_for
from stoker.engines.engine_exit import EngineExit
from stoker.engines.launch import ExitDecision, PreparedLaunch
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.quarantine import Ledger, is_quarantined, lift, mark_drafter_broken, record_strike
from stoker.fleet.recovery import CTX_FLOOR, RecoveryInputs, RecoveryStep, next_recovery_step
from stoker.planning.plan import LaunchPlan

log = logging.getLogger(__name__)


def step_words(step: RecoveryStep) -> str:
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


class LaunchLessons:
    """The ledger and the recovery ladder, for the preparer that owns them."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # model path -> the recovery steps taken since a person last started it
        self._recovery: dict[str, tuple[RecoveryStep, ...]] = {}

    # -- the ledger on disk

    @staticmethod
    def _store() -> LedgerStore:
        return LedgerStore.in_data_dir(stoker_paths().data)

    def load_ledger(self) -> Ledger:
        """The saved ledger; what in it could not be used is logged, one sentence each."""
        ledger, problems = self._store().load()
        for problem in problems:
            log.warning("%s", problem)
        return ledger

    def _save_ledger(self, ledger: Ledger) -> None:
        """Save what a failure taught; a read-only or full data folder costs the memory of it
        across restarts of Stoker, never the launch (one sentence, no traceback)."""
        try:
            self._store().save(ledger)
        except OSError as exc:
            log.warning("could not save the engine ledger: %s", storage_sentence(exc))

    def lift_quarantine(self, build_id: str) -> None:
        """The user's word: use this build again (saved, so a restart of Stoker keeps it).
        Unlike a lesson, a save that fails here is the person's to hear (it raises)."""
        with self._lock:
            self._store().save(lift(self.load_ledger(), build_id))

    def quarantined(self) -> tuple[tuple[str, str], ...]:
        """(build id, why) of every quarantined build, from the saved ledger."""
        return tuple((q.build_id, q.why) for q in self.load_ledger().quarantined)

    # -- the recovery ladder

    def recovery_steps(self, model_path: str, *, after_failure: bool) -> tuple[RecoveryStep, ...]:
        """The steps this model's next attempt plans with; a person's start (not
        `after_failure`) begins afresh, with none."""
        with self._lock:
            if not after_failure:
                self._recovery.pop(model_path, None)
            return self._recovery.get(model_path, ())

    # -- the supervisor's hooks

    def after_exit(self, launch: PreparedLaunch, incident: Incident, exit: EngineExit) -> ExitDecision:
        """A broken drafter, a strike (and quarantine) against the build, or the next rung
        of the OOM recovery ladder: what this failed exit changes about the next attempt."""
        ctx, plan = launch.context, launch.plan
        if ctx is None or plan is None:
            return ExitDecision()
        now = self._clock()
        drafter = plan.drafter if isinstance(plan, LaunchPlan) else None
        if (incident.kind == "drafter-failure" and drafter is not None and drafter.draft_path
                and launch.build_id is not None):
            if drafter.status == "forced":
                return ExitDecision(action=f"kept {Path(drafter.draft_path).name}, the drafter set for "
                                           f"this model; it is the likely cause", retry=False)
            with self._lock:
                ledger = mark_drafter_broken(
                    self.load_ledger(), launch.build_id, drafter.draft_path, now, ctx.identity,
                    f"{incident.title} ({incident.evidence})")
                self._save_ledger(ledger)
            return ExitDecision(action=f"marked the drafter {Path(drafter.draft_path).name} broken with "
                                       f"{launch.build_id}; retrying without it", retry=True)
        if incident.counts_as_strike and launch.build_id:
            with self._lock:
                ledger, now_quarantined = record_strike(self.load_ledger(), launch.build_id,
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
            return ExitDecision(action=f"{step_words(step)}: {step.reason}", retry=True)
        return ExitDecision()

    def after_ready(self, launch: PreparedLaunch, lines: Sequence[str]) -> None:
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
        # Only a launch with a drafter file can have the engine drop it.
        draft_path = launch.plan.drafter.draft_path if isinstance(launch.plan, LaunchPlan) else None
        if (lesson.drafter_dropped is not None and ctx is not None and draft_path is not None
                and launch.build_id is not None):
            with self._lock:
                ledger = mark_drafter_broken(self.load_ledger(), launch.build_id, draft_path,
                                             self._clock(), ctx.identity,
                                             f"the engine started without it: {lesson.drafter_dropped}")
                self._save_ledger(ledger)
