"""A request's own lifetime for its model, on every route family (issue 22, item 4): `ttl`
(seconds) or `keep_alive` (Ollama's form) on an OpenAI, an Anthropic or an Ollama request
replaces the model's idle time from then on; 0 unloads it after the answer. Real engine,
real clients, through the gateway process."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from stoker.fleet.snapshot import EngineState as S
from tests.shell.test_gateway import DEMO_ID, oai, ready
from tests.shell.test_gateway import gateway as gateway  # the fixture, shared

pytestmark = pytest.mark.engine
HI = [{"role": "user", "content": "Say hi"}]


def idle_becomes(inst, seconds, timeout=30) -> None:
    snap = inst.supervisor.wait_for(lambda s: any(e.model_id == DEMO_ID and e.state is S.READY
                                                  and e.idle_timeout_s == seconds for e in s.engines), timeout)
    assert snap is not None, [(e.model_id, e.idle_timeout_s) for e in inst.supervisor.snapshot().engines]


def test_ttl_and_keep_alive_set_the_idle_time_on_the_openai_anthropic_and_ollama_routes(gateway, demo_model):
    inst = gateway(demo_model, ctx=1024, slots=1)
    client = oai(inst)
    claude = anthropic.Anthropic(base_url=inst.url, api_key="unused", max_retries=0)

    client.chat.completions.create(model=DEMO_ID, max_tokens=2, messages=HI, extra_body={"ttl": 120})
    idle_becomes(inst, 120.0)  # OpenAI, seconds
    claude.messages.create(model=DEMO_ID, max_tokens=2, messages=HI, extra_body={"ttl": 300})
    idle_becomes(inst, 300.0)  # Anthropic, seconds
    claude.messages.create(model=DEMO_ID, max_tokens=2, messages=HI, extra_body={"keep_alive": "10m"})
    idle_becomes(inst, 600.0)  # Anthropic, Ollama's duration
    r = httpx.post(inst.url + "/api/chat", timeout=60, json={"model": DEMO_ID, "messages": HI, "stream": False,
                                                           "keep_alive": "7m", "options": {"num_predict": 2}})
    assert r.status_code == 200, r.text
    idle_becomes(inst, 420.0)  # Ollama
    r = httpx.post(inst.url + "/api/generate", timeout=60, json={"model": DEMO_ID, "prompt": "hi", "stream": False,
                                                               "keep_alive": -1, "options": {"num_predict": 2}})
    assert r.status_code == 200, r.text
    idle_becomes(inst, None)  # negative: kept loaded
    # A request without one leaves it; the Anthropic route's ttl 0 unloads after the answer.
    pid = ready(inst, DEMO_ID).pid
    claude.messages.create(model=DEMO_ID, max_tokens=2, messages=HI)
    assert ready(inst, DEMO_ID).pid == pid and ready(inst, DEMO_ID).idle_timeout_s is None
    claude.messages.create(model=DEMO_ID, max_tokens=2, messages=HI, extra_body={"ttl": 0})
    gone = inst.supervisor.wait_for(lambda s: all(e.model_id != DEMO_ID for e in s.engines), 30)
    assert gone is not None, inst.supervisor.snapshot().engines
