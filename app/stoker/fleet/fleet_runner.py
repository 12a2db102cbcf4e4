"""Carries out the fleet reducer's decisions for the supervisor, on the supervisor thread.

stoker/fleet/fleet_state.py decides for the models as a group (admission, queued loads,
waiting requests, pins, unloads, idle expiry, the focus); this module holds its state, the
engine records (stoker/fleet/engine_record.py) it decides about and the EnsureModel
callbacks waiting on it, steps it with events and carries out its effects: a start or a
stop goes to one engine's runner (EngineRunner in stoker/fleet/supervisor.py, seen here
as `EngineOps`), a route is closed or forgotten in the route table, a waiter is answered.
It also tells the fleet what it decides on of one engine (its phase, the bytes its plan
holds per device, its idle timeout, its measured load time, whether it serves embeddings or
reranking) when that changed, and keeps the last models yielded to other applications
(`yielded`, for the snapshot: each one a log line and a notification).

It must not decide anything itself (no admission, no order, no timing), start a thread or
touch a process: the supervisor's one thread calls every method here, and a record's
process is only the EngineRunner's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Protocol, assert_never

from stoker.engines.launch import PreparationRefused, PreparedLaunch
from stoker.fleet import fleet_state as fleet
from stoker.fleet import lifecycle as life
from stoker.fleet.commands import EnsureResult
from stoker.fleet.engine_record import EngineRecord
from stoker.fleet.exit_diagnosis import IncidentRecorder
from stoker.fleet.health_watch import HealthProber
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.routes import RouteTable
from stoker.fleet.snapshot import EngineState, YieldView
from stoker.fleet.snapshot_assembly import bytes_by_device

log = logging.getLogger(__name__)

Answer = Callable[[EnsureResult], None]
YIELDS_KEPT = 8  # the snapshot's recent "memory is tight" unloads (a notification each)
# The flags stoker/engines/argv.py gives an engine that serves embeddings or reranking: such a
# model stays beside a chat model unless memory is tight (residency.Resident.beside).
BESIDE_FLAGS = frozenset({"--embeddings", "--rerank"})


class EngineOps(Protocol):
    """What the fleet's effects ask of one engine's runner (EngineRunner)."""

    def feed(self, e: EngineRecord, event: life.Event) -> None: ...

    def stop(self, engine: EngineRecord) -> None: ...

    def prepare(self, e: EngineRecord, attempt: int) -> PreparedLaunch | PreparationRefused: ...


def call_answer(answer: Answer, result: EnsureResult) -> None:
    """Answer an EnsureModel waiter; a callback that raises is logged, never the thread's end."""
    try:
        answer(result)
    except Exception:
        log.exception("an EnsureModel callback failed")


