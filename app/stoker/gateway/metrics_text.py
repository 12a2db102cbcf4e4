"""The gateway's `/metrics` as Prometheus text, and the token counts read from an answer.

Two decisions kept apart from the request path so they can be tested alone: how counters,
gauges and histograms are written in Prometheus' text format 0.0.4 (names, HELP/TYPE lines,
escaped label values, cumulative `le` buckets with `+Inf`, `_sum` and `_count`), and where an
engine's answer says how many tokens went in and came out (OpenAI `usage`, Anthropic
`usage`, Responses `usage`, llama-server's own `timings`), from the answer's first and last
bytes only, so a long stream is never kept whole for counting. Pure: values in, text out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any


class MetricType(Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    labels: Labels
    value: float


@dataclass(frozen=True)
class HistogramSample:
    labels: Labels
    buckets: tuple[tuple[float, int], ...]  # (upper bound, count in that bucket alone), ascending
    total: float  # the sum of every observation
    count: int


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    type: MetricType
    samples: tuple[Sample, ...] = ()
    histograms: tuple[HistogramSample, ...] = ()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    pairs = labels + extra
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render(families: tuple[Family, ...]) -> str:
    """Prometheus text exposition format 0.0.4, one family after another."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# HELP {fam.name} {fam.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        lines.append(f"# TYPE {fam.name} {fam.type.value}")
        for s in fam.samples:
            lines.append(f"{fam.name}{_labels(s.labels)} {_number(s.value)}")
        for h in fam.histograms:
            running = 0
            for bound, n in h.buckets:
                running += n
                # `le` as a float ("1.0"), as Prometheus' own clients write it
                lines.append(f"{fam.name}_bucket{_labels(h.labels, (('le', repr(float(bound))),))} {running}")
            lines.append(f"{fam.name}_bucket{_labels(h.labels, (('le', '+Inf'),))} {h.count}")
            lines.append(f"{fam.name}_sum{_labels(h.labels)} {_number(h.total)}")
            lines.append(f"{fam.name}_count{_labels(h.labels)} {h.count}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class TokenCounts:
    """Tokens an answer reports; None where it does not say (unknown, never 0)."""

    prompt: int | None
    completion: int | None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _from_object(obj: dict[str, Any], prompt: int | None, completion: int | None) -> tuple[int | None, int | None]:
    """Fold one JSON object of an answer (a whole answer or one stream event) into the counts."""
    if obj.get("type") == "response.completed" and isinstance(obj.get("response"), dict):
        obj = {**obj["response"], "timings": obj.get("timings")}
    if obj.get("type") == "message_start" and isinstance(obj.get("message"), dict):
        obj = obj["message"]
    usage = obj.get("usage")
    if isinstance(usage, dict):
        if _int(usage.get("prompt_tokens")) is not None:  # OpenAI chat and completions
            prompt = usage["prompt_tokens"]
        elif _int(usage.get("input_tokens")) is not None:  # Anthropic, Responses
            cached = _int(usage.get("cache_read_input_tokens")) or 0  # Anthropic counts the cache apart
            prompt = usage["input_tokens"] + cached
        if _int(usage.get("completion_tokens")) is not None:
            completion = usage["completion_tokens"]
        elif _int(usage.get("output_tokens")) is not None:
            completion = usage["output_tokens"]
    timings = obj.get("timings")
    if isinstance(timings, dict):  # llama-server's own numbers (chat streams carry only these)
        if prompt is None and _int(timings.get("prompt_n")) is not None:
            prompt = timings["prompt_n"] + (_int(timings.get("cache_n")) or 0)
        if completion is None and _int(timings.get("predicted_n")) is not None:
            completion = timings["predicted_n"]
    return prompt, completion


def _objects(data: bytes) -> list[dict[str, Any]]:
    """The JSON objects in an answer: the body itself, or each `data:` line of a stream that
    mentions usage (a line cut at the edge of the kept bytes does not parse and is skipped)."""
    text = data.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
            return [obj] if isinstance(obj, dict) else []
        except ValueError:
            pass  # not one object: read it as a stream
    found = []
    for line in text.splitlines():
        if not line.startswith("data:") or ("usage" not in line and "timings" not in line):
            continue
        try:
            obj = json.loads(line[5:].strip())
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def token_counts(head: bytes, tail: bytes) -> TokenCounts:
    """Token counts from an answer's first bytes (Anthropic's `message_start` names the prompt)
    and last bytes (the final chunk, `message_delta`, `response.completed`); later events win."""
    prompt = completion = None
    objects = _objects(head) + (_objects(tail) if tail is not head else [])
    for obj in objects:
        p, c = _from_object(obj, None, None)
        prompt = p if p is not None else prompt
        completion = c if c is not None else completion
    return TokenCounts(prompt, completion)


# The last event each streaming API sends (OpenAI's chat and completions, Anthropic's
# messages, OpenAI's Responses): once it has gone out, the client holds the whole answer.
STREAM_ENDS = (b"data: [DONE]", b"event: message_stop", b"event: response.completed")


def stream_ended(tail: bytes) -> bool:
    """Whether an answer's last bytes carry its API's end-of-stream event."""
    return any(end in tail for end in STREAM_ENDS)
