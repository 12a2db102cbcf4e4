"""The pure translations behind Ollama's routes and the /v1/models entries: every edge of
keep_alive, the options and format mapping, messages with images and tool calls, the
stream reducer (tool-call arguments arriving in pieces), the listings, the pull names and
the extra port's verdict."""

from __future__ import annotations

import pytest

from stoker.fleet.snapshot import EngineState, EngineView
from stoker.gateway import ollama_rules as r
from stoker.gateway.listing import model_entry
from stoker.library.model_ids import CatalogEntry, ModelFacts, ModelKind

FACTS = ModelFacts(architecture="llama", quantization="Q4_1", parameter_count=134_515_008, size_bytes=90_000_000,
                   n_ctx_train=8192, n_embd=576, modified_at=0.0, template_tools=True, projector=False,
                   fill_in_middle=False)
CHAT = CatalogEntry(id="smol:q4_1", path="/m/smol.gguf", facts=FACTS)


@pytest.mark.parametrize(("value", "seconds", "unload"), [
    (0, 0.0, True), ("0", 0.0, True), ("0s", 0.0, True), (300, 300.0, False), ("5m", 300.0, False),
    ("1h30m", 5400.0, False), ("1.5h", 5400.0, False), ("250ms", 0.25, False), ("-1", None, False),
    (-1, None, False), ("-1m", None, False), (2.5, 2.5, False), (" 10m ", 600.0, False)])
def test_keep_alive_durations(value, seconds, unload):
    assert r.parse_keep_alive(value) == r.KeepAlive(seconds, unload)


@pytest.mark.parametrize("value", ["soon", "5 minutes", "m5", "", True, [1], {"m": 5}, "5mm"])
def test_keep_alive_refused_with_a_sentence(value):
    with pytest.raises(r.OllamaRequestError) as err:
        r.parse_keep_alive(value)
    assert "keep_alive" in str(err.value)


def test_keep_alive_absent_and_ttl():
    assert r.parse_keep_alive(None) is None and r.request_keep_alive({}) is None
    assert r.request_keep_alive({"ttl": 60}) == r.KeepAlive(60.0)
    assert r.request_keep_alive({"keep_alive": 0, "ttl": 60}) == r.KeepAlive(0.0, True)  # keep_alive first


def test_options_and_format_map_onto_llama_server_fields():
    body = {"options": {"num_predict": 8, "temperature": 0.2, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
                        "seed": 3, "stop": ["\n"], "repeat_penalty": 1.1, "num_ctx": 4096, "num_gpu": 99},
            "format": "json"}
    chat = r.sampling_fields(body, chat=True)
    assert chat == {"max_tokens": 8, "temperature": 0.2, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 3,
                    "stop": ["\n"], "repeat_penalty": 1.1,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "format", "schema": {"type": "object"}}}}
    native = r.sampling_fields({**body, "format": {"type": "array"}}, chat=False)
    assert native["n_predict"] == 8 and native["json_schema"] == {"type": "array"} and "max_tokens" not in native
    assert r.sampling_fields({"options": {"num_predict": -1}}, chat=True) == {}  # -1: as long as it goes
    with pytest.raises(r.OllamaRequestError, match="options.num_gpus is not an option"):
        r.sampling_fields({"options": {"num_gpus": 1}}, chat=True)
    with pytest.raises(r.OllamaRequestError, match="format must be"):
        r.sampling_fields({"format": "yaml"}, chat=True)
    assert r.requested_num_ctx(body) == 4096 and r.requested_num_ctx({}) is None
    for bad in (0, -5, "4k", True, 1.5):
        with pytest.raises(r.OllamaRequestError, match="num_ctx"):
            r.requested_num_ctx({"options": {"num_ctx": bad}})


