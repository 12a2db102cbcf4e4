#!/usr/bin/env python3
"""A stand-in for antirez/ds4's `ds4-server`, for tests on machines that cannot run ds4.

ds4 needs a Metal or CUDA GPU and a model of tens of GiB, so no CPU test can start it. This
script takes ds4-server's command line (the flags Stoker passes; anything else is refused
with ds4's own message and exit code 2), prints the startup and request output of real ds4
runs (tests/data/ds4/, copied from public antirez/ds4 threads) with only the values that
echo its arguments replaced, and serves `/v1/models` and `/v1/chat/completions` on the
given loopback port. Its KV term scales with --ctx as ds4's does, and in streaming mode its
planned total includes the expert cache it was given, so a measured line taken from it has
the shape a real one has.

Knobs (environment): FAKE_DS4_STARTUP_S delays `listening on` (default 0.3 s);
FAKE_DS4_RECORD=<file> appends the argv and working directory as one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VALUE_FLAGS = {"-m": "model", "--model": "model", "-c": "ctx", "--ctx": "ctx", "--host": "host",
               "--port": "port", "--kv-disk-dir": "kv_dir", "--kv-disk-space-mb": "kv_mb",
               "--ssd-streaming-cache-experts": "cache"}
BARE_FLAGS = {"--metal": "metal", "--cuda": "cuda", "--cors": "cors", "--ssd-streaming": "ssd"}


def say(line: str, *, stamp: bool = False, end: str = "\n") -> None:
    # server_log lines carry ds4's `MMDD HH:MM:SS ` stamp; ds4.c's fprintf(stderr) lines do not.
    prefix = time.strftime("%m%d %H:%M:%S ") if stamp else ""
    sys.stderr.write(prefix + line + end)
    sys.stderr.flush()


def parse(argv: list[str]) -> dict:
    opts: dict = {"model": "ds4flash.gguf", "ctx": "32768", "host": "127.0.0.1", "port": "8000", "kv_mb": "4096"}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in VALUE_FLAGS:
            if i + 1 >= len(argv):
                say(f"ds4-server: missing value for {a}", stamp=True)
                sys.exit(2)
            opts[VALUE_FLAGS[a]] = argv[i + 1]
            i += 2
            continue
        if a in BARE_FLAGS:
            opts[BARE_FLAGS[a]] = True
            i += 1
            continue
        say(f"ds4-server: unknown option: {a}", stamp=True)
        sys.exit(2)
    return opts


def main() -> int:
    opts = parse(sys.argv[1:])
    record = os.environ.get("FAKE_DS4_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as f:
            f.write(json.dumps({"argv": sys.argv, "cwd": os.getcwd()}) + "\n")
    if not os.path.isfile(opts["model"]):
        say(f"ds4: failed to open {opts['model']}: No such file or directory")
        return 1
    ctx = int(opts["ctx"])
    cache_gib = float(opts["cache"].removesuffix("GB")) if opts.get("cache") else None
    if opts.get("cuda"):  # issue #554, NVIDIA L40S
        say("ds4: Linux cuda backend set oom_score_adj=1000")
        say("ds4: CUDA backend initialized on NVIDIA L40S (sm_89)")
        say("ds4: CUDA registered 80.76 GiB model mapping for device access")
        say("ds4: CUDA preparing model tensor mappings: 80.24 GiB")
        say("ds4: CUDA startup model preparation covered 80.76 GiB of tensor spans in 0.033s")
        say("ds4: cuda backend initialized for graph diagnostics")
        backend = "cuda"
    else:  # issue #929, Apple Silicon
        say("ds4: Metal model views created in 114860034.874 ms, residency requested in 0.008 ms, "
            "warmup 0.000 ms (mapped 889.64 MiB from offset 0.02 MiB)")
        say("ds4: metal backend initialized for graph diagnostics")
        backend = "metal"
    # ds4's memory line (issue #929, ctx 32768): the KV term grows with the window.
    kv = 0.61 * ctx / 32768
    raw, comp = 0.36 * ctx / 32768, 0.25 * ctx / 32768
    resident = 9.37 + cache_gib if opts.get("ssd") and cache_gib is not None else 42.34
    say(f"ds4: memory: KV {kv:.2f} GiB (raw {raw:.2f} + compressed {comp:.2f}) + buffers 0.25 GiB + "
        f"resident model {resident:.2f} GiB = {kv + 0.25 + resident:.2f} GiB planned")
    say(f"ds4: memory detail: ctx={ctx} prefill_cap=4096 raw_kv_rows=4352 compressed_kv_rows=8194 backend={backend}")
    say(f"ds4-server: context buffers 1061.71 MiB (ctx={ctx}, backend={backend}, prefill_chunk=2048, "
        f"raw_kv_rows=2304, compressed_kv_rows=8194)", stamp=True)
    if opts.get("kv_dir"):
        os.makedirs(opts["kv_dir"], exist_ok=True)
        say(f"ds4-server: KV disk cache {opts['kv_dir']} (budget={opts['kv_mb']} MiB, cross-quant=accept, min=512, "
            "cold_max=30000, continued=10000, trim=32, align=2048, hit_half_life=21600s)", stamp=True)
    time.sleep(float(os.environ.get("FAKE_DS4_STARTUP_S", "0.3")))  # simulates a slow peer: ds4's warm-up

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # ds4 does not log every request
            pass

        def reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if opts.get("cors"):
                self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self.reply(200, {"object": "list", "data": [{"id": "deepseek-v4-flash", "object": "model",
                                                            "owned_by": "ds4"}]})
            else:
                self.reply(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path != "/v1/chat/completions":
                self.reply(404, {"error": {"message": "not found"}})
                return
            n = 10341  # the prompt of PR #818's log
            span = f"0..{n}:{n}"
            say(f"ds4-server: chat ctx={span} TOOLS prompt start", stamp=True)
            say(f"ds4-server: chat ctx={span} TOOLS prefill chunk 1024/{n} (9.9%) chunk=0.00 t/s avg=58.85 t/s 17.400s",
                stamp=True)
            # ds4.c repaints its core progress with \r (one terminal line, many states).
            for layer in (1, 2, 43):
                say(f"ds4: gpu prefill token 3/3 layer {layer}/43", end="\r")
            say(f"ds4-server: chat ctx={span} TOOLS prefill chunk 5120/{n} (49.5%) chunk=227.12 t/s avg=144.49 t/s "
                "35.434s", stamp=True)
            say(f"ds4-server: chat ctx={n}..{n + 50}:50 gen=50 TOOLS decoding chunk=5.95 t/s avg=5.96 t/s 8.401s",
                stamp=True)
            self.reply(200, {"id": "chatcmpl-ds4", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "Hello from ds4."}}]})

    server = ThreadingHTTPServer((opts["host"], int(opts["port"])), Handler)
    say(f"ds4-server: listening on http://{opts['host']}:{opts['port']}", stamp=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.exit(main())
