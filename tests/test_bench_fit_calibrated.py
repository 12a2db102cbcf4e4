"""bench fit's search and bench memory's calibrated column, without launching an engine:
the search against a fake engine whose true limit is known, the calibration against rows
that lie on (or off) a straight line."""

from __future__ import annotations

import pytest

from stoker.bench.fit import MAJOR_FAULTS_ALLOWED, Trial, judge_serving, largest_serving_ctx
from stoker.bench.memory import Row, calibrated_predictions

MIB = 1 << 20


def fake_engine(limit_ctx):
    calls = []

    def try_ctx(ctx):
        calls.append(ctx)
        return Trial(ctx, ctx <= limit_ctx, "fake", None, None, 0.0)
    return try_ctx, calls


@pytest.mark.parametrize("limit", [256, 3840, 5120, 6144, 7936, 8192])
@pytest.mark.parametrize("start", [2048, 5376, 6144, 8192])
def test_search_finds_the_true_largest_within_the_launch_budget(limit, start):
    try_ctx, calls = fake_engine(limit)
    best, trials = largest_serving_ctx(try_ctx, start, 8192, max_launches=12)
    assert best == limit
    assert calls[0] == start and len(trials) == len(calls) <= 12


def test_search_reports_none_when_nothing_serves():
    try_ctx, _ = fake_engine(0)
    best, trials = largest_serving_ctx(try_ctx, 4096, 8192, max_launches=20)
    assert best is None and trials[-1].ctx == 256


def test_search_stops_at_the_launch_budget_with_the_largest_seen():
    try_ctx, calls = fake_engine(7936)
    best, trials = largest_serving_ctx(try_ctx, 1024, 1 << 20, max_launches=3)
    assert len(calls) == 3 and best == max(c for c in calls if c <= 7936)


def test_serving_by_rereading_from_disk_is_not_a_fit():
    assert (judge_serving(True, 1000, 1000 + MAJOR_FAULTS_ALLOWED)
            == (True, f" ({MAJOR_FAULTS_ALLOWED} major page faults)"))
    ok, note = judge_serving(True, 1000, 1000 + MAJOR_FAULTS_ALLOWED + 1)
    assert not ok and "major page faults (re-read from disk)" in note
    assert judge_serving(False, 0, 0) == (False, "")
    assert judge_serving(True, None, 5000) == (True, "")  # no cgroup: no counts, served stands


def row(ctx, total_kv, model="m", kv="f16", slots=1, source="buffers", est_kv=None):
    """A row whose estimate says 23040 bytes of KV a token (unless `est_kv`), 1 MiB less weights
    and 2 MiB more compute than the engine took."""
    est_kv = ctx * 23040 if est_kv is None else est_kv
    return Row(model, ctx, kv, slots, source, 99 * MIB, est_kv, 12 * MIB, 100 * MIB, total_kv, 10 * MIB, 0)


def test_calibrated_prediction_is_exact_on_a_line_and_needs_two_other_contexts():
    rows = [row(c, c * 23040) for c in (2048, 4096, 8192)] + [row(2048, 2048 * 23040, kv="q8_0"),
                                                               row(8192, 8192 * 23040, kv="q8_0")]
    preds = calibrated_predictions(rows)
    for r, (pred, err) in zip(rows[:3], preds[:3], strict=True):
        assert pred == r.eng_total and err == 0.0
    assert preds[3:] == [(None, None), (None, None)]  # only one other context in that group


def test_calibrated_prediction_follows_the_estimates_sliding_window_knee():
    """KV that stops growing at 4096 (the SWA cache is full), 1 % above the estimate: calibrated
    from 2048 and 4096, the 8192 row stays exact; a line in cells would add another 94 MiB."""
    def kv(c):
        return min(c, 4096) * 23040
    rows = [row(c, int(kv(c) * 1.01), est_kv=kv(c), slots=4) for c in (2048, 4096, 8192)]
    pred, err = calibrated_predictions(rows)[2]
    assert abs(pred - rows[2].eng_total) <= 2 and abs(err) < 1e-6


def test_calibrated_error_shows_a_row_off_the_line():
    rows = [row(2048, 2048 * 23040), row(4096, 4096 * 23040 + 8 * MIB), row(8192, 8192 * 23040)]
    _, err = calibrated_predictions(rows)[1]
    assert err is not None and err < -1.0  # the line through 2048 and 8192 misses the bump


def test_dry_run_rows_are_not_calibrated():
    rows = [row(c, c * 23040, source="dry-run") for c in (2048, 4096, 8192)]
    assert calibrated_predictions(rows) == [(None, None)] * 3
