"""The engine's own memory accounting, read from its log: what llama-server says it allocated.

Stoker's analytic estimate is checked against, and calibrated by, these numbers. The lines
come from llama-server b11434 at `-lv 4` (verified on the real CPU build: see
tests/data/engine_logs/*.log), either as plain text (`M.SS.mmm.uuu L message`) or as
`--log-jsonl` objects. The parser takes any iterable of lines and never touches files.

Two kinds of numbers, with different precision:
- buffer lines (`load_tensors: CPU_Mapped model buffer size = 92.10 MiB`, `KV buffer size`,
  `RS buffer size`, `compute buffer size`, `output buffer size`) print MiB with 2 decimals,
  so each value is exact to +-0.005 MiB (`BUFFER_ROUNDING_BYTES`);
- the fit breakdown table (`common_memory_breakdown_print`, or the JSON `fit_memory_breakdown`
  event) prints whole MiB, floored (the engine divides bytes by 1 MiB in integers), so each
  value is up to 1 MiB under the truth. Its `context` column is the KV/recurrent memory only
  and `compute` the scheduler's buffers; the output buffer is in neither.
Tables printed before the model's tensors are loaded are the fit dry run's projections (the
first one is for the parameters as launched); tables after that report the real allocation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from stoker.diagnosis.log_lines import HOST, device_of_buffer

MIB = 1048576
# A value printed as "%8.2f MiB" is off by at most half the last digit.
BUFFER_ROUNDING_BYTES = MIB // 200

@dataclass(frozen=True)
class BufferLine:
    """One `<DEV> <kind> buffer size = X MiB` line."""

    kind: str  # model | kv | recurrent | compute | output
    buffer: str  # as printed: CPU_Mapped, CPU_REPACK, CUDA0, CUDA_Host …
    device: str  # where the bytes live: CPU (host RAM) or the device name
    bytes: int  # printed MiB x 1048576, rounded; true value within BUFFER_ROUNDING_BYTES


@dataclass(frozen=True)
class KVCacheLine:
    """One `llama_kv_cache: size = …` line; SWA models print one per cache."""

    total_bytes: int
    cells: int  # per stream
    layers: int
    seqs: int  # n_seq_max
    streams: int
    type_k: str
    type_v: str | None  # None: MLA caches K only
    k_bytes: int
    v_bytes: int
    cache: str = "kv"  # kv | non-swa | swa


@dataclass(frozen=True)
class BreakdownRow:
    """One row of the fit memory breakdown, whole MiB floored, in bytes."""

    kind: str  # device | host | buffer_type
    name: str  # CUDA0, Host, CPU_REPACK …
    self_bytes: int
    model_bytes: int
    context_bytes: int
    compute_bytes: int
    total_bytes: int | None = None  # devices only
    free_bytes: int | None = None


@dataclass(frozen=True)
class Breakdown:
    phase: str  # projected (fit dry run, before tensors load) | loaded
    rows: tuple[BreakdownRow, ...]

    @property
    def self_bytes(self) -> int:
        return sum(r.self_bytes for r in self.rows)


@dataclass(frozen=True)
class DeviceMemoryReport:
    """What one memory (host RAM or a device) holds, summed over its buffers."""

    device: str
    model_bytes: int
    kv_bytes: int  # KV cache + recurrent state
    compute_bytes: int
    output_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.kv_bytes + self.compute_bytes + self.output_bytes


@dataclass(frozen=True)
class FitEvent:
    """One `common_fit_params` / `common_params_fit_impl` outcome line, kept as printed."""

    kind: str  # projected | no-change | ctx-reduced | fitted | failed | error
    text: str
    projected_bytes: int | None = None
    ctx_from: int | None = None
    ctx_to: int | None = None


@dataclass(frozen=True)
class EngineMemoryReport:
    buffers: tuple[BufferLine, ...]
    kv_caches: tuple[KVCacheLine, ...]
    breakdowns: tuple[Breakdown, ...]
    fit_events: tuple[FitEvent, ...]
    n_ctx: int | None = None
    n_ctx_seq: int | None = None
    n_seq_max: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    flash_attn: str | None = None  # as the context line prints it: auto | enabled | disabled
    flash_attn_resolved: bool | None = None  # what `resolve_fused_ops` decided
    kv_unified: bool | None = None
    swa_full: bool = False
    file_bytes: int | None = None  # `print_info: file size` (2 decimals, in MiB/GiB as printed)
    n_ctx_train: int | None = None
    tensors_loaded: bool = False  # a `model buffer size` line was seen
    load_error: str | None = None  # first `E` line of a failed load, as printed

    @property
    def devices(self) -> tuple[DeviceMemoryReport, ...]:
        """Per-memory sums of the buffer lines, host (`CPU`) first."""
        acc: dict[str, dict[str, int]] = {}
        for b in self.buffers:
            d = acc.setdefault(b.device, {"model": 0, "kv": 0, "compute": 0, "output": 0})
            d["kv" if b.kind == "recurrent" else b.kind] += b.bytes
        order = sorted(acc, key=lambda n: (n != HOST, n))
        return tuple(DeviceMemoryReport(n, acc[n]["model"], acc[n]["kv"], acc[n]["compute"],
                                        acc[n]["output"]) for n in order)

    def device(self, name: str) -> DeviceMemoryReport | None:
        for d in self.devices:
            if d.device == name:
                return d
        return None

    @property
    def total_bytes(self) -> int | None:
        """All buffers the engine allocated, or None when it never got to allocate any."""
        return sum(b.bytes for b in self.buffers) if self.buffers else None

    @property
    def rounding_bytes(self) -> int:
        """How far `total_bytes` may be from the truth because each line is rounded."""
        return BUFFER_ROUNDING_BYTES * len(self.buffers)

    @property
    def projected(self) -> Breakdown | None:
        """The fit dry run's table for the parameters as launched (before any shrinking)."""
        for b in self.breakdowns:
            if b.phase == "projected":
                return b
        return None

    @property
    def loaded(self) -> Breakdown | None:
        found = None
        for b in self.breakdowns:
            if b.phase == "loaded":
                found = b
        return found

    @property
    def complete(self) -> bool:
        """Weights, KV and compute were all reported: enough to fit a measured line."""
        kinds = {b.kind for b in self.buffers}
        return {"model", "compute"} <= kinds and bool(kinds & {"kv", "recurrent"})


