"""Stoker's one endpoint, on the real engine, driven by clients nobody here wrote.

The official `openai` and `anthropic` packages talk to the gateway as a chat client would:
chat, streaming, completions, embeddings (refused for a chat model with a clear 400),
Anthropic messages with streaming; the same URL answers across kill -9, Restart, Apply and a
switch; two models are resident when they fit, and with a budget for one the second waits
for the first's stream, which ends without an error; an idle model is unloaded and loaded
again on the next request; unknown models, keys and Host headers are refused.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import anthropic
import httpx
import keyring
import openai
import pytest

from stoker.base.overrides import ModelOverrides
from stoker.fleet.commands import ApplyOverrides, Restart, Shutdown, StartModel, SwitchModel
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.supervisor import SupervisorOptions
from stoker.instance.instance import Instance
from tests.helpers.waiting import wait_until
from tests.shell.engine_helpers import engines_running
from tests.shell.test_secrets import MemoryKeyring

pytestmark = pytest.mark.engine
DEMO_ID = "smollm2-135m-instruct:q4_1"
GEMMA_ID = "gemma-3-270m:q4_k_m"
MIB = 1024 ** 2


@pytest.fixture
def gateway(engine_binary, stoker_home):
    made: list[Instance] = []

    def make(*models, ctx=1024, slots=1, **prep):
        preparer = RealPreparer(engine=str(engine_binary), remember_last_model=False,
                                cli_overrides=ModelOverrides(ctx=ctx, slots=slots), **prep)
        inst = Instance(preparer, port=0, extra_models=tuple(str(m) for m in models),
                        options=SupervisorOptions(stop_grace_s=5)).start()
        made.append(inst)
        return inst

    yield make
    for inst in made:
        inst.supervisor.submit(Shutdown())
        assert inst.supervisor.join(30)
        inst.close()
    assert engines_running(engine_binary) == []


def ready(inst, model_id=None, timeout=60, other_than=None):
    snap = inst.supervisor.wait_for(
        lambda s: any(e.state is S.READY and (model_id is None or e.model_id == model_id)
                      and (other_than is None or e.pid != other_than) for e in s.engines), timeout)
    assert snap is not None, inst.supervisor.snapshot()
    return next(e for e in snap.engines if e.state is S.READY
                and (model_id is None or e.model_id == model_id) and (other_than is None or e.pid != other_than))


def oai(inst) -> openai.OpenAI:
    return openai.OpenAI(base_url=inst.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def say(client, model=DEMO_ID, n=8) -> str:
    out = client.chat.completions.create(model=model, max_tokens=n,
                                         messages=[{"role": "user", "content": "Say hi"}])
    return out.choices[0].message.content


def test_real_clients_through_one_endpoint(gateway, demo_model):
    inst = gateway(demo_model)
    client = oai(inst)
    ids = [m.id for m in client.models.list().data]
    assert ids == [DEMO_ID]
    assert str(demo_model.parent) not in str(client.models.list().model_dump())  # no file paths
    # Nothing is loaded yet: the first request loads the model on demand and is held until READY.
    assert not inst.supervisor.snapshot().engines
    out = client.chat.completions.create(model=DEMO_ID, max_tokens=8,
                                         messages=[{"role": "user", "content": "Say hi"}])
    assert out.choices[0].message.content and out.model == DEMO_ID
    chunks = list(client.chat.completions.create(model=DEMO_ID, max_tokens=12, stream=True,
                                                 messages=[{"role": "user", "content": "Count"}],
                                                 extra_body={"ignore_eos": True}))  # never 2 tokens and done
    assert len(chunks) > 3 and "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    done = client.completions.create(model=DEMO_ID, prompt="The sky is", max_tokens=6)
    assert done.choices[0].text
    # No model named: the loaded one answers. An alias-free unknown name: 404 naming close ids.
    assert client.chat.completions.with_raw_response.create(
        model="", max_tokens=4, messages=[{"role": "user", "content": "hi"}]).http_response.status_code == 200
    with pytest.raises(openai.NotFoundError) as missing:
        say(client, model="smollm2-135m-instruct")
    assert DEMO_ID in str(missing.value) and "does not exist" in str(missing.value)
    with pytest.raises(openai.BadRequestError) as wrong:
        client.embeddings.create(model=DEMO_ID, input="hello")
    assert "chat model" in str(wrong.value) and "embeddings" in str(wrong.value)

    claude = anthropic.Anthropic(base_url=inst.url, api_key="unused", max_retries=0)
    msg = claude.messages.create(model=DEMO_ID, max_tokens=8,
                                 messages=[{"role": "user", "content": "Say hi"}])
    assert msg.content[0].text
    with claude.messages.stream(model=DEMO_ID, max_tokens=12,
                                messages=[{"role": "user", "content": "Count"}]) as stream:
        text = "".join(stream.text_stream)
    assert text
    with pytest.raises(anthropic.NotFoundError) as gone:
        claude.messages.create(model="claude-3-opus", max_tokens=4,
                               messages=[{"role": "user", "content": "hi"}])
    assert gone.value.body["type"] == "error" and DEMO_ID in gone.value.body["error"]["message"]

    status = httpx.get(inst.url + "/stoker/v1/status").json()
    assert status["schema"] == 2 and status["gateway"]["url"] == inst.url
    (engine,) = status["engines"]
    assert engine["id"] == DEMO_ID and engine["state"] == "ready" and engine["bytes"]["CPU"] > 50 * MIB
    assert engine["endpoint"] != inst.url  # the engine's private port, for diagnostics only
    # The engine's own port refuses anyone without its per-launch key.
    assert httpx.post(engine["endpoint"] + "/v1/chat/completions",
                      json={"messages": [{"role": "user", "content": "hi"}]}).status_code == 401


def test_the_same_url_across_kill_restart_apply_and_switch(gateway, demo_model, tmp_path):
    other = tmp_path / "SmolLM2-135M-Copy.Q4_1.gguf"
    shutil.copyfile(demo_model, other)
    inst = gateway(demo_model, other)
    client = oai(inst)
    inst.supervisor.submit(StartModel(str(demo_model)))
    first = ready(inst, DEMO_ID)
    assert say(client)

    os.kill(first.pid, signal.SIGKILL)
    second = ready(inst, DEMO_ID, other_than=first.pid)
    assert say(client) and second.pid != first.pid

    inst.supervisor.submit(Restart(model_path=str(demo_model)))
    third = ready(inst, DEMO_ID, other_than=second.pid)
    assert say(client)

    inst.supervisor.submit(ApplyOverrides(str(demo_model), ModelOverrides(ctx=2048)))
    applied = ready(inst, DEMO_ID, other_than=third.pid)
    assert say(client) and applied.pid != third.pid

    inst.supervisor.submit(SwitchModel(str(other)))
    copy = ready(inst, "smollm2-135m-copy:q4_1")
    assert say(client, model="smollm2-135m-copy:q4_1")
    snap = inst.supervisor.wait_for(lambda s: [e.model_id for e in s.engines] == [copy.model_id], 30)
    assert snap is not None, inst.supervisor.snapshot().engines  # the switch unloaded the first


def _stream_long(client, model, out: dict, under_way: threading.Event) -> None:
    """A stream that still runs when the next request comes and is SEEN queued (128 tokens,
    end-of-text ignored): the test observes the queue through supervisor snapshots, which on a
    loaded 2-core machine lag by a few hundred milliseconds, longer than 32 tokens of the demo
    model took (a loaded CI run saw the queue 5 ms after such a stream had ended); `under_way`
    is set on its first chunk."""
    try:
        text = []
        for c in client.chat.completions.create(model=model, max_tokens=128, stream=True,
                                                messages=[{"role": "user", "content": "Tell a story"}],
                                                extra_body={"ignore_eos": True}):
            under_way.set()
            if c.choices:
                text.append(c.choices[0].delta.content or "")
        out["text"] = "".join(text)
    except Exception as exc:
        out["error"] = exc
    out["ended"] = time.monotonic()


def _plan_bytes(engine_binary, model) -> int:
    from stoker.engines.launch import AttemptContext

    prep = RealPreparer(engine=str(engine_binary), remember_last_model=False,
                        cli_overrides=ModelOverrides(ctx=1024, slots=1))
    launch = prep(str(model), AttemptContext(attempt=0, port=1, log_dir=os.getcwd(), overrides=None,
                                             last_exit=None))
    return sum(d.total_bytes for d in launch.plan.devices)


def test_two_models_resident_then_a_budget_for_one_waits_for_the_stream(
        gateway, engine_binary, demo_model, gemma_model):
    both = gateway(demo_model, gemma_model)
    client = oai(both)
    assert say(client, DEMO_ID) and say(client, GEMMA_ID)
    snap = both.supervisor.snapshot()
    assert sorted(e.model_id for e in snap.engines if e.state is S.READY) == sorted([DEMO_ID, GEMMA_ID])
    both.supervisor.submit(Shutdown())
    both.supervisor.join(30)

    a, b = _plan_bytes(engine_binary, demo_model), _plan_bytes(engine_binary, gemma_model)
    budget = max(a, b) + 4 * MIB  # each fits alone, never both
    assert budget < a + b
    one = gateway(demo_model, gemma_model, memory_budget_bytes=budget)
    client = oai(one)
    assert say(client, DEMO_ID)
    out: dict = {}
    under_way = threading.Event()
    streamer = threading.Thread(target=_stream_long, args=(client, DEMO_ID, out, under_way))
    streamer.start()
    assert under_way.wait(60), out.get("error")  # the first chunk came: the stream is under way
    asked: dict = {}
    held = client.with_options(timeout=600)  # waits for the whole stream, however slow this machine is

    def ask() -> None:
        try:
            asked["answer"] = say(held, GEMMA_ID)  # held until the demo model's stream ends and it is unloaded
        except Exception as exc:
            asked["error"] = exc
        asked["at"] = time.monotonic()

    asker = threading.Thread(target=ask)
    asker.start()
    queued_at: list[float] = []

    def gemma_waits(snap) -> bool:
        if any(e.model_id == GEMMA_ID and e.queued for e in snap.engines):
            queued_at.append(time.monotonic())
            return True
        return False

    assert one.supervisor.wait_for(gemma_waits, 60) is not None, one.supervisor.snapshot().engines
    streamer.join(300)
    asker.join(300)
    assert not streamer.is_alive() and not asker.is_alive(), "the stream or the held request never ended"
    assert "error" not in out and "error" not in asked, (out.get("error"), asked.get("error"))
    assert out["text"] and queued_at[0] < out["ended"] <= asked["at"]  # it waited for the running stream
    assert asked["answer"]
    snap = one.supervisor.wait_for(lambda s: [e.model_id for e in s.engines] == [GEMMA_ID], 30)
    assert snap is not None, one.supervisor.snapshot().engines


def test_an_idle_model_is_unloaded_and_the_next_request_loads_it_again(gateway, demo_model, engine_binary):
    inst = gateway(demo_model, idle_timeout_s=2.0)
    client = oai(inst)
    assert say(client)
    served = time.monotonic()
    gone = inst.supervisor.wait_for(lambda s: not s.engines, 20)
    assert gone is not None, inst.supervisor.snapshot().engines
    assert time.monotonic() - served <= 2.0 + 2.0 + 1.0
    assert engines_running(engine_binary) == []
    assert httpx.get(inst.url + "/v1/models").json()["data"][0]["status"] == "unloaded"
    assert say(client)  # loaded again on demand, same URL


def test_key_host_and_origin_are_checked(gateway, demo_model):
    before = keyring.get_keyring()
    keyring.set_keyring(MemoryKeyring())
    try:
        inst = gateway(demo_model)
        from stoker.base.secrets import set_api_key

        body = {"model": DEMO_ID, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(inst.url + "/v1/chat/completions", json=body, timeout=60).status_code == 200
        set_api_key("s3cret-key")  # no restart: the save reaches the gateway's process as a message
        assert wait_until(lambda: httpx.post(inst.url + "/v1/chat/completions", json=body).status_code == 401, 10)
        wrong = httpx.post(inst.url + "/v1/chat/completions", json=body,
                           headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "API key" in wrong.json()["error"]["message"]
        ok = httpx.post(inst.url + "/v1/chat/completions", json=body, timeout=60,
                        headers={"Authorization": "Bearer s3cret-key"})
        assert ok.status_code == 200
        assert say(openai.OpenAI(base_url=inst.url + "/v1", api_key="s3cret-key", max_retries=0))
        claude = anthropic.Anthropic(base_url=inst.url, api_key="s3cret-key", max_retries=0)
        assert claude.messages.create(model=DEMO_ID, max_tokens=4,
                                      messages=[{"role": "user", "content": "hi"}]).content
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=inst.url, api_key="nope", max_retries=0).messages.create(
                model=DEMO_ID, max_tokens=4, messages=[{"role": "user", "content": "hi"}])
        assert httpx.get(inst.url + "/health").status_code == 200  # stays open
        rebinding = httpx.get(inst.url + "/health", headers={"Host": "evil.example:7857"})
        assert rebinding.status_code == 403 and "loopback" in rebinding.json()["error"]["message"]
        page = httpx.post(inst.url + "/v1/chat/completions", json=body,
                          headers={"Authorization": "Bearer s3cret-key", "Origin": "https://evil.example"})
        assert page.status_code == 403
        local = httpx.options(inst.url + "/v1/chat/completions",
                              headers={"Origin": "http://localhost:3000",
                                       "Access-Control-Request-Method": "POST"})
        assert local.status_code == 204
        assert local.headers["Access-Control-Allow-Origin"] == "http://localhost:3000"
        set_api_key(None)
    finally:
        keyring.set_keyring(before)


def test_a_crash_while_serving_is_a_502_naming_the_incident_and_the_next_request_restarts(
        gateway, demo_model):
    inst = gateway(demo_model)
    client = oai(inst)
    assert say(client)
    engine = ready(inst, DEMO_ID)
    out: dict = {}

    def long_request():
        try:
            # Long enough to be cut: up to the whole 1,024-token window, end-of-text ignored.
            client.completions.create(model=DEMO_ID, prompt="Once upon a time", max_tokens=1000,
                                      extra_body={"ignore_eos": True})
        except Exception as exc:
            out["error"] = exc

    t = threading.Thread(target=long_request)
    t.start()
    assert wait_until(lambda: _generating(inst, DEMO_ID), 60), "the long request never started generating"
    assert t.is_alive()  # still generating when the engine dies
    os.kill(engine.pid, signal.SIGKILL)
    t.join(30)
    err = out.get("error")
    assert isinstance(err, openai.APIStatusError) and err.status_code == 502, err
    assert "stopped while answering" in str(err) and "restarting in" in str(err)  # the incident, and what Stoker does
    assert say(client)  # restarted (after the backoff), same URL


def _generating(inst, model_id: str) -> bool:
    """The engine's own /slots (through the gateway) shows a slot working on a request."""
    resp = httpx.get(inst.url + "/slots", params={"model": model_id}, timeout=30)
    return resp.status_code == 200 and any(slot.get("is_processing") for slot in resp.json())


