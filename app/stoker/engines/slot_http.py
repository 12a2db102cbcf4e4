"""Talk to a running llama-server's slot endpoints: list the slots, save one, restore one.

These are the engine's own `GET /slots` and `POST /slots/{id}?action=save|restore`
(b11434, tools/server/server-context.cpp): both need the launch's API key, and the save and
restore only exist when the engine was started with `--slot-save-path DIR`; the file name
in the body is relative to that folder (the engine refuses path separators). Every call is
bounded by its timeout and answers a value, never raises: a failed save or restore must
only ever cost a cold start. It decides nothing (stoker/engines/slot_keep.py does) and
touches no file.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from stoker.engines.slot_keep import SlotNow, slots_from_json


@dataclass(frozen=True)
class SlotAnswer:
    ok: bool
    n_tokens: int | None = None
    n_bytes: int | None = None  # the engine's count of bytes written or read
    ms: float | None = None
    error: str | None = None  # one phrase: what the engine said, or why it did not answer


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _error_text(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return f"HTTP {resp.status_code}"
    err = body.get("error") if isinstance(body, dict) else None
    message = err.get("message") if isinstance(err, dict) else None
    return f"HTTP {resp.status_code}: {message}" if message else f"HTTP {resp.status_code}"


def list_slots(endpoint: str, api_key: str | None, *, timeout_s: float) -> tuple[SlotNow, ...] | str:
    """The engine's slots, or one phrase why they could not be listed."""
    try:
        resp = httpx.get(endpoint.rstrip("/") + "/slots", headers=_headers(api_key), timeout=timeout_s)
    except httpx.HTTPError as exc:
        return f"the engine did not answer ({type(exc).__name__})"
    if resp.status_code != 200:
        return _error_text(resp)
    try:
        return slots_from_json(resp.json())
    except ValueError:
        return "the engine's answer was not JSON"


def slot_action(endpoint: str, api_key: str | None, slot: int, action: str, filename: str, *,
                timeout_s: float) -> SlotAnswer:
    """Save (`action="save"`) or restore (`"restore"`) one slot from/to `filename` in the
    engine's slot folder."""
    url = f"{endpoint.rstrip('/')}/slots/{slot}?action={action}"
    try:
        resp = httpx.post(url, headers=_headers(api_key), json={"filename": filename}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return SlotAnswer(False, error=f"the engine did not answer within {timeout_s:.0f} s ({type(exc).__name__})")
    if resp.status_code != 200:
        return SlotAnswer(False, error=_error_text(resp))
    try:
        body = resp.json()
    except ValueError:
        return SlotAnswer(False, error="the engine's answer was not JSON")
    timings = body.get("timings") if isinstance(body, dict) else None
    ms = None
    if isinstance(timings, dict):
        value = timings.get("save_ms" if action == "save" else "restore_ms")
        ms = float(value) if isinstance(value, (int, float)) else None
    n_tokens = body.get(f"n_{'saved' if action == 'save' else 'restored'}") if isinstance(body, dict) else None
    n_bytes = body.get("n_written" if action == "save" else "n_read") if isinstance(body, dict) else None
    return SlotAnswer(True, n_tokens=n_tokens if isinstance(n_tokens, int) else None,
                      n_bytes=n_bytes if isinstance(n_bytes, int) else None, ms=ms)