# --- line shapes (b11434) -------------------------------------------------------------

_PREFIX = re.compile(r"^\s*\d+(?:\.\d+)+\s+([IWED])\s+")
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_BUFFER = re.compile(
    r"^(load_tensors|llama_kv_cache|llama_memory_recurrent|sched_reserve|llama_context|"
    r"[A-Za-z_]+):\s+(\S+)\s+(model|KV|RS|compute|output) buffer size\s*=\s*" + _NUM + r" MiB")
_BUFFER_KIND = {"model": "model", "KV": "kv", "RS": "recurrent", "compute": "compute",
                "output": "output"}
_KV_SIZE = re.compile(
    r"^llama_kv_cache: size =\s*" + _NUM + r" MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/\s*(\d+) seqs\)"
    r", K \((\w+)\):\s*" + _NUM + r" MiB(?:, V \((\w+)\):\s*" + _NUM + r" MiB)?")
_ISWA = re.compile(r"^llama_kv_cache_iswa: creating\s+(non-SWA|SWA) KV cache")
_CTX_PARAM = re.compile(r"^llama_context: (n_ctx|n_ctx_seq|n_seq_max|n_batch|n_ubatch|flash_attn|"
                        r"kv_unified)\s+=\s+(\S+)")
_FA_RESOLVED = re.compile(r"^resolve_fused_ops: Flash Attention (enabled|not supported)")
_FILE_SIZE = re.compile(r"^print_info: file size\s*=\s*" + _NUM + r" (MiB|GiB)")
_N_CTX_TRAIN = re.compile(r"^print_info: n_ctx_train\s*=\s*(\d+)")
_TABLE_HEADER = re.compile(r"^\w*memory_breakdown_print: \| memory breakdown \[MiB\]")
_TABLE_ROW = re.compile(r"^\w*memory_breakdown_print: \|\s+- (.+?)\s+\|(.*)\|\s*$")
_FIT = re.compile(r"^(?:common_fit_params|common_params_fit_impl|llama_params_fit\w*): (.*)$")
_PROJECTED = re.compile(r"projected to use (\d+) MiB of (?:device|host) memory")
_REDUCED = re.compile(r"context size reduced from (\d+) to (\d+)")
_ANY_PREFIXES = ("cmn  ", "srv  ")


