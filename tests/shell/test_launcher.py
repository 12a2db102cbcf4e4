"""The real preparer: which model (last used, else demo), CLI overrides over saved ones, the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore, SettingsStore
from stoker.engines.launch import AttemptContext, PreparationRefused, PreparedLaunch
from stoker.fleet.launcher import RealPreparer, merge_overrides


def attempt(port=40000, n=0):
    return AttemptContext(attempt=n, port=port, log_dir=Path("/tmp"), overrides=None, last_exit=None)


def test_cli_overrides_win_over_saved_ones():
    saved = ModelOverrides(ctx=8192, kv_type_k="q8_0", threads=4)
    merged = merge_overrides(saved, ModelOverrides(ctx=2048))
    assert (merged.ctx, merged.kv_type_k, merged.threads) == (2048, "q8_0", 4)
    assert merge_overrides(None, None) == ModelOverrides()


def test_no_model_and_no_demo_is_a_refusal_sentence(stoker_home):
    out = RealPreparer()(None, attempt())
    assert isinstance(out, PreparationRefused) and "stoker setup" in out.reason


@pytest.mark.engine
def test_prepares_the_last_used_model_with_the_cli_context(engine_binary, demo_model, stoker_home):
    SettingsStore(stoker_paths().config).update(last_model=str(demo_model))
    out = RealPreparer(cli_overrides=ModelOverrides(ctx=1024, slots=1), engine=str(engine_binary),
                       remember_last_model=False)(None, attempt(port=40123))
    assert isinstance(out, PreparedLaunch), out
    assert out.model_path == str(demo_model) and out.backend == "cpu"
    argv = out.spec.argv
    assert argv[argv.index("-m") + 1] == str(demo_model)
    assert argv[argv.index("--port") + 1] == "40123" and argv[argv.index("-c") + 1] == "1024"
    assert out.plan.ctx == 1024 and out.spec.host == "127.0.0.1"


@pytest.mark.engine
def test_idle_timeout_comes_from_settings_and_the_models_override(engine_binary, demo_model, stoker_home):
    """The supervisor stops an idle engine itself; the engine never sleeps on its own."""
    from stoker.engines.argv import API_KEY_ENV

    store = SettingsStore(stoker_paths().config)
    store.update(idle_unload_minutes=7)
    prep = RealPreparer(cli_overrides=ModelOverrides(ctx=1024, slots=1), engine=str(engine_binary),
                        remember_last_model=False)
    out = prep(str(demo_model), attempt())
    assert out.idle_timeout_s == 420 and "--sleep-idle-seconds" not in out.spec.argv
    OverridesStore(stoker_paths().config).set(demo_model, ModelOverrides(idle_minutes=2))
    assert prep(str(demo_model), attempt()).idle_timeout_s == 120
    OverridesStore(stoker_paths().config).set(demo_model, ModelOverrides(idle_minutes=0))
    assert prep(str(demo_model), attempt()).idle_timeout_s is None
    # Each launch gets its own random engine key, by environment only.
    a, b = prep(str(demo_model), attempt()), prep(str(demo_model), attempt())
    assert a.engine_key and b.engine_key and a.engine_key != b.engine_key
    assert dict(a.secrets)[API_KEY_ENV] == a.engine_key and a.engine_key not in " ".join(a.spec.argv)


@pytest.mark.engine
def test_idle_timeout_in_seconds_beats_the_model_and_settings(engine_binary, demo_model, stoker_home):
    SettingsStore(stoker_paths().config).update(idle_unload_minutes=7)
    overrides = ModelOverrides(ctx=1024, slots=1, idle_minutes=3)
    prep = RealPreparer(cli_overrides=overrides, engine=str(engine_binary), remember_last_model=False)
    assert prep(str(demo_model), attempt()).idle_timeout_s == 180.0  # the model's own minutes
    prep.idle_timeout_s = 2.5
    assert prep(str(demo_model), attempt()).idle_timeout_s == 2.5
    prep.idle_timeout_s = 0  # never, whatever the model and Settings say
    assert prep(str(demo_model), attempt()).idle_timeout_s is None


@pytest.mark.engine
def test_memory_budget_setting_caps_the_plan(engine_binary, demo_model, stoker_home):
    """Settings' model_memory_gib is what every model's plan may use (None: the machine's);
    a budget the model cannot fit in refuses it with the planner's sentence."""
    store = SettingsStore(stoker_paths().config)
    prep = RealPreparer(cli_overrides=ModelOverrides(ctx=1024, slots=1), engine=str(engine_binary),
                        remember_last_model=False)
    free = prep(str(demo_model), attempt())
    machine_budget = sum(d.budget_bytes for d in free.plan.devices)
    store.update(model_memory_gib=0.5)
    capped = prep(str(demo_model), attempt())
    assert isinstance(capped, PreparedLaunch), capped
    capped_budget = sum(d.budget_bytes for d in capped.plan.devices)
    assert capped_budget <= 0.5 * 1024 ** 3 < machine_budget
    store.update(model_memory_gib=0.01)  # 10 MiB: not even the weights fit
    refused = prep(str(demo_model), attempt())
    assert isinstance(refused, PreparationRefused) and refused.reason


@pytest.mark.engine
def test_a_model_listed_with_a_projector_is_launched_with_it(engine_binary, demo_model, stoker_home):
    """The model list pairs a model with the mmproj beside it; the launch passes it as --mmproj."""
    import os
    import shutil

    import gguf

    from stoker.library.gguf_write import write_header_only_gguf
    from stoker.library.models import list_models

    folder = stoker_paths().models / "vision"
    folder.mkdir(parents=True)
    model = folder / demo_model.name
    try:
        os.link(demo_model, model)  # the same file, no copy
    except OSError:
        shutil.copyfile(demo_model, model)
    projector = write_header_only_gguf(folder / "mmproj-SmolLM2-135M-f16.gguf", "clip", {
        "clip.has_vision_encoder": True, "clip.vision.block_count": 2},
        [("v.patch_embd.weight", (14, 14, 3, 64), gguf.GGMLQuantizationType.F16)])
    listed = next(m for m in list_models() if m.path == model)
    assert listed.mmproj == str(projector)
    out = RealPreparer(cli_overrides=ModelOverrides(ctx=1024, slots=1), engine=str(engine_binary),
                       remember_last_model=False)(str(model), attempt())
    assert isinstance(out, PreparedLaunch), out
    argv = out.spec.argv
    assert argv[argv.index("--mmproj") + 1] == str(projector) and out.plan.mmproj_path == str(projector)
