"""The CPU's decode bandwidth: measured with the real engine and the demo model, cached, read by plans."""

from __future__ import annotations

import pytest

from stoker.engines import bandwidth
from stoker.engines.probe import probe_machine
from stoker.library.gguf_io import load_summary


def test_memory_reads_are_measured_in_plausible_bytes_per_second():
    bw = bandwidth.memory_read_bandwidth(size_bytes=64 * 1024 * 1024, passes=2)
    assert bw is not None and 0.2e9 < bw < 2000e9


def test_nothing_measured_reads_as_unknown(stoker_home, tmp_path):
    assert bandwidth.cached_cpu_bandwidth(None) is None
    assert bandwidth.cached_cpu_bandwidth(tmp_path / "llama-server") is None
    assert bandwidth.CpuBandwidth(None, None, None, None).effective_bytes_per_s is None


@pytest.mark.engine
def test_a_measured_figure_is_cached_and_the_probed_machine_carries_it(stoker_home, engine_binary, demo_model):
    assert probe_machine(engine_binary).ram_bandwidth_bytes_per_s is None
    measured, reason = bandwidth.measure_cpu_bandwidth(engine_binary, demo_model, n_predict=16, requests=1)
    assert reason.startswith("measured"), reason
    assert measured.engine_tokens_per_s > 0 and measured.engine_decode_bytes_per_s > 0
    per_token = bandwidth.bytes_per_token_on_cpu(load_summary(demo_model), ctx=2048, context_tokens=0)
    assert 80 * 2**20 < per_token < 100 * 2**20  # 92 MiB of Q4_1 weights, the tied output included
    assert measured.engine_decode_bytes_per_s >= per_token * measured.engine_tokens_per_s
    assert measured.effective_bytes_per_s == min(measured.memory_read_bytes_per_s,
                                                 measured.engine_decode_bytes_per_s)
    cached = bandwidth.cached_cpu_bandwidth(engine_binary)
    assert cached.effective_bytes_per_s == measured.effective_bytes_per_s
    assert probe_machine(engine_binary).ram_bandwidth_bytes_per_s == measured.effective_bytes_per_s
    # another thread count is another figure, not this one
    assert bandwidth.cached_cpu_bandwidth(engine_binary, threads=1) is None
