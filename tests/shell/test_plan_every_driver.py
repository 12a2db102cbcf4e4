"""plan = preview = launch for every engine driver: `stoker plan --json`, the per-model
dialog's preview (desktop Services.plan) and the launch (RealPreparer) each ask
`driver_for(model).plan(inputs)` with inputs from fleet/pipeline.gather_plan_inputs, so for
the same machine and settings they make the same plan.

llama-server on the demo model with the real build (its described machines are
tests/shell/test_plan_pipeline.py's); ds4 with the fake ds4-server
(tests/helpers/fake_ds4_server.py) on a described 128 GiB Mac; sd-server with the real
sd-server build and the tiny diffusion model (tests/helpers/tiny_diffusion.py); rpc-server:
a plan with a worker (a real rpc-server on loopback, its devices probed by the RPC engine).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore, SettingsStore
from stoker.cli import main
from stoker.cli.commands.plan import _plain, plan_json
from stoker.desktop.services import Services
from stoker.engines.drivers import driver_for
from stoker.engines.ds4_launch import Ds4Plan
from stoker.engines.kind import EngineKind
from stoker.engines.launch import AttemptContext, PreparationRefused, PreparedLaunch
from stoker.engines.process import free_loopback_port
from stoker.engines.sd_server import ImagePlan
from stoker.fleet.launcher import RealPreparer
from stoker.library.gguf_io import load_summary
from stoker.planning.machine import Machine, machine_from_json
from stoker.planning.plan import LaunchPlan, PlanRefusal
from tests.conftest import TEST_HOME
from tests.helpers.tiny_diffusion import write_tiny_flux2_klein
from tests.shell.test_ds4_engine import ds4_model, install_fake

pytestmark = pytest.mark.engine
GIB = 1 << 30

MAC_128 = {"os": "darwin", "arch": "arm64", "ram_total_gib": 128, "physical_cores": 24, "logical_cores": 24,
           "unified_memory": True}
CPU_8 = {"os": "linux", "arch": "x86_64", "ram_total_gib": 8, "ram_available_gib": 7.5,
         "physical_cores": 4, "logical_cores": 8}


def _machine(tmp_path: Path, name: str, described: dict) -> tuple[Path, Machine]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(described))
    return path, machine_from_json(path.read_text(), str(path))


def _launch(model: Path, machine: Machine | None, held: tuple = (), **kw) -> PreparedLaunch:
    prepared = RealPreparer(machine=machine, remember_last_model=False, **kw)(
        str(model), AttemptContext(attempt=0, port=free_loopback_port(), log_dir=stoker_paths().logs,
                                   overrides=None, last_exit=None, held_bytes=held))
    assert isinstance(prepared, PreparedLaunch), prepared
    return prepared


def _preview(model: Path, machine: Machine | None):
    services = Services()
    services._machine = machine  # the dialog plans for the machine the launch would use
    return services.plan(str(model), services.load_overrides(str(model)))


def _cli(capsys, model: Path, machine_file: Path | None) -> dict:
    rc = main(["plan", str(model), "--json", *(["--machine", str(machine_file)] if machine_file else [])])
    out = capsys.readouterr()
    assert rc in (0, 3), out.err
    return json.loads(out.out)


def _same_plan(cli: dict, launch: PreparedLaunch, machine: Machine) -> None:
    """The CLI's JSON is the launch's plan as JSON (argv aside: its port is a placeholder)."""
    ours = plan_json(launch.plan, launch.spec, machine, driver_for(launch.kind))
    keep = ("engine", "memory", "decisions", "engine_plan", "ctx", "slots", "kv_type_k", "kv_type_v",
            "gpu_layers", "drafter")
    assert {k: cli.get(k) for k in keep} == {k: ours.get(k) for k in keep}


def test_llama_server_plan_preview_and_launch_agree_on_this_machine(tmp_path, demo_model, engine_dir,
                                                                     stoker_home, capsys, monkeypatch):
    own = stoker_home / "data" / "engines" / "llama-server"
    own.mkdir(parents=True)
    (own / engine_dir.name).symlink_to(engine_dir, target_is_directory=True)
    SettingsStore(stoker_paths().config).update(memory_reserve_gib=3.0)
    from stoker.desktop import services
    from stoker.engines.probe import probe_machine
    from stoker.fleet import launcher

    machine = probe_machine(str(engine_dir / "llama-server"))  # once: free RAM moves between probes
    for module in (launcher, services):
        monkeypatch.setattr(module, "probe_machine", lambda *a, **k: machine)
    launch = _launch(demo_model, None)
    assert isinstance(launch.plan, LaunchPlan) and launch.kind is EngineKind.LLAMA_SERVER
    assert _preview(demo_model, None) == launch.plan
    cli = _cli(capsys, demo_model, None)
    assert cli["engine"] == "llama-server"
    _same_plan(cli, launch, machine)


def test_ds4_plan_preview_and_launch_agree_and_stoker_plan_has_a_ds4_plan(tmp_path, stoker_home, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("STOKER_DS4_SERVER", str(install_fake(tmp_path / "ds4-build")))
    model = ds4_model(tmp_path / "DeepSeek-V4-Flash.gguf", 81)
    machine_file, machine = _machine(tmp_path, "mac", MAC_128)
    launch = _launch(model, machine)
    assert isinstance(launch.plan, Ds4Plan) and launch.kind is EngineKind.DS4
    assert _preview(model, machine) == launch.plan
    cli = _cli(capsys, model, machine_file)
    assert cli["kind"] == "plan" and cli["engine"] == "ds4" and cli["argv"][0] == "ds4-server"
    assert cli["engine_plan"] == _plain(launch.plan)
    _same_plan(cli, launch, machine)


def test_the_ds4_launch_plans_with_what_the_budget_and_the_residents_leave(tmp_path, stoker_home, capsys,
                                                                           monkeypatch):
    """Settings' memory budget for models reaches the ds4 plan (it used to plan on the whole
    machine), and what other residents hold is added back: the launch and the preview agree."""
    monkeypatch.setenv("STOKER_DS4_SERVER", str(install_fake(tmp_path / "ds4-build")))
    model = ds4_model(tmp_path / "DeepSeek-V4-Flash.gguf", 81)
    machine_file, machine = _machine(tmp_path, "mac", MAC_128)
    whole = _launch(model, machine).plan
    SettingsStore(stoker_paths().config).update(model_memory_gib=40)
    capped = _preview(model, machine)
    assert isinstance(capped, (Ds4Plan, PlanRefusal)) and capped != whole
    refused = RealPreparer(machine=machine, remember_last_model=False)(
        str(model), AttemptContext(attempt=0, port=free_loopback_port(), log_dir=stoker_paths().logs,
                                   overrides=None, last_exit=None))
    if isinstance(capped, PlanRefusal):
        assert isinstance(refused, PreparationRefused) and capped.reason in refused.reason
    else:
        assert refused.plan == capped  # a smaller expert cache than on the whole machine
    # 20 GiB free of 128, and Stoker's other residents hold 70 GiB of host RAM: the launch
    # plans with them added back (admission then makes room), not with the 20 GiB alone.
    SettingsStore(stoker_paths().config).update(model_memory_gib=None)
    short = Machine(**{**machine.__dict__, "ram_available_bytes": 20 * GIB})
    with_residents = _launch(model, short, held=(("CPU", 70 * GIB),)).plan
    alone = RealPreparer(machine=short, remember_last_model=False)(
        str(model), AttemptContext(attempt=0, port=free_loopback_port(), log_dir=stoker_paths().logs,
                                   overrides=None, last_exit=None))
    assert isinstance(with_residents, Ds4Plan)
    assert isinstance(alone, PreparationRefused) or alone.plan != with_residents


def test_sd_server_plan_preview_and_launch_agree(tmp_path, stoker_home, capsys, monkeypatch):
    root = TEST_HOME / "data" / "engines" / "sd-server"
    builds = sorted(d for d in root.glob("sd-*-cpu") if (d / "manifest.json").is_file()) if root.is_dir() else []
    if not builds:
        pytest.skip(f"no sd-server build under {root}; run `stoker setup --image` there")
    own = stoker_home / "data" / "engines" / "sd-server"
    own.mkdir(parents=True)
    (own / builds[0].name).symlink_to(builds[0], target_is_directory=True)  # found as Stoker's own
    monkeypatch.delenv("STOKER_SD_SERVER", raising=False)
    image = write_tiny_flux2_klein(stoker_paths().models / "tiny-flux2-klein")
    model = Path(image.diffusion_model or image.checkpoint)
    machine_file, machine = _machine(tmp_path, "cpu", CPU_8)
    launch = _launch(model, machine)
    assert isinstance(launch.plan, ImagePlan) and launch.kind is EngineKind.SD_SERVER
    assert launch.build_id == builds[0].name and launch.plan.devices[0].name == "CPU"
    assert _preview(model, machine) == launch.plan
    cli = _cli(capsys, model, machine_file)
    assert cli["engine"] == "sd-server" and "--diffusion-model" in " ".join(cli["argv"])
    _same_plan(cli, launch, machine)


def test_rpc_plan_with_a_worker_agrees_and_a_plan_without_workers_is_refused(tmp_path, demo_model, stoker_home,
                                                                              capsys, monkeypatch):
    rpc = TEST_HOME / "data" / "engines" / "rpc"
    if not (rpc / "b11434-cpu-rpc" / "rpc-server").is_file():
        pytest.skip(f"no RPC build under {rpc}; run `stoker setup --rpc` there")
    (stoker_home / "data" / "engines").mkdir(parents=True, exist_ok=True)
    (stoker_home / "data" / "engines" / "rpc").symlink_to(rpc, target_is_directory=True)
    from stoker.fleet.rpc_worker import SharedWorker

    port = free_loopback_port()
    worker = SharedWorker(lambda: None)
    worker.start("127.0.0.1", port)
    try:
        _wait_for_port(port)
        # A budget this machine's share of the model cannot fit in: the plan spills onto the worker.
        SettingsStore(stoker_paths().config).update(rpc_workers=[f"127.0.0.1:{port}"], model_memory_gib=0.08)
        OverridesStore(stoker_paths().config).set(demo_model, ModelOverrides(ctx=2048))
        machine_file, machine = _machine(tmp_path, "cpu", CPU_8)
        launch = _launch(demo_model, machine)
        plan = launch.plan
        assert isinstance(plan, LaunchPlan) and plan.rpc_endpoints == (f"127.0.0.1:{port}",)
        assert launch.build_id == "b11434-cpu-rpc" and "--rpc" in launch.spec.argv
        assert _preview(demo_model, machine) == plan
        cli = _cli(capsys, demo_model, None)
        assert f"127.0.0.1:{port}" in " ".join(cli["argv"])
    finally:
        worker.stop()
        worker.join(10)
    inputs_without = RealPreparer(machine=machine).plan_inputs(
        demo_model, held_bytes={}, driver=driver_for(EngineKind.RPC_SERVER),
        build=driver_for(EngineKind.RPC_SERVER).default_build(), machine=machine,
        settings=SettingsStore(stoker_paths().config).load(), overrides=ModelOverrides())
    assert inputs_without.rpc_workers  # Settings' worker is required by the RPC driver's inputs
    refused = driver_for(EngineKind.RPC_SERVER).plan(
        inputs_without.__class__(**{**inputs_without.__dict__, "rpc_workers": ()}))
    assert isinstance(refused, PlanRefusal) and "needs at least one worker" in refused.reason
    assert driver_for(load_summary(demo_model), rpc_workers=inputs_without.rpc_workers).kind \
        is EngineKind.RPC_SERVER


def _wait_for_port(port: int) -> None:
    """Until the worker's port accepts a connection (its readiness), or fail after 30 s."""
    import socket
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)  # paces the connect attempts until the worker listens
    pytest.fail(f"the rpc-server worker did not listen on {port} within 30 s")



def test_pull_verdicts_plan_through_the_driver_with_the_settings_reserve(demo_model, stoker_home):
    """A verdict on a file still on the hub plans its remote header with the launch's inputs:
    Settings' reserve (it used the 2 GiB default), so on a small machine the reserve changes it."""
    from stoker.fleet.pipeline import load_settings, remote_planner

    machine = machine_from_json(json.dumps({"os": "linux", "arch": "x86_64", "ram_total_gib": 4.3,
                                            "ram_available_gib": 4.2, "physical_cores": 4,
                                            "logical_cores": 8}), "small")
    header = load_summary(demo_model)
    plans = {}
    for reserve in (4.0, 0.5):
        SettingsStore(stoker_paths().config).update(memory_reserve_gib=reserve)
        policy, plan = remote_planner(machine, load_settings()[0])
        assert policy.os_reserve_min_bytes == int(reserve * GIB)
        plans[reserve] = plan(header, "hf://example/SmolLM2")
    assert isinstance(plans[4.0], LaunchPlan) and isinstance(plans[0.5], LaunchPlan)
    assert plans[4.0].ctx < plans[0.5].ctx
