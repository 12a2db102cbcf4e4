"""The fleet as a pure reducer: `step(state, event, now) -> (state, effects)`.

Which models Stoker holds engines for, and everything decided about them as a group: the
loads waiting for room (FIFO), the requests waiting for a model (EnsureModel tickets), pins,
on-demand loads cancelled when their last waiter leaves, asked unloads, idle expiry, which
model the top-level snapshot fields describe (the focus) and which stopped models are
forgotten. One model's own lifecycle (STARTING → READY, retries, stops) is the other
reducer, stoker/fleet/lifecycle.py; the supervisor feeds this one what it needs of that
(`PhaseChanged`) and of the gateway's route table (`Tick`'s usage), and carries out the
effects: start or stop an engine, prepare a launch to decide its admission, answer a
waiter, forget a model.

Admission goes through stoker/fleet/residency.py (`admit`, whose eviction order is one
function there), and so does yielding memory to other applications (`MemoryRead`: a reading
of what is free now; `yield_to_desktop` decides which idle models go). What this module must
not do: read the clock (`now` is passed in), touch a process, a route or a callback, or
call the preparer; it sees keys (real model paths), bytes, phases and usage, and answers
with frozen effects.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import assert_never

from stoker.fleet.residency import (
    AdmissionKind,
    FreeMemory,
    Resident,
    YieldedModel,
    admit,
    expired,
    next_expiry,
    yield_to_desktop,
)
from stoker.fleet.snapshot import EngineState

S = EngineState
# A model in these phases holds (or is about to hold) memory: it counts against the budget.
RESIDENT_PHASES = frozenset({S.STARTING, S.READY, S.STOPPING, S.BACKOFF})
ADMIT_RETRY_S = 1.0  # a load waiting for room is decided again at least this often
# Which model the top-level snapshot describes when the focused one is gone: the one that serves.
_FOCUS_RANK = {S.READY: 0, S.STARTING: 1, S.BACKOFF: 2, S.STOPPING: 3, S.FAILED: 4}

# ---------------------------------------------------------------------------- state


@dataclass(frozen=True)
class Member:
    """One model the fleet knows: what the fleet decided about it, and the facts it needs
    of the model's lifecycle (its phase) and plan (its bytes and idle timeout)."""

    key: str  # the model's real path ("" for the preparer's own choice)
    model_id: str
    phase: EngineState = S.STOPPED
    bytes_by_device: tuple[tuple[str, int], ...] = ()
    idle_timeout_s: float | None = None  # None: never unloaded for idleness
    failure: str | None = None  # while FAILED: the sentence a waiter is answered with
    pinned: bool = False
    on_demand: bool = False  # loaded for waiting requests: cancelled when they all leave
    unload_when_idle: bool = False  # asked to unload: stop once nothing is in flight
    # Unloaded because other applications need the memory (with unload_when_idle): the
    # sentence and bytes a person is told once its engine really stops.
    yielding: YieldedModel | None = None
    queued: str | None = None  # waiting for room, and why
    reload_s: float | None = None  # its measured load time (None: never measured)
    beside: bool = False  # an embedding or rerank model (residency.Resident.beside)

    @property
    def resident(self) -> bool:
        return self.phase in RESIDENT_PHASES


@dataclass(frozen=True)
class Usage:
    """What the gateway's route table says of one model right now."""

    key: str
    in_flight: int
    last_used_at: float | None
    routed: bool  # a route is open: a waiter can be answered with it


@dataclass(frozen=True)
class FleetState:
    members: tuple[Member, ...] = ()
    pending: tuple[str, ...] = ()  # keys of loads waiting for admission, FIFO
    waiters: tuple[tuple[Hashable, str], ...] = ()  # (ticket, key), oldest first
    focus: str | None = None
    shutting_down: bool = False
    admit_at: float = 0.0  # the head of `pending` is decided again from this time on
    deciding: str | None = None  # a PrepareAdmission is out for this key
    # Memory is short and only these busy or pinned models could make room (told once per change).
    short_kept: tuple[str, ...] = ()

    def member(self, key: str | None) -> Member | None:
        return next((m for m in self.members if m.key == key), None) if key is not None else None

    def waited(self) -> frozenset[str]:
        return frozenset(k for _, k in self.waiters)


# ---------------------------------------------------------------------------- events


@dataclass(frozen=True)
class LoadAsked:
    """StartModel, LoadModel, SwitchModel: a person's (or a command's) load; it takes the focus."""

    key: str
    model_id: str
    pin: bool | None = None  # None: leave the pin as it is
    switch: bool = False  # unload every other model (each once its requests end)