def test_engine_endpoints_by_model_and_the_event_stream(gateway, demo_model):
    inst = gateway(demo_model)
    events: list[dict] = []

    def follow():
        import json

        with httpx.stream("GET", inst.url + "/stoker/v1/events", timeout=60) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            for line in resp.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
                    if any(e["state"] == "ready" for ev in events for e in ev["engines"]):
                        return

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    assert wait_until(lambda: events, 30), "the event stream sent nothing"  # subscribed: the first snapshot came
    tok = httpx.post(inst.url + "/tokenize", json={"model": DEMO_ID, "content": "hello world"}, timeout=60)
    assert tok.status_code == 200 and tok.json()["tokens"]
    t.join(30)
    assert events and events[0]["schema"] == 2
    assert any(e["id"] == DEMO_ID and e["state"] == "ready" for ev in events for e in ev["engines"])
    for path in ("/props", "/slots", "/metrics"):
        resp = httpx.get(inst.url + path, params={"model": DEMO_ID}, timeout=30)
        assert resp.status_code == 200, (path, resp.text)
    assert "llamacpp:" in httpx.get(inst.url + "/metrics", params={"model": DEMO_ID}).text
    assert httpx.get(inst.url + "/v1/nothing-here").status_code == 404


def test_embeddings_on_an_embedding_model_and_clear_refusals_elsewhere(gateway, demo_model, tmp_path):
    from tests.helpers.tiny_bert import N_EMBD, write_tiny_bert

    bert = write_tiny_bert(tmp_path / "tiny-bert-F32.gguf")
    inst = gateway(demo_model, bert, ctx=256)
    client = oai(inst)
    kinds = {m["id"]: m["kind"] for m in httpx.get(inst.url + "/v1/models").json()["data"]}
    assert kinds == {DEMO_ID: "chat", "tiny-bert:f32": "embedding"}
    first = client.embeddings.create(model="tiny-bert:f32", input=["hello world", "other text"])
    vectors = [d.embedding for d in first.data]
    assert len(vectors) == 2 and all(len(v) == N_EMBD for v in vectors) and vectors[0] != vectors[1]
    again = client.embeddings.create(model="tiny-bert:f32", input=["hello world", "other text"])
    assert [d.embedding for d in again.data] == vectors  # deterministic
    with pytest.raises(openai.BadRequestError) as chat_model:
        client.embeddings.create(model=DEMO_ID, input="hello")
    assert "tiny-bert:f32" in str(chat_model.value)  # names the model that can
    with pytest.raises(openai.BadRequestError) as embedder:
        say(client, model="tiny-bert:f32")
    assert "embedding model" in str(embedder.value) and DEMO_ID in str(embedder.value)
    argv = next(e for e in inst.supervisor.snapshot().engines if e.model_id == "tiny-bert:f32")
    assert argv.state is S.READY


