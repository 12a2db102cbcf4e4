"""A drafter that breaks the engine's start-up, on the real engine: left out, or kept when forced.

The broken drafter is the demo model with one tensor renamed in its header (same length,
so the file stays valid): Stoker's header check reads it like any model, the engine does
not (`check_tensor_dims: tensor 'blk.0.attn_q.weight' not found` -> `failed to load draft
model` -> exit 1). A draft model with another vocabulary is not such a drafter with
b11434: the engine logs `draft model vocab type must match target` and serves without
speculation, so it cannot show a failed start.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.fleet.commands import Shutdown, StartModel
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import Supervisor, SupervisorHooks, SupervisorOptions
from tests.shell.engine_helpers import chat, engine_key, engines_running

pytestmark = pytest.mark.engine
RENAMED = (b"blk.0.attn_q.weight", b"blk.0.attn_z.weight")


def _model_with_broken_drafter(demo_model: Path, tmp: Path, name: str) -> tuple[Path, Path]:
    folder = tmp / "models"
    folder.mkdir(exist_ok=True)
    model = folder / f"{name}.gguf"
    try:
        os.link(demo_model, model)
    except OSError:
        shutil.copy(demo_model, model)
    draft = folder / f"{name}.draft.gguf"
    shutil.copy(demo_model, draft)
    old, new = RENAMED
    with open(draft, "r+b") as fh:
        head = fh.read(8 << 20)
        needle = struct.pack("<Q", len(old)) + old
        assert head.count(needle) == 1
        fh.seek(head.find(needle) + 8)
        fh.write(new)
    return model, draft


def _install_own(engine_dir: Path) -> None:
    root = stoker_paths().engines / "llama-server"
    root.mkdir(parents=True, exist_ok=True)
    (root / "b11434-cpu").symlink_to(engine_dir, target_is_directory=True)


def _supervisor(preparer, launches=None):
    from stoker.fleet.restart import RestartPolicy

    return Supervisor(preparer, SupervisorOptions(policy=RestartPolicy(first_delay_s=0.2, factor=2.0, cap_s=2.0),
                                                  stop_grace_s=5),
                      SupervisorHooks(on_launch=launches.append if launches is not None else None)).start()


def _preparer(**kw):
    from stoker.fleet.launcher import RealPreparer

    kw.setdefault("cli_overrides", ModelOverrides(ctx=1024, slots=1))
    return RealPreparer(remember_last_model=False, startup_deadline_s=60, **kw)


def _shutdown(sup):
    sup.submit(Shutdown())
    assert sup.join(30)


def test_a_chosen_drafter_that_breaks_start_up_is_marked_broken_and_left_out(engine_dir, demo_model,
                                                                            stoker_home, tmp_path):
    _install_own(engine_dir)
    model, draft = _model_with_broken_drafter(demo_model, tmp_path, "tiny")
    launches = []
    sup = _supervisor(_preparer(), launches)
    try:
        sup.submit(StartModel(str(model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 60)
        assert ready is not None, sup.snapshot()
        assert launches[0].plan.drafter.status == "in" and "-md" in launches[0].spec.argv
        assert len(launches) == 2 and "-md" not in launches[1].spec.argv
        assert "-md" not in ready.argv
        assert ready.drafter_status == "broken" and draft.name in (ready.drafter_reason or ""), \
            (ready.drafter_status, ready.drafter_reason)
        inc = ready.incidents[-1]
        assert inc.kind == "drafter-failure" and "failed to load draft model" in inc.evidence
        assert f"marked the drafter {draft.name} broken with b11434-cpu" in inc.action
        assert chat(ready.endpoint, key=engine_key(sup))
    finally:
        _shutdown(sup)
    ledger, _ = LedgerStore.in_data_dir(stoker_paths().data).load()
    assert [(d.build_id, d.drafter_path) for d in ledger.broken_drafters] == [("b11434-cpu", str(draft))]
    assert ledger.strikes == ()

    # The next Stoker on this home leaves it out from the first launch on.
    launches = []
    sup = _supervisor(_preparer(), launches)
    try:
        sup.submit(StartModel(str(model)))
        ready = sup.wait_for(lambda s: s.state is S.READY, 60)
        assert ready is not None and len(launches) == 1 and ready.drafter_status == "broken"
    finally:
        _shutdown(sup)
    assert engines_running(engine_dir / "llama-server") == []


def test_a_forced_drafter_stays_and_is_named_as_the_suspect(engine_dir, demo_model, stoker_home, tmp_path):
    _install_own(engine_dir)
    model, draft = _model_with_broken_drafter(demo_model, tmp_path, "forced")
    launches = []
    prep = _preparer(cli_overrides=ModelOverrides(ctx=1024, slots=1, draft_model=str(draft)))
    sup = _supervisor(prep, launches)
    try:
        sup.submit(StartModel(str(model)))
        failed = sup.wait_for(lambda s: s.state is S.FAILED, 60)
        assert failed is not None, sup.snapshot()
        inc = failed.incidents[-1]
        assert inc.kind == "drafter-failure", inc
        assert draft.name in inc.action and "likely cause" in inc.action, inc.action
        assert failed.drafter_status == "forced" and failed.restarts == 0
        assert len(launches) == 1 and "-md" in launches[0].spec.argv
    finally:
        _shutdown(sup)
    ledger, _ = LedgerStore.in_data_dir(stoker_paths().data).load()
    assert ledger.broken_drafters == () and ledger.strikes == ()
    assert engines_running(engine_dir / "llama-server") == []
