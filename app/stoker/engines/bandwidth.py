"""Measure how fast this machine's CPU reads model weights while decoding, once, and remember it.

stoker/planning/speed.py predicts decode speed from bytes read per token over each device's memory
bandwidth. GPUs and Apple chips come from its table; the host CPU's figure has to be
measured here, because RAM and CPUs vary too much to look up. Two figures are measured:

- memory reads: numpy's matrix-vector product over a 256 MiB matrix (8x the largest L3
  caches), best of a few passes, with the CPU's threads: what RAM gives a streaming reader;
- engine decode: a short real decode of the demo model by the llama-server build that will
  run (bytes one token reads, from stoker/planning/speed.py, times the measured tokens/s): what that
  build's quantised kernels reach on this CPU with the thread count it will use.

The CPU's figure is the slower of the two: a big model on a fast desktop is limited by RAM,
a small one on a few slow or shared cores by the kernels. Both are cached in
<cache>/bandwidth.json, keyed by the engine build, the CPU model, the RAM size and the
thread count, so a plan reads the figure without measuring (`cached_cpu_bandwidth`); `stoker
setup` and `stoker bench speed` measure it. A failed measurement is None (unknown), never 0.

Never imports Qt; never decides anything about a plan.
"""

from __future__ import annotations

import platform
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from stoker.base.paths import stoker_paths
from stoker.base.store import read_json, write_json_atomic
from stoker.engines.health import wait_ready
from stoker.engines.identity import binary_identity
from stoker.engines.process import clean_engine_env, end_process, free_loopback_port
from stoker.library.gguf_io import load_summary
from stoker.planning import memory as mem
from stoker.planning import speed

CACHE_SCHEMA = 1
PROBE_BYTES = 256 * 1024 * 1024
PROMPT = "Write a long story about a lighthouse keeper who finds a map in a bottle."


@dataclass(frozen=True)
class CpuBandwidth:
    memory_read_bytes_per_s: int | None
    engine_decode_bytes_per_s: int | None
    engine_tokens_per_s: float | None  # the demo model's measured decode speed
    threads: int | None  # None: the engine's default

    @property
    def effective_bytes_per_s(self) -> int | None:
        known = [x for x in (self.memory_read_bytes_per_s, self.engine_decode_bytes_per_s) if x]
        return min(known) if known else None


def memory_read_bandwidth(size_bytes: int = PROBE_BYTES, passes: int = 4,
                          threads: int | None = None) -> int | None:
    """Bytes/s a streaming reader gets from RAM: best pass of a matrix-vector product."""
    try:
        import numpy as np  # here, not at import: numpy costs ~0.1 s and most callers only read the cache
    except ImportError:
        return None
    n_threads = max(1, threads or psutil.cpu_count(logical=False) or 1)
    cols = 4096
    rows = max(n_threads, size_bytes // (4 * cols))
    try:
        a = np.ones((rows, cols), dtype=np.float32)
    except MemoryError:
        return None
    x = np.ones(cols, dtype=np.float32)
    parts = np.array_split(a, n_threads)
    best = 0.0
    for _ in range(passes):
        workers = [threading.Thread(target=np.dot, args=(p, x)) for p in parts]  # numpy drops the GIL
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        dt = time.perf_counter() - t0
        if dt > 0:
            best = max(best, a.nbytes / dt)
    return int(best) if best > 0 else None


def engine_decode_rate(binary: str | Path, model: str | Path, *, threads: int | None = None,
                       n_predict: int = 64, requests: int = 2, ctx: int = 2048,
                       timeout_s: float = 120.0) -> tuple[float | None, int | None, str]:
    """(tokens/s, prompt tokens, reason) of a short greedy decode by a real llama-server.

    The best of `requests` requests after an 8-token warm-up: another program taking the CPU
    for a moment slows one request, never speeds one up.
    """
    port = free_loopback_port()
    argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(ctx),
            "-np", "1", "--no-webui", "--cache-ram", "0", "-ngl", "0"]  # -ngl 0: the CPU's figure, on any build
    if threads:
        argv += ["-t", str(threads)]
    with tempfile.TemporaryDirectory(prefix="stoker-bandwidth-") as tmp:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=clean_engine_env(Path(tmp)),
                                start_new_session=True)
        try:
            endpoint = f"http://127.0.0.1:{port}"
            ready = wait_ready(endpoint, proc, timeout_s)
            if not ready.ready:
                return None, None, f"the engine did not start ({ready.reason})"
            best, prompt_n = None, None
            with httpx.Client(timeout=timeout_s) as client:
                for i in range(requests + 1):
                    body = {"prompt": PROMPT, "n_predict": 8 if i == 0 else n_predict, "ignore_eos": True,
                            "cache_prompt": False, "temperature": 0}
                    t = client.post(f"{endpoint}/completion", json=body).json().get("timings", {})
                    if i == 0:
                        continue
                    rate = t.get("predicted_per_second")
                    if isinstance(rate, (int, float)) and rate > 0:
                        best = max(best or 0.0, float(rate))
                        prompt_n = t.get("prompt_n")
            return best, prompt_n, "measured" if best else "the engine reported no decode timings"
        except (httpx.HTTPError, ValueError) as exc:
            return None, None, f"the decode request failed ({exc})"
        finally:
            end_process(proc)


