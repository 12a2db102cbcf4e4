"""Failure and memory truth through the real supervisor and preparer, on the real engine.

Each test runs Stoker's own path (Supervisor + RealPreparer on a fresh STOKER_HOME) against
the CPU llama-server build and the demo model, and makes a failure really happen: a second
build that dies of SIGILL while starting; and measures real launches. One engine at a time,
small contexts.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.fleet.commands import LiftQuarantine, Shutdown, StartModel, Stop
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import Supervisor, SupervisorHooks, SupervisorOptions
from tests.shell.engine_helpers import chat, engine_key, engines_running

pytestmark = pytest.mark.engine
MIB = 1024 * 1024
GIB = 1024 * MIB


def _supervisor(preparer, launches=None):
    from stoker.fleet.restart import RestartPolicy

    policy = RestartPolicy(first_delay_s=0.2, factor=2.0, cap_s=2.0)
    return Supervisor(preparer, SupervisorOptions(policy=policy, stop_grace_s=5),
                      SupervisorHooks(on_launch=launches.append if launches is not None else None)).start()


def _shutdown(sup):
    sup.submit(Shutdown())
    assert sup.join(30)


def _install_own(engine_dir: Path, name: str = "b11434-cpu") -> Path:
    """The real CPU build as an own build of this STOKER_HOME (a link, no copy)."""
    root = stoker_paths().engines / "llama-server"
    root.mkdir(parents=True, exist_ok=True)
    (root / name).symlink_to(engine_dir, target_is_directory=True)
    return root / name


REAL_START_LINES = """\
0.00.004.113 I srv  llama_server: initializing ...
0.00.005.441 I cmn  common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)
0.00.005.536 I srv  init_listene: The UI is disabled
0.00.007.151 I srv    load_model: loading model '{model}'
0.00.012.020 I ggml_vulkan: Found 1 Vulkan devices:"""


def _install_crashing_vulkan(engine_dir: Path, model: Path) -> Path:
    """A second own build, preferred (vulkan before cpu), that dies of SIGILL while starting.

    `--version` answers like the real build (discovery runs it); a launch prints the real
    engine's first lines and then takes an illegal instruction, as a build compiled for
    another CPU does.
    """
    folder = stoker_paths().engines / "llama-server" / "b11434-vulkan"
    folder.mkdir(parents=True)
    script = folder / "llama-server"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then exec "{engine_dir / "llama-server"}" --version; fi\n'
        "cat <<'LOG'\n" + REAL_START_LINES.format(model=model) + "\nLOG\n"
        "kill -ILL $$\n")
    script.chmod(0o755)
    manifest = json.loads((engine_dir / "manifest.json").read_text())
    manifest.update(backend="vulkan", sha256=None, files=["llama-server"])
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _real_preparer(**kw):
    from stoker.fleet.launcher import RealPreparer

    kw.setdefault("cli_overrides", ModelOverrides(ctx=1024, slots=1))
    return RealPreparer(remember_last_model=False, startup_deadline_s=60, **kw)


# ---------------------------------------------------------------------- quarantine


def test_three_sigill_starts_quarantine_the_build_and_the_next_one_serves(engine_dir, demo_model,
                                                                          stoker_home):
    _install_own(engine_dir)
    _install_crashing_vulkan(engine_dir, demo_model)
    sup = _supervisor(_real_preparer())
    try:
        sup.submit(StartModel(str(demo_model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 90)
        assert ready is not None, sup.snapshot()
        assert ready.engine_build == "b11434-cpu" and ready.backend == "cpu"
        assert [b for b, _ in ready.quarantined] == ["b11434-vulkan"]
        assert "crashed 3 times while starting" in ready.quarantined[0][1]
        kinds = [i.kind for i in ready.incidents]
        assert kinds == ["illegal-instruction"] * 3, ready.incidents
        assert "strike 1 of 3 against b11434-vulkan" in ready.incidents[0].action
        assert "quarantined b11434-vulkan" in ready.incidents[-1].action
        assert chat(ready.endpoint, key=engine_key(sup))
    finally:
        _shutdown(sup)

    # A new Stoker on the same home: the quarantine and the incidents are still there.
    sup = _supervisor(_real_preparer())
    try:
        first = sup.snapshot()
        assert [i.kind for i in first.incidents] == ["illegal-instruction"] * 3
        sup.submit(StartModel(str(demo_model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 60)
        assert ready is not None and ready.engine_build == "b11434-cpu", sup.snapshot()
        assert ready.restarts == 0 and [b for b, _ in ready.quarantined] == ["b11434-vulkan"]
        sup.submit(LiftQuarantine("b11434-vulkan"))
        lifted = sup.wait_for(lambda s: s.quarantined == (), 10)
        assert lifted is not None
        ledger, _ = LedgerStore.in_data_dir(stoker_paths().data).load()
        assert ledger.quarantined == () and ledger.strikes == ()
    finally:
        _shutdown(sup)
    records = [json.loads(x) for x in (stoker_paths().data / "incidents.jsonl").read_text().splitlines()]
    assert {r["build"] for r in records} == {"b11434-vulkan"} and all(r["model"] for r in records)


def test_a_failure_that_is_not_the_builds_never_counts_as_a_strike(engine_dir, demo_model, stoker_home):
    from stoker.diagnosis.exit_report import Incident
    from stoker.engines.engine_exit import EngineExit
    from stoker.engines.launch import AttemptContext

    _install_own(engine_dir)
    prep = _real_preparer()
    launch = prep(str(demo_model), AttemptContext(0, 40001, stoker_home, None, None))
    ex = EngineExit(1, 1, None, False, "starting", 0.3, None, ())
    for kind in ("port-in-use", "bad-model", "bad-argument"):
        inc = Incident(kind, "t", "e", "a", counts_as_strike=False, recoverable_by=None,
                       exit_description="exited with code 1")
        assert prep.after_exit(launch, inc, ex).retry is None
    ledger, _ = LedgerStore.in_data_dir(stoker_paths().data).load()
    assert ledger.strikes == () and ledger.quarantined == ()


# ---------------------------------------------------------------------- measured memory


def _launch_once(prep, model, launches):
    sup = _supervisor(prep, launches)
    try:
        sup.submit(StartModel(str(model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 60)
        assert ready is not None, sup.snapshot()
        sup.submit(Stop())
        assert sup.wait_for(lambda s: s.state is S.STOPPED and s.seq > ready.seq, 30)
    finally:
        _shutdown(sup)
    return launches[-1].plan


def test_launches_measure_the_model_and_a_replaced_file_or_build_drops_the_line(engine_dir, demo_model,
                                                                                stoker_home, tmp_path):
    _install_own(engine_dir)
    model = tmp_path / "m.gguf"
    shutil.copy(demo_model, model)
    launches = []
    # Two contexts pin down a line (one point is not a line): the third launch uses it.
    assert _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=1024, slots=1)), model,
                        launches).estimate_source == "estimated"
    _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=2048, slots=1)), model, launches)
    third = _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=1536, slots=1)), model, launches)
    assert third.estimate_source == "measured"
    assert any(d.what == "measured memory" and "measured these settings" in d.why for d in third.decisions)

    # The same bytes written again are another file as far as a measurement knows.
    model.write_bytes(model.read_bytes())
    again = _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=1536, slots=1)), model, launches)
    assert again.estimate_source == "estimated"

    # Another build of the engine (a copy whose binary is newer) has measured nothing yet.
    _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=1024, slots=1)), model, launches)
    _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=2048, slots=1)), model, launches)
    copy = tmp_path / "engine-copy"
    shutil.copytree(engine_dir, copy, symlinks=True)
    os.utime(copy / "llama-server")  # a rebuild: same name, newer binary
    other = _launch_once(_real_preparer(cli_overrides=ModelOverrides(ctx=1536, slots=1),
                                        engine=str(copy / "llama-server")), model, launches)
    assert launches[-1].spec.binary == str(copy / "llama-server")
    assert other.estimate_source == "estimated"
    assert engines_running(engine_dir / "llama-server") == []


# ---------------------------------------------------------------------- GPU blockers before launch


def _install_gpu_build(engine_dir: Path, backend: str, **manifest_facts) -> Path:
    """An own GPU build that answers `--version` like the real one (it is never launched)."""
    folder = stoker_paths().engines / "llama-server" / f"b11434-{backend}"
    folder.mkdir(parents=True)
    script = folder / "llama-server"
    script.write_text(f'#!/bin/sh\nexec "{engine_dir / "llama-server"}" "$@"\n')
    script.chmod(0o755)
    manifest = json.loads((engine_dir / "manifest.json").read_text())
    manifest.update(backend=backend, sha256=None, files=["llama-server"], **manifest_facts)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _machine(*devices):
    from stoker.planning.machine import Machine

    return Machine(os="linux", arch="x86_64", ram_total_bytes=32 * GIB, ram_available_bytes=28 * GIB,
                   physical_cores=8, logical_cores=16, devices=devices)


def test_a_cuda_build_newer_than_the_driver_is_passed_over_before_launch(engine_dir, demo_model,
                                                                         stoker_home):
    from stoker.engines.launch import AttemptContext, PreparedLaunch
    from stoker.planning.machine import Device

    _install_own(engine_dir)
    _install_gpu_build(engine_dir, "cuda", cuda_runtime="12.4")
    gpu = Device("CUDA0", "NVIDIA GeForce RTX 3060", "cuda", 12 * GIB, 11 * GIB, kind="discrete",
                 driver_cuda_version="12.2")
    prep = _real_preparer(machine=_machine(gpu))
    out = prep(str(demo_model), AttemptContext(attempt=0, port=40111, log_dir=stoker_home,
                                               overrides=None, last_exit=None))
    assert isinstance(out, PreparedLaunch) and out.build_id == "b11434-cpu"
    (blocker,) = [b for b in prep.engine_health().blockers if b.kind == "cudaBlocker"]
    assert "needs CUDA 12.4" in blocker.message and "12.2" in blocker.message

    fresh = _machine(Device("CUDA0", "NVIDIA GeForce RTX 3060", "cuda", 12 * GIB, 11 * GIB,
                            kind="discrete", driver_cuda_version="12.6"))
    prep = _real_preparer(machine=fresh)
    assert prep.choose_engine().id == "b11434-cuda" and prep.engine_health().blockers == ()


def test_rocm_launch_hides_gpus_without_kernels_and_blocks_when_none_is_left(engine_dir, demo_model,
                                                                              stoker_home):
    from stoker.engines.launch import AttemptContext
    from stoker.planning.machine import Device

    _install_own(engine_dir)
    _install_gpu_build(engine_dir, "rocm", gfx_targets=["gfx1100"])
    older = Device("ROCm0", "AMD Radeon RX 6800", "rocm", 16 * GIB, 15 * GIB, gfx_target="gfx1030")
    newer = Device("ROCm1", "AMD Radeon RX 7900 XTX", "rocm", 24 * GIB, 23 * GIB, gfx_target="gfx1100")
    prep = _real_preparer(machine=_machine(older, newer))
    out = prep(str(demo_model), AttemptContext(attempt=0, port=40112, log_dir=stoker_home,
                                               overrides=None, last_exit=None))
    assert out.build_id == "b11434-rocm" and ("ROCR_VISIBLE_DEVICES", "1") in out.spec.env

    prep = _real_preparer(machine=_machine(older))
    assert prep.choose_engine().id == "b11434-cpu"
    assert [b.kind for b in prep.engine_health().blockers] == ["rocmBlocker"]