def _mib(text: str) -> int:
    return round(float(text) * MIB)


def _message(raw: str) -> tuple[str, str | None]:
    """A line's message without the timestamp prefix, and its level letter when known."""
    line = raw.rstrip("\r\n")
    stripped = line.lstrip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            return line, None
        if isinstance(obj, dict) and obj.get("type") == "log":
            level = {"error": "E", "warn": "W", "info": "I", "debug": "D"}.get(str(obj.get("level")))
            return str(obj.get("msg", "")).rstrip("\n"), level
        if isinstance(obj, dict) and obj.get("type") == "fit_memory_breakdown":
            return "\x00fit_json\x00" + stripped, None
        return line, None
    m = _PREFIX.match(line)
    if m:
        return line[m.end():], m.group(1)
    return line, None


def _table_row(name: str, body: str) -> BreakdownRow | None:
    """Parse `total = free + (self = model + context + compute) + unaccounted` or
    `self = model + context + compute`."""
    nums = [int(n) for n in re.findall(r"-?\d+", body)]
    kind = "host" if name == "Host" else "buffer_type"
    if "(" in body and len(nums) == 7:
        total, free, self_, model, context, compute, _unacc = nums
        dev = name.split(" (", 1)[0]
        return BreakdownRow("device", dev, self_ * MIB, model * MIB, context * MIB, compute * MIB,
                            total * MIB, free * MIB)
    if len(nums) == 4:
        self_, model, context, compute = nums
        return BreakdownRow(kind, name, self_ * MIB, model * MIB, context * MIB, compute * MIB)
    return None


def _json_rows(text: str) -> tuple[BreakdownRow, ...]:
    data = json.loads(text).get("data", {})
    scale = MIB if data.get("unit", "MiB") == "MiB" else 1
    rows = []
    for r in data.get("rows", ()):
        def get(key: str, r: dict[str, Any] = r) -> int | None:  # bound now, though only called in this pass
            v = r.get(key)
            return None if v is None else int(v) * scale
        rows.append(BreakdownRow(str(r.get("kind", "")), str(r.get("name", "")), get("self") or 0,
                                 get("model") or 0, get("context") or 0, get("compute") or 0,
                                 get("total"), get("free")))
    return tuple(rows)


