"""What reading an engine's output costs Stoker's process per request (Linux).

llama-server at `-lv 4` (what Stoker runs, for the load lines diagnosis reads) prints about
50 lines for each request it answers. This starts the demo engine the way Stoker does
(EngineProcess, 16 slots), sends N one-token /completion requests, and prints the CPU time
of the thread that reads the engine's output, per request, from /proc.

    python docs/measurements/engine_log_cpu.py ENGINE MODEL [N]
"""
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.process import EngineProcess, free_loopback_port


def thread_cpu_s(native_id: int) -> float:
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    binary, model = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    port = free_loopback_port()
    argv = (binary, "-lv", "4", "-m", model, "--host", "127.0.0.1", "--port", str(port),
            "-c", "4096", "-np", "16", "-t", "1", "--no-webui")
    spec = LaunchSpec(binary=binary, argv=argv, env=(), drop_env_prefixes=("LLAMA_ARG_",),
                      secret_env=(), host="127.0.0.1", port=port)
    with tempfile.TemporaryDirectory() as logs:
        proc = EngineProcess.start(spec, log_dir=Path(logs))
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    with urllib.request.urlopen(url + "/health", timeout=1) as r:
                        if r.status == 200:
                            break
                except OSError:
                    time.sleep(0.1)
            body = json.dumps({"prompt": "Hello", "n_predict": 1, "temperature": 0}).encode()
            ask = urllib.request.Request(url + "/completion", data=body,
                                         headers={"Content-Type": "application/json"})
            for _ in range(10):
                urllib.request.urlopen(ask).read()
            time.sleep(0.5)
            reader = proc._reader.native_id  # the engine-output thread
            assert reader is not None
            lines0, cpu0 = len(Path(logs).joinpath(os.listdir(logs)[0]).read_text().splitlines()), thread_cpu_s(reader)
            for _ in range(n):
                urllib.request.urlopen(ask).read()
            time.sleep(0.5)
            lines1, cpu1 = len(Path(logs).joinpath(os.listdir(logs)[0]).read_text().splitlines()), thread_cpu_s(reader)
        finally:
            proc.stop()
    print(f"{n} requests: {(lines1 - lines0) / n:.1f} engine lines per request, "
          f"{(cpu1 - cpu0) / n * 1e6:.0f} µs of the reader thread's CPU per request")


if __name__ == "__main__":
    main()