@dataclass(frozen=True)
class EnsureAsked:
    ticket: Hashable
    key: str
    model_id: str


@dataclass(frozen=True)
class EnsureCancelled:
    ticket: Hashable


@dataclass(frozen=True)
class PinAsked:
    key: str | None  # None: the focused model
    pinned: bool


@dataclass(frozen=True)
class UnloadAsked:
    key: str | None  # None: the focused model


@dataclass(frozen=True)
class StopAsked:
    key: str | None  # None: every model


@dataclass(frozen=True)
class ShutdownAsked:
    pass


@dataclass(frozen=True)
class PhaseChanged:
    """A model's lifecycle moved (or its launch changed): the facts the fleet decides on."""

    key: str
    phase: EngineState
    bytes_by_device: tuple[tuple[str, int], ...] = ()
    idle_timeout_s: float | None = None
    failure: str | None = None
    reload_s: float | None = None
    beside: bool = False


@dataclass(frozen=True)
class AdmissionFacts:
    """The launch prepared for the head of the queue: its plan's bytes and budget per device
    (None for a launch without a plan, which is admitted as it is), or a refused preparation."""

    key: str
    need: tuple[tuple[str, int], ...] | None
    budget: tuple[tuple[str, int], ...] | None
    usage: tuple[Usage, ...]


@dataclass(frozen=True)
class Tick:
    """Something may have changed outside the fleet: the route table's usage as it is now."""

    usage: tuple[Usage, ...]
    usage_changed: bool = False  # a request ended or began since the last tick


@dataclass(frozen=True)
class MemoryRead:
    """A reading of the memory free now (other applications may have grown), with the
    route table's usage: idle models go when the reserve no longer fits."""

    reading: FreeMemory
    usage: tuple[Usage, ...]


Event = (LoadAsked | EnsureAsked | EnsureCancelled | PinAsked | UnloadAsked | StopAsked | ShutdownAsked
         | PhaseChanged | AdmissionFacts | Tick | MemoryRead)

# ---------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class StartEngine:
    """Feed the model's lifecycle a start. `refused`: the sentence its start fails with."""

    key: str
    refused: str | None = None


@dataclass(frozen=True)
class StopEngine:
    """Close the model's route and stop its engine now (a person asked, or a cancelled load)."""

    key: str
    why: str


@dataclass(frozen=True)
class StopIfIdle:
    """Close the route only if nothing is in flight (the route table decides that race-free),
    and stop the engine then; else it goes on serving and the next Tick asks again."""

    key: str
    why: str


@dataclass(frozen=True)
class YieldMemory:
    """Memory is tight: close the route and stop the engine if nothing is in flight (as
    StopIfIdle: until then each Tick asks again), and once it stops tell a person `note`
    (a log line, the snapshot, a notification)."""

    key: str
    note: str
    freed_bytes: int


@dataclass(frozen=True)
class CloseRoute:
    key: str


@dataclass(frozen=True)
class PrepareAdmission:
    """Prepare the launch of the head of the queue and answer with AdmissionFacts."""

    key: str


@dataclass(frozen=True)
class Answer:
    """Answer a waiting request: with the model's route (`error` None), or a sentence."""

    ticket: Hashable
    key: str
    error: str | None = None


@dataclass(frozen=True)
class ShutdownEngines:
    """Close every route and stop every engine for good."""


@dataclass(frozen=True)
class Forget:
    """The model is stopped and nobody asks for it: drop it and its route's usage."""

    key: str


@dataclass(frozen=True)
class Publish:
    pass


@dataclass(frozen=True)
class MemoryShort:
    """Memory is tight and what is left to unload is busy or pinned: a log line (never a stop)."""

    sentence: str


Effect = (StartEngine | StopEngine | StopIfIdle | YieldMemory | MemoryShort | CloseRoute | PrepareAdmission
          | Answer | ShutdownEngines | Forget | Publish)

# ---------------------------------------------------------------------------- the reducer


