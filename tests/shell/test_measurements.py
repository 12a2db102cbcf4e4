"""Measured lines on disk: recorded from launches, used on the next launch, dropped when the
model file or the engine build changes. Store tests use real engine logs (tests/data); the
engine tests launch the real llama-server with the demo model."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from stoker.engines import measurements
from stoker.engines.engine_log import MIB, parse_memory_report
from stoker.engines.memory_probe import measure_dry_run, run_probe
from stoker.planning.plan import AnalyticMemory

LOGS = Path(__file__).resolve().parents[1] / "data" / "engine_logs"


@dataclass(frozen=True)
class Settings:  # the LaunchPlan fields record_launch reads
    ctx: int
    slots: int = 1
    kv_type_k: str = "f16"
    kv_type_v: str = "f16"
    flash_attn: str = "auto"
    kv_unified: bool = False
    ubatch: int | None = None
    analytic_devices: tuple = ()


def log_report(name):
    return parse_memory_report((LOGS / name).read_text().splitlines())


@pytest.fixture
def files(tmp_path, stoker_home):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    binary = tmp_path / "engine" / "llama-server"
    binary.parent.mkdir()
    binary.write_bytes(b"\x7fELF build one")
    (binary.parent / "libllama.so").write_bytes(b"lib one")
    return model, binary


def estimated(ctx, report, **settings):
    """The settings of a plan whose analytic estimate said exactly what `report` shows, but
    with KV at 23040 bytes a cell (the demo model's f16 KV, which the estimate gets exactly)."""
    dev = report.device("CPU")
    est = AnalyticMemory("CPU", dev.model_bytes, ctx * 23040, dev.compute_bytes + dev.output_bytes)
    return Settings(ctx, analytic_devices=(est,), **settings)


def record(model, binary, ctx, report=None, **settings):
    report = report or (_report_at(ctx) if ctx != 2048 else log_report("smollm2-f16-np1-c2048.log"))
    return measurements.record_launch(model, binary, estimated(ctx, report, **settings), report)


def _report_at(ctx, kv_per_cell=23040):
    """The demo model's real c2048 report, with KV scaled to another context by the KV line."""
    from dataclasses import replace
    r = log_report("smollm2-f16-np1-c2048.log")
    bufs = tuple(replace(b, bytes=ctx * kv_per_cell) if b.kind == "kv" else b for b in r.buffers)
    return replace(r, buffers=bufs, n_ctx=ctx)


def test_one_context_gives_no_line_two_give_one(files):
    model, binary = files
    # the engine's KV is 128 bytes a cell more than the estimate says: the line learns it
    assert record(model, binary, 2048, _report_at(2048, kv_per_cell=23040 + 128)) == 1
    assert measurements.lookup(model, binary).lines == ()
    assert measurements.points_for(model, binary) == 1
    record(model, binary, 8192, _report_at(8192, kv_per_cell=23040 + 128))
    mem = measurements.lookup(model, binary)
    line = mem.lookup("CPU", "f16", "f16", "auto", 1)
    assert line is not None and line.contexts == (2048, 8192)
    dev = log_report("smollm2-f16-np1-c2048.log").device("CPU")
    analytic = (dev.model_bytes, 4096 * 23040, dev.compute_bytes + dev.output_bytes)
    w, kv, c = line.calibrated(analytic)
    assert (w, c) == (analytic[0], analytic[2])
    assert kv == 4096 * (23040 + 128)
    assert mem.lookup("CPU", "q8_0", "q8_0", "auto", 1) is None
    assert (measurements.store_path()).is_file()


def test_a_plan_without_analytic_figures_is_kept_but_calibrates_nothing(files):
    model, binary = files
    assert measurements.record_launch(model, binary, Settings(2048), log_report("smollm2-f16-np1-c2048.log")) == 1
    assert measurements.record_launch(model, binary, Settings(8192), _report_at(8192)) == 1
    assert measurements.points_for(model, binary) == 2
    assert measurements.lookup(model, binary).lines == ()


def test_schema_1_points_are_dropped_not_misread(files):
    """Schema 1 stored only the engine's bytes; read as calibration points they would say the
    estimate was zero. The whole file is dropped and the next launch starts schema 2."""
    import json
    model, binary = files
    record(model, binary, 2048)
    record(model, binary, 8192)
    data = json.loads(measurements.store_path().read_text())
    assert data["schema"] == 2 and measurements.lookup(model, binary).lines
    for e in data["entries"]:
        for p in e["points"]:
            for k in ("est_weights", "est_kv", "est_compute"):
                del p[k]
    data["schema"] = 1
    measurements.store_path().write_text(json.dumps(data))
    assert measurements.lookup(model, binary).lines == ()
    assert measurements.points_for(model, binary) == 0
    record(model, binary, 4096)
    assert json.loads(measurements.store_path().read_text())["schema"] == 2
    assert measurements.points_for(model, binary) == 1


def test_replacing_the_model_file_drops_its_lines(files):
    model, binary = files
    record(model, binary, 2048)
    record(model, binary, 8192)
    assert measurements.lookup(model, binary).lines
    replacement = model.with_suffix(".new")
    replacement.write_bytes(b"GGUF" + b"\1" * 80)
    os.replace(replacement, model)
    assert measurements.lookup(model, binary).lines == ()
    assert measurements.points_for(model, binary) == 0


def test_a_new_engine_build_drops_its_lines(files):
    model, binary = files
    record(model, binary, 2048)
    record(model, binary, 8192)
    assert measurements.lookup(model, binary).lines
    (binary.parent / "libllama.so").write_bytes(b"lib two, rebuilt")
    assert measurements.lookup(model, binary).lines == ()


def test_incomplete_report_is_not_recorded(files):
    model, binary = files
    assert measurements.record_launch(model, binary, Settings(2048),
                                      log_report("smollm2-header-only-refused.log")) == 0
    assert not measurements.store_path().exists()


def test_torn_store_file_is_treated_as_empty(files):
    model, binary = files
    measurements.store_path().parent.mkdir(parents=True, exist_ok=True)
    measurements.store_path().write_text("{not json")
    assert measurements.lookup(model, binary).lines == ()
    assert record(model, binary, 2048) == 1


# -- with the real engine -----------------------------------------------------------------

def test_second_launch_uses_the_line_and_a_replaced_model_drops_it(engine_binary, demo_model,
                                                                   tmp_path, stoker_home):
    from stoker.bench.memory import estimate
    from stoker.library.gguf_io import load_summary

    model = tmp_path / demo_model.name
    shutil.copyfile(demo_model, model)
    summary = load_summary(model)

    def analytic(ctx):
        return estimate(summary, ctx, 1, "f16")[:3]

    for ctx in (1024, 3072):
        probe = run_probe(engine_binary, model, ctx=ctx)
        assert probe.started, probe.reason
        plan = Settings(ctx, analytic_devices=(AnalyticMemory("CPU", *analytic(ctx)),))
        measurements.record_launch(model, engine_binary, plan, probe.report)
    line = measurements.lookup(model, engine_binary).lookup("CPU", "f16", "f16", "auto", 1)
    assert line is not None
    # The next launch at a context never measured costs what the calibrated estimate says.
    probe = run_probe(engine_binary, model, ctx=2048)
    assert probe.started, probe.reason
    assert abs(line.total_at(analytic(2048)) - probe.report.total_bytes) <= probe.report.rounding_bytes * 3
    os.utime(model, ns=(1, 1))  # replaced (or touched) file: new identity
    assert measurements.lookup(model, engine_binary).lines == ()


def test_dry_run_projects_without_loading_and_matches_the_real_start(engine_binary, demo_model):
    dry = measure_dry_run(engine_binary, demo_model, 2048)
    assert dry.started, dry.reason
    assert not dry.report.tensors_loaded
    host = dry.report.projected.rows[0]
    real = run_probe(engine_binary, demo_model, ctx=2048).report.device("CPU")
    # whole MiB, floored: each column is at most 1 MiB under the buffer lines
    assert 0 <= real.model_bytes - host.model_bytes < MIB
    assert 0 <= real.kv_bytes - host.context_bytes < MIB
    assert 0 <= real.compute_bytes - host.compute_bytes < MIB


def test_planner_uses_the_measured_line_until_the_model_file_is_replaced(demo_model, tmp_path,
                                                                        stoker_home):
    """The must-show, through the planner seam: a second plan of the same file says
    "measured"; a replaced file is planned from the estimate again."""
    from stoker.base.overrides import ModelOverrides
    from stoker.library.gguf_io import load_summary
    from stoker.planning.machine import Machine
    from stoker.planning.planner import plan_launch

    model = tmp_path / demo_model.name
    shutil.copyfile(demo_model, model)
    binary = tmp_path / "engine" / "llama-server"
    binary.parent.mkdir()
    binary.write_bytes(b"\x7fELF build one")
    summary = load_summary(model)
    machine = Machine(os="linux", arch="x86_64", ram_total_bytes=24 << 30,
                      ram_available_bytes=20 << 30, physical_cores=2, logical_cores=2)
    ov = ModelOverrides(slots=1)
    first = plan_launch(summary, machine, ov, measured=measurements.lookup(model, binary))
    assert first.estimate_source == "estimated"
    # what launches of such plans reported (real engine logs of this model at two contexts),
    # recorded with those plans' own analytic figures
    for ctx, report in ((2048, log_report("smollm2-f16-np1-c2048.log")), (8192, _report_at(8192))):
        plan = plan_launch(summary, machine, ModelOverrides(slots=1, ctx=ctx))
        assert plan.flash_attn == first.flash_attn and plan.analytic_devices
        measurements.record_launch(model, binary, plan, report)
    second = plan_launch(summary, machine, ov, measured=measurements.lookup(model, binary))
    assert second.estimate_source == "measured"
    assert any(d.what == "measured memory" for d in second.decisions)
    replacement = tmp_path / "new.gguf"
    shutil.copyfile(demo_model, replacement)
    os.replace(replacement, model)
    third = plan_launch(summary, machine, ov, measured=measurements.lookup(model, binary))
    assert third.estimate_source == "estimated"