def bytes_per_token_on_cpu(summary, *, ctx: int, context_tokens: int) -> int:
    """Bytes a CPU-only decode of `summary` reads per token with `context_tokens` cached."""
    placement = mem.place_layers(summary, None)
    kv = mem.kv_bytes(summary, ctx=ctx, slots=1, kv_unified=False)
    return sum(speed.bytes_read_per_token(summary, placement, kv, context_tokens).values())


def _cache_path() -> Path:
    return stoker_paths().cache / "bandwidth.json"


def _key(binary: str | Path, threads: int | None) -> str:
    ident = binary_identity(binary)
    cpu = platform.processor() or platform.machine()
    return f"{ident}|{cpu}|{psutil.virtual_memory().total}|t{threads or 'default'}"


def cached_cpu_bandwidth(binary: str | Path | None, threads: int | None = None) -> CpuBandwidth | None:
    """The figure measured before for this build, CPU and thread count; None when never measured."""
    if binary is None:
        return None
    data, _problem = read_json(_cache_path())
    if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA:
        return None
    entries = data.get("entries")
    entry = entries.get(_key(binary, threads)) if isinstance(entries, dict) else None
    if not isinstance(entry, dict):
        return None
    return CpuBandwidth(entry.get("memory_read_bytes_per_s"), entry.get("engine_decode_bytes_per_s"),
                        entry.get("engine_tokens_per_s"), threads)


def measure_cpu_bandwidth(binary: str | Path, demo_model: str | Path, *, threads: int | None = None,
                          store: bool = True, n_predict: int = 64, requests: int = 2,
                          timeout_s: float = 120.0) -> tuple[CpuBandwidth, str]:
    """Measure both figures now (a few seconds), cache them, and say how it went."""
    read = memory_read_bandwidth(threads=threads)
    rate, prompt_n, reason = engine_decode_rate(binary, demo_model, threads=threads, n_predict=n_predict,
                                                requests=requests, timeout_s=timeout_s)
    decode_bw = None
    if rate:
        summary = load_summary(demo_model)
        # the decode attends over the prompt and half the new tokens on average
        per_token = bytes_per_token_on_cpu(summary, ctx=2048, context_tokens=(prompt_n or 0) + n_predict // 2)
        decode_bw = int(per_token * rate)
    result = CpuBandwidth(read, decode_bw, rate, threads)
    if store and (read or decode_bw):
        data, _ = read_json(_cache_path())
        entries = data.get("entries") if isinstance(data, dict) and data.get("schema") == CACHE_SCHEMA else None
        if not isinstance(entries, dict):
            entries = {}
        data = {"schema": CACHE_SCHEMA, "entries": entries}
        entries[_key(binary, threads)] = {
            "memory_read_bytes_per_s": read, "engine_decode_bytes_per_s": decode_bw,
            "engine_tokens_per_s": rate, "measured_at": time.time(), "model": str(demo_model)}
        try:
            write_json_atomic(_cache_path(), data)
        except OSError as exc:
            reason += f"; could not cache it in {_cache_path().parent} ({exc.strerror or exc})"
    return result, reason
