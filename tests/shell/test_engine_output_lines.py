"""EngineProcess splits output at `\\n`, `\\r\\n` and a lone `\\r`, as it arrives.

sd-server and ds4 repaint progress with `\\r` and print a newline only at the end of a render
or prefill; a `\\r\\n` split across two reads must still be one line end.
"""

from __future__ import annotations

import sys
import time

from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.process import EngineProcess

CHILD = r"""
import sys, time
out = sys.stdout.buffer
for piece in (b"first\r\n", b"step 1/3\r", b"step 2/3\r", b"ends with cr\r", b"\nafter", b"\n"):
    out.write(piece); out.flush(); time.sleep(0.15)
out.write(b"step 3/3\r"); out.flush()
time.sleep(1.0)
"""


def test_lone_carriage_returns_end_lines_as_they_arrive(tmp_path):
    spec = LaunchSpec(binary=sys.executable, argv=(sys.executable, "-c", CHILD), env=(), drop_env_prefixes=(),
                      secret_env=(), host="127.0.0.1", port=1)
    proc = EngineProcess.start(spec, log_dir=tmp_path, run_dir=tmp_path)
    try:
        time.sleep(0.45)  # "step 1/3" has been followed by the next repaint: it is a line already
        assert "step 1/3" in proc.tail()
        proc.wait(timeout=10)
        time.sleep(0.2)
        assert proc.tail() == ("first", "step 1/3", "step 2/3", "ends with cr", "after", "step 3/3")
    finally:
        proc.stop(grace_s=1)
