"""ds4 end to end against the fake `ds4-server` (tests/helpers/fake_ds4_server.py, whose output
is real ds4 output): discovery, plan -> argv (pinned whole) -> spawn with the binary's folder
as cwd -> progress -> READY -> measured line -> the next plan uses it.

ds4 needs a Metal or CUDA GPU and a model of tens of GiB, so the plans are made for a
described machine (as `stoker plan --machine` does) and the fake runs on this one. The model
files are header-only GGUFs with architecture deepseek4 whose data is a sparse hole: their
size is the real model's, their disk use a few KiB.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import urllib.request
from pathlib import Path

import gguf
import pytest

from stoker.base.overrides import ModelOverrides
from stoker.engines.ds4_files import (
    ds4_measurements,
    find_ds4_binary,
    kv_disk_dir,
    plan_ds4_model,
    record_ds4_measurement,
)
from stoker.engines.ds4_launch import Ds4Plan, ds4_launch_spec, parse_ds4_output
from stoker.engines.kind import DS4, EngineKind, failure_of_line, is_ready_status
from stoker.engines.process import EngineProcess
from stoker.library.gguf_write import write_header_only_gguf
from stoker.planning.ds4 import GIB
from stoker.planning.machine import Device, Machine
from stoker.planning.plan import PlanRefusal
from tests.helpers.waiting import wait_until

FAKE = Path(__file__).resolve().parents[1] / "helpers" / "fake_ds4_server.py"


def install_fake(folder: Path) -> Path:
    """The fake as an executable named ds4-server (shebang: this interpreter)."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "ds4-server"
    binary.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


