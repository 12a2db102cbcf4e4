"""Per-model overrides: one sentence per bad value, a storage round trip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.base.overrides import (
    FLASH_ATTN,
    KV_CACHE_TYPES,
    SPEC_SAMPLING,
    SPEC_TYPES,
    ModelOverrides,
    overrides_to_dict,
    validate_overrides,
)


def test_good_values_in_the_forms_a_form_or_a_command_line_produce():
    ov, errors = validate_overrides({"ctx": "32768", "slots": 2, "kv_type": "q8_0", "flash_attn": True,
                                     "gpu_layers": "all", "n_cpu_moe": "12", "spec_type": "draft-simple",
                                     "draft_model": "/m/d.gguf", "draft_max": 8, "spec_sampling": "greedy",
                                     "swa_full": "on", "threads": 4, "batch": 2048, "ubatch": 512,
                                     "extra_args": "--jinja --temp 0.7", "kv_unified": False,
                                     "ds4_cache_gb": 32, "ds4_ssd_streaming": "false"})
    assert errors == ()
    assert ov == ModelOverrides(ctx=32768, slots=2, kv_type_k="q8_0", kv_type_v="q8_0", kv_unified=False,
                                flash_attn="on", gpu_layers="all", n_cpu_moe=12, spec_type="draft-simple",
                                draft_model="/m/d.gguf", draft_max=8, spec_sampling="greedy", ds4_cache_gb=32,
                                ds4_ssd_streaming=False, swa_full=True, threads=4, batch=2048, ubatch=512,
                                extra_args=("--jinja", "--temp", "0.7"))


def test_each_bad_value_gets_its_own_sentence_and_is_dropped():
    ov, errors = validate_overrides({"ctx": "abc", "slots": 0, "kv_type_k": "q3_k", "flash_attn": "maybe",
                                     "gpu_layers": "most", "spec_type": "mtp", "threads": 1.5,
                                     "bogus": 1})
    assert ov == ModelOverrides()
    assert "ctx must be a whole number of tokens between 256 and 16777216, got 'abc'" in errors
    assert "slots must be a whole number of slots between 1 and 256, got 0" in errors
    assert any(e.startswith("kv_type_k must be one of f32, f16") and "'q3_k'" in e for e in errors)
    assert any(e.startswith("flash_attn must be one of on, off, auto") for e in errors)
    assert any(e.startswith("gpu_layers must be a whole number") for e in errors)
    assert any(e.startswith("spec_type must be one of none, draft-simple") for e in errors)
    assert any(e.startswith("threads must be a whole number") for e in errors)
    assert any(e.startswith("unknown override 'bogus'") for e in errors)
    assert len(errors) == 8


def test_cross_field_rules_the_engine_would_reject():
    _, errors = validate_overrides({"flash_attn": "off", "kv_type_v": "q4_0"})
    assert any("quantised V cache (q4_0) needs flash attention" in e for e in errors)
    _, errors = validate_overrides({"batch": 256, "ubatch": 512})
    assert errors == ("ubatch (512) must not be larger than batch (256)",)
    _, errors = validate_overrides({"extra_args": ["--no-mmap"]})
    assert "--no-mmap" in errors[0]


def test_ctx_below_256_is_refused_and_none_means_unset():
    _, errors = validate_overrides({"ctx": 100})
    assert errors and "≥" not in errors[0] and "between 256" in errors[0]
    ov, errors = validate_overrides({"ctx": None, "slots": ""})
    assert ov == ModelOverrides() and errors == ()


def test_not_a_dict_is_one_sentence():
    ov, errors = validate_overrides(["ctx", 1])  # type: ignore[arg-type]
    assert ov == ModelOverrides() and len(errors) == 1


overrides = st.builds(
    ModelOverrides,
    ctx=st.none() | st.integers(256, 1 << 20), slots=st.none() | st.integers(1, 16),
    kv_type_k=st.none() | st.sampled_from(KV_CACHE_TYPES), kv_type_v=st.none() | st.sampled_from(("f16", "f32")),
    kv_unified=st.none() | st.booleans(), flash_attn=st.none() | st.sampled_from(FLASH_ATTN),
    gpu_layers=st.none() | st.integers(0, 200) | st.sampled_from(("all", "auto")),
    n_cpu_moe=st.none() | st.integers(0, 100), spec_type=st.none() | st.sampled_from(SPEC_TYPES),
    draft_max=st.none() | st.integers(1, 64), spec_sampling=st.none() | st.sampled_from(SPEC_SAMPLING),
    swa_full=st.none() | st.booleans(), threads=st.none() | st.integers(1, 64),
    extra_args=st.lists(st.sampled_from(["--jinja", "--temp", "0.5"]), max_size=3).map(tuple))


@given(overrides)
def test_storage_round_trip(ov):
    back, errors = validate_overrides(overrides_to_dict(ov))
    assert errors == ()
    assert back == ov
