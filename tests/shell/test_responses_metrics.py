"""The gateway's Responses state and `/metrics`, on the real engine and the demo model.

A two-turn `previous_response_id` chain is answered across a Stoker restart (the official
`openai` package's `responses.create`): the second turn reaches the engine expanded, with
the first turn's input and answer in front of it, although llama-server itself refuses
`previous_response_id`. `store: false` keeps nothing. `/metrics` is parsed by
`prometheus_client`'s own text parser after a few requests of each API.
"""

from __future__ import annotations

import json
import socket
import struct

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from stoker.base.overrides import ModelOverrides
from stoker.fleet.commands import Shutdown
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.supervisor import SupervisorOptions
from stoker.instance.instance import Instance
from tests.shell.engine_helpers import engines_running, wait_until

pytestmark = pytest.mark.engine
DEMO_ID = "smollm2-135m-instruct:q4_1"


def start(engine_binary, demo_model) -> Instance:
    preparer = RealPreparer(engine=str(engine_binary), remember_last_model=False,
                            cli_overrides=ModelOverrides(ctx=2048, slots=1))
    return Instance(preparer, port=0, extra_models=(str(demo_model),),
                    options=SupervisorOptions(stop_grace_s=5)).start()


def stop(inst: Instance) -> None:
    inst.supervisor.submit(Shutdown())
    assert inst.supervisor.join(30)
    inst.close()


def oai(inst) -> openai.OpenAI:
    return openai.OpenAI(base_url=inst.url + "/v1", api_key="unused", max_retries=0, timeout=120)


def test_a_responses_chain_survives_a_restart(engine_binary, demo_model, stoker_home):
    inst = start(engine_binary, demo_model)
    try:
        client = oai(inst)
        first = client.responses.create(model=DEMO_ID, input="My name is Bob. Remember it.",
                                        max_output_tokens=8, temperature=0)
        assert first.id.startswith("resp_") and first.output_text
        alone = client.responses.create(model=DEMO_ID, input="What is my name?", max_output_tokens=8,
                                        temperature=0, store=False)
        # A stateless request reached the engine as it was: its own prompt only.
        assert alone.usage.input_tokens < first.usage.input_tokens + first.usage.output_tokens + 5
        with pytest.raises(openai.NotFoundError) as unkept:
            client.responses.create(model=DEMO_ID, input="again", previous_response_id=alone.id,
                                    max_output_tokens=4)
        assert "not found" in str(unkept.value) and "store: false" in str(unkept.value)
    finally:
        stop(inst)
    kept = stoker_home / "data" / "responses" / f"{first.id}.json"
    assert wait_until(kept.is_file, 10)
    assert json.loads(kept.read_text())["output"][0]["content"][0]["text"] == first.output_text
    assert not (stoker_home / "data" / "responses" / f"{alone.id}.json").exists()

    inst = start(engine_binary, demo_model)  # a new Stoker: a new gateway process, a new engine
    try:
        client = oai(inst)
        second = client.responses.create(model=DEMO_ID, input="What is my name?", max_output_tokens=8,
                                         temperature=0, previous_response_id=first.id)
        assert second.output_text
        # The engine read the first turn's input and answer in front of the question.
        assert second.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens + 5
        # A streamed third turn continues the chain too, and is kept like the others.
        # (responses.create, not responses.stream: the SDK's stream helper needs a content_index
        # llama-server b11434 leaves out of its text deltas)
        events = list(client.responses.create(model=DEMO_ID, input="And again?", max_output_tokens=6,
                                              previous_response_id=second.id, stream=True))
        (third,) = [e.response for e in events if e.type == "response.completed"]
        assert third.usage.input_tokens > second.usage.input_tokens
        assert wait_until((stoker_home / "data" / "responses" / f"{third.id}.json").is_file, 10)
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model=DEMO_ID, input="x", previous_response_id="resp_nothere",
                                    max_output_tokens=4)
    finally:
        stop(inst)
    assert engines_running(engine_binary) == []


