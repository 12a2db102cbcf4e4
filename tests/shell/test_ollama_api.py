"""Ollama's API on Stoker's endpoint, driven by the official `ollama` Python client (pinned in
the test extras) against the real engine on the demo model and the tiny BERT.

list, show (its context is the plan's per slot), chat streaming and not, generate (templated
and raw), format, embed and the older embeddings, ps (size from the plan, expires_at from
the idle timer), keep_alive (0 unloads after the answer, also with an empty prompt and on
the OpenAI routes as `ttl`; negative keeps loaded), num_ctx above the plan (re-planned and
reloaded; clamped when it cannot fit, saying so), Ollama's 404 for an unknown model, and the
key and Host rules with Ollama's error shape. Also what /v1/models says about each model.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import httpx
import keyring
import ollama
import openai
import pytest

from stoker.fleet.snapshot import EngineState as S
from tests.helpers.waiting import wait_until
from tests.shell.test_gateway import DEMO_ID, oai, ready
from tests.shell.test_gateway import gateway as gateway  # the fixture, shared
from tests.shell.test_secrets import MemoryKeyring

pytestmark = pytest.mark.engine
BERT_ID = "tiny-bert:f32"


def view(inst, model_id=DEMO_ID):
    return next((e for e in inst.supervisor.snapshot().engines if e.model_id == model_id), None)


def unloaded(inst, model_id=DEMO_ID, timeout=30):
    snap = inst.supervisor.wait_for(lambda s: all(e.model_id != model_id for e in s.engines), timeout)
    assert snap is not None, inst.supervisor.snapshot().engines


def test_listing_chat_generate_show_and_ps_with_the_ollama_client(gateway, demo_model):
    inst = gateway(demo_model, ctx=1024, slots=1)
    client = ollama.Client(host=inst.url, timeout=120)
    version = httpx.get(inst.url + "/api/version").json()
    assert version["stoker"] is True and tuple(map(int, version["version"].split("."))) >= (0, 6, 4)

    (listed,) = client.list().models
    assert listed.model == DEMO_ID and listed.size == demo_model.stat().st_size
    assert listed.details.format == "gguf" and listed.details.family == "llama"
    assert listed.details.quantization_level and listed.details.parameter_size.endswith("M")
    # Not planned yet: /v1/models says so with None (never 0), and nothing is loaded.
    (entry,) = httpx.get(inst.url + "/v1/models").json()["data"]
    assert entry["context_length"] is None and entry["state"] == "not-loaded" and entry["arch"] == "llama"
    assert not inst.supervisor.snapshot().engines

    with pytest.raises(ollama.ResponseError) as missing:
        client.chat(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.status_code == 404 and missing.value.error == "model 'no-such-model' not found"
    with pytest.raises(ollama.ResponseError) as no_show:
        client.show("no-such-model")
    assert no_show.value.status_code == 404

    with pytest.raises(ollama.ResponseError) as bad:  # refused before anything is loaded for it
        client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "hi"}], options={"num_gpus": 1})
    assert bad.value.status_code == 400 and "num_gpus" in bad.value.error
    with pytest.raises(ollama.ResponseError) as blind:
        client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "what is it", "images": [b"\x89PNG"]}])
    assert blind.value.status_code == 400 and "no vision projector" in blind.value.error
    assert not inst.supervisor.snapshot().engines

    answer = client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "Say hi"}],
                         options={"num_predict": 8, "temperature": 0, "seed": 1, "top_k": 20, "top_p": 0.9,
                                  "min_p": 0.05, "repeat_penalty": 1.1})
    assert answer.done and answer.message.role == "assistant" and answer.message.content
    assert 0 < answer.eval_count <= 8 and answer.prompt_eval_count > 0 and answer.load_duration > 0
    parts = list(client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "Write a story about a cat."}],
                             stream=True, options={"num_predict": 12}))
    assert len(parts) >= 3 and parts[-1].done and not any(p.done for p in parts[:-1])
    assert parts[-1].eval_count == len([p for p in parts[:-1] if p.message.content])  # a line per token
    assert "".join(p.message.content for p in parts) and parts[-1].done_reason in ("stop", "length")
    again = client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "Say hi"}],
                        options={"num_predict": 8, "temperature": 0, "seed": 1, "top_k": 20, "top_p": 0.9,
                                 "min_p": 0.05, "repeat_penalty": 1.1})
    assert again.message.content == answer.message.content  # the options reached the engine

    made = client.generate(model=DEMO_ID, prompt="Say hi", options={"num_predict": 6})
    assert made.done and made.response
    raw = client.generate(model=DEMO_ID, prompt="The sky is", raw=True, options={"num_predict": 6, "stop": ["\n"]})
    assert raw.done and raw.response and "\n" not in raw.response
    streamed = list(client.generate(model=DEMO_ID, prompt="The sea is", raw=True, stream=True,
                                    options={"num_predict": 6}))
    assert streamed[-1].done and "".join(p.response for p in streamed)
    shaped = client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "Give a number as JSON"}],
                         format={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                         options={"num_predict": 24, "temperature": 0})
    assert isinstance(json.loads(shaped.message.content)["n"], int)

    planned = view(inst)
    assert planned.state is S.READY and planned.ctx_per_slot == 1024
    shown = client.show(DEMO_ID)
    assert shown.modelinfo["llama.context_length"] == planned.ctx_per_slot
    assert "completion" in shown.capabilities and "embedding" not in shown.capabilities
    assert ("tools" in shown.capabilities) == ("tools" in _template(demo_model))
    (entry,) = httpx.get(inst.url + "/v1/models").json()["data"]
    assert entry["context_length"] == entry["loaded_context_length"] == 1024 and entry["state"] == "loaded"
    assert entry["max_output_tokens"] == 1024 and entry["max_context_length"] > 1024
    assert "chat" in entry["capabilities"] and entry["quantization"] == listed.details.quantization_level

    (running,) = client.ps().models
    assert running.model == DEMO_ID and running.context_length == 1024
    assert running.size == sum(b for _, b in planned.bytes_by_device) > 0
    assert running.size_vram == sum(b for d, b in planned.bytes_by_device if d != "CPU")
    assert planned.idle_timeout_s is not None
    left = running.expires_at.timestamp() - time.time()
    assert planned.idle_timeout_s - 30 < left <= planned.idle_timeout_s + 1

    client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "hi"}], keep_alive=-1,
                options={"num_predict": 2})
    kept = inst.supervisor.wait_for(lambda s: any(e.model_id == DEMO_ID and e.idle_timeout_s is None
                                                  for e in s.engines), 10)
    assert kept is not None
    assert client.ps().models[0].expires_at.year == 2318  # what Ollama answers for "never"
    client.generate(model=DEMO_ID, prompt="hi", keep_alive="10m", options={"num_predict": 2})
    assert inst.supervisor.wait_for(lambda s: any(e.idle_timeout_s == 600 for e in s.engines), 10) is not None
    left = client.ps().models[0].expires_at.timestamp() - time.time()
    assert 590 < left <= 601

    # keep_alive 0: the answer comes, then the model is unloaded.
    last = client.generate(model=DEMO_ID, prompt="Say hi", keep_alive=0, options={"num_predict": 4})
    assert last.done and last.response
    unloaded(inst)
    assert client.ps().models == []
    # Open WebUI's unload: an empty prompt with keep_alive 0 loads nothing and answers "unload".
    gone = client.generate(model=DEMO_ID, keep_alive=0)
    assert gone.done_reason == "unload" and not inst.supervisor.snapshot().engines
    # The listing still says the last plan's context after the unload.
    assert client.show(DEMO_ID).modelinfo["llama.context_length"] == 1024
    assert httpx.get(inst.url + "/v1/models").json()["data"][0]["context_length"] == 1024
    # An empty prompt without keep_alive 0 loads the model (Ollama's preload).
    assert client.generate(model=DEMO_ID).done_reason == "load"
    ready(inst, DEMO_ID)


def test_num_ctx_above_the_plan_replans_or_clamps_and_says_which(gateway, demo_model):
    inst = gateway(demo_model, ctx=1024, slots=1)
    client = ollama.Client(host=inst.url, timeout=180)
    first = client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "hi"}], options={"num_predict": 2})
    assert first.done
    before = ready(inst, DEMO_ID)
    assert before.ctx_per_slot == 1024
    wider = httpx.post(inst.url + "/api/chat", timeout=180, json={
        "model": DEMO_ID, "stream": False, "messages": [{"role": "user", "content": "hi"}],
        "options": {"num_ctx": 2048, "num_predict": 2}}).json()
    assert wider["done"] and "re-planned for 2,048 tokens per slot" in wider["stoker_context"]
    after = ready(inst, DEMO_ID)
    assert after.ctx_per_slot == 2048 and after.pid != before.pid
    assert client.show(DEMO_ID).modelinfo["llama.context_length"] == 2048
    assert client.ps().models[0].context_length == 2048
    # Asking no more than the plan gives changes nothing.
    same = client.chat(model=DEMO_ID, messages=[{"role": "user", "content": "hi"}],
                       options={"num_ctx": 1500, "num_predict": 2})
    assert same.done and ready(inst, DEMO_ID).pid == after.pid
    # Far beyond what the model or the machine can hold: clamped, and the answer says so.
    with httpx.stream("POST", inst.url + "/api/chat", timeout=180, json={
            "model": DEMO_ID, "messages": [{"role": "user", "content": "hi"}],
            "options": {"num_ctx": 16 * 1024 * 1024, "num_predict": 2}}) as huge:
        lines = [json.loads(line) for line in huge.iter_lines() if line.strip()]
        said = huge.headers["X-Stoker-Context"]
    assert lines[-1]["done"] and lines[-1]["stoker_context"].startswith("clamped to 2,048 tokens per slot")
    assert said.startswith("clamped to 2,048 tokens per slot")
    assert ready(inst, DEMO_ID).pid == after.pid


def test_embed_ttl_on_the_openai_routes_and_the_gateway_rules(gateway, demo_model, tmp_path):
    from tests.helpers.tiny_bert import N_EMBD, write_tiny_bert

    bert = write_tiny_bert(tmp_path / "tiny-bert-F32.gguf")
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    try:
        inst = gateway(demo_model, bert, ctx=256)
        client = ollama.Client(host=inst.url, timeout=120)
        assert {m.model for m in client.list().models} == {DEMO_ID, BERT_ID}
        assert client.show(BERT_ID).capabilities == ["embedding"]
        both = client.embed(model=BERT_ID, input=["hello world", "other text"])
        assert len(both.embeddings) == 2 and all(len(v) == N_EMBD for v in both.embeddings)
        assert both.embeddings[0] != both.embeddings[1] and both.prompt_eval_count > 0
        one = client.embeddings(model=BERT_ID, prompt="hello world")
        assert one.embedding == pytest.approx(both.embeddings[0], abs=1e-5)
        with pytest.raises(ollama.ResponseError) as chat_model:
            client.embed(model=DEMO_ID, input="hello")
        assert chat_model.value.status_code == 400 and BERT_ID in chat_model.value.error
        with pytest.raises(ollama.ResponseError) as embedder:
            client.chat(model=BERT_ID, messages=[{"role": "user", "content": "hi"}])
        assert embedder.value.status_code == 400 and "embedding model" in embedder.value.error

        # keep_alive / ttl on the OpenAI routes: 0 unloads after the answer; a bad one is refused.
        chat = oai(inst)
        with pytest.raises(openai.BadRequestError) as bad_ttl:
            chat.chat.completions.create(model=DEMO_ID, max_tokens=2, messages=[{"role": "user", "content": "hi"}],
                                         extra_body={"keep_alive": "soon"})
        assert "keep_alive" in str(bad_ttl.value)
        assert chat.chat.completions.create(model=DEMO_ID, max_tokens=2, extra_body={"ttl": 0},
                                            messages=[{"role": "user", "content": "hi"}]).choices
        unloaded(inst)
        chat.chat.completions.create(model=DEMO_ID, max_tokens=2, extra_body={"keep_alive": "-1"},
                                     messages=[{"role": "user", "content": "hi"}])
        kept = inst.supervisor.wait_for(lambda s: any(e.model_id == DEMO_ID and e.state is S.READY
                                                      and e.idle_timeout_s is None for e in s.engines), 10)
        assert kept is not None

        # The key, the Host rule and the unsupported routes, in Ollama's shape.
        from stoker.base.secrets import set_api_key

        set_api_key("s3cret-key")
        # The save reaches the gateway's process as a message: wait for the refusal it brings.
        assert wait_until(lambda: httpx.get(inst.url + "/api/tags").status_code == 401, 10)
        with pytest.raises(ollama.ResponseError) as locked:
            client.list()
        assert locked.value.status_code == 401 and "API key" in locked.value.error
        keyed = ollama.Client(host=inst.url, headers={"Authorization": "Bearer s3cret-key"})
        assert len(keyed.list().models) == 2
        rebinding = httpx.get(inst.url + "/api/tags", headers={"Host": "evil.example:7857"})
        assert rebinding.status_code == 403 and "loopback" in rebinding.json()["error"]
        with pytest.raises(ollama.ResponseError) as library:
            keyed.pull("llama3.2")
        assert library.value.status_code == 400 and "hf.co/" in library.value.error
        for method, path in (("POST", "/api/create"), ("POST", "/api/push"), ("HEAD", "/api/blobs/sha256:00")):
            r = httpx.request(method, inst.url + path, json={} if method == "POST" else None,
                              headers={"Authorization": "Bearer s3cret-key"})
            assert r.status_code == 501, (path, r.text)
            if method == "POST":
                assert "Stoker does not support" in r.json()["error"]
        set_api_key(None)
    finally:
        keyring.set_keyring(before)


def _template(model) -> str:
    from stoker.library.gguf_io import read_gguf_header

    value = read_gguf_header(model).metadata.get("tokenizer.chat_template")
    return value if isinstance(value, str) else ""


def test_times_are_utc_iso():
    from stoker.gateway.ollama_rules import iso_time

    assert datetime.fromisoformat(iso_time(0.0).replace("Z", "+00:00")) == datetime(1970, 1, 1, tzinfo=UTC)


def test_pull_and_delete_over_the_ollama_api(gateway, demo_model, tmp_path, monkeypatch):
    from tests.helpers.fake_hub import FakeHub, HubRepo

    repo, file = "stoker-test/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf"
    with FakeHub({repo: HubRepo({file: demo_model})}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
        inst = gateway()
        client = ollama.Client(host=inst.url, timeout=300)
        assert client.list().models == []
        with pytest.raises(ollama.ResponseError) as library:
            client.pull("llama3.2:3b")
        assert library.value.status_code == 400 and "Ollama's own library" in library.value.error
        with pytest.raises(ollama.ResponseError) as missing:
            client.pull("hf.co/stoker-test/no-such-repo-GGUF")
        assert missing.value.status_code == 400 and "no-such-repo" in missing.value.error
        name = f"hf.co/{repo}:Q4_1"
        progress = list(client.pull(name, stream=True))
        assert progress[0].status == "pulling manifest" and progress[-1].status == "success"
        bytes_seen = [p for p in progress if p.total]
        assert bytes_seen and bytes_seen[-1].completed == bytes_seen[-1].total == demo_model.stat().st_size
        assert bytes_seen[-1].digest == file
        (listed,) = client.list().models  # listed as soon as the pull says success
        assert listed.model == DEMO_ID
        # The name the pull was given names the model on every route.
        assert client.show(name).details.quantization_level == listed.details.quantization_level
        assert client.generate(model=name, prompt="hi", options={"num_predict": 2}).done
        ready(inst, DEMO_ID)
        pulled = tmp_path / "hub" / ("models--" + repo.replace("/", "--"))
        assert any(pulled.rglob(file))
        assert client.delete(name).status == "success"
        unloaded(inst)
        assert not any(p.is_file() for p in pulled.rglob("*.gguf")) and client.list().models == []
        with pytest.raises(ollama.ResponseError) as gone:
            client.delete(name)
        assert gone.value.status_code == 404

    # A model Stoker did not pull is never deleted.
    other = gateway(demo_model)
    with pytest.raises(ollama.ResponseError) as kept:
        ollama.Client(host=other.url).delete(DEMO_ID)
    assert kept.value.status_code == 400 and "not pulled by Stoker" in kept.value.error and demo_model.is_file()
