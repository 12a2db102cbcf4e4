"""Which desktop notifications a new snapshot deserves, de-duplicated and rate-limited.

A notification interrupts the user, so it is sent only for things that changed and that
a user would otherwise miss: a new incident, a build put in quarantine, a blocker found,
a settings problem (a file moved aside, a bad override), the drafter left out, a model
that became ready after a long load, a model unloaded because other applications needed the
memory ("memory is tight: …"), an RPC worker that went away and is back (with the
tray's "Use it again" offer), and this machine's own RPC worker stopping or giving up. The same thing is
not repeated within `dedupe_s`, and no more than `max_per_window` go out per `window_s`
(a crash loop must not flood the desktop). Pure: the time is passed in, the history is
a value handed back; the UI shows what this returns and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stoker.desktop.tray_view import model_label
from stoker.fleet.snapshot import AppSnapshot, EngineState


@dataclass(frozen=True)
class Note:
    key: str  # what it is about; equal keys are duplicates
    title: str
    body: str
    level: str = "info"  # info | warning | critical


@dataclass(frozen=True)
class NotifyPolicy:
    dedupe_s: float = 600.0  # the same key again within this is a duplicate
    window_s: float = 60.0
    max_per_window: int = 3
    long_load_s: float = 20.0  # "ready" is worth saying only after a load this long


@dataclass(frozen=True)
class NoteHistory:
    sent: tuple[tuple[str, float], ...] = ()  # (key, when), newest last
    starting_since: float | None = None  # when the current load began, as seen here
    suppressed: int = 0  # notes dropped by the rate limit so far (for the status window)

    def last_sent(self, key: str) -> float | None:
        times = [t for k, t in self.sent if k == key]
        return max(times) if times else None


def _model(snap: AppSnapshot) -> str:
    return model_label(snap) or "the model"


def _candidates(prev: AppSnapshot | None, snap: AppSnapshot,
                history: NoteHistory, now: float, policy: NotifyPolicy) -> list[Note]:
    notes: list[Note] = []
    # Incidents: only those new since the previous snapshot. The first snapshot is the
    # baseline: old incidents were told about when they happened.
    if prev is not None:
        seen = {(i.at, i.kind, i.summary) for i in prev.incidents}
        for inc in snap.incidents:
            if (inc.at, inc.kind, inc.summary) in seen:
                continue
            body = inc.summary if not inc.action else f"{inc.summary} {inc.action}"
            notes.append(Note(f"incident:{inc.kind}:{snap.model_path}",
                              f"{_model(snap)}: {inc.kind}", body, "critical"))
    prev_quarantined = {b for b, _ in prev.quarantined} if prev is not None else set()
    for build, why in snap.quarantined:
        if build not in prev_quarantined:
            notes.append(Note(f"quarantine:{build}", f"Engine build {build} put aside",
                              why, "warning"))
    prev_blockers = {b.kind for b in prev.blockers} if prev is not None else set()
    for blocker in snap.blockers:
        if blocker.kind not in prev_blockers:
            notes.append(Note(f"blocker:{blocker.kind}", blocker.message, blocker.advice,
                              "warning"))
    # Settings problems: told on the first snapshot too (they are found before any start).
    prev_problems = set(prev.problems) if prev is not None else set()
    for problem in snap.problems:
        if problem not in prev_problems:
            notes.append(Note(f"problem:{problem}", "Stoker settings problem", problem, "warning"))
    was_left_out = (prev is not None and prev.drafter_status == "left-out"
                    and prev.model_path == snap.model_path)
    if snap.drafter_status == "left-out" and not was_left_out:
        notes.append(Note(f"drafter:{snap.model_path}", f"{_model(snap)}: drafter left out",
                          snap.drafter_reason or "the speculative drafter was left out.",
                          "info"))
    notes += _worker_notes(prev, snap)
    # Models unloaded for other applications: each one new since the previous snapshot
    # (the first snapshot is the baseline: those were told about when they happened).
    if prev is not None:
        told = set(prev.yielded)
        for y in snap.yielded:
            if y not in told:
                notes.append(Note(f"yield:{y.model_id}:{y.at}", "Memory is tight",
                                  y.note[0].upper() + y.note[1:] + ". It loads again on its next request.",
                                  "warning"))
    if (snap.state is EngineState.READY and prev is not None
            and prev.state is not EngineState.READY and history.starting_since is not None
            and now - history.starting_since >= policy.long_load_s):
        took = now - history.starting_since
        notes.append(Note(f"ready:{snap.model_path}:{snap.started_at}",
                          f"{_model(snap)} is ready",
                          f"Loaded in {took:.0f} s; listening at {snap.endpoint}."
                          if snap.endpoint else f"Loaded in {took:.0f} s.", "info"))
    return notes


def _worker_notes(prev: AppSnapshot | None, snap: AppSnapshot) -> list[Note]:
    if prev is None:  # the baseline, as for incidents
        return []
    notes: list[Note] = []
    for ep in snap.workers_back:
        if ep not in prev.workers_back:
            notes.append(Note(f"worker-back:{ep}", f"RPC worker {ep} is back",
                              f"Choose \u201cUse {ep} again\u201d in Stoker's menu to spread "
                              f"{_model(snap)} across it again.", "info"))
    w, was = snap.worker, prev.worker
    if w is None:
        return notes
    if w.state is EngineState.FAILED and (was is None or was.state is not EngineState.FAILED):
        notes.append(Note(f"worker-failed:{w.endpoint}", f"This machine's RPC worker {w.endpoint} gave up",
                          (w.last_error or "rpc-server kept stopping.")
                          + " Start it again from its line in Stoker's menu.", "critical"))
    elif w.last_incident is not None and (was is None or was.last_incident != w.last_incident):
        inc = w.last_incident
        notes.append(Note(f"worker-incident:{w.endpoint}:{inc.kind}", f"RPC worker {w.endpoint}: {inc.kind}",
                          f"{inc.summary} {inc.action}".strip(), "warning"))
    return notes


def _track_loading(prev: AppSnapshot | None, snap: AppSnapshot, history: NoteHistory,
                   now: float) -> NoteHistory:
    loading = snap.state in (EngineState.STARTING, EngineState.BACKOFF)
    if loading and history.starting_since is None:
        return replace(history, starting_since=now)
    if snap.state is EngineState.READY:
        return history  # cleared after the decision below, which still needs it
    if not loading:
        return replace(history, starting_since=None)
    return history


def decide_notifications(prev: AppSnapshot | None, snap: AppSnapshot, history: NoteHistory,
                         now: float, policy: NotifyPolicy = NotifyPolicy()
                         ) -> tuple[tuple[Note, ...], NoteHistory]:
    """The notes to show for `snap` (given the one shown before it) and the new history."""
    history = _track_loading(prev, snap, history, now)
    sent = [(k, t) for k, t in history.sent if now - t < max(policy.dedupe_s, policy.window_s)]
    recent = sum(1 for _, t in sent if now - t < policy.window_s)
    chosen: list[Note] = []
    suppressed = history.suppressed
    keys_now: set[str] = set()
    for note in _candidates(prev, snap, history, now, policy):
        last = max((t for k, t in sent if k == note.key), default=None)
        if note.key in keys_now or (last is not None and now - last < policy.dedupe_s):
            continue  # a duplicate is not news, and not counted as suppressed
        if recent >= policy.max_per_window:
            suppressed += 1
            continue
        chosen.append(note)
        keys_now.add(note.key)
        sent.append((note.key, now))
        recent += 1
    starting_since = None if snap.state is EngineState.READY else history.starting_since
    return tuple(chosen), NoteHistory(tuple(sent), starting_since, suppressed)