def families(url: str) -> dict:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams, family: str, sample: str, **labels) -> float | None:
    for s in fams[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def test_metrics_after_a_few_requests_parse_as_prometheus_text(engine_binary, demo_model, stoker_home):
    inst = start(engine_binary, demo_model)
    try:
        client = oai(inst)
        for _ in range(2):
            client.chat.completions.create(model=DEMO_ID, max_tokens=6,
                                           messages=[{"role": "user", "content": "Say hi"}])
        chunks = list(client.chat.completions.create(model=DEMO_ID, max_tokens=6, stream=True,
                                                     messages=[{"role": "user", "content": "Count"}]))
        assert chunks
        claude = anthropic.Anthropic(base_url=inst.url, api_key="unused", max_retries=0)
        with claude.messages.stream(model=DEMO_ID, max_tokens=6,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            "".join(stream.text_stream)
        done = client.responses.create(model=DEMO_ID, input="hi", max_output_tokens=5)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model="no-such-model", max_tokens=2,
                                           messages=[{"role": "user", "content": "hi"}])

        fams = families(inst.url)
        chat = dict(model=DEMO_ID, endpoint="/v1/chat/completions", status="200")
        assert value(fams, "stoker_requests", "stoker_requests_total", **chat) == 3
        assert value(fams, "stoker_requests", "stoker_requests_total", endpoint="/v1/messages") == 1
        assert value(fams, "stoker_requests", "stoker_requests_total", model="none",
                     endpoint="/v1/chat/completions", status="404") == 1
        out = value(fams, "stoker_completion_tokens", "stoker_completion_tokens_total", model=DEMO_ID)
        assert out is not None and out >= 3 + done.usage.output_tokens  # every API's answer was counted
        prompt = value(fams, "stoker_prompt_tokens", "stoker_prompt_tokens_total", model=DEMO_ID)
        assert prompt is not None and prompt > done.usage.input_tokens
        assert value(fams, "stoker_time_to_first_token_seconds", "stoker_time_to_first_token_seconds_count",
                     model=DEMO_ID) == 5
        assert value(fams, "stoker_model_load_seconds", "stoker_model_load_seconds_count", model=DEMO_ID) == 1
        assert value(fams, "stoker_model_load_seconds", "stoker_model_load_seconds_sum", model=DEMO_ID) > 0
        assert value(fams, "stoker_model_loaded", "stoker_model_loaded", model=DEMO_ID) == 1
        resident = [s.value for s in fams["stoker_model_resident_bytes"].samples]
        assert resident and min(resident) > 0
        assert value(fams, "stoker_requests_in_flight", "stoker_requests_in_flight", model=DEMO_ID) == 0

        inst.answer({"op": "unload", "model": DEMO_ID})
        assert wait_until(lambda: value(families(inst.url), "stoker_model_evictions",
                                        "stoker_model_evictions_total", model=DEMO_ID) == 1, 30)
    finally:
        stop(inst)


def _stream_then_reset(url: str, body: bytes) -> bytes:
    """What `openai`'s Stream does at `[DONE]`, made as abrupt as it gets: read until the end
    event and drop the connection (a reset) before the chunked body is ended."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=120)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: " + host.encode() + b"\r\n"
                 b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                 + b"\r\n\r\n" + body)
    seen = b""
    while b"data: [DONE]" not in seen:
        got = sock.recv(65536)
        assert got, seen
        seen += got
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    return seen


def test_a_client_that_leaves_at_the_end_event_was_answered(engine_binary, demo_model, stoker_home):
    """Counted as answered (200), not as a client that left (499): CI once saw 2 of 3."""
    inst = start(engine_binary, demo_model)
    try:
        body = json.dumps({"model": DEMO_ID, "max_tokens": 3, "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]}).encode()
        for _ in range(8):
            assert _stream_then_reset(inst.url, body).startswith(b"HTTP/1.1 200")
        wait_until(lambda: sum(s.value for s in families(inst.url)["stoker_requests"].samples
                               if s.name == "stoker_requests_total") >= 8, 10)
        fams = families(inst.url)
        counted = {s.labels["status"]: s.value for s in fams["stoker_requests"].samples
                   if s.name == "stoker_requests_total" and s.labels["endpoint"] == "/v1/chat/completions"}
        assert counted == {"200": 8}
        assert inst.supervisor.snapshot().engines[0].restarts == 0
    finally:
        stop(inst)
