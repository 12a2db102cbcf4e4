"""One planning pipeline: `stoker plan`, the per-model dialog's preview and the launch agree.

For several machines (described by files, as `stoker plan --machine` reads them, and handed
to the preview and to the launcher as the same values) and several settings (the memory
reserve from Settings, a drafter beside the model, a drafter the ledger marks broken,
lines measured on this machine, saved overrides), the plan each of the three makes must be
the same plan. Machines are small enough that the reserve binds: the old preview's 2 GiB
default against Settings' reserve gave a different context.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore, SettingsStore
from stoker.cli import main
from stoker.cli.commands.plan import plan_json
from stoker.desktop.services import Services
from stoker.engines.launch import AttemptContext
from stoker.engines.process import free_loopback_port
from stoker.fleet.launcher import RealPreparer
from stoker.planning.machine import machine_from_json

pytestmark = pytest.mark.engine
GIB = 1 << 30
LOGS = Path(__file__).resolve().parents[1] / "data" / "engine_logs"

MACHINES = {
    "cpu-4.3g": {"os": "linux", "arch": "x86_64", "ram_total_gib": 4.3, "ram_available_gib": 4.2,
                 "physical_cores": 4, "logical_cores": 8},
    "mac-unified-4.4g": {"os": "darwin", "arch": "arm64", "ram_total_gib": 4.4, "ram_available_gib": 4.3,
                         "physical_cores": 8, "logical_cores": 8, "unified_memory": True,
                         "devices": [{"name": "MTL0", "description": "Apple M1", "backend": "metal",
                                      "kind": "integrated", "total_gib": 3.0, "free_gib": 3.0}]},
    "cuda-small": {"os": "linux", "arch": "x86_64", "ram_total_gib": 4.5, "ram_available_gib": 4.4,
                   "physical_cores": 6, "logical_cores": 12,
                   "devices": [{"name": "CUDA0", "description": "NVIDIA GeForce GT 1030", "backend": "cuda",
                                "kind": "discrete", "total_mib": 2048, "free_mib": 300,
                                "compute_cap": "6.1"}]},
}


@pytest.fixture
def model_dir(tmp_path, demo_model, engine_dir, stoker_home):
    """The demo model in its own folder (a drafter may be put beside it), Stoker's own build
    installed in the home, and a settings file."""
    own = stoker_home / "data" / "engines" / "llama-server"
    own.mkdir(parents=True)
    (own / engine_dir.name).symlink_to(engine_dir, target_is_directory=True)
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / demo_model.name).symlink_to(demo_model)
    return folder


def _launch_plan(model: Path, machine=None):
    preparer = RealPreparer(machine=machine, remember_last_model=False)
    prepared = preparer(str(model), AttemptContext(attempt=0, port=free_loopback_port(),
                                                   log_dir=stoker_paths().logs, overrides=None,
                                                   last_exit=None))
    assert hasattr(prepared, "plan"), prepared
    return prepared.plan


def _preview_plan(model: Path, machine=None):
    services = Services()
    if machine is not None:
        services._machine = machine  # the dialog plans for the machine the launch would use
    return services.plan(str(model), services.load_overrides(str(model)))


def _cli_plan(capsys, model: Path, machine_file: Path | None) -> dict:
    rc = main(["plan", str(model), "--json", *(["--machine", str(machine_file)] if machine_file else [])])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def _comparable(doc: dict, with_engine: bool = True) -> dict:
    keep = ("ctx", "slots", "kv_type_k", "kv_type_v", "kv_unified", "flash_attn", "gpu_layers",
            "n_cpu_moe", "cpu_moe", "swa_full", "drafter", "memory", "decisions")
    out = {k: doc[k] for k in keep}
    if not with_engine:
        out["decisions"] = [d for d in doc["decisions"] if not d["what"].startswith("engine")]
    return out


def _as_json(plan, machine) -> dict:
    from stoker.engines.argv import build_launch_spec
    from stoker.engines.drivers import driver_for
    from stoker.engines.kind import EngineKind

    return plan_json(plan, build_launch_spec(plan, binary="llama-server", port=8080), machine,
                     driver_for(EngineKind.LLAMA_SERVER))


@pytest.mark.parametrize("machine_name", sorted(MACHINES))
@pytest.mark.parametrize("reserve_gib", [4.0, 3.9, 0.5])
@pytest.mark.parametrize("drafter", [False, True])
def test_preview_launch_and_stoker_plan_agree_on_described_machines(
        model_dir, tmp_path, capsys, machine_name, reserve_gib, drafter):
    model = model_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if drafter:
        shutil.copyfile(model, model_dir / "SmolLM2-135M-Instruct.Q4_1.draft.gguf")
    SettingsStore(stoker_paths().config).update(memory_reserve_gib=reserve_gib)
    machine_file = tmp_path / f"{machine_name}.json"
    machine_file.write_text(json.dumps(MACHINES[machine_name]))
    machine = machine_from_json(machine_file.read_text(), str(machine_file))

    launch = _launch_plan(model, machine)
    preview = _preview_plan(model, machine)
    assert preview == launch  # the same LaunchPlan value, decisions included
    cli = _cli_plan(capsys, model, machine_file)
    # a described machine runs whatever build fits it: only the engine decision differs
    assert _comparable(cli, with_engine=False) == _comparable(_as_json(launch, machine), with_engine=False)
    assert (launch.drafter.status == "in") == drafter or launch.drafter.status == "left-out"


def test_the_reserve_from_settings_changes_the_plan_so_the_test_can_fail(model_dir, tmp_path):
    """Guard: on these machines the reserve binds, so a preview ignoring it would differ."""
    model = model_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"
    machine = machine_from_json(json.dumps(MACHINES["cpu-4.3g"]), "m")
    plans = {}
    for reserve in (4.0, 0.5):
        SettingsStore(stoker_paths().config).update(memory_reserve_gib=reserve)
        plans[reserve] = _launch_plan(model, machine)
    assert plans[4.0].ctx < plans[0.5].ctx


def test_on_this_machine_measured_lines_and_broken_drafters_reach_all_three(model_dir, capsys,
                                                                             engine_binary, monkeypatch):
    """This machine, probed once (free RAM moves between probes, so all three get that one
    probe's value): lines measured here and a drafter the ledger marks broken with this
    build; saved overrides pin what the measured line was taken with."""
    from stoker.engines import measurements
    from stoker.engines.engine_log import parse_memory_report
    from stoker.engines.identity import binary_identity
    from stoker.engines.probe import probe_machine
    from stoker.fleet.ledger import LedgerStore
    from stoker.fleet.pipeline import EngineChoice, plan_model
    from stoker.fleet.quarantine import mark_drafter_broken

    model = model_dir / "SmolLM2-135M-Instruct.Q4_1.gguf"
    draft = model_dir / "SmolLM2-135M-Instruct.Q4_1.draft.gguf"
    shutil.copyfile(model, draft)
    OverridesStore(stoker_paths().config).set(model, ModelOverrides(slots=1, kv_type_k="f16",
                                                                    kv_type_v="f16"))
    SettingsStore(stoker_paths().config).update(memory_reserve_gib=1.0)
    store = LedgerStore.in_data_dir(stoker_paths().data)
    ledger, _ = store.load()
    store.save(mark_drafter_broken(ledger, "b11434-cpu", str(draft), 1.0,
                                   binary_identity(engine_binary), "it broke a start"))
    # two measured launches (the engine's real report, the second with 1 MiB more KV)
    real = parse_memory_report((LOGS / "smollm2-f16-np1-c2048.log").read_text().splitlines())
    machine = probe_machine(str(engine_binary))
    engine = EngineChoice(str(engine_binary), "b11434-cpu")
    for ctx in (2048, 8192):
        plan = plan_model(model, machine, ModelOverrides(ctx=ctx, slots=1, kv_type_k="f16",
                                                         kv_type_v="f16", spec_type="none"),
                          engine=engine)
        report = replace(real, n_ctx=ctx, buffers=tuple(
            replace(b, bytes=ctx * 23040 + (1 << 20)) if b.kind == "kv" else b for b in real.buffers))
        assert measurements.record_launch(model, engine_binary, plan, report) == 1

    from stoker.desktop import services
    from stoker.fleet import launcher

    # `stoker plan` probes through the launcher; the dialog probes itself: both names replaced.
    for module in (launcher, services):
        monkeypatch.setattr(module, "probe_machine", lambda *a, **k: machine)
    launch = _launch_plan(model)
    preview = _preview_plan(model)
    cli = _cli_plan(capsys, model, None)
    assert launch.estimate_source == "measured" and launch.drafter.status != "in"
    assert any(d.what.startswith("engine b11434-cpu") for d in launch.decisions)
    assert preview == launch
    assert _comparable(cli) == _comparable(_as_json(launch, machine))