class FleetRunner:
    def __init__(self, runner: EngineOps, routes: RouteTable, prober: HealthProber, incidents: IncidentRecorder,
                 *, policy: RestartPolicy, clock: Callable[[], float], model_id: Callable[[str], str],
                 publish: Callable[[], None]) -> None:
        self._runner = runner
        self._routes = routes
        self._prober = prober
        self._incidents = incidents
        self._policy = policy
        self._clock = clock
        self._model_id = model_id
        self._publish = publish
        self.state = fleet.FleetState()
        self.engines: dict[str, EngineRecord] = {}
        self._answers: dict[Hashable, Answer] = {}  # EnsureModel tickets
        self.yielded: tuple[YieldView, ...] = ()  # newest last

    def engine(self, key: str) -> EngineRecord:
        """The model's record, made on first use."""
        engine = self.engines.get(key)
        if engine is None:
            engine = self.engines[key] = EngineRecord(key, self._policy)
        return engine

    # -- the waiters of EnsureModel

    def ensure(self, ticket: Hashable, key: str, answer: Answer) -> None:
        """A request waits for this model: answered once it is READY, or cannot be."""
        self.engine(key)
        self._answers[ticket] = answer
        self.do(fleet.EnsureAsked(ticket, key, self._model_id(key)))

    def cancel_ensure(self, ticket: Hashable) -> None:
        self._answers.pop(ticket, None)
        self.do(fleet.EnsureCancelled(ticket))

    def refuse_waiters(self, why: str) -> None:
        """Every waiter still waiting hears `why` (the supervisor is ending)."""
        for answer in list(self._answers.values()):
            call_answer(answer, EnsureResult(error=why))
        self._answers.clear()

    # -- stepping the fleet

    def usage(self) -> tuple[fleet.Usage, ...]:
        """Each member's requests in flight, last use and open route, from the route table."""
        out = []
        for m in self.state.members:
            in_flight, last_used = self._routes.usage(m.key)
            out.append(fleet.Usage(m.key, in_flight, last_used, self._routes.route(m.key) is not None))
        return tuple(out)

    def tick(self) -> None:
        changed = self._routes.changed.is_set()
        self._routes.changed.clear()
        self.do(fleet.Tick(self.usage(), usage_changed=changed))

    def do(self, event: fleet.Event) -> tuple[fleet.Effect, ...]:
        """Step the fleet and carry out what it decided, in order."""
        self.state, effects = fleet.step(self.state, event, self._clock())
        for effect in effects:
            match effect:
                case fleet.StartEngine():
                    engine = self.engine(effect.key)
                    if effect.refused is not None:
                        engine.prepared = PreparationRefused(effect.key, effect.refused)
                    self._runner.feed(engine, life.StartRequested(effect.key or None))
                case fleet.StopEngine():
                    stopped = self.engines.get(effect.key)
                    if stopped is not None:
                        log.info("stopping %s: %s", self._model_id(effect.key), effect.why)
                        self._runner.stop(stopped)
                case fleet.StopIfIdle():
                    idle = self.engines.get(effect.key)
                    if idle is not None and idle.phase is EngineState.READY \
                            and self._routes.close_if_idle(effect.key):
                        log.info("unloading %s: %s", self._model_id(effect.key), effect.why)
                        self._runner.stop(idle)
                case fleet.YieldMemory():
                    self._yield(effect)
                case fleet.MemoryShort():
                    log.warning("%s", effect.sentence)
                case fleet.CloseRoute():
                    self._routes.close(effect.key)
                case fleet.PrepareAdmission():
                    self._prepare_admission(effect.key)
                case fleet.Answer():
                    self._answer(effect)
                case fleet.ShutdownEngines():
                    for engine in list(self.engines.values()):
                        self._routes.close(engine.key)
                        self._runner.feed(engine, life.ShutdownRequested())
                case fleet.Forget():
                    self.engines.pop(effect.key, None)
                    self._routes.forget(effect.key)
                    self._prober.forget(effect.key)
                case fleet.Publish():
                    self._publish()
                case _:
                    assert_never(effect)
        return effects

    def _yield(self, effect: fleet.YieldMemory) -> None:
        """Memory is tight: unload the model if nothing is in flight (else, or while the
        gateway process confirms the close, the next Tick asks again)."""
        engine = self.engines.get(effect.key)
        if engine is None or engine.phase is not EngineState.READY or not self._routes.close_if_idle(effect.key):
            return
        log.warning("%s", effect.note)
        self._runner.stop(engine)
        self.yielded = (self.yielded + (YieldView(at=self._clock(), model_id=self._model_id(effect.key),
                                                  freed_bytes=effect.freed_bytes, note=effect.note),))[-YIELDS_KEPT:]

    def _prepare_admission(self, key: str) -> None:
        """Prepare the head of the queue's launch, so admission can weigh its plan's bytes;
        the launch is kept for its spawn when it is admitted now."""
        engine = self.engine(key)
        prepared = self._runner.prepare(engine, attempt=0)
        engine.prepared = prepared
        need = budget = None
        if isinstance(prepared, PreparedLaunch) and prepared.plan is not None:
            need = tuple((d.name, d.total_bytes) for d in prepared.plan.devices)
            budget = tuple((d.name, d.budget_bytes) for d in prepared.plan.devices)
        effects = self.do(fleet.AdmissionFacts(key, need, budget, self.usage()))
        if not any(isinstance(x, fleet.StartEngine) and x.key == key for x in effects):
            engine.prepared = None  # waits: planned afresh at its next decision

    def _answer(self, effect: fleet.Answer) -> None:
        answer = self._answers.pop(effect.ticket, None)
        if answer is None:
            return
        if effect.error is not None:
            call_answer(answer, EnsureResult(error=effect.error))
            return
        call_answer(answer, EnsureResult(route=self._routes.route(effect.key)))

    # -- what the fleet needs of one engine (EngineRunner's host asks these)

    def phase_changed(self, e: EngineRecord) -> None:
        """Tell the fleet what it decides on: the phase, the plan's bytes, the idle timeout."""
        if self.state.member(e.key) is None:
            return
        failure = (self._incidents.failure_sentence(e.key, e.state.last_error)
                   if e.phase is EngineState.FAILED else None)
        self.do(fleet.PhaseChanged(
            e.key, e.phase, bytes_by_device(e.launch),
            e.launch.idle_timeout_s if e.launch is not None else None, failure, reload_s=e.reload_s,
            beside=e.launch is not None and not BESIDE_FLAGS.isdisjoint(e.launch.spec.argv)))

    def watched_memory(self) -> tuple[bool, str | None]:
        """Whether free memory is worth reading (a model is READY), and the engine build of
        one that holds GPU memory (whose devices are read too; None: RAM only)."""
        ready = [e for e in self.engines.values() if e.phase is EngineState.READY and e.launch is not None]
        gpu = next((e.launch.spec.binary for e in ready if e.launch is not None
                    and any(dev != "CPU" and b > 0 for dev, b in bytes_by_device(e.launch))), None)
        return bool(ready), gpu

    def unloading(self, key: str) -> bool:
        """Asked to unload: its route stays closed."""
        member = self.state.member(key)
        return member is not None and member.unload_when_idle

    def held_by_others(self, key: str) -> tuple[tuple[str, int], ...]:
        """Bytes per device the other resident models hold (a plan adds them back)."""
        held: dict[str, int] = {}
        for m in self.state.members:
            if m.key != key and m.resident:
                for dev, b in m.bytes_by_device:
                    held[dev] = held.get(dev, 0) + b
        return tuple(held.items())
