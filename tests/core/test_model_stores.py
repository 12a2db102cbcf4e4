"""Names and layouts of other tools' stores, and `hf.co/...` references: pure parsing."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from stoker.library.store_layouts import (
    HFReference,
    ModelOrigin,
    StoreLayout,
    hf_model_name,
    hf_repo_of_folder,
    may_delete,
    ollama_name,
    parse_hf_reference,
    parse_ollama_manifest,
    quant_of,
    quant_rank,
    split_of,
    store_roots,
)

SHA = "a" * 64


def test_quant_names_as_uploaders_write_them():
    assert quant_of("Llama-3.2-3B-Instruct-Q4_K_M.gguf") == "Q4_K_M"
    assert quant_of("SmolLM2-135M-Instruct.Q4_1.gguf") == "Q4_1"
    assert quant_of("Qwen3-30B-A3B-UD-Q4_K_XL-00001-of-00002.gguf") == "Q4_K_XL"
    assert quant_of("gemma-3-270m-it-bf16.gguf") == "BF16"
    assert quant_of("model-fp16.gguf") == "F16"
    assert quant_of("gpt-oss-20b-MXFP4.gguf") == "MXFP4"
    assert quant_of("Q8_0/model-Q8_0.gguf") == "Q8_0"
    assert quant_of("phi-2.gguf") is None
    assert quant_rank("Q8_0") < quant_rank("Q6_K") < quant_rank("Q4_K_M") < quant_rank("IQ2_XS")
    assert quant_rank("Q4_K_M") < quant_rank("WEIRD") < quant_rank(None)


def test_split_and_hub_names():
    assert split_of("Big-Q8_0-00002-of-00003.gguf") == ("Big-Q8_0", 2, 3)
    assert split_of("Big-Q8_0.gguf") is None
    assert hf_repo_of_folder("models--unsloth--gemma-3-270m-it-GGUF") == "unsloth/gemma-3-270m-it-GGUF"
    assert hf_repo_of_folder("datasets--x--y") is None
    assert hf_model_name("org/repo", "Q8_0/Big-Q8_0-00001-of-00002.gguf") == "org/repo:Q8_0"
    assert hf_model_name("org/repo", "phi-2.gguf") == "org/repo:phi-2"


def test_ollama_names_as_ollama_list_shows_them():
    assert ollama_name("registry.ollama.ai", "library", "llama3.2", "3b") == "llama3.2:3b"
    assert ollama_name("registry.ollama.ai", "someone", "tiny", "latest") == "someone/tiny:latest"
    assert (ollama_name("hf.co", "bartowski", "Llama-3.2-1B-GGUF", "Q4_K_M")
            == "hf.co/bartowski/Llama-3.2-1B-GGUF:Q4_K_M")


def test_ollama_manifests():
    layer = lambda media, d: {"mediaType": media, "digest": f"sha256:{d}", "size": 10}  # noqa: E731
    m = parse_ollama_manifest(json.dumps({"layers": [layer("application/vnd.ollama.image.template", "b" * 64),
                                                     layer("application/vnd.ollama.image.model", SHA),
                                                     layer("application/vnd.ollama.image.projector", "c" * 64)]}))
    assert (m.model_blob, m.projector_blob, m.skip_reason) == (f"sha256-{SHA}", "sha256-" + "c" * 64, None)
    assert parse_ollama_manifest("{not json").skip_reason == "its manifest is not JSON"
    assert parse_ollama_manifest(json.dumps({"layers": []})).skip_reason == "its manifest has no model layer"
    lora = parse_ollama_manifest(json.dumps({"layers": [layer("application/vnd.ollama.image.model", SHA),
                                                        layer("application/vnd.ollama.image.adapter", "d" * 64)]}))
    assert "LoRA" in lora.skip_reason


def test_references():
    assert parse_hf_reference("hf.co/unsloth/gemma-3-270m-it-GGUF:q4_k_m") == \
        HFReference("unsloth/gemma-3-270m-it-GGUF", "Q4_K_M")
    assert parse_hf_reference("https://huggingface.co/org/repo") == HFReference("org/repo")
    assert parse_hf_reference("org/repo", "sub/x.gguf") == HFReference("org/repo", filename="sub/x.gguf")
    assert parse_hf_reference("https://huggingface.co/org/repo/blob/dev/x-Q4_0.gguf") == \
        HFReference("org/repo", filename="x-Q4_0.gguf", revision="dev")
    assert "not a Hugging Face repository" in parse_hf_reference("llama3.2")
    assert "names no quantisation" in parse_hf_reference("hf.co/org/repo:")
    assert "not both" in parse_hf_reference("org/repo:Q4_0", "x.gguf")


@given(st.text(max_size=60))
def test_any_reference_text_is_a_reference_or_one_sentence(text):
    out = parse_hf_reference(text)
    assert isinstance(out, HFReference) or (isinstance(out, str) and out.endswith("."))


def test_store_roots_per_os():
    linux = store_roots({}, "/home/u", "linux")
    paths = {(r.origin, r.layout, r.path) for r in linux}
    assert (ModelOrigin.OLLAMA, StoreLayout.OLLAMA, "/home/u/.ollama/models") in paths
    assert "/usr/share/ollama/.ollama/models" not in {r.path for r in linux}  # another account's: off by default
    service = store_roots({}, "/home/u", "linux", ollama_service=True)
    assert (ModelOrigin.OLLAMA, StoreLayout.OLLAMA, "/usr/share/ollama/.ollama/models") in {
        (r.origin, r.layout, r.path) for r in service}
    assert (ModelOrigin.HF, StoreLayout.HF, "/home/u/.cache/huggingface/hub") in paths
    assert (ModelOrigin.LMSTUDIO, StoreLayout.LMSTUDIO, "/home/u/.lmstudio/models") in paths
    assert (ModelOrigin.LLAMA_CPP, StoreLayout.FLAT, "/home/u/.cache/llama.cpp") in paths
    env = {"OLLAMA_MODELS": "/big/ollama", "HF_HOME": "/big/hf", "LLAMA_CACHE": "/big/llama"}
    paths = {(r.origin, r.layout, r.path) for r in store_roots(env, "/home/u", "linux")}
    assert (ModelOrigin.OLLAMA, StoreLayout.OLLAMA, "/big/ollama") in paths
    assert (ModelOrigin.HF, StoreLayout.HF, "/big/hf/hub") in paths
    assert {(ModelOrigin.LLAMA_CPP, StoreLayout.HF, "/big/llama"),
            (ModelOrigin.LLAMA_CPP, StoreLayout.FLAT, "/big/llama")} <= paths
    mac = {r.path for r in store_roots({}, "/Users/u", "darwin")}
    assert "/Users/u/Library/Caches/llama.cpp" in mac and "/usr/share/ollama/.ollama/models" not in mac
    assert "/usr/share/ollama/.ollama/models" not in {
        r.path for r in store_roots({}, "/Users/u", "darwin", ollama_service=True)}
    win = {r.path for r in store_roots({"USERPROFILE": "C:\\Users\\u", "LOCALAPPDATA": "C:\\Users\\u\\AppData\\Local"},
                                       "C:\\Users\\u", "win32")}
    assert "C:\\Users\\u\\.ollama\\models" in win and "C:\\Users\\u\\AppData\\Local\\llama.cpp" in win


def test_only_stokers_own_downloads_may_be_deleted():
    assert {o for o in ModelOrigin if may_delete(o)} == {ModelOrigin.LIBRARY, ModelOrigin.PULLED}


def test_a_manifest_too_deep_or_too_big_is_a_reason_not_an_exception():
    from stoker.library.store_layouts import MAX_MANIFEST_BYTES, parse_ollama_manifest

    deep = parse_ollama_manifest('{"layers": ' + "[" * 5000 + "]" * 5000 + "}")
    assert deep.model_blob is None and "nested too deeply" in deep.skip_reason
    big = parse_ollama_manifest('{"layers": []' + " " * MAX_MANIFEST_BYTES + "}")
    assert big.model_blob is None and "over 1 MiB" in big.skip_reason
    fine = parse_ollama_manifest('{"layers": ' + "[" * 50 + "]" * 50 + "}")
    assert fine.skip_reason == "its manifest has no model layer"