def test_chat_messages_with_images_tools_and_thinking():
    body = {"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is this", "images": ["iVBORw0KGgo="]},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "tool", "content": "42", "tool_name": "f"}],
        "tools": [{"type": "function", "function": {"name": "f"}}], "think": False, "stream": True}
    out = r.chat_request(body, "m", vision=True, stream=True)
    assert out["model"] == "m" and out["stream"] and out["stream_options"] == {"include_usage": True}
    assert out["messages"][1]["content"] == [{"type": "text", "text": "what is this"},
                                             {"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                                                       "iVBORw0KGgo="}}]
    call = out["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "f", "arguments": '{"x": 1}'} and call["type"] == "function"
    assert out["messages"][3] == {"role": "tool", "content": "42", "name": "f", "tool_call_id": "f"}
    assert out["tools"] == body["tools"] and out["chat_template_kwargs"] == {"enable_thinking": False}
    with pytest.raises(r.OllamaRequestError, match="no vision projector"):
        r.chat_request(body, "m", vision=False, stream=True)
    with pytest.raises(r.OllamaRequestError, match="chat template"):
        r.chat_request({**body, "template": "{{ .Prompt }}"}, "m", vision=True, stream=True)


def test_generate_maps_raw_suffix_and_system():
    path, out = r.generate_request({"prompt": "The sky", "raw": True, "options": {"num_predict": 3}}, "m",
                                   vision=False, stream=False)
    assert path == "/completion" and out == {"stream": False, "n_predict": 3, "prompt": "The sky"}
    path, out = r.generate_request({"prompt": "def f(", "suffix": "return 1"}, "m", vision=False, stream=True)
    assert path == "/infill" and out["input_prefix"] == "def f(" and out["input_suffix"] == "return 1"
    path, out = r.generate_request({"prompt": "hi", "system": "be brief"}, "m", vision=False, stream=False)
    assert path == "/v1/chat/completions"
    assert out["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def test_answers_and_the_stream_reducer():
    oai = {"choices": [{"message": {"content": "", "tool_calls": [
        {"function": {"name": "f", "arguments": '{"x": 1}'}}]}, "finish_reason": "tool_calls"}],
        "timings": {"prompt_n": 5, "prompt_ms": 2.0, "predicted_n": 3, "predicted_ms": 4.0}}
    out = r.chat_answer(oai, "m", 0.0, 1.0, 0.5, generate=False)
    assert out["message"]["tool_calls"] == [{"function": {"name": "f", "arguments": {"x": 1}}}]
    assert out["done"] and out["done_reason"] == "stop" and out["eval_count"] == 3
    assert out["prompt_eval_duration"] == 2_000_000 and out["load_duration"] == 500_000_000
    state = r.ChatStream()
    lines: list[dict] = []
    for event in ({"choices": [{"delta": {"content": "Hel"}}]},
                  {"choices": [{"delta": {"reasoning_content": "hmm"}}]},
                  {"choices": [{"delta": {"tool_calls": [
                      {"index": 0, "function": {"name": "f", "arguments": '{"x'}}]}}]},
                  {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '": 2}'}}]}}]},
                  {"choices": [{"delta": {}, "finish_reason": "length"}], "timings": {"predicted_n": 4}}):
        state, new = r.chat_stream_step(state, event, "m", 0.0, generate=False)
        lines += new
    assert [line["message"].get("content") for line in lines] == ["Hel", ""]
    assert lines[1]["message"]["thinking"] == "hmm" and not any(line["done"] for line in lines)
    end = r.chat_stream_end(state, "m", 0.0, 1.0, 0.0, generate=False)
    assert end[0]["message"]["tool_calls"] == [{"function": {"name": "f", "arguments": {"x": 2}}}]
    assert end[-1]["done"] and end[-1]["done_reason"] == "length" and end[-1]["eval_count"] == 4
    native = r.completion_answer({"content": "x", "stop_type": "limit"}, "m", 0.0, 1.0, 0.0)
    assert native["done_reason"] == "length" and native["response"] == "x"


