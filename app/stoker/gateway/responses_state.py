"""The gateway's Responses API state: stored turns on disk, and `/v1/responses` served with them.

What a chain means is stoker/gateway/responses_chain.py; this module keeps the turns and
drives one request. Each kept turn is one small JSON file under Stoker's data folder
(`<data>/responses/<id>.json`, written atomically), so a restart of Stoker, or of its
gateway process, keeps every conversation; a file that no longer parses is moved aside and
reported, and counts as missing. A turn is also held in memory the moment its answer ends,
so a follow-up sent at once finds it before the disk write is done. Files are read and
written on executor threads, never on the gateway's loop. The bounds (count, age) are
applied after each write.

The gateway process must not read the disk for anything else (stoker/gateway/child.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from stoker.base.paths import stoker_paths
from stoker.base.store import read_json, write_json_atomic
from stoker.gateway.responses_chain import (
    MAX_AGE_S,
    MAX_TURNS,
    ChainError,
    StoredTurn,
    chain_problem,
    expanded_body,
    read_request,
    to_drop,
    turn_from_answer,
    valid_id,
)

log = logging.getLogger(__name__)

MAX_CHAIN = 10_000  # a loop in hand-edited files must not hang a request


class ResponseStore:
    """Kept turns: in memory while recent, one file each on disk (None folder: memory only)."""

    def __init__(self, folder: Path | None, *, clock: Callable[[], float] = time.time,
                 max_turns: int = MAX_TURNS, max_age_s: float = MAX_AGE_S) -> None:
        self.folder = Path(folder) if folder is not None else None
        self._clock = clock
        self._max_turns, self._max_age_s = max_turns, max_age_s
        self._lock = threading.Lock()
        self._recent: dict[str, StoredTurn] = {}
        self._kept: dict[str, float] | None = None  # id → created_at, read from the folder once
        self.problems: list[str] = []

    def _index(self) -> dict[str, float]:
        if self._kept is None:
            kept: dict[str, float] = {}
            if self.folder is not None and self.folder.is_dir():
                for f in self.folder.glob("*.json"):
                    try:
                        kept[f.stem] = f.stat().st_mtime
                    except OSError:
                        continue
            self._kept = kept
        return self._kept

    def _file(self, turn_id: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{turn_id}.json"

    def remember(self, turn: StoredTurn) -> None:
        """On the loop: the turn is findable at once (the file follows on `persist`)."""
        with self._lock:
            self._recent[turn.id] = turn
            if len(self._recent) > self._max_turns:
                oldest = min(self._recent.values(), key=lambda t: t.created_at)
                self._recent.pop(oldest.id, None)

    def persist(self, turn: StoredTurn) -> None:
        """On an executor thread: write the turn's file, then drop what the bounds exclude."""
        path = self._file(turn.id)
        with self._lock:
            kept = self._index()
            kept[turn.id] = turn.created_at
            drop = to_drop(kept, self._clock(), self._max_turns, self._max_age_s)
            for i in drop:
                kept.pop(i, None)
                self._recent.pop(i, None)
        if path is not None:
            write_json_atomic(path, {"id": turn.id, "parent": turn.parent, "created_at": turn.created_at,
                                     "input": json.loads(turn.input_json), "output": json.loads(turn.output_json)})
            for i in drop:
                dropped = self._file(i)
                if dropped is not None:
                    dropped.unlink(missing_ok=True)

    def get(self, turn_id: str) -> StoredTurn | None:
        """On an executor thread: the kept turn, or None (unknown, expired, or unreadable)."""
        with self._lock:
            turn = self._recent.get(turn_id)
            kept = self._index()
        if turn is not None:
            return turn if self._clock() - turn.created_at <= self._max_age_s else None
        path = self._file(turn_id)
        if path is None or not valid_id(turn_id) or turn_id not in kept:
            return None
        value, problem = read_json(path)
        if problem is not None:
            log.warning("%s", problem)
            self.problems.append(problem)
            with self._lock:
                kept.pop(turn_id, None)
            return None
        try:
            if not isinstance(value, dict):
                raise TypeError("a kept turn is a JSON object")
            turn = StoredTurn(str(value["id"]), value.get("parent"), json.dumps(value["input"]),
                              json.dumps(value["output"]), float(value["created_at"]))
        except (KeyError, TypeError, ValueError):
            return None
        if self._clock() - turn.created_at > self._max_age_s:
            return None
        return turn

    def chain(self, last_id: str) -> tuple[StoredTurn, ...]:
        """Every turn up to `last_id`, oldest first; ChainError naming the missing one."""
        turns: list[StoredTurn] = []
        want: str | None = last_id
        seen: set[str] = set()
        while want is not None and len(turns) < MAX_CHAIN:
            if want in seen:
                break
            seen.add(want)
            turn = self.get(want)
            if turn is None:
                raise ChainError(chain_problem(last_id, want))
            turns.append(turn)
            want = turn.parent
        return tuple(reversed(turns))


class _Capture:
    """Keeps every chunk of one answer, for the turn to store."""

    __slots__ = ("parts", "status")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.status = 0

    def chunk(self, data: bytes) -> None:
        self.parts.append(data)

    def finish(self, status: int) -> None:
        self.status = status


async def serve_responses(gw, request: web.Request, path: str, body: bytes, key: str | None,
                          store: ResponseStore) -> web.StreamResponse:
    """`POST /v1/responses`: a request naming no earlier response is forwarded with its body
    unchanged; one that does is expanded from the kept chain. A stored answer is kept."""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return await gw.forwarder.forward(request, path, body, key)  # the engine says what is wrong with it
    try:
        wanted = read_request(parsed)
        if wanted.previous_id is not None:
            loop = asyncio.get_running_loop()
            chain = await loop.run_in_executor(None, store.chain, wanted.previous_id)
            body = json.dumps(expanded_body(parsed, chain, wanted.input_items)).encode()
    except ChainError as exc:
        status = 404 if "not found" in str(exc) else 400
        return gw._error(path, status, str(exc), param="previous_response_id"
                         if "previous" in str(exc).lower() else "input", request=request)
    if not wanted.store:
        return await gw.forwarder.forward(request, path, body, key)
    capture = _Capture()
    response = await gw.forwarder.forward(request, path, body, key, tap=capture)
    if capture.status == 200:
        turn = turn_from_answer(b"".join(capture.parts), wanted.stream, wanted.previous_id,
                                wanted.input_items, time.time())
        if turn is not None:
            store.remember(turn)
            asyncio.get_running_loop().run_in_executor(None, _persist, store, turn)
    return response


def _persist(store: ResponseStore, turn: StoredTurn) -> None:
    try:
        store.persist(turn)
    except OSError as exc:
        log.warning("the response %s could not be kept on disk (%s); it is kept in memory until "
                    "the gateway restarts", turn.id, exc)


def default_folder() -> Path:
    return stoker_paths().data / "responses"
