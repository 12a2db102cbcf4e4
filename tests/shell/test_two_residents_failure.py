"""Two resident models on the real engine: what a failure teaches belongs to its own launch.

The launch context (binary identity, the overrides and policy the plan was made with) once
lived in a side map of the preparer keyed by id(PreparedLaunch), rebound on every prepare:
with two resident models the first one's crash found no context, so it got no recovery
decision and its READY recorded no measured line. The context now travels inside the
PreparedLaunch. Two copies of the demo model (differently named files, so two engines)
run side by side under Supervisor + RealPreparer on a fresh STOKER_HOME; the first is
killed with SIGILL while READY: a strike against its build, a restart, a measured line.
"""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest

from stoker.base.paths import stoker_paths
from stoker.fleet.commands import LoadModel, Shutdown
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.snapshot import EngineState as S
from tests.shell.engine_helpers import engines_running
from tests.shell.test_failure_wiring import _install_own, _real_preparer, _supervisor

pytestmark = pytest.mark.engine


def _measured_paths() -> set[str]:
    path = stoker_paths().data / "measurements.json"
    if not path.is_file():
        return set()
    return {e["model_path"] for e in json.loads(path.read_text())["entries"] if e["points"]}


def _engine(snap, path):
    return next((e for e in snap.engines if e.model_path == path), None)


def test_the_first_of_two_residents_crashes_and_keeps_its_own_decisions(engine_dir, demo_model,
                                                                       stoker_home, tmp_path):
    _install_own(engine_dir)
    first, second = tmp_path / "first.gguf", tmp_path / "second.gguf"
    shutil.copy(demo_model, first)
    shutil.copy(demo_model, second)
    a, b = os.path.realpath(first), os.path.realpath(second)
    sup = _supervisor(_real_preparer())
    try:
        # Both asked at once: the second is prepared while the first is still starting.
        sup.submit(LoadModel(a))
        sup.submit(LoadModel(b))
        both = sup.wait_for(lambda s: all((e := _engine(s, p)) and e.state is S.READY for p in (a, b)), 90)
        assert both is not None, sup.snapshot()
        # Each READY recorded its own measured line, the first one's too.
        assert {a, b} <= _measured_paths(), _measured_paths()

        pid = _engine(both, a).pid
        # SIGILL, as a build compiled for another CPU dies: a fault of the build, so a strike.
        # (A SIGKILL from outside while READY, with the kernel saying it was no OOM kill, is
        # an "unknown" exit that neither strikes nor recovers: it would show nothing here.)
        os.kill(pid, signal.SIGILL)
        crashed = sup.wait_for(lambda s: any(i.model_path == a for i in s.incidents), 30)
        assert crashed is not None, sup.snapshot()
        incident = next(i for i in crashed.incidents if i.model_path == a)
        # The preparer's decision about this very launch: it knew which binary ran it.
        # Without its context it says nothing and records nothing.
        assert incident.kind == "illegal-instruction", incident
        assert "strike 1 of 3 against b11434-cpu" in incident.action, incident
        ledger, _ = LedgerStore.in_data_dir(stoker_paths().data).load()
        assert [s.build_id for s in ledger.strikes] == ["b11434-cpu"], ledger

        again = sup.wait_for(lambda s: (e := _engine(s, a)) is not None and e.state is S.READY
                             and e.restarts == 1 and e.pid != pid, 90)
        assert again is not None, sup.snapshot()
        assert _engine(again, b).state is S.READY and _engine(again, b).restarts == 0
        assert len(engines_running(engine_dir / "llama-server")) == 2
    finally:
        sup.submit(Shutdown())
        assert sup.join(30)
    assert engines_running(engine_dir / "llama-server") == []