def ds4_model(path: Path, size_gib: int) -> Path:
    """A deepseek4 GGUF of `size_gib` (a sparse hole after the header)."""
    n = size_gib * GIB // 2  # one f16 tensor of that many bytes
    write_header_only_gguf(path, "deepseek4", {"deepseek4.context_length": 1_048_576, "deepseek4.block_count": 43},
                           [("token_embd.weight", (4096, n // 4096), gguf.GGMLQuantizationType.F16)])
    return path


def mac(ram_gib: int) -> Machine:
    return Machine(os="darwin", arch="arm64", ram_total_bytes=ram_gib * GIB, ram_available_bytes=None,
                   physical_cores=24, logical_cores=24, unified_memory=True)


def linux_cuda(ram_gib: int) -> Machine:
    return Machine(os="linux", arch="x86_64", ram_total_bytes=ram_gib * GIB, ram_available_bytes=None,
                   physical_cores=16, logical_cores=32,
                   devices=(Device("CUDA0", "NVIDIA L40S", "cuda", 48 * GIB, 47 * GIB, "discrete"),))


def free_port() -> int:
    from stoker.engines.process import free_loopback_port  # the one free-port helper

    return free_loopback_port()


def run_until_ready(spec, tmp_path: Path) -> tuple[EngineProcess, list]:
    proc = EngineProcess.start(spec, log_dir=tmp_path / "logs", log_name="ds4-server.log")
    deadline = time.monotonic() + 20
    status = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the fake ds4-server exited: {proc.tail()}"
        try:
            with urllib.request.urlopen(f"{spec.endpoint}{DS4.readiness_path}", timeout=1) as r:
                status = r.status
        except OSError:
            status = None
        if is_ready_status(EngineKind.DS4, status):
            break
        time.sleep(0.1)  # paces the poll
    assert is_ready_status(EngineKind.DS4, status)
    # ds4 prints its ready line before it serves; the reader thread may still be handing it over.
    assert wait_until(lambda: any(e.phase == "ready" for e in parse_ds4_output(proc.tail())), 30), proc.tail()
    return proc, list(parse_ds4_output(proc.tail()))


def test_discovery_order_configured_then_path_then_stokers_folder(stoker_home, tmp_path, monkeypatch):
    from stoker.base.paths import stoker_paths

    monkeypatch.delenv("STOKER_DS4_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_ds4_binary() is None
    own = install_fake(stoker_paths().engines / "ds4")
    assert find_ds4_binary().path == str(own) and find_ds4_binary().source == "own"
    on_path = install_fake(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_ds4_binary().path == str(on_path)
    configured = install_fake(tmp_path / "opt" / "ds4")
    monkeypatch.setenv("STOKER_DS4_SERVER", str(configured))
    assert find_ds4_binary().source == "configured"
    monkeypatch.setenv("STOKER_DS4_SERVER", str(tmp_path / "nope" / "ds4-server"))
    assert find_ds4_binary().path == str(on_path)  # a configured path that is not a binary is passed over


def test_streamed_plan_argv_progress_ready_measured_line_and_the_next_plan(stoker_home, tmp_path):
    binary = install_fake(tmp_path / "ds4-build")
    model = ds4_model(tmp_path / "DeepSeek-V4-Flash-IQ2XXS.gguf", 81)
    machine = mac(128)

    first = plan_ds4_model(str(model), machine, binary=str(binary))
    assert isinstance(first, Ds4Plan) and first.ssd_streaming and not first.measured
    assert first.cache.limit == "headroom" and first.cache_gb == 56
    port = free_port()
    spec = ds4_launch_spec(first, binary=str(binary), port=port)
    assert spec.argv == (str(binary), "--model", str(model), "--metal", "--ctx", "131072", "--host", "127.0.0.1",
                         "--port", str(port), "--kv-disk-dir", str(kv_disk_dir()), "--kv-disk-space-mb", "16384",
                         "--cors", "--ssd-streaming", "--ssd-streaming-cache-experts", "56GB")
    record = tmp_path / "argv.jsonl"
    os.environ["FAKE_DS4_RECORD"] = str(record)
    try:
        proc, events = run_until_ready(spec, tmp_path)
    finally:
        del os.environ["FAKE_DS4_RECORD"]
    try:
        seen = json.loads(record.read_text().splitlines()[0])
        assert seen["cwd"] == str(binary.parent) and tuple(seen["argv"][1:]) == spec.argv[1:]
        assert [e.phase for e in events] == ["mapping", "memory", "ready"]
        # A request: prefill chunks, \r repaints of the core's progress, then generation.
        req = urllib.request.Request(f"{spec.endpoint}/v1/chat/completions", method="POST",
                                     data=json.dumps({"model": "deepseek-v4-flash", "messages": [
                                         {"role": "user", "content": "hi"}]}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.loads(r.read())["choices"][0]["message"]["content"] == "Hello from ds4."
        # The generation line was printed before the reply; wait for the reader to hand it over.
        assert wait_until(lambda: any(e.phase == "generating" for e in parse_ds4_output(proc.tail())), 30)
        phases = [(e.phase, e.done, e.total) for e in parse_ds4_output(proc.tail())]
        assert phases[-6:] == [("prefill", 1024, 10341), ("prefill", 3, 3), ("prefill", 3, 3), ("prefill", 3, 3),
                               ("prefill", 5120, 10341), ("generating", 50, None)]
        # READY: the memory line is recorded for (model, build) and the next plan uses it.
        m = record_ds4_measurement(str(model), str(binary), first, proc.tail())
    finally:
        assert proc.stop(grace_s=5) is not None
    assert m is not None and m.ssd_streaming and m.ctx_tokens == 131072
    # The fake planned KV (4x the 32k line) + buffers + 9.37 GiB static + the 56 GiB cache.
    assert abs(m.bytes - (0.61 * 4 + 0.25 + 9.37) * GIB) < 0.02 * GIB
    assert ds4_measurements(str(model), str(binary)) == (m,)
    second = plan_ds4_model(str(model), machine, binary=str(binary))
    assert second.measured and second.cache.limit == "model-budget"
    assert second.cache_gb == 64  # the 64 GiB tier fits beside the measured ~12 GiB in the 112 GiB budget
    assert ds4_launch_spec(second, binary=str(binary), port=port).argv[-1] == "64GB"
    assert any("measured streamed footprint" in d.why for d in second.decisions)
    # Another build of ds4 has measured nothing.
    other = install_fake(tmp_path / "other-build")
    other.write_text(other.read_text() + "\n# another build\n")
    assert ds4_measurements(str(model), str(other)) == ()


def test_full_residency_measured_replaces_the_96_gib_floor(stoker_home, tmp_path):
    binary = install_fake(tmp_path / "ds4-build")
    model = ds4_model(tmp_path / "Qwen3.8-ds4.gguf", 45)
    machine = mac(192)
    full = ModelOverrides(ds4_ssd_streaming=False, ctx=32768)
    first = plan_ds4_model(str(model), machine, full, binary=str(binary))
    assert not first.ssd_streaming and not first.measured and first.reservation_bytes == 96 * GIB
    spec = ds4_launch_spec(first, binary=str(binary), port=free_port())
    assert "--ssd-streaming" not in spec.argv and spec.argv[spec.argv.index("--ctx") + 1] == "32768"
    proc, events = run_until_ready(spec, tmp_path)
    try:
        assert events[-1].phase == "ready"
        m = record_ds4_measurement(str(model), str(binary), first, proc.tail())
    finally:
        proc.stop(grace_s=5)
    assert not m.ssd_streaming and abs(m.bytes - 43.20 * GIB) < 0.01 * GIB
    second = plan_ds4_model(str(model), machine, full, binary=str(binary))
    assert second.measured and abs(second.reservation_bytes - 43.20 * GIB) < 0.01 * GIB
    assert "measured full-residency working set" in second.decisions[-1].why
    # The measured line re-bases to another window by its KV slope.
    wider = plan_ds4_model(str(model), machine, ModelOverrides(ds4_ssd_streaming=False, ctx=65536), binary=str(binary))
    assert abs(wider.reservation_bytes - (43.20 + 0.61) * GIB) < 0.02 * GIB


def test_not_safe_refusal_and_unknown_flags_end_with_ds4s_own_error(stoker_home, tmp_path):
    binary = install_fake(tmp_path / "ds4-build")
    model = ds4_model(tmp_path / "GLM-5.2.gguf", 400)
    refused = plan_ds4_model(str(model), linux_cuda(64), ModelOverrides(ds4_cache_gb=8), binary=str(binary))
    # 64 GiB of RAM less the 48 GiB fixed guess and 24 GiB headroom leaves nothing for experts.
    assert isinstance(refused, PlanRefusal) and refused.reason.startswith("ds4 is not safe to launch")
    # A flag ds4 does not have is refused by it the way ds4 refuses it.
    ok = plan_ds4_model(str(model), linux_cuda(128), binary=str(binary))
    spec = ds4_launch_spec(ok, binary=str(binary), port=free_port())
    bad = spec.__class__(**{**spec.__dict__, "argv": spec.argv + ("--bogus",)})
    proc = EngineProcess.start(bad, log_dir=tmp_path / "logs")
    assert proc.wait(timeout=10) == 2
    # Its last line (ds4's own refusal) reaches the tail once the reader has read to the end.
    assert wait_until(lambda: [failure_of_line(EngineKind.DS4, ln) for ln in proc.tail()][-1:] == ["bad-argument"],
                      30), proc.tail()


@pytest.mark.parametrize("setting", [None, True])
def test_the_dialogs_ds4_fields_change_the_preview(stoker_home, tmp_path, setting):
    """Services.plan routes a deepseek4 file to the ds4 plan; the ds4 overrides change it."""
    from stoker.desktop.services import Services

    binary = install_fake(tmp_path / "ds4-build")
    os.environ["STOKER_DS4_SERVER"] = str(binary)
    try:
        model = ds4_model(tmp_path / "DeepSeek-V4-Flash.gguf", 81)
        services = Services()
        services._machine = mac(128)
        base = services.plan(str(model), ModelOverrides(ds4_ssd_streaming=setting))
        changed = services.plan(str(model), ModelOverrides(ds4_ssd_streaming=setting, ds4_cache_gb=20))
    finally:
        del os.environ["STOKER_DS4_SERVER"]
    assert isinstance(base, Ds4Plan) and base.cache_gb == 56 and changed.cache_gb == 20
    assert any(d.what == "expert cache 20 GiB" for d in changed.decisions)


def test_stoker_launches_ds4_through_the_seam_and_the_gateway_routes_a_chat_to_it(stoker_home, tmp_path,
                                                                                  monkeypatch):
    """The supervisor and the gateway, as `stoker run` assembles them (stoker/instance/instance.py), with
    the fake ds4-server found at STOKER_DS4_SERVER and a machine described as a 128 GiB Mac:
    the deepseek4 model is listed, a chat request loads it through the ds4 seam (plan -> argv
    -> READY on /v1/models), is answered, ds4's memory line is recorded at READY and the next
    launch is planned from it (a bigger expert cache in its argv)."""
    import httpx
    import openai

    from stoker.base.paths import stoker_paths
    from stoker.fleet.commands import Shutdown, Stop
    from stoker.fleet.launcher import RealPreparer
    from stoker.fleet.snapshot import EngineState
    from stoker.fleet.supervisor import SupervisorOptions
    from stoker.instance.instance import Instance

    binary = install_fake(tmp_path / "ds4-build")
    monkeypatch.setenv("STOKER_DS4_SERVER", str(binary))
    stoker_paths().models.mkdir(parents=True, exist_ok=True)
    model = ds4_model(stoker_paths().models / "DeepSeek-V4-Flash-IQ2XXS.gguf", 81)
    record = tmp_path / "argv.jsonl"
    monkeypatch.setenv("FAKE_DS4_RECORD", str(record))
    inst = Instance(RealPreparer(machine=mac(128), remember_last_model=False), port=0,
                    options=SupervisorOptions(stop_grace_s=5)).start()
    try:
        listed = {m["id"]: m for m in httpx.get(inst.url + "/v1/models").json()["data"]}
        assert listed["deepseek-v4-flash-iq2xxs"]["kind"] == "chat"
        client = openai.OpenAI(base_url=inst.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        out = client.chat.completions.create(model="deepseek-v4-flash-iq2xxs",
                                             messages=[{"role": "user", "content": "hi"}])
        assert out.choices[0].message.content == "Hello from ds4."
        snap = inst.supervisor.snapshot()
        engine = next(e for e in snap.engines if e.engine_kind == "ds4")
        assert engine.state is EngineState.READY and engine.plan_summary == (
            "ds4, context 131,072, SSD streaming with a 56 GiB expert cache, metal")
        seen = json.loads(record.read_text().splitlines()[0])
        assert seen["cwd"] == str(binary.parent)
        assert seen["argv"][1:] == ["--model", str(model.resolve()), "--metal", "--ctx", "131072", "--host",
                                    "127.0.0.1", "--port", str(seen["argv"][9]), "--kv-disk-dir",
                                    str(kv_disk_dir()), "--kv-disk-space-mb", "16384", "--cors",
                                    "--ssd-streaming", "--ssd-streaming-cache-experts", "56GB"]
        measured = ds4_measurements(str(model.resolve()), str(binary))
        assert len(measured) == 1 and measured[0].ssd_streaming and measured[0].ctx_tokens == 131072
        # The next launch is planned from the measured line: the 64 GiB tier fits beside it.
        inst.supervisor.submit(Stop())
        assert inst.supervisor.wait_for(lambda s: not any(e.state is EngineState.READY for e in s.engines), 20)
        again = client.chat.completions.create(model="deepseek-v4-flash-iq2xxs",
                                               messages=[{"role": "user", "content": "hi"}])
        assert again.choices[0].message.content == "Hello from ds4."
        argv = json.loads(record.read_text().splitlines()[-1])["argv"]
        assert argv[-1] == "64GB"
        assert any(w.startswith("expert cache 64 GiB") for w, _ in inst.supervisor.snapshot().plan_decisions)
        assert inst.supervisor.snapshot().incidents == ()
    finally:
        inst.supervisor.submit(Shutdown())
        assert inst.supervisor.join(30)
        inst.close()


def test_ds4_progress_lines_read_as_words_for_the_tray():
    from stoker.engines.kind import progress_text

    lines = (Path(__file__).resolve().parents[1] / "data" / "ds4" / "prefill.log").read_text().splitlines()
    text = progress_text(EngineKind.DS4, lines)
    assert text is not None and ("reading the prompt" in text or "generating" in text)
