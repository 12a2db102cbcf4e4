"""One-off engine launches that exist only to measure memory: a real start, or the fit dry run.

`stoker bench memory` / `stoker bench fit` and the first-launch calibration need the
engine's own numbers without supervising anything: start llama-server with `-lv 4`, read
its log until it is ready (or until the fit dry run has printed its projection), stop it,
parse. One process at a time, bound to 127.0.0.1 on a free port, with a clean environment
(no inherited LLAMA_ARG_*, an empty XDG_CONFIG_HOME so no config.ini applies).

Measured cost on the 2-core test machine with the demo model (see `measure_dry_run`):
the fit dry run's projection is printed ~0.1 s after spawn with ~25 MB RSS; a real start
to READY with `--no-warmup` takes ~0.6 s and ~180 MB RSS (weights mapped, KV zeroed).
The dry run is cheap enough to run before every first launch; its table is whole MiB
(floored) and, on CPU, misses the repacked weight copy (CPU_REPACK) in the Host row,
so it calibrates weights + KV + compute only to about 1 MiB per component.

`fill_context=True` makes "started" mean what a user means by it: after READY the probe
sends one request whose prompt fills a slot's context (token ids from /tokenize of a
repeated text, n_predict 4, cache_prompt false), so every KV page and the largest compute
graph are really used. A start alone (especially with `--no-warmup`) leaves the compute
buffer untouched, and a memory cgroup admits contexts that then die on their first long
prompt. Cost: prompt processing, ~100-300 tokens/s for the demo model on 2 busy cores.

It must not plan or decide; it launches, reads and reports.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from stoker.engines.engine_log import EngineMemoryReport, parse_memory_report
from stoker.engines.health import wait_ready
from stoker.engines.process import clean_engine_env, free_loopback_port

DRY_RUN_DONE = "fitting params to free memory took"


def _env(tmp: Path) -> dict[str, str]:
    env = clean_engine_env(tmp)
    env["NO_COLOR"] = "1"
    return env


@dataclass(frozen=True)
class ProbeResult:
    report: EngineMemoryReport
    started: bool  # READY on /health (real start) or the projection printed (dry run)
    reason: str  # "ready", "exited with code N …", "not ready within N s", "projection printed"
    wall_s: float
    peak_rss_bytes: int | None  # the engine process's highest RSS we saw while polling
    exit_code: int | None
    log: str  # the engine's log text, for evidence
    served: bool | None = None  # fill_context: the full-context request completed (None: not asked)
    serve_reason: str = ""  # "served N tokens in S s" or why not


def _argv(binary, model, ctx, slots, type_k, type_v, flash_attn, ubatch, kv_unified, port,
          extra, warmup=False) -> list[str]:
    argv = [str(binary), "-lv", "4", "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(ctx), "-np", str(slots), "-ctk", type_k, "-ctv", type_v, "-fa", flash_attn,
            "-ub", str(ubatch), "--no-webui", "--cache-ram", "0"]
    if not warmup:
        argv.append("--no-warmup")
    argv.append("-kvu" if kv_unified else "-no-kvu")
    return argv + list(extra)


def _limit_address_space(limit_bytes: int):
    def apply():  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    return apply


def run_probe(binary, model, *, ctx: int, slots: int = 1, type_k: str = "f16", type_v: str = "f16",
              flash_attn: str = "auto", ubatch: int = 512, kv_unified: bool = False,
              dry_run: bool = False, timeout_s: float = 60.0, address_space_limit: int | None = None,
              extra: tuple[str, ...] = (), warmup: bool = False, fill_context: bool = False,
              serve_timeout_s: float = 180.0, before_stop=None, on_ready=None) -> ProbeResult:
    """Start the engine once, wait for READY (or, `dry_run`, for the fit projection), stop it.

    `address_space_limit` sets RLIMIT_AS on the engine (the memory budget of `bench fit`).
    `warmup` drops `--no-warmup`; `fill_context` then serves one full-slot request
    (`served`), which must finish within `serve_timeout_s`. `before_stop()` is called
    while the engine still runs (after serving, if asked): a caller reads the memory the
    engine holds in steady state there, e.g. its cgroup's counters; `on_ready()` once it
    is READY, before the request (to take counters the request is judged by).
    """
    with tempfile.TemporaryDirectory(prefix="stoker-probe-") as tmp:
        tmp_path = Path(tmp)
        log_path = tmp_path / "engine.log"
        port = free_loopback_port()
        argv = _argv(binary, model, ctx, slots, type_k, type_v, flash_attn, ubatch, kv_unified,
                     port, extra, warmup)
        t0 = time.monotonic()
        with open(log_path, "wb") as log_f:
            popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log_f, stderr=subprocess.STDOUT,
                env=_env(tmp_path), start_new_session=True,
                preexec_fn=_limit_address_space(address_space_limit) if address_space_limit else None)
        peak = [0]
        served, serve_reason = None, ""
        stop_watch = threading.Event()

        def watch_rss():
            try:
                proc = psutil.Process(popen.pid)
                while not stop_watch.is_set():
                    peak[0] = max(peak[0], proc.memory_info().rss)
                    stop_watch.wait(0.02)
            except psutil.Error:
                pass

        watcher = threading.Thread(target=watch_rss, daemon=True)
        watcher.start()
        try:
            if dry_run:
                started, reason = _wait_for_text(log_path, popen, DRY_RUN_DONE, timeout_s)
            else:
                ready = wait_ready(f"http://127.0.0.1:{port}", popen, timeout_s)
                started, reason = ready.ready, ready.reason
            if started and on_ready is not None:
                on_ready()
            if started and fill_context:
                served, serve_reason = serve_full_context(
                    f"http://127.0.0.1:{port}", popen, max(1, ctx // max(1, slots) - 16), serve_timeout_s)
            wall = time.monotonic() - t0
            if before_stop is not None and popen.poll() is None:
                before_stop()
        finally:
            stop_watch.set()
            exit_code = _stop(popen, kill=dry_run)
            watcher.join(1)
        text = log_path.read_text(encoding="utf-8", errors="replace")
    return ProbeResult(parse_memory_report(text.splitlines()), started, reason, wall,
                       peak[0] or None, exit_code if not started or served is False else None, text,
                       served, serve_reason)


FILL_TEXT = "The quick brown fox jumps over the lazy dog while the stoker feeds the fire. "


def serve_full_context(endpoint: str, popen, n_tokens: int, timeout_s: float) -> tuple[bool, str]:
    """POST one /completion whose prompt is `n_tokens` token ids; (served, why).

    Token ids, not text, so the prompt length is exact whatever the tokenizer; the ids are
    the model's own tokens for an ordinary sentence, repeated. cache_prompt false so the
    whole prompt is really evaluated.
    """
    import httpx

    t0 = time.monotonic()
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=5.0)) as client:
            r = client.post(f"{endpoint}/tokenize", json={"content": FILL_TEXT * 8})
            r.raise_for_status()
            unit = [t for t in r.json().get("tokens", ()) if isinstance(t, int)]
            if not unit:
                return False, "the engine tokenized the fill text to nothing"
            ids = (unit * (n_tokens // len(unit) + 1))[:n_tokens]
            r = client.post(f"{endpoint}/completion",
                            json={"prompt": ids, "n_predict": 4, "cache_prompt": False})
            if r.status_code != 200:
                return False, f"the request failed with HTTP {r.status_code}: {r.text[:200]}"
            done = r.json()
    except httpx.TimeoutException:
        return False, f"the full-context request did not finish within {timeout_s:.0f} s"
    except httpx.HTTPError as exc:
        code = popen.poll()
        if code is not None:
            return False, f"the engine exited with code {code} during the full-context request"
        return False, f"the full-context request failed ({type(exc).__name__})"
    evaluated = done.get("tokens_evaluated")
    if isinstance(evaluated, int) and evaluated < n_tokens:
        return False, f"the engine evaluated only {evaluated} of {n_tokens} prompt tokens"
    return True, f"served {n_tokens} prompt tokens in {time.monotonic() - t0:.1f} s"


def _wait_for_text(log_path: Path, popen, needle: str, timeout_s: float) -> tuple[bool, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if needle in log_path.read_text(encoding="utf-8", errors="replace"):
            return True, "projection printed"
        code = popen.poll()
        if code is not None:
            return False, f"exited with code {code} before the projection"
        time.sleep(0.01)
    return False, f"no projection within {timeout_s:.0f} s"


def _stop(popen, kill: bool) -> int | None:
    """SIGTERM (or SIGKILL for a dry run, whose real load we do not want), then reap."""
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            popen.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(5)
    return popen.returncode


def measure_dry_run(binary, model, ctx: int, **settings) -> ProbeResult:
    """The engine's own projection for these settings, without loading the weights.

    Runs llama-server until `common_fit_params` has printed its memory breakdown (a no_alloc
    load: metadata and tensor shapes only) and kills it before the real load. Works for
    sparse files whose tensor data is a hole; a file cut short after its header is refused
    by the engine ("data is not within the file bounds") even in the dry run.

    Chosen over the `llama-fit-params` tool of the same sdist because that tool is not part
    of an engine build Stoker installs (building it is 4 more ninja steps, ~20-40 s on 2
    cores, and users' own builds may lack it), and its output is the same breakdown that
    llama-server prints itself (`common_fit_print` / `common_memory_breakdown_print`).
    """
    return run_probe(binary, model, ctx=ctx, dry_run=True, **settings)
