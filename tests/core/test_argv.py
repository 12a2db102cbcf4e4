"""Whole argv tuples for llama-server b11434, pinned, and the environment rules."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stoker.engines.argv import CONFIG_DIR_MARKER, build_launch_spec
from stoker.planning.plan import DeviceMemory, DrafterChoice, LaunchPlan

NONE = DrafterChoice("none", None, None, "no drafter")


def plan(**kw) -> LaunchPlan:
    base = LaunchPlan(model_path="/m/demo.gguf", ctx=4096, slots=2, kv_unified=False, kv_type_k="f16",
                      kv_type_v="f16", flash_attn="auto", gpu_layers=None, n_cpu_moe=None, cpu_moe=False,
                      swa_full=False, drafter=NONE, devices=(DeviceMemory("CPU", 1, 0, 0, 0),), decisions=())
    return replace(base, **kw)


def test_cpu_plan_argv_is_pinned():
    spec = build_launch_spec(plan(), binary="/e/llama-server", port=18080)
    assert spec.argv == ("/e/llama-server", "-lv", "4", "-m", "/m/demo.gguf", "--host", "127.0.0.1",
                         "--port", "18080", "-c", "4096", "-np", "2", "-no-kvu", "-ctk", "f16", "-ctv", "f16",
                         "-fa", "auto", "--no-webui", "--metrics")
    assert spec.endpoint == "http://127.0.0.1:18080"


def test_gpu_moe_drafter_and_everything_else_in_order():
    p = plan(ctx=65536, slots=1, kv_unified=True, kv_type_k="q8_0", kv_type_v="q8_0", flash_attn="on",
             gpu_layers="all", n_cpu_moe=12, swa_full=True,
             drafter=DrafterChoice("in", "draft-simple", "/m/draft.gguf", "r", draft_max=8, sampling="greedy"),
             threads=6, batch=1024, ubatch=256, mmproj_path="/m/mmproj.gguf", extra_args=("--jinja",))
    spec = build_launch_spec(p, binary="llama-server", port=9000, backend="cuda", log_file="/l/e.log",
                             api_key_entry="stoker-api-key")
    assert spec.argv == ("llama-server", "-lv", "4", "-m", "/m/demo.gguf", "--host", "127.0.0.1", "--port",
                         "9000", "-c", "65536", "-np", "1", "-kvu", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on",
                         "-ngl", "all", "--n-cpu-moe", "12", "--swa-full", "--spec-type", "draft-simple",
                         "-md", "/m/draft.gguf", "--spec-draft-n-max", "8", "--spec-draft-sampling", "greedy",
                         "-t", "6", "-b", "1024", "-ub", "256", "--mmproj", "/m/mmproj.gguf", "--no-webui",
                         "--metrics", "--log-file", "/l/e.log", "--jinja")
    assert spec.secret_env == (("LLAMA_API_KEY", "stoker-api-key"),)
    assert "stoker-api-key" not in " ".join(spec.argv)


def test_cpu_backend_never_gets_ngl_and_cpu_moe_beats_n_cpu_moe():
    spec = build_launch_spec(plan(gpu_layers=20, cpu_moe=True, n_cpu_moe=3), binary="b", port=1)
    assert "-ngl" not in spec.argv
    assert "--cpu-moe" in spec.argv and "--n-cpu-moe" not in spec.argv


def test_mtp_drafts_without_a_file():
    p = plan(drafter=DrafterChoice("in", "draft-mtp", None, "own head", draft_max=4))
    argv = build_launch_spec(p, binary="b", port=1).argv
    assert argv[argv.index("--spec-type"):argv.index("--no-webui")] == (
        "--spec-type", "draft-mtp", "--spec-draft-n-max", "4")
    assert "-md" not in argv


@pytest.mark.parametrize("status", ["left-out", "broken", "none"])
def test_a_drafter_left_out_adds_no_flags(status):
    p = plan(drafter=DrafterChoice(status, None, "/m/d.gguf", "why"))
    assert "--spec-type" not in build_launch_spec(p, binary="b", port=1).argv


def test_environment_is_sanitised_and_marks_the_config_dir():
    spec = build_launch_spec(plan(), binary="b", port=1)
    assert dict(spec.env) == {"GGML_NO_BACKTRACE": "1", "XDG_CONFIG_HOME": CONFIG_DIR_MARKER}
    assert spec.drop_env_prefixes == ("LLAMA_ARG_", "LLAMA_API_KEY", "AIP_")
    assert spec.secret_env == ()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "example.com", "::"])
def test_non_loopback_hosts_are_refused(host):
    with pytest.raises(ValueError, match="loopback"):
        build_launch_spec(plan(), binary="b", port=1, host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_hosts_are_accepted(host):
    assert build_launch_spec(plan(), binary="b", port=1, host=host).host == host


@pytest.mark.parametrize("bad", ["--no-mmap", "--mlock", "--api-key=secret", "--draft-max"])
def test_removed_or_secret_flags_never_reach_the_argv(bad):
    with pytest.raises(ValueError, match=bad.split("=")[0]):
        build_launch_spec(plan(extra_args=(bad,)), binary="b", port=1)


def test_threads_argument_overrides_the_plan():
    argv = build_launch_spec(plan(threads=4), binary="b", port=1, threads=2).argv
    assert argv[argv.index("-t") + 1] == "2"


def test_prompt_cache_size_is_passed_when_the_plan_sized_it():
    argv = build_launch_spec(plan(cache_ram_mib=512), binary="/e/llama-server", port=8080).argv
    i = argv.index("-cram")
    assert argv[i + 1] == "512" and argv.index("--no-webui") == i + 2
    assert "-cram" not in build_launch_spec(plan(), binary="/e/llama-server", port=8080).argv
    off = build_launch_spec(plan(cache_ram_mib=0), binary="/e/llama-server", port=8080).argv
    assert off[off.index("-cram") + 1] == "0"


def test_embedding_and_rerank_models_get_their_flags_and_nobody_sleeps():
    from stoker.library.model_ids import ModelKind

    argv = build_launch_spec(plan(), binary="/e/llama-server", port=8080, serves=ModelKind.EMBEDDING).argv
    assert argv[-3:] == ("--embeddings", "--no-webui", "--metrics")
    argv = build_launch_spec(plan(), binary="/e/llama-server", port=8080, serves=ModelKind.RERANK).argv
    assert argv[-3:] == ("--rerank", "--no-webui", "--metrics")
    for kind in ModelKind:
        argv = build_launch_spec(plan(), binary="b", port=1, serves=kind).argv
        assert "--sleep-idle-seconds" not in argv


@pytest.mark.parametrize("bad", ["--rpc", "-hf", "-mu", "--api-prefix=/x"])
def test_a_plan_whose_extra_args_reach_out_is_refused_even_unvalidated(bad):
    with pytest.raises(ValueError, match="Stoker refuses it"):
        build_launch_spec(plan(extra_args=(bad, "203.0.113.7:50052")), binary="b", port=1)
