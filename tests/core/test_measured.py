"""Measured lines: fitting, padding to cells, never a negative fixed part, lookup by key."""

from __future__ import annotations

from hypothesis import given, strategies as st

from app.core.measured import (MeasuredKey, MeasuredMemory, MeasuredPoint,
                               fit_line, kv_cells)


def point(ctx, total_kv_per_cell=23040, weights=96_573_850, compute=17_000_000, slots=1,
          unified=False):
    cells = kv_cells(ctx, slots, unified)
    return MeasuredPoint(ctx, cells, weights, cells * total_kv_per_cell, compute)


def test_kv_cells_follow_the_engines_padding():
    assert kv_cells(2048, 1, False) == 2048
    assert kv_cells(2000, 1, False) == 2048
    assert kv_cells(4096, 4, False) == 4096
    assert kv_cells(1000, 4, False) == 1024  # pad(1024/4)=256 per stream
    assert kv_cells(3000, 4, False) == 4 * 768  # pad(3072/4)=768: more than asked
    assert kv_cells(3000, 4, True) == 3072


def test_two_points_give_the_exact_line():
    line = fit_line([point(2048), point(8192)])
    assert line.per_token_bytes == 23040
    assert line.fixed_bytes == 96_573_850 + 17_000_000
    assert line.bytes_at(4096) == 96_573_850 + 17_000_000 + 4096 * 23040
    assert line.contexts == (2048, 8192)
    w, kv, c = line.components_at(4096)
    assert (w, kv, c) == (96_573_850, 4096 * 23040, 17_000_000)


def test_one_context_is_not_enough():
    assert fit_line([point(2048)]) is None
    assert fit_line([point(2048), point(2048)]) is None
    assert fit_line([point(2000), point(2048)]) is None  # same cells after padding
    assert fit_line([]) is None


def test_negative_intercept_is_pinned_at_zero_and_stays_above_points():
    pts = [MeasuredPoint(1024, 1024, 0, 1000, 0), MeasuredPoint(2048, 2048, 0, 5000, 0)]
    line = fit_line(pts)
    assert line.fixed_bytes == 0
    assert all(line.bytes_at(p.ctx) >= p.total_bytes for p in pts)


def test_lookup_matches_every_key_field():
    line = fit_line([point(2048), point(8192)])
    key = MeasuredKey("m", "b", "CPU", "f16", "f16", "auto", 1, False, 512)
    mem = MeasuredMemory("m", "b", ((key, line),))
    assert mem.lookup("CPU", "f16", "f16", "auto", 1) is line
    assert mem.lookup("CPU", "q8_0", "q8_0", "auto", 1) is None
    assert mem.lookup("CPU", "f16", "f16", "auto", 2) is None
    assert mem.lookup("CUDA0", "f16", "f16", "auto", 1) is None
    assert mem.lookup("CPU", "f16", "f16", "off", 1) is None
    assert mem.lookup("CPU", "f16", "f16", "auto", 1, ubatch=1024) is None
    assert MeasuredMemory("other", "b", ((key, line),)).lookup("CPU", "f16", "f16", "auto", 1) is None
    assert mem.devices == ("CPU",)


@given(st.lists(st.tuples(st.integers(1, 512), st.integers(0, 10**9), st.integers(0, 10**6)),
                min_size=2, max_size=6))
def test_fixed_part_never_negative_and_exact_lines_recovered(raw):
    pts = [MeasuredPoint(c * 256, c * 256, w, kv, 0) for c, w, kv in raw]
    line = fit_line(pts)
    if len({p.cells for p in pts}) < 2:
        assert line is None
        return
    assert line.fixed_bytes >= 0 and line.per_token_bytes >= 0


@given(st.integers(0, 10**9), st.integers(1, 200_000), st.lists(st.integers(1, 256), min_size=2,
                                                                  max_size=5, unique=True))
def test_points_on_a_line_are_reproduced(fixed, per_cell, cells256):
    pts = [MeasuredPoint(c * 256, c * 256, fixed, c * 256 * per_cell, 0) for c in cells256]
    line = fit_line(pts)
    for p in pts:
        assert abs(line.bytes_at(p.ctx) - p.total_bytes) <= 2
