"""Strikes and quarantine for engine builds, and the broken (build, drafter) pairs.

A build that crashes while starting gets a strike; three strikes within ten minutes
quarantine it and the next build in line is used (cuda -> vulkan -> cpu, rocm -> vulkan ->
cpu). Strikes and quarantine are keyed to the binary's identity (e.g. size + mtime + hash,
made by the shell), so a replaced binary is tried again. Only incidents that say they count
(`Incident.counts_as_strike`) are strikes: a taken port, a bad model or a bad argument never
count against a build. A drafter that broke a launch is remembered per build so it is left
out instead of costing the build strikes.

Pure ledger operations with the clock passed in; app/stoker/fleet/ledger.py keeps it on disk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from stoker.diagnosis.exit_report import Incident

_B = TypeVar("_B")  # a build value: `.id` (or `.build_id`) and `.backend`
_E = TypeVar("_E", "Strike", "QuarantineEntry", "BrokenDrafter")

STRIKES_TO_QUARANTINE = 3
STRIKE_WINDOW_S = 600.0
# Fallback rank: the vendor's own backend first, then the portable GPU one, then CPU.
_BACKEND_RANK = {"cuda": 0, "rocm": 0, "metal": 0, "musa": 0, "sycl": 0,
                 "vulkan": 1, "opencl": 1, "cpu": 2}


@dataclass(frozen=True)
class Strike:
    build_id: str
    identity: str | None
    at: float
    kind: str


@dataclass(frozen=True)
class QuarantineEntry:
    build_id: str
    identity: str | None
    at: float
    why: str  # one sentence for the tray and `stoker engines`


@dataclass(frozen=True)
class BrokenDrafter:
    build_id: str
    drafter_path: str
    at: float
    identity: str | None = None
    why: str = ""


@dataclass(frozen=True)
class Ledger:
    strikes: tuple[Strike, ...] = ()
    quarantined: tuple[QuarantineEntry, ...] = ()
    broken_drafters: tuple[BrokenDrafter, ...] = ()


def record_strike(ledger: Ledger, build_id: str, binary_identity: str | None, now: float,
                  incident: Incident, *, window_s: float = STRIKE_WINDOW_S,
                  limit: int = STRIKES_TO_QUARANTINE) -> tuple[Ledger, bool]:
    """Count one start-up crash; quarantine the build at the third within the window.

    Returns the new ledger and whether this strike put the build in quarantine now.
    Incidents that do not count leave the ledger as it is. Strikes of an older binary
    under the same build id are dropped: a replaced binary starts clean.
    """
    if not getattr(incident, "counts_as_strike", False):
        return ledger, False
    kept = tuple(s for s in ledger.strikes
                 if not (s.build_id == build_id and (s.identity != binary_identity
                                                     or now - s.at > window_s)))
    kind = getattr(incident, "kind", "unknown")
    strikes = kept + (Strike(build_id, binary_identity, now, kind),)
    mine = [s for s in strikes if s.build_id == build_id]
    if len(mine) < limit or is_quarantined(ledger, build_id, binary_identity):
        return replace(ledger, strikes=strikes), False
    why = (f"{build_id} crashed {len(mine)} times while starting within "
           f"{int(window_s // 60)} minutes (last: {kind}); the next build in line is used.")
    entry = QuarantineEntry(build_id, binary_identity, now, why)
    others = tuple(q for q in ledger.quarantined if q.build_id != build_id)
    rest = tuple(s for s in strikes if s.build_id != build_id)
    return Ledger(rest, others + (entry,), ledger.broken_drafters), True


def is_quarantined(ledger: Ledger, build_id: str, identity: str | None) -> bool:
    """True while this very binary is quarantined; a replaced binary is not."""
    return any(q.build_id == build_id and q.identity == identity for q in ledger.quarantined)


def quarantine_reason(ledger: Ledger, build_id: str, identity: str | None) -> str | None:
    for q in ledger.quarantined:
        if q.build_id == build_id and q.identity == identity:
            return q.why
    return None


def lift(ledger: Ledger, build_id: str) -> Ledger:
    """The user's word: try the build again, with no strikes left against it."""
    return replace(
        ledger,
        strikes=tuple(s for s in ledger.strikes if s.build_id != build_id),
        quarantined=tuple(q for q in ledger.quarantined if q.build_id != build_id),
    )


