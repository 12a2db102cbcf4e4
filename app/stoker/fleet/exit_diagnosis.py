"""What an engine's end means, and the one place incidents are recorded.

Diagnosis of an exit (stoker/diagnosis/classify.py) with the launch's facts (its drafter,
whether the plan wanted a GPU, the kernel's OOM killer), whether a retry can help, and the
blockers an incident or a start-up log shows. `IncidentRecorder` keeps the latest incidents
for the snapshot and appends every one to the ledger, `<data>/incidents.jsonl`
(stoker/diagnosis/incidents.py), so they are still there after Stoker restarts.
It decides no transition (the lifecycle does) and touches no process.
"""

from __future__ import annotations

import logging
from pathlib import Path

from stoker.base.paths import storage_sentence
from stoker.diagnosis import classify as diagnosis
from stoker.diagnosis.blockers import blocker_from_incident, gpu_unused_blocker
from stoker.diagnosis.exit_report import Incident
from stoker.diagnosis.incidents import IncidentLog
from stoker.diagnosis.silent_fallbacks import drafter_dropped_from_log, gpu_unused_from_log
from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.engines.drivers import driver_for
from stoker.engines.engine_exit import EngineExit
from stoker.engines.launch import ExitDecision, PreparedLaunch
from stoker.engines.process import host_os
from stoker.fleet.lifecycle import RecordIncident
from stoker.planning.plan import LaunchPlan

log = logging.getLogger(__name__)

MAX_INCIDENTS = 5  # the latest incidents every snapshot carries (oldest first, newest last)


HOPELESS_KINDS = frozenset({"bad-argument", "bad-model", "missing-library", "illegal-instruction",
                            "cuda-driver-too-old", "no-kernel-image", "stale-library",
                            "system-too-old"})


def drafter_left_out_by_engine(lines, launch: PreparedLaunch | None) -> tuple[str, str] | None:
    """("left-out", sentence) when the engine dropped the planned drafter while starting."""
    plan = launch.plan if launch is not None else None
    has_drafter, _ = _drafter_facts(launch)
    why = drafter_dropped_from_log(lines) if has_drafter else None
    if why is None or not isinstance(plan, LaunchPlan):
        return None
    name = Path(plan.drafter.draft_path or "the drafter").name
    return "left-out", f"the engine started without {name}: {why}"


def _drafter_facts(launch: PreparedLaunch | None) -> tuple[bool, bool]:
    """(a drafter file or head was loaded, the user forced it) for this launch's plan."""
    plan = launch.plan if launch is not None else None
    status = plan.drafter.status if isinstance(plan, LaunchPlan) else None
    return status in ("in", "forced"), status == "forced"


def _plan_wanted_gpu(launch: PreparedLaunch | None) -> bool:
    plan = launch.plan if launch is not None else None
    layers = plan.gpu_layers if isinstance(plan, LaunchPlan) else None
    return bool(launch and launch.backend not in (None, "cpu") and layers not in (None, 0, "0"))


def diagnose_exit(ex: EngineExit, launch: PreparedLaunch | None) -> Incident | None:
    """core.diagnosis.Incident for an exit (drafter, GPU and OOM-killer facts included), or None."""
    has_drafter, forced = _drafter_facts(launch)
    try:
        report = diagnosis.report_from_engine_exit(
            ex, backend=launch.backend if launch else None, plan_wanted_gpu=_plan_wanted_gpu(launch),
            has_drafter=has_drafter, drafter_forced=forced,
            os=host_os(), oom_killed=ex.oom_killed)
        if launch is not None:
            # ds4 and sd-server name their failures in lines of their own (their drivers);
            # llama-server's lines are classify_exit's, its driver names none.
            driver = driver_for(launch.kind)
            for line in reversed(ex.log_tail):
                kind = driver.failure_of_line(line)
                if kind is not None:
                    return diagnosis.incident_of_kind(kind, report, line)
        return diagnosis.classify_exit(report)
    except Exception:
        log.warning("classify_exit failed; recording a plain incident", exc_info=True)
        return None


