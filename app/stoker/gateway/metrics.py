"""What the gateway counts for `GET /metrics`: requests, tokens, time to first token, loads,
waiting requests, unloads and resident bytes, per model.

The request path pays for a clock read when a request starts and one when its first chunk
arrives, a reference to the first chunk and the last two, and a few dict updates under an
uncontended lock when it ends; the token counts are read from those kept bytes after the
answer is sent (stoker/gateway/metrics_text.py). Loads and unloads are learned from the
snapshots the supervisor already publishes, not asked for. Counters are keyed by model file
and named by the catalog's ids only when `/metrics` is read. Nothing here does I/O, and it
decides nothing: it only counts.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stoker.fleet.snapshot import AppSnapshot, EngineState
from stoker.gateway.metrics_text import (
    Family,
    HistogramSample,
    MetricType,
    Sample,
    render,
    stream_ended,
    token_counts,
)
from stoker.library.model_ids import Catalog

TTFT_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
LOAD_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
NO_MODEL = ""  # a request the gateway answered before it named a model


@dataclass
class _Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.bounds)
        i = bisect.bisect_left(self.bounds, value)
        if i < len(self.bounds):
            self.counts[i] += 1
        self.total += value
        self.count += 1

    def sample(self, labels) -> HistogramSample:
        counts = self.counts or [0] * len(self.bounds)
        return HistogramSample(labels, tuple(zip(self.bounds, counts, strict=True)), self.total, self.count)


class RequestTap:
    """One forwarded request: sees each chunk of the answer as it is written."""

    __slots__ = ("_metrics", "key", "path", "started", "first_at", "head", "tail", "_prev")

    def __init__(self, metrics: GatewayMetrics, key: str | None, path: str, started: float) -> None:
        self._metrics = metrics
        self.key = key or NO_MODEL
        self.path = path
        self.started = started
        self.first_at: float | None = None
        self.head = b""
        self.tail = b""
        self._prev = b""

    def chunk(self, data: bytes) -> None:
        if self.first_at is None:
            self.first_at = time.monotonic()
            self.head = data
        self._prev, self.tail = self.tail, data

    def finish(self, status: int) -> None:
        self._metrics._finished(self, status)

    def tail_bytes(self) -> bytes:
        return self._prev + self.tail

    def answer_whole(self) -> bool:
        """Whether the stream's end event has been passed on: a client that closes then (the
        `openai` package does at `[DONE]`) has its whole answer, even if it closed before
        the gateway ended the chunked body."""
        return stream_ended(self.tail_bytes())


class GatewayMetrics:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], int] = {}
        self._tokens_in: dict[str, int] = {}
        self._tokens_out: dict[str, int] = {}
        self._ttft: dict[str, _Histogram] = {}
        self._loads: dict[str, _Histogram] = {}
        self._evictions: dict[str, int] = {}
        self._waiting: dict[str, int] = {}
        self._starting_since: dict[str, float] = {}  # model → when it was first seen loading
        self._ready: set[str] = set()
        self._snapshot: AppSnapshot | None = None

    # ---------------------------------------------------------------- the request path

    def start(self, key: str | None, path: str) -> RequestTap:
        return RequestTap(self, key, path, self._clock())

    def waiting(self, key: str | None, delta: int) -> None:
        k = key or NO_MODEL
        with self._lock:
            self._waiting[k] = max(0, self._waiting.get(k, 0) + delta)

    def refused(self, key: str | None, path: str, status: int) -> None:
        """A request answered by the gateway itself (unknown model, bad key, queue full)."""
        k = (key or NO_MODEL, path, str(status))
        with self._lock:
            self._requests[k] = self._requests.get(k, 0) + 1

    def _finished(self, tap: RequestTap, status: int) -> None:
        counts = token_counts(tap.head, tap.tail_bytes()) if tap.head and status < 400 else None
        k = (tap.key, tap.path, str(status))
        with self._lock:
            self._requests[k] = self._requests.get(k, 0) + 1
            if tap.first_at is not None and status < 400:
                self._ttft.setdefault(tap.key, _Histogram(TTFT_BUCKETS)).observe(tap.first_at - tap.started)
            if counts is not None and counts.prompt is not None:
                self._tokens_in[tap.key] = self._tokens_in.get(tap.key, 0) + counts.prompt
            if counts is not None and counts.completion is not None:
                self._tokens_out[tap.key] = self._tokens_out.get(tap.key, 0) + counts.completion

    # ---------------------------------------------------------------- snapshots

    def on_snapshot(self, snap: AppSnapshot) -> None:
        """Loads (first seen loading → READY) and unloads (READY → gone or stopping)."""
        now = self._clock()
        with self._lock:
            self._snapshot = snap
            ready_now: set[str] = set()
            for e in snap.engines:
                if not e.model_path:
                    continue
                if e.state is EngineState.READY:
                    ready_now.add(e.model_path)
                    since = self._starting_since.pop(e.model_path, None)
                    if since is not None and e.model_path not in self._ready:
                        self._loads.setdefault(e.model_path, _Histogram(LOAD_BUCKETS)).observe(now - since)
                elif e.state is EngineState.STARTING and not e.queued:
                    self._starting_since.setdefault(e.model_path, now)
            for gone in self._ready - ready_now:
                self._evictions[gone] = self._evictions.get(gone, 0) + 1
            self._ready = ready_now

    # ---------------------------------------------------------------- /metrics

    def text(self, catalog: Catalog, in_flight: Callable[[str], int]) -> str:
        def name(key: str) -> str:
            entry = catalog.by_path(key) if key else None
            return entry.id if entry is not None else (key.rsplit("/", 1)[-1] if key else "none")

        with self._lock:
            requests = dict(self._requests)
            tokens_in, tokens_out = dict(self._tokens_in), dict(self._tokens_out)
            ttft = {k: h.sample((("model", name(k)),)) for k, h in self._ttft.items()}
            loads = {k: h.sample((("model", name(k)),)) for k, h in self._loads.items()}
            evictions, waiting = dict(self._evictions), dict(self._waiting)
            snap = self._snapshot
        resident: list[Sample] = []
        loaded: list[Sample] = []
        flight: list[Sample] = []
        for e in (snap.engines if snap is not None else ()):
            if not e.model_path:
                continue
            model = (("model", name(e.model_path)),)
            loaded.append(Sample(model, 1.0 if e.state is EngineState.READY else 0.0))
            flight.append(Sample(model, float(in_flight(e.model_path))))
            for device, b in e.bytes_by_device:
                resident.append(Sample(model + (("device", device),), float(b)))

        def per_model(values: dict[str, int]) -> tuple[Sample, ...]:
            return tuple(Sample((("model", name(k)),), float(v)) for k, v in sorted(values.items()))

        families = (
            Family("stoker_requests_total", "Requests answered, by model, endpoint and HTTP status.",
                   MetricType.COUNTER, tuple(Sample((("model", name(m)), ("endpoint", p), ("status", s)), float(n))
                                             for (m, p, s), n in sorted(requests.items()))),
            Family("stoker_prompt_tokens_total", "Tokens read (prompt, cached ones included), by model.",
                   MetricType.COUNTER, per_model(tokens_in)),
            Family("stoker_completion_tokens_total", "Tokens generated, by model.",
                   MetricType.COUNTER, per_model(tokens_out)),
            Family("stoker_time_to_first_token_seconds",
                   "From the request reaching the gateway to the answer's first bytes (a load included).",
                   MetricType.HISTOGRAM, histograms=tuple(ttft[k] for k in sorted(ttft))),
            Family("stoker_model_load_seconds", "From a model starting to load to its engine being ready.",
                   MetricType.HISTOGRAM, histograms=tuple(loads[k] for k in sorted(loads))),
            Family("stoker_requests_waiting", "Requests held while their model loads (the queue), by model.",
                   MetricType.GAUGE, per_model(waiting)),
            Family("stoker_requests_in_flight", "Requests being answered by a loaded model.",
                   MetricType.GAUGE, tuple(flight)),
            Family("stoker_model_evictions_total",
                   "Times a loaded model was unloaded (idle timer, room for another, keep_alive 0, or by hand).",
                   MetricType.COUNTER, per_model(evictions)),
            Family("stoker_model_loaded", "1 when the model's engine is ready, 0 while it loads or stops.",
                   MetricType.GAUGE, tuple(loaded)),
            Family("stoker_model_resident_bytes", "Memory the model's plan holds, by device.",
                   MetricType.GAUGE, tuple(resident)),
        )
        return render(families)