def parse_memory_report(lines: Iterable[str]) -> EngineMemoryReport:
    """Read every memory fact a llama-server log holds; lines it does not know are skipped.

    Accepts text logs and `--log-jsonl` output (also mixed). A JSONL log carries each table
    twice (text rows and a `fit_memory_breakdown` event); the event wins, the rows are dropped.
    """
    buffers: list[BufferLine] = []
    kv_caches: list[KVCacheLine] = []
    breakdowns: list[Breakdown] = []
    fit_events: list[FitEvent] = []
    params: dict[str, str] = {}
    fa_resolved: bool | None = None
    file_bytes = n_ctx_train = None
    swa_full = False
    load_error = None
    pending_cache = "kv"
    table: list[BreakdownRow] | None = None
    table_is_text = False
    tensors_loaded = False

    def close_table() -> None:
        nonlocal table
        if table is not None:
            breakdowns.append(Breakdown("loaded" if tensors_loaded else "projected", tuple(table)))
        table = None

    for raw in lines:
        msg, level = _message(raw)
        if msg.startswith("\x00fit_json\x00"):
            # The event follows its own text rows: replace them rather than count twice.
            if table is not None and table_is_text:
                table = None
            rows = _json_rows(msg[len("\x00fit_json\x00"):])
            breakdowns.append(Breakdown("loaded" if tensors_loaded else "projected", rows))
            continue
        for p in _ANY_PREFIXES:
            if msg.startswith(p):
                msg = msg[len(p):].lstrip()
                break
        if _TABLE_HEADER.match(msg):
            close_table()
            table, table_is_text = [], True
            continue
        row = _TABLE_ROW.match(msg)
        if row and table is not None:
            parsed = _table_row(row.group(1).strip(), row.group(2))
            if parsed:
                table.append(parsed)
            continue
        close_table()

        m = _BUFFER.match(msg)
        if m:
            kind = _BUFFER_KIND[m.group(3)]
            if kind == "model":
                tensors_loaded = True
            buffers.append(BufferLine(kind, m.group(2), device_of_buffer(m.group(2)),
                                      _mib(m.group(4))))
            continue
        m = _KV_SIZE.match(msg)
        if m:
            kv_caches.append(KVCacheLine(
                total_bytes=_mib(m.group(1)), cells=int(m.group(2)), layers=int(m.group(3)),
                seqs=int(m.group(4)), streams=int(m.group(5)), type_k=m.group(6),
                type_v=m.group(8), k_bytes=_mib(m.group(7)),
                v_bytes=_mib(m.group(9)) if m.group(9) else 0, cache=pending_cache))
            continue
        m = _ISWA.match(msg)
        if m:
            pending_cache = "swa" if m.group(1) == "SWA" else "non-swa"
            continue
        m = _CTX_PARAM.match(msg)
        if m:
            params[m.group(1)] = m.group(2)
            continue
        m = _FA_RESOLVED.match(msg)
        if m:
            fa_resolved = m.group(1) == "enabled"
            continue
        if "using full-size SWA cache" in msg:
            swa_full = True
            continue
        m = _FILE_SIZE.match(msg)
        if m:
            file_bytes = round(float(m.group(1)) * (MIB if m.group(2) == "MiB" else MIB * 1024))
            continue
        m = _N_CTX_TRAIN.match(msg)
        if m:
            n_ctx_train = int(m.group(1))
            continue
        m = _FIT.match(msg)
        if m:
            event = _fit_event(m.group(1), level)
            if event:
                fit_events.append(event)
            continue
        if level == "E" and load_error is None and not tensors_loaded and "fit" not in msg:
            load_error = msg.strip()
    close_table()

    def as_int(key: str) -> int | None:
        v = params.get(key)
        return int(v) if v is not None and v.isdigit() else None

    unified = params.get("kv_unified")
    return EngineMemoryReport(
        buffers=tuple(buffers), kv_caches=tuple(kv_caches), breakdowns=tuple(breakdowns),
        fit_events=tuple(fit_events), n_ctx=as_int("n_ctx"), n_ctx_seq=as_int("n_ctx_seq"),
        n_seq_max=as_int("n_seq_max"), n_batch=as_int("n_batch"), n_ubatch=as_int("n_ubatch"),
        flash_attn=params.get("flash_attn"), flash_attn_resolved=fa_resolved,
        kv_unified=None if unified is None else unified == "true", swa_full=swa_full,
        file_bytes=file_bytes, n_ctx_train=n_ctx_train, tensors_loaded=tensors_loaded,
        load_error=load_error)


def _fit_event(text: str, level: str | None) -> FitEvent | None:
    m = _PROJECTED.search(text)
    if m:
        return FitEvent("projected", text, projected_bytes=int(m.group(1)) * MIB)
    m = _REDUCED.search(text)
    if m:
        return FitEvent("ctx-reduced", text, ctx_from=int(m.group(1)), ctx_to=int(m.group(2)))
    if "no changes needed" in text:
        return FitEvent("no-change", text)
    if text.startswith("successfully fit"):
        return FitEvent("fitted", text)
    if text.startswith("failed to fit"):
        return FitEvent("failed", text)
    if text.startswith("encountered an error"):
        return FitEvent("error", text)
    return None


# llama-server prints `srv  init_listene: api_keys: ****zq9X` at start: the last four
# characters of the key. Nothing of a key is written to an engine's log.
_API_KEYS_LINE = re.compile(r"(\bapi_keys?:\s*).*$", re.IGNORECASE | re.MULTILINE)
REDACTED = "(set; not logged)"


def redact_secrets(text: str, secrets: tuple[str, ...] = ()) -> str:
    """The text (a line, or lines joined by newlines) with any part of a key taken out: the
    engine's own key report, and any whole secret value Stoker handed the engine (only values
    of 8 characters or more: a shorter one would match ordinary text). The pattern runs only
    where its words are: an engine prints about 50 lines per request, and the pattern on each
    cost ten times the rest of reading them."""
    if "api_key" in text.lower():
        text = _API_KEYS_LINE.sub(lambda m: m.group(1) + REDACTED, text)
    for secret in secrets:
        if len(secret) >= 8 and secret in text:
            text = text.replace(secret, REDACTED)
    return text