def hopeless_reason(ex: EngineExit, launch: PreparedLaunch | None,
                    incident: Incident | None = None) -> str | None:
    """A sentence when retrying this start-up failure cannot help, else None."""
    if ex.phase != "starting" or ex.signalled_by_us:
        return None
    inc = incident if incident is not None else diagnose_exit(ex, launch)
    if inc is None:
        return None  # without diagnosis, fall back to the retry budget
    return inc.title if inc.kind in HOPELESS_KINDS else None


def plain_incident(effect: RecordIncident) -> Incident:
    """An Incident for a failure with no process exit: a start-up timeout or a refused start."""
    return Incident(kind=effect.kind or "unknown", title=effect.summary, evidence="",
                    advice="see the engine log, or start it again with a smaller context",
                    counts_as_strike=False, recoverable_by=None, exit_description=None)


def blocker_for(incident: Incident, ex: EngineExit, launch: PreparedLaunch | None,
                 model_path: str | None) -> BlockerView | None:
    name = Path(model_path).name.removesuffix(".gguf") if model_path else None
    try:
        return blocker_from_incident(incident, name, ex.phase, launch.backend if launch else None)
    except Exception:
        log.warning("could not turn an incident into a blocker", exc_info=True)
        return None


def gpu_unused_blockers(lines, launch: PreparedLaunch) -> tuple[BlockerView, ...]:
    """gpuUnused for the build that just became READY, from its own start-up log."""
    evidence = gpu_unused_from_log(lines, launch.backend, _plan_wanted_gpu(launch))
    blocker = gpu_unused_blocker(evidence, launch.backend)
    return (blocker,) if blocker is not None else ()


class IncidentRecorder:
    """The latest incidents (for every snapshot) and the ledger they are appended to."""

    def __init__(self, ledger: IncidentLog) -> None:
        self._ledger = ledger
        try:  # what happened before this Stoker started stays visible
            self.latest: tuple[IncidentView, ...] = tuple(reversed(ledger.latest(MAX_INCIDENTS)))
        except OSError:
            self.latest = ()

    def record(self, effect: RecordIncident, *, now: float, key: str, model_id: str | None,
               launch: PreparedLaunch | None,
               diagnosed: tuple[EngineExit, Incident | None, ExitDecision] | None
               ) -> tuple[Incident, BlockerView | None]:
        """Record one failure; the incident and the blocker it shows (None: none)."""
        incident: Incident | None = None
        decided: str | None = None
        if effect.exit is not None and diagnosed is not None and diagnosed[0] is effect.exit:
            _, incident, decision = diagnosed
            decided = decision.action
        elif effect.exit is not None:
            incident = diagnose_exit(effect.exit, launch)
        action = f"{decided}; {effect.action}" if decided else effect.action
        if incident is None:
            incident = plain_incident(effect)
        model = key or (launch.model_path if launch is not None else None)
        view = IncidentView(at=now, kind=incident.kind, summary=incident.title,
                            evidence=incident.evidence or None, advice=incident.advice, action=action,
                            model_path=key or None, model_id=model_id)
        self.latest = (self.latest + (view,))[-MAX_INCIDENTS:]
        blocker = blocker_for(incident, effect.exit, launch, model) if effect.exit is not None else None
        try:
            self._ledger.append(incident, at=now, model=model,
                                build=launch.build_id if launch else None, action=action)
        except OSError as exc:  # a read-only or full data folder: one sentence, the engine goes on
            log.warning("could not append to the incident log: %s", storage_sentence(exc))
        return incident, blocker

    def failure_sentence(self, key: str, last_error: str | None) -> str:
        """What a request waiting for this failed model is told."""
        for inc in reversed(self.latest):
            if inc.model_path == key or inc.model_path is None:
                return f"{inc.summary}: {inc.advice}" if inc.advice else inc.summary
        return last_error or "the model could not be loaded"
