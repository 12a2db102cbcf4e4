"""Responses API state: what `previous_response_id` means, decided without touching the disk.

llama-server b11434 answers `POST /v1/responses` itself but refuses `previous_response_id`
(400 "llama.cpp does not support 'previous_response_id'"). OpenAI's API (and LM Studio's)
keep each stored response so that a follow-up can name it instead of re-sending the whole
conversation. The gateway does the same by expanding the chain: the input items of every
earlier turn and the output items each turn answered, oldest first, then this request's
own input, sent to the engine as one stateless request. As in OpenAI's API, an earlier
turn's `instructions` are not carried over.

Decided here: whether a request needs the chain, whether its answer is kept (`store`
defaults to true, as in OpenAI's API; `store: false` keeps nothing), the expanded body,
the turn to keep from an answer (a whole JSON answer or a stream's `response.completed`
event), and which kept turns to drop for the count and age bounds. A request that names no
previous response is forwarded with its body unchanged. Pure: no clock, files or sockets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_TURNS = 2000  # kept turns, all conversations together
MAX_AGE_S = 30 * 24 * 3600.0  # OpenAI keeps stored responses for 30 days
MAX_ID_LEN = 200


@dataclass(frozen=True)
class StoredTurn:
    """One answered request: its own input items and the output items it answered, as JSON text."""

    id: str
    parent: str | None  # the previous_response_id it continued, if any
    input_json: str  # a JSON array of input items
    output_json: str  # a JSON array of output items
    created_at: float

    def items(self) -> list[Any]:
        items: list[Any] = json.loads(self.input_json) + json.loads(self.output_json)
        return items


@dataclass(frozen=True)
class ResponsesRequest:
    previous_id: str | None
    store: bool
    stream: bool
    input_items: tuple[Any, ...]  # this request's own input, as items (a string becomes one user message)


class ChainError(ValueError):
    """The request cannot be answered as asked; the message is one sentence for the client."""


def valid_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LEN and value.replace("_", "").replace(
        "-", "").isalnum()


def as_items(value: object) -> tuple[Any, ...]:
    """`input` as a list of items: a string is one user message, as OpenAI's API reads it."""
    if value is None:
        return ()
    if isinstance(value, str):
        return ({"type": "message", "role": "user", "content": value},)
    if isinstance(value, list):
        return tuple(value)
    raise ChainError("`input` must be a string or a list of input items.")


def read_request(body: dict[str, Any]) -> ResponsesRequest:
    previous = body.get("previous_response_id")
    if previous is not None and not valid_id(previous):
        raise ChainError("`previous_response_id` must be the `id` of an earlier response (resp_…).")
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise ChainError("`store` must be true or false.")
    return ResponsesRequest(previous, store, body.get("stream") is True, as_items(body.get("input")))


def chain_problem(previous_id: str, missing: str) -> str:
    if missing == previous_id:
        return (f"Previous response with id '{previous_id}' not found: Stoker keeps stored responses for "
                f"{int(MAX_AGE_S // 86400)} days and at most {MAX_TURNS:,}, and never those sent with "
                "`store: false`; send the whole conversation in `input` instead.")
    return (f"The conversation before '{previous_id}' is no longer kept (its earlier response '{missing}' "
            "was dropped by age or count); send the whole conversation in `input` instead.")


def expanded_body(body: dict[str, Any], chain: tuple[StoredTurn, ...], own_input: tuple[Any, ...]) -> dict[str, Any]:
    """The stateless request the engine answers: every earlier turn's items, oldest first,
    then this request's input; `previous_response_id` removed."""
    items: list[Any] = []
    for turn in chain:
        items += turn.items()
    items += list(own_input)
    out = {k: v for k, v in body.items() if k != "previous_response_id"}
    out["input"] = items
    return out


def _response_from_stream(data: bytes) -> dict[str, Any] | None:
    text = data.decode("utf-8", "replace")
    found = None
    for line in text.splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            try:
                event = json.loads(line[5:].strip())
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("response"), dict):
                found = event["response"]
    return found


def turn_from_answer(answer: bytes, stream: bool, parent: str | None, own_input: tuple[Any, ...],
                     now: float) -> StoredTurn | None:
    """The turn to keep from a successful answer, or None when it names no usable id or output."""
    if stream:
        response = _response_from_stream(answer)
    else:
        try:
            response = json.loads(answer)
        except ValueError:
            return None
    if not isinstance(response, dict) or not valid_id(response.get("id")):
        return None
    output = response.get("output")
    if not isinstance(output, list):
        return None
    return StoredTurn(response["id"], parent, json.dumps(list(own_input)), json.dumps(output), now)


def to_drop(kept: dict[str, float], now: float, max_turns: int = MAX_TURNS,
            max_age_s: float = MAX_AGE_S) -> tuple[str, ...]:
    """Ids of kept turns (id → created_at) to drop: every one older than `max_age_s`, then the
    oldest until at most `max_turns` remain."""
    old = [i for i, at in kept.items() if now - at > max_age_s]
    rest = sorted((at, i) for i, at in kept.items() if now - at <= max_age_s)
    excess = max(0, len(rest) - max_turns)
    return tuple(old) + tuple(i for _, i in rest[:excess])