def _build_id(build: object) -> str:
    bid = getattr(build, "id", None) or getattr(build, "build_id", None)
    if not isinstance(bid, str):
        raise AttributeError(f"{build!r} has neither an id nor a build_id")
    return bid


def fallback_order(builds: Iterable[_B]) -> tuple[_B, ...]:
    """Builds in the order to try: vendor GPU backend, then Vulkan, then CPU.

    A stable sort, so within one rank the caller's order (its own preference) stays.
    Unknown backends go between Vulkan and CPU.
    """
    return tuple(sorted(builds, key=lambda b: _BACKEND_RANK.get(getattr(b, "backend", None) or "", 1.5)))


def choose_build(candidates_in_order: Iterable[_B], ledger: Ledger, identities: Mapping[str, str | None],
                 blocked: Mapping[str, str] | None = None) -> tuple[_B | None, tuple[tuple[_B, str], ...]]:
    """The first build to use, and each build passed over with why.

    `candidates_in_order` are build values with `.id` (or `.build_id`) and `.backend`;
    `identities` maps build ids to the binary identity now on disk; `blocked` maps build
    ids to a blocker sentence (CUDA driver too old, no ROCm kernels for these GPUs …).
    """
    blocked = blocked or {}
    passed: list[tuple[_B, str]] = []
    for build in fallback_order(candidates_in_order):
        bid = _build_id(build)
        if bid in blocked:
            passed.append((build, blocked[bid]))
            continue
        why = quarantine_reason(ledger, bid, identities.get(bid))
        if why is not None:
            passed.append((build, "quarantined: " + why))
            continue
        return build, tuple(passed)
    return None, tuple(passed)


def mark_drafter_broken(ledger: Ledger, build_id: str, drafter_path: str, now: float = 0.0,
                        identity: str | None = None, why: str = "") -> Ledger:
    """Remember that this drafter broke a launch with this build (replacing an older note)."""
    rest = tuple(d for d in ledger.broken_drafters
                 if not (d.build_id == build_id and d.drafter_path == drafter_path))
    return replace(ledger, broken_drafters=rest + (BrokenDrafter(build_id, drafter_path, now, identity, why),))


def is_drafter_broken(ledger: Ledger, build_id: str, drafter_path: str,
                      identity: str | None = None) -> bool:
    """True when the pair broke before; a replaced binary (other identity) gets another try."""
    for d in ledger.broken_drafters:
        if d.build_id == build_id and d.drafter_path == drafter_path:
            return d.identity is None or identity is None or d.identity == identity
    return False


def forget_broken_drafter(ledger: Ledger, build_id: str, drafter_path: str) -> Ledger:
    return replace(ledger, broken_drafters=tuple(
        d for d in ledger.broken_drafters
        if not (d.build_id == build_id and d.drafter_path == drafter_path)))


# ------------------------------------------------------------------ JSON (for the shell)

LEDGER_SCHEMA = 1


def ledger_to_json(ledger: Ledger) -> dict[str, Any]:
    return {
        "schema": LEDGER_SCHEMA,
        "strikes": [vars(s) for s in ledger.strikes],
        "quarantined": [vars(q) for q in ledger.quarantined],
        "broken_drafters": [vars(d) for d in ledger.broken_drafters],
    }


def ledger_from_json(obj: object) -> tuple[Ledger, tuple[str, ...]]:
    """A ledger from its JSON form, skipping entries that do not parse (with a note each)."""
    problems: list[str] = []
    if not isinstance(obj, dict):
        return Ledger(), ("the quarantine ledger is not a JSON object; starting with an empty one",)
    data: dict[str, Any] = obj  # the narrowed type, for the closure below

    def load(key: str, cls: type[_E]) -> tuple[_E, ...]:
        out: list[_E] = []
        for i, item in enumerate(data.get(key) or ()):
            try:
                out.append(cls(**item))
            except TypeError:
                problems.append(f"entry {i} of {key} in the quarantine ledger is malformed; it was skipped")
        return tuple(out)

    return Ledger(load("strikes", Strike), load("quarantined", QuarantineEntry),
                  load("broken_drafters", BrokenDrafter)), tuple(problems)