def _gateway_log_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("stoker.gateway")]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_kill_9_mid_stream_ends_the_stream_with_its_error_event_and_one_log_line(
        gateway, demo_model, caplog, api):
    """The engine dies while a stream is under way: aiohttp raises ClientPayloadError while
    reading its body. The client reads the API's final error event (OpenAI's `data:` error,
    Anthropic's `event: error`); the gateway's log has one line for it and no traceback."""
    caplog.set_level("INFO")
    inst = gateway(demo_model)
    assert say(oai(inst))
    engine = ready(inst, DEMO_ID)
    messages = [{"role": "user", "content": "Tell me a long story"}]
    got_text = False
    with pytest.raises((openai.APIError, anthropic.APIError)) as failed:
        if api == "openai":
            for chunk in oai(inst).chat.completions.create(model=DEMO_ID, max_tokens=1000, stream=True,
                                                           messages=messages, extra_body={"ignore_eos": True}):
                if chunk.choices and chunk.choices[0].delta.content and not got_text:
                    got_text = True
                    os.kill(engine.pid, signal.SIGKILL)  # mid-stream: the first words are out
        else:
            claude = anthropic.Anthropic(base_url=inst.url, api_key="unused", max_retries=0)
            with claude.messages.stream(model=DEMO_ID, max_tokens=1000, messages=messages) as stream:
                for text in stream.text_stream:
                    if text and not got_text:
                        got_text = True
                        os.kill(engine.pid, signal.SIGKILL)
    assert got_text
    assert "stopped while answering" in str(failed.value)
    lines = _gateway_log_lines(caplog)
    assert sum("stopped mid-answer" in line for line in lines) == 1, lines
    assert not [line for line in lines if "Traceback" in line or "Error handling request" in line], lines