def test_embeddings_in_and_out():
    assert r.embed_request({"input": "a"}, "e", legacy=False) == {"model": "e", "input": ["a"]}
    assert r.embed_request({"prompt": "a"}, "e", legacy=True) == {"model": "e", "input": ["a"]}
    with pytest.raises(r.OllamaRequestError):
        r.embed_request({"input": [1]}, "e", legacy=False)
    data = {"data": [{"index": 1, "embedding": [3.0, 4.0]}, {"index": 0, "embedding": [1.0, 2.0]}],
            "usage": {"prompt_tokens": 4}}
    assert r.embed_answer(data, "e", 1.0, 0.0, legacy=False)["embeddings"] == [[1.0, 2.0], [3.0, 4.0]]
    assert r.embed_answer(data, "e", 1.0, 0.0, legacy=False, dimensions=1)["embeddings"] == [[1.0], [3.0]]
    assert r.embed_answer(data, "e", 1.0, 0.0, legacy=True) == {"embedding": [1.0, 2.0]}


def test_listings_report_the_plan_not_the_training_maximum():
    shown = r.show_answer(CHAT, 2048)
    assert shown["model_info"]["llama.context_length"] == 2048 and shown["capabilities"] == ["completion", "tools"]
    assert "llama.context_length" not in r.show_answer(CHAT, None)["model_info"]  # unknown: left out
    assert shown["details"]["parameter_size"] == "135M" and shown["details"]["quantization_level"] == "Q4_1"
    vision = CatalogEntry(id="v", path="/v", facts=ModelFacts(projector=True, fill_in_middle=True))
    assert r.capabilities(vision) == ["completion", "insert", "vision"]
    assert r.capabilities(CatalogEntry(id="e", path="/e", kind=ModelKind.EMBEDDING)) == ["embedding"]
    ps = r.ps_entry(CHAT, (("CPU", 100), ("CUDA0", 900)), 2048, 60.0)
    assert (ps["size"], ps["size_vram"], ps["context_length"]) == (1000, 900, 2048)
    assert ps["expires_at"] == "1970-01-01T00:01:00.000000Z"
    assert r.ps_entry(CHAT, (), None, None)["expires_at"] == r.NEVER_EXPIRES
    assert r.expires_at(100.0, 60.0, 500.0, in_flight=0) == 160.0
    assert r.expires_at(100.0, 60.0, 500.0, in_flight=1) == 560.0  # busy: the timer has not started
    assert r.expires_at(100.0, None, 500.0, in_flight=0) is None


def test_v1_models_entry_says_none_until_planned_never_zero():
    cold = model_entry(CHAT, None, None)
    assert cold["context_length"] is None and cold["max_output_tokens"] is None and cold["state"] == "not-loaded"
    assert cold["max_context_length"] == 8192 and cold["capabilities"] == ["completion", "chat", "tool_use"]
    assert (cold["arch"], cold["quantization"], cold["type"]) == ("llama", "Q4_1", "llm")
    assert "loaded_context_length" not in cold
    view = EngineView(model_id=CHAT.id, model_path=CHAT.path, state=EngineState.READY, ctx_per_slot=4096)
    hot = model_entry(CHAT, view, 1024)
    assert hot["context_length"] == hot["loaded_context_length"] == hot["max_output_tokens"] == 4096
    assert hot["state"] == "loaded" and hot["status"] == "loaded"
    assert model_entry(CHAT, None, 1024)["context_length"] == 1024  # the last plan, after an unload
    bare = model_entry(CatalogEntry(id="x", path="/x"), None, None)
    assert bare["arch"] is None and bare["max_context_length"] is None and bare["context_length"] is None


def test_pull_names_and_the_extra_port():
    assert r.hf_repo("hf.co/bartowski/SmolLM2-GGUF:Q4_K_M") == ("bartowski/SmolLM2-GGUF", "Q4_K_M")
    assert r.hf_repo("huggingface.co/a/b") == ("a/b", None) and r.pull_refusal("hf.co/a/b") is None
    assert r.hf_repo("llama3.2") is None and "Ollama's own library" in r.pull_refusal("llama3.2:3b")
    assert r.ollama_port_refusal(11434, False, None) is None
    assert "Ollama itself (version 0.13.1)" in r.ollama_port_refusal(11434, True, {"version": "0.13.1"})
    assert "Another Stoker" in r.ollama_port_refusal(11434, True, {"version": "0.12.0", "stoker": True})
    assert "Another program holds 127.0.0.1:11434" in r.ollama_port_refusal(11434, True, None)
    assert r.error("x") == {"error": "x"} and r.not_found("m") == "model 'm' not found"
