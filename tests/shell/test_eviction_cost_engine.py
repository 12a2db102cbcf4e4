"""Eviction by measured reload cost on the real engine: the model that is cheapest to load
again per byte it frees goes first, even when it is the most recently used one.

Two real models are loaded by a Supervisor whose plans declare the same bytes for each (so
cost per byte is the measured load time): the demo model and Gemma 3 270M. Each READY
records its spawn → READY time (stoker/engines/load_times.py, `reload_s` in the snapshot).
Whichever measured cheaper is then used last, so least-recently-used would keep it and
evict the other; a third model that needs room for one of them evicts the cheap one.
"""

from __future__ import annotations

import json
import shutil

import pytest

from stoker.base.paths import stoker_paths
from stoker.engines.launch import PreparedLaunch
from stoker.fleet.commands import EnsureModel, Shutdown
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import FunctionPreparer, Supervisor, SupervisorOptions
from tests.shell.engine_helpers import demo_spec, engines_running
from tests.shell.engine_helpers import wait_until as wait
from tests.shell.test_residency_supervisor import plan_of

pytestmark = pytest.mark.engine


def test_the_cheapest_reload_per_byte_is_evicted_not_the_least_recently_used(
        engine_binary, demo_model, gemma_model, stoker_home, tmp_path):
    third = tmp_path / "third.gguf"
    shutil.copy(demo_model, third)
    demo, gemma, new = str(demo_model.resolve()), str(gemma_model.resolve()), str(third.resolve())

    def prepare(model_path, attempt):
        # 400 MiB each against a 1,000 MiB budget: two fit, a third needs one gone.
        return PreparedLaunch(spec=demo_spec(engine_binary, model_path, port=attempt.port), model_path=model_path,
                              plan=plan_of(400, model_path), backend="cpu", build_id="b11434-cpu",
                              startup_deadline_s=120)

    sup = Supervisor(FunctionPreparer(prepare), SupervisorOptions(stop_grace_s=3)).start()
    try:
        for path in (demo, gemma):
            loaded: list = []
            sup.submit(EnsureModel(model_path=path, ticket=path, answer=loaded.append))
            assert wait(lambda loaded=loaded: loaded, 120) and loaded[0].route is not None, loaded
        snap = sup.wait_for(lambda s: all(e.state is S.READY and e.reload_s is not None for e in s.engines)
                            and len(s.engines) == 2, 30)
        assert snap is not None, sup.snapshot().engines
        measured = {e.model_path: e.reload_s for e in snap.engines}
        cheap, dear = sorted(measured, key=lambda p: measured[p])
        # Kept on disk per model and build: what the next run prices these reloads at.
        stored = json.loads((stoker_paths().data / "load_times.json").read_text())["entries"]
        assert {e["model_path"] for e in stored} == {demo, gemma}

        lease = sup.routes.acquire(cheap)  # the cheap one is used last: LRU would evict `dear`
        assert lease is not None
        sup.routes.release(lease)
        got: list = []
        sup.submit(EnsureModel(model_path=new, ticket="new", answer=got.append))
        assert wait(lambda: got, 120) and got[0].route is not None, got
        left = {e.model_path: e.state for e in sup.snapshot().engines}
        assert cheap not in left or left[cheap] in (S.STOPPING, S.STOPPED), left
        assert left[dear] is S.READY and left[new] is S.READY
        loads = ", ".join(f"{p.rsplit('/', 1)[-1]} {t:.2f} s" for p, t in measured.items())
        print(f"\nmeasured loads: {loads}; evicted {cheap.rsplit('/', 1)[-1]} (most recently used, cheapest per byte)")
    finally:
        sup.submit(Shutdown())
        assert sup.join(30)
    assert engines_running(engine_binary) == []
