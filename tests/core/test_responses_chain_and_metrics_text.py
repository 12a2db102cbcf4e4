"""The pure halves of the gateway's Responses state and `/metrics`: every edge of a chain's
expansion, what is kept and dropped, and Prometheus text read back by prometheus_client."""

from __future__ import annotations

import json

import pytest

from stoker.gateway.metrics_text import (
    Family,
    HistogramSample,
    MetricType,
    Sample,
    TokenCounts,
    render,
    stream_ended,
    token_counts,
)
from stoker.gateway.responses_chain import (
    ChainError,
    StoredTurn,
    as_items,
    chain_problem,
    expanded_body,
    read_request,
    to_drop,
    turn_from_answer,
)


def turn(i: str, parent=None, said="hi", answered="hello", at=0.0) -> StoredTurn:
    return StoredTurn(i, parent, json.dumps([{"role": "user", "content": said}]),
                      json.dumps([{"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": answered}]}]), at)


def test_a_request_without_previous_response_is_read_as_it_is():
    req = read_request({"model": "m", "input": "hi"})
    assert req.previous_id is None and req.store is True and req.stream is False
    assert req.input_items == ({"type": "message", "role": "user", "content": "hi"},)
    assert read_request({"input": [{"role": "user", "content": "x"}], "store": False, "stream": True}).store is False


@pytest.mark.parametrize("body, words", [
    ({"previous_response_id": "../../etc/passwd"}, "previous_response_id"),
    ({"previous_response_id": 5}, "previous_response_id"),
    ({"store": "no"}, "`store`"),
    ({"input": 3}, "`input`"),
])
def test_bad_fields_are_one_sentence(body, words):
    with pytest.raises(ChainError) as err:
        read_request(body)
    assert words in str(err.value)


def test_the_chain_is_expanded_oldest_first_and_the_id_removed():
    chain = (turn("resp_a", said="I am Bob", answered="Hi Bob"), turn("resp_b", "resp_a", said="ok", answered="sure"))
    body = {"model": "m", "previous_response_id": "resp_b", "input": "Who am I?", "instructions": "brief"}
    out = expanded_body(body, chain, as_items(body["input"]))
    assert "previous_response_id" not in out and out["instructions"] == "brief" and out["model"] == "m"
    texts = [i["content"] if isinstance(i["content"], str) else i["content"][0]["text"] for i in out["input"]]
    assert texts == ["I am Bob", "Hi Bob", "ok", "sure", "Who am I?"]
    assert body["previous_response_id"] == "resp_b"  # the caller's body is not changed


def test_a_turn_is_kept_from_a_whole_answer_and_from_a_stream():
    answer = {"id": "resp_x", "output": [{"type": "message", "content": [{"type": "output_text", "text": "yo"}]}]}
    kept = turn_from_answer(json.dumps(answer).encode(), False, "resp_p", ({"role": "user", "content": "q"},), 5.0)
    assert kept == StoredTurn("resp_x", "resp_p", '[{"role": "user", "content": "q"}]',
                              json.dumps(answer["output"]), 5.0)
    stream = (b'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_x","output":[]}}\n\n'
              b'event: response.completed\ndata: ' + json.dumps({"type": "response.completed",
                                                                "response": answer}).encode() + b"\n\n")
    assert turn_from_answer(stream, True, None, (), 1.0).output_json == json.dumps(answer["output"])
    assert turn_from_answer(b"not json", False, None, (), 1.0) is None
    assert turn_from_answer(b'{"id": "x/../y", "output": []}', False, None, (), 1.0) is None
    assert turn_from_answer(b"data: [DONE]\n\n", True, None, (), 1.0) is None


def test_the_bounds_drop_the_old_then_the_oldest():
    kept = {"a": 0.0, "b": 50.0, "c": 60.0, "d": 70.0}
    assert to_drop(kept, now=100.0, max_turns=10, max_age_s=1000) == ()
    assert set(to_drop(kept, now=100.0, max_turns=10, max_age_s=45)) == {"a", "b"}
    assert to_drop(kept, now=100.0, max_turns=2, max_age_s=1000) == ("a", "b")
    assert set(to_drop(kept, now=100.0, max_turns=1, max_age_s=35)) == {"a", "b", "c"}


def test_missing_turns_are_named():
    assert "not found" in chain_problem("resp_b", "resp_b") and "store: false" in chain_problem("resp_b", "resp_b")
    assert "'resp_a'" in chain_problem("resp_b", "resp_a") and "no longer kept" in chain_problem("resp_b", "resp_a")


def test_prometheus_text_reads_back_with_prometheus_client():
    parser = pytest.importorskip("prometheus_client.parser")
    text = render((
        Family("stoker_requests_total", "Requests.", MetricType.COUNTER,
               (Sample((("model", 'we"ird\\id\n'), ("status", "200")), 3.0),)),
        Family("stoker_model_resident_bytes", "Bytes.", MetricType.GAUGE, (Sample((("model", "m"),), 2.5e9),)),
        Family("stoker_ttft_seconds", "TTFT.", MetricType.HISTOGRAM,
               histograms=(HistogramSample((("model", "m"),), ((0.1, 1), (1.0, 2), (10.0, 0)), 2.35, 4),)),
    ))
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    (req,) = fams["stoker_requests"].samples
    assert req.labels["model"] == 'we"ird\\id\n' and req.value == 3
    assert fams["stoker_model_resident_bytes"].samples[0].value == 2.5e9
    buckets = {s.labels["le"]: s.value for s in fams["stoker_ttft_seconds"].samples if s.name.endswith("_bucket")}
    assert buckets == {"0.1": 1, "1.0": 3, "10.0": 3, "+Inf": 4}  # cumulative, +Inf the count


def test_token_counts_from_each_api():
    chat = b'{"choices":[],"usage":{"prompt_tokens":31,"completion_tokens":3}}'
    assert token_counts(chat, chat) == TokenCounts(31, 3)
    stream_end = (b'data: {"choices":[{"delta":{}}],"timings":{"cache_n":24,"prompt_n":7,"predicted_n":3}}\n\n'
                  b"data: [DONE]\n\n")
    assert token_counts(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n', stream_end) == TokenCounts(31, 3)
    head = (b'event: message_start\ndata: {"type":"message_start","message":{"usage":'
            b'{"cache_read_input_tokens":30,"input_tokens":1,"output_tokens":0}}}\n\n')
    tail = b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":3}}\n\n'
    assert token_counts(head, tail) == TokenCounts(31, 3)
    done = (b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
            b'{"input_tokens":32,"output_tokens":4}}}\n\n')
    assert token_counts(b"event: response.created\n", done) == TokenCounts(32, 4)
    assert token_counts(b"", b"") == TokenCounts(None, None)  # unknown, never 0
    assert token_counts(b'ta: {"usage": {"prompt_tokens": 9', b"") == TokenCounts(None, None)  # a cut line


def test_a_stream_is_whole_once_its_end_event_has_gone_out():
    assert stream_ended(b'data: {"choices":[]}\n\ndata: [DONE]\n\n')
    assert stream_ended(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert stream_ended(b'event: response.completed\ndata: {"type":"response.completed"}\n\n')
    assert not stream_ended(b'data: {"choices":[{"delta":{"content":"[DONE]"}}]}\n\n')  # said, not sent
    assert not stream_ended(b'event: message_delta\ndata: {"type":"message_delta"}\n\n')
    assert not stream_ended(b"")
