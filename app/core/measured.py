"""Measured memory lines: what a model really took on this machine, as bytes = fixed + per_token x cells.

Every launch Stoker makes reports its buffers (`core/engine_log.py`). Two launches of the
same model file, engine build, device and cache settings at different contexts pin down a
straight line, like the seed's measured ds4 lines; the planner then prefers that line to
its analytic estimate and says so ("measured on this machine").

The x of the line is the KV cells the engine really allocates for a context, not the
context asked for: the engine pads the context to 256 and, without a unified cache, each
slot's share to 256 again, so two requests 100 tokens apart can cost the same. Sliding-
window layers stop growing once the window fits, so a line fitted above the window is
exact above it and over-estimates (safely) below it.

Pure: no files, no clock. `shell/measurements.py` keeps the lines on disk and decides when
a file or a build changed.
"""

from __future__ import annotations

from dataclasses import dataclass

KV_PAD = 256


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
    """One launch's report for one memory: the context and what each component took."""

    ctx: int  # -c as launched (the engine's n_ctx)
    cells: int  # kv_cells(ctx, slots, unified)
    weights_bytes: int
    kv_bytes: int  # KV + recurrent state
    compute_bytes: int  # compute + output buffers

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes


@dataclass(frozen=True)
class MeasuredLine:
    """bytes(cells) = fixed_bytes + per_token_bytes x cells, from at least two contexts."""

    fixed_bytes: int
    per_token_bytes: float
    points: tuple[MeasuredPoint, ...]

    def bytes_at(self, ctx: int, slots: int = 1, kv_unified: bool = True) -> int:
        return int(round(self.fixed_bytes + self.per_token_bytes * kv_cells(ctx, slots, kv_unified)))

    def components_at(self, ctx: int, slots: int = 1, kv_unified: bool = True) -> tuple[int, int, int]:
        """(weights, kv, compute) at this context, each from its own fit over the same points.

        They add up to `bytes_at` within rounding, so a plan can show the split and the total.
        """
        cells = kv_cells(ctx, slots, kv_unified)
        parts = []
        for attr in ("weights_bytes", "kv_bytes", "compute_bytes"):
            fixed, slope = _least_squares([(p.cells, getattr(p, attr)) for p in self.points])
            parts.append(max(0, int(round(fixed + slope * cells))))
        return parts[0], parts[1], parts[2]

    @property
    def contexts(self) -> tuple[int, ...]:
        return tuple(sorted({p.ctx for p in self.points}))


def _least_squares(xy: list[tuple[int, int]]) -> tuple[float, float]:
    n = len(xy)
    mx = sum(x for x, _ in xy) / n
    my = sum(y for _, y in xy) / n
    sxx = sum((x - mx) ** 2 for x, _ in xy)
    if sxx == 0:
        return my, 0.0
    slope = sum((x - mx) * (y - my) for x, y in xy) / sxx
    return my - slope * mx, slope


def fit_line(points) -> MeasuredLine | None:
    """A line through the points' totals, or None when fewer than two distinct cell counts.

    Least squares over all points (two points: exact). A negative fixed part is never
    returned: memory at zero context cannot be negative, so the line is then pinned at 0
    with the steepest slope any point needs, which stays at or above every point. A
    negative slope (noise between equal-looking launches) is clamped to 0 the same way.
    """
    pts = tuple(sorted(points, key=lambda p: (p.cells, p.ctx)))
    if len({p.cells for p in pts}) < 2:
        return None
    xy = [(p.cells, p.total_bytes) for p in pts]
    fixed, slope = _least_squares(xy)
    if slope < 0:
        slope, fixed = 0.0, float(max(y for _, y in xy))
    if fixed < 0:
        fixed = 0.0
        slope = max(y / x for x, y in xy if x > 0)
    return MeasuredLine(fixed_bytes=int(round(fixed)), per_token_bytes=slope, points=pts)


@dataclass(frozen=True)
class MeasuredKey:
    """What a measurement depends on; any difference means a different line."""

    model_identity: str  # shell/measurements.py: resolved path + size + mtime_ns
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

    Built by `shell/measurements.py` (`measured_memory(model_path, build)`); the planner
    calls `lookup(...)` with the settings it is considering and, when a line comes back,
    uses `line.components_at(ctx, slots, kv_unified)` for that device instead of the
    analytic estimate and sets `estimate_source="measured"`.
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
