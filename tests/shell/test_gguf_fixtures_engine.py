"""The header-only fixtures are models llama-server b11434 really loads (metadata only).

A sparse file's data reads as zeros and `--no-warmup -nr` keeps the engine from touching
it, so a load proves the names, shapes and keys match what the engine expects. Only the
two smallest fixtures run here; the lead measured the rest by hand (see the report).
"""

from __future__ import annotations

import subprocess
import time

import pytest

from stoker.engines.process import free_loopback_port
from tests.helpers.gguf_fixtures import header_only_150k_vocab, lfm2_1_2b_q4_k_m


@pytest.mark.parametrize("build", [header_only_150k_vocab, lfm2_1_2b_q4_k_m])
def test_llama_server_loads_header_only_fixture(engine_binary, tmp_path, build):
    model = build(tmp_path / "m.gguf")
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(engine_binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(free_loopback_port()),
             "-c", "256", "-np", "1", "--no-warmup", "-nr", "--fit", "off"],
            stdout=out, stderr=subprocess.STDOUT, cwd=engine_binary.parent)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if "listening on" in log.read_text(errors="replace"):
                break
            time.sleep(0.2)  # paces the poll
        text = log.read_text(errors="replace")
        assert "listening on" in text, text[-2000:]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
