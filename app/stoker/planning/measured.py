"""Measured memory lines: what a model really took on this machine, used to calibrate the estimate.

Every launch Stoker makes reports its buffers (`stoker/engines/engine_log.py`). A launch records, per
device and component (weights, KV, compute), both the engine's bytes and the analytic
estimate (`stoker/planning/memory.py`) for that launch's own settings. Two launches of the same model
file, engine build, device and cache settings at different contexts pin down, per component,
how far the estimate is off: engine = analytic + offset + slope x analytic. The planner
prices every candidate analytically as before and passes those components through the line
(`MeasuredLine.calibrated`), and says so ("measured on this machine").

Why calibrate the estimate instead of a straight line in KV cells: sliding-window layers stop
growing once the window (times the slots, plus a ubatch) fits, so the engine's KV against
context has a knee (Gemma 3 270M, 4 slots: 36/72/84 MiB at 2048/4096/8192). The analytic
estimate already has that knee; a line in cells through two contexts extrapolated across it
by up to 17 % (`stoker bench memory`), while the estimate's error stays a near-constant few
hundred KiB on either side. The error is fitted against the analytic component itself, so a
correction follows the estimate's shape (it flattens where the estimate flattens), and a
different layer placement (same key, other -ngl) keeps its own analytic weights plus the
small measured offset rather than the measured placement's weights.

Pure: no files, no clock. `stoker/engines/measurements.py` keeps the points on disk and decides when
a file or a build changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

KV_PAD = 256
# Below this spread of the analytic values the points cannot tell a proportional error from
# rounding (q8_0 blocks, whole pages): the error is then taken as a constant, their mean.
MIN_ANALYTIC_SPREAD = 64 * 1024

COMPONENTS = ("weights", "kv", "compute")


def pad256(n: int) -> int:
    return ((max(0, n) + KV_PAD - 1) // KV_PAD) * KV_PAD


def kv_cells(ctx: int, slots: int, kv_unified: bool) -> int:
    """Cells the engine allocates over all streams for `-c ctx -np slots` (src/llama-context.cpp)."""
    n_ctx = pad256(ctx)
    if kv_unified or slots <= 1:
        return n_ctx
    return pad256(n_ctx // slots) * slots


@dataclass(frozen=True)
class MeasuredPoint:
    """One launch's report for one device: the context, what each component took, and what the
    analytic estimate said for the same settings (None: not known, the point cannot calibrate)."""

    ctx: int  # -c as launched (the engine's n_ctx)
    cells: int  # kv_cells(ctx, slots, unified): two contexts with the same cells are one point
    weights_bytes: int
    kv_bytes: int  # KV + recurrent state
    compute_bytes: int  # compute + output buffers
    est_weights_bytes: int | None = None
    est_kv_bytes: int | None = None
    est_compute_bytes: int | None = None

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes

    @property
    def engine(self) -> tuple[int, int, int]:
        return self.weights_bytes, self.kv_bytes, self.compute_bytes

    @property
    def analytic(self) -> tuple[int, int, int] | None:
        est = (self.est_weights_bytes, self.est_kv_bytes, self.est_compute_bytes)
        return None if any(e is None for e in est) else est  # type: ignore[return-value]


@dataclass(frozen=True)
class Correction:
    """engine = analytic + offset_bytes + slope x analytic, for one component."""

    offset_bytes: float
    slope: float

    def apply(self, analytic: int) -> int:
        return max(0, int(round(analytic + self.offset_bytes + self.slope * analytic)))


@dataclass(frozen=True)
class MeasuredLine:
    """Per component, how the engine's bytes follow the analytic estimate, from >= 2 contexts."""

    weights: Correction
    kv: Correction
    compute: Correction
    points: tuple[MeasuredPoint, ...]

    def calibrated(self, analytic: tuple[int, int, int]) -> tuple[int, int, int]:
        """(weights, kv, compute) the engine will take where the estimate says `analytic`."""
        w, k, c = analytic
        return self.weights.apply(w), self.kv.apply(k), self.compute.apply(c)

    def total_at(self, analytic: tuple[int, int, int]) -> int:
        return sum(self.calibrated(analytic))

    @property
    def contexts(self) -> tuple[int, ...]:
        return tuple(sorted({p.ctx for p in self.points}))


def _least_squares(xy: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(xy)
    mx = sum(x for x, _ in xy) / n
    my = sum(y for _, y in xy) / n
    sxx = sum((x - mx) ** 2 for x, _ in xy)
    if sxx == 0:
        return my, 0.0
    slope = sum((x - mx) * (y - my) for x, y in xy) / sxx
    return my - slope * mx, slope


def _correction(pairs: list[tuple[float, float]]) -> Correction:
    """Least squares of the error (engine - analytic) against the analytic value.

    Two points: exact at both. Analytic values closer together than MIN_ANALYTIC_SPREAD
    (the weights of one placement, a compute buffer that does not grow) give a constant
    error: a slope there would only magnify rounding into every other context.
    """
    xs = [a for a, _ in pairs]
    resid = [(a, e - a) for a, e in pairs]
    if max(xs) - min(xs) < MIN_ANALYTIC_SPREAD:
        return Correction(sum(r for _, r in resid) / len(resid), 0.0)
    offset, slope = _least_squares(resid)
    return Correction(offset, slope)


def fit_line(points: Iterable[MeasuredPoint]) -> MeasuredLine | None:
    """The calibration through the points that carry an analytic estimate, or None when they
    cover fewer than two distinct cell counts (one context cannot tell a constant error from a
    per-token one)."""
    pts = tuple(sorted((p for p in points if p.analytic is not None), key=lambda p: (p.cells, p.ctx)))
    if len({p.cells for p in pts}) < 2:
        return None
    parts = []
    analytic = [(p, p.analytic) for p in pts]
    for i in range(3):
        parts.append(_correction([(float(a[i]), float(p.engine[i])) for p, a in analytic if a is not None]))
    return MeasuredLine(parts[0], parts[1], parts[2], pts)


@dataclass(frozen=True)
class MeasuredKey:
    """What a measurement depends on; any difference means a different line."""

    model_identity: str  # stoker/engines/measurements.py: resolved path + size + mtime_ns
    build_identity: str  # the engine binary's sha256 + size + mtime_ns
    device: str  # CPU (host RAM) or the engine's device name
    type_k: str
    type_v: str
    flash_attn: str  # on | off | auto, as launched
    slots: int
    kv_unified: bool = False
    ubatch: int = 512  # the compute buffer scales with -ub


@dataclass(frozen=True)
class MeasuredMemory:
    """Every line measured for one model file under one engine build: the planner's seam.

    Built by `stoker/engines/measurements.py` (`lookup(model_path, binary)`); the planner calls
    `lookup(...)` with the settings it is considering and, when a line comes back, passes
    that device's analytic components through `line.calibrated(...)` and sets
    `estimate_source="measured"`.
    """

    model_identity: str
    build_identity: str
    lines: tuple[tuple[MeasuredKey, MeasuredLine], ...] = ()

    def lookup(self, device: str, type_k: str, type_v: str, flash_attn: str, slots: int,
               kv_unified: bool = False, ubatch: int = 512) -> MeasuredLine | None:
        want = MeasuredKey(self.model_identity, self.build_identity, device, type_k, type_v,
                           flash_attn, slots, kv_unified, ubatch)
        for key, line in self.lines:
            if key == want:
                return line
        return None

    @property
    def devices(self) -> tuple[str, ...]:
        return tuple(sorted({k.device for k, _ in self.lines}))