def step(state: FleetState, event: Event, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    """The next fleet state and the effects to carry out, in order."""
    if state.shutting_down and not isinstance(event, (PhaseChanged, Tick, ShutdownAsked)):
        if isinstance(event, EnsureAsked):
            return state, (Answer(event.ticket, event.key, "Stoker is shutting down"),)
        return state, ()
    match event:
        case LoadAsked():
            return _load_asked(state, event, now)
        case EnsureAsked():
            return _ensure_asked(state, event, now)
        case EnsureCancelled():
            return _ensure_cancelled(state, event)
        case PinAsked():
            key = event.key if event.key is not None else state.focus
            m = state.member(key)
            if m is None or m.pinned == event.pinned:
                return state, ()
            return _put(state, replace(m, pinned=event.pinned)), (Publish(),)
        case UnloadAsked():
            key = event.key if event.key is not None else state.focus
            return _unload(state, key) if state.member(key) is not None else (state, ())
        case StopAsked():
            keys = [m.key for m in state.members] if event.key is None else [event.key]
            effects: list[Effect] = []
            for key in keys:
                if state.member(key) is None:
                    continue
                state, _ = _unqueue(state, key)
                effects.append(StopEngine(key, "asked to stop"))
            return state, tuple(effects)
        case ShutdownAsked():
            if state.shutting_down:
                return state, ()
            members = tuple(replace(m, queued=None) for m in state.members)
            return (replace(state, shutting_down=True, pending=(), members=members, deciding=None),
                    (ShutdownEngines(), Publish()))
        case PhaseChanged():
            return _phase_changed(state, event)
        case AdmissionFacts():
            return _admission(state, event, now)
        case Tick():
            return _tick(state, event, now)
        case MemoryRead():
            return _memory_read(state, event)
        case _:
            assert_never(event)


def next_deadline(state: FleetState) -> float | None:
    """When the fleet next needs a Tick without any event: a queued load's next decision,
    or the next idle expiry (None: nothing is due until something happens)."""
    times = []
    if state.pending and state.deciding is None:
        times.append(state.admit_at)
    return min(times) if times else None


def expiry_deadline(state: FleetState, usage: tuple[Usage, ...]) -> float | None:
    """When the next idle model would expire, given the route table's usage."""
    return next_expiry([r for r in residents(state, usage, exclude=None) if not r.busy])


def residents(state: FleetState, usage: tuple[Usage, ...], exclude: str | None) -> list[Resident]:
    """The resident models as residency.py sees them: a model is busy while a request is in
    flight or while it is not READY (a load is never evicted)."""
    by_key = {u.key: u for u in usage}
    out = []
    for m in state.members:
        if m.key == exclude or not m.resident:
            continue
        u = by_key.get(m.key)
        in_flight, last_used = (u.in_flight, u.last_used_at) if u is not None else (0, None)
        out.append(Resident(key=m.key, model_id=m.model_id, bytes_by_device=m.bytes_by_device,
                            busy=in_flight > 0 or m.phase is not S.READY, pinned=m.pinned,
                            last_used_at=last_used, idle_timeout_s=m.idle_timeout_s,
                            reload_s=m.reload_s, beside=m.beside))
    return out


# ---------------------------------------------------------------------------- edges


def _put(state: FleetState, member: Member) -> FleetState:
    members = tuple(member if m.key == member.key else m for m in state.members)
    if not any(m.key == member.key for m in state.members):
        members += (member,)
    return replace(state, members=members)


def _known(state: FleetState, key: str, model_id: str) -> Member:
    return state.member(key) or Member(key=key, model_id=model_id)


def _request_load(state: FleetState, key: str, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    """Make this model resident: at once when it fits, else when room is made."""
    m = state.member(key)
    assert m is not None
    state = _put(state, replace(m, unload_when_idle=False, yielding=None))
    if m.phase in (S.STARTING, S.READY, S.BACKOFF):
        return state, ()
    if m.phase is S.STOPPING:
        # Started again once the old process is gone (the lifecycle remembers it).
        return state, (StartEngine(key),)
    if key not in state.pending:
        state = replace(state, pending=state.pending + (key,))
    return _decide_next(replace(state, admit_at=now), now)


def _decide_next(state: FleetState, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    """Ask for the head of the queue's launch, unless room is still being made for it."""
    if not state.pending or state.deciding is not None or now < state.admit_at:
        return state, ()
    head = state.pending[0]
    if any(m.phase is S.STOPPING for m in state.members if m.key != head):
        return state, ()  # room is being made: decided again once it is (PhaseChanged)
    return replace(state, deciding=head), (PrepareAdmission(head),)


def _unqueue(state: FleetState, key: str) -> tuple[FleetState, bool]:
    if key not in state.pending:
        return state, False
    m = state.member(key)
    state = replace(state, pending=tuple(k for k in state.pending if k != key),
                    deciding=None if state.deciding == key else state.deciding)
    if m is not None:
        state = _put(state, replace(m, queued=None))
    return state, True


def _load_asked(state: FleetState, ev: LoadAsked, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    effects: list[Effect] = []
    state = replace(state, focus=ev.key)
    if ev.switch:
        for other in [m.key for m in state.members if m.key != ev.key]:
            state, more = _unload(state, other)
            effects += more
    m = _known(state, ev.key, ev.model_id)
    state = _put(state, replace(m, on_demand=False, pinned=m.pinned if ev.pin is None else ev.pin))
    state, more = _request_load(state, ev.key, now)
    return state, (*effects, *more, Publish())


def _ensure_asked(state: FleetState, ev: EnsureAsked, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    m = _known(state, ev.key, ev.model_id)
    state = replace(_put(state, m), waiters=state.waiters + ((ev.ticket, ev.key),))
    if m.phase not in (S.STOPPED, S.FAILED) or ev.key in state.pending:
        return state, ()
    if m.phase is S.FAILED and m.failure:
        return state, ()  # answered with its sentence at the next Tick
    state = _put(state, replace(m, on_demand=True))
    return _request_load(state, ev.key, now)


def _ensure_cancelled(state: FleetState, ev: EnsureCancelled) -> tuple[FleetState, tuple[Effect, ...]]:
    entry = next(((t, k) for t, k in state.waiters if t == ev.ticket), None)
    if entry is None:
        return state, ()
    state = replace(state, waiters=tuple(w for w in state.waiters if w != entry))
    key = entry[1]
    m = state.member(key)
    if key in state.waited() or m is None or m.pinned or not m.on_demand or state.shutting_down:
        return state, ()
    if key in state.pending:
        state, _ = _unqueue(state, key)
        return state, (Publish(),)
    if m.phase is S.STARTING:
        return state, (StopEngine(key, "every request waiting for it has gone; its load is cancelled"),)
    return state, ()


def _unload(state: FleetState, key: str | None) -> tuple[FleetState, tuple[Effect, ...]]:
    """A person asked: stop taking requests for it and stop it once none is in flight."""
    m = state.member(key)
    if m is None:
        return state, ()
    state, _ = _unqueue(state, m.key)
    if m.phase is S.READY:
        return _put(state, replace(m, unload_when_idle=True, yielding=None, queued=None)), (
            CloseRoute(m.key), StopIfIdle(m.key, "asked to unload"))
    if m.phase in (S.STARTING, S.BACKOFF, S.FAILED):
        return state, (StopEngine(m.key, "asked to unload"),)
    return state, (CloseRoute(m.key),)


def _phase_changed(state: FleetState, ev: PhaseChanged) -> tuple[FleetState, tuple[Effect, ...]]:
    m = state.member(ev.key)
    if m is None:
        return state, ()
    unload = m.unload_when_idle and ev.phase is S.READY
    state = _put(state, replace(m, phase=ev.phase, bytes_by_device=ev.bytes_by_device,
                                idle_timeout_s=ev.idle_timeout_s, failure=ev.failure,
                                unload_when_idle=unload, yielding=m.yielding if unload else None,
                                reload_s=ev.reload_s, beside=ev.beside))
    return state, ()


def _admission(state: FleetState, ev: AdmissionFacts, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    if state.deciding != ev.key or not state.pending or state.pending[0] != ev.key:
        return state, ()  # cancelled while it was being prepared
    state = replace(state, deciding=None)
    m = state.member(ev.key)
    assert m is not None
    refused = None
    if ev.need is not None and ev.budget is not None:
        decision = admit(m.model_id, dict(ev.need), dict(ev.budget),
                         residents(state, ev.usage, exclude=ev.key))
        if decision.kind is AdmissionKind.REFUSE:
            refused = decision.reason
        elif decision.kind is not AdmissionKind.FITS:
            effects: list[Effect] = [StopIfIdle(k, decision.reason) for k in decision.evict]
            if m.queued != decision.reason:
                state = _put(state, replace(m, queued=decision.reason))
                effects.append(Publish())
            return replace(state, admit_at=now + ADMIT_RETRY_S), tuple(effects)
    state = replace(state, pending=state.pending[1:], admit_at=now)
    state = _put(state, replace(m, queued=None))
    nxt, more = _decide_next(state, now)
    return nxt, (StartEngine(ev.key, refused), *more)


def _tick(state: FleetState, ev: Tick, now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    effects: list[Effect] = []
    if ev.usage_changed and state.pending:
        state = replace(state, admit_at=min(state.admit_at, now))  # a request ended: room may be free
    state, more = _decide_next(state, now)
    effects += more
    for m in state.members:
        if m.unload_when_idle and m.phase is S.READY:
            effects.append(YieldMemory(m.key, m.yielding.note, m.yielding.freed_bytes) if m.yielding
                           else StopIfIdle(m.key, "asked to unload"))
    idle = [r for r in residents(state, ev.usage, exclude=None) if not r.busy]
    for key in expired(idle, now):
        member = state.member(key)
        if member is not None and member.phase is S.READY and not member.unload_when_idle:
            effects.append(StopIfIdle(key, "idle for its timeout"))
    state, more = _answer_waiters(state, ev.usage, now)
    effects += more
    state, more = _drop_stopped(state)
    effects += more
    return state, tuple(effects)


def _memory_read(state: FleetState, ev: MemoryRead) -> tuple[FleetState, tuple[Effect, ...]]:
    """Other applications grew: unload the idle models `yield_to_desktop` names. A model
    already stopping, or already asked to unload, is not asked again: its bytes count as
    coming back. Each one yielded is marked asked-to-unload, so its route stays closed and
    the next reading does not choose it twice; its next request loads it again as usual."""
    going = {m.key for m in state.members if m.phase is S.STOPPING or (m.unload_when_idle and m.resident)}
    freeing: dict[str, int] = {}
    for m in state.members:
        if m.key in going:
            for dev, b in m.bytes_by_device:
                pool = "CPU" if ev.reading.unified else dev
                freeing[pool] = freeing.get(pool, 0) + b
    candidates = [r for r in residents(state, ev.usage, exclude=None) if r.key not in going]
    decision = yield_to_desktop(candidates, ev.reading, freeing)
    kept = decision.kept if decision is not None else ()
    effects: list[Effect] = []
    if kept != state.short_kept:
        state = replace(state, short_kept=kept)
        if kept:
            effects.append(MemoryShort(f"memory is tight, and only {', '.join(kept)} could make room; "
                                       "busy or pinned, they stay"))
    if decision is None:
        return state, tuple(effects)
    for y in decision.unload:
        chosen = state.member(y.key)
        if chosen is None or chosen.phase is not S.READY:
            continue
        state = _put(state, replace(chosen, unload_when_idle=True, yielding=y))
        effects.append(YieldMemory(y.key, y.note, y.freed_bytes))
    if any(isinstance(e, YieldMemory) for e in effects):
        effects.append(Publish())
    return state, tuple(effects)


def _answer_waiters(state: FleetState, usage: tuple[Usage, ...],
                    now: float) -> tuple[FleetState, tuple[Effect, ...]]:
    routed = {u.key for u in usage if u.routed}
    effects: list[Effect] = []
    for ticket, key in state.waiters:
        m = state.member(key)
        if key in routed:
            effects.append(Answer(ticket, key))
        elif m is not None and m.phase is S.FAILED:
            effects.append(Answer(ticket, key, m.failure or "the model could not be loaded"))
        elif m is not None and m.phase is S.STOPPED and key not in state.pending \
                and not state.shutting_down:
            # Unloaded meanwhile (idle, or for room): load it again.
            state = _put(state, replace(m, on_demand=True))
            state, more = _request_load(state, key, now)
            effects += more
            continue
        else:
            continue
    answered = {e.ticket for e in effects if isinstance(e, Answer)}
    if answered:
        state = replace(state, waiters=tuple(w for w in state.waiters if w[0] not in answered))
    return state, tuple(effects)


def _drop_stopped(state: FleetState) -> tuple[FleetState, tuple[Effect, ...]]:
    """Forget models that are gone and not asked for. The focused one stays (the tray shows
    the last model) unless another one runs, which then takes the focus."""
    if state.shutting_down:
        return state, ()
    effects: list[Effect] = []
    alive = sorted((m for m in state.members if m.phase is not S.STOPPED), key=lambda m: _FOCUS_RANK[m.phase])
    focus = state.member(state.focus)
    if alive and (focus is None or focus.phase is S.STOPPED) and (focus is None or focus.key not in state.pending):
        state = replace(state, focus=alive[0].key)
        effects.append(Publish())
    waited = state.waited()
    gone = [m.key for m in state.members if m.phase is S.STOPPED and m.key != state.focus
            and m.key not in state.pending and m.key not in waited]
    if gone:
        state = replace(state, members=tuple(m for m in state.members if m.key not in gone))
        effects += [Forget(k) for k in gone]
        effects.append(Publish())
    return state, tuple(effects)
