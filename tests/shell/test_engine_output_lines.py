"""EngineProcess splits output at `\\n`, `\\r\\n` and a lone `\\r`, as it arrives.

sd-server and ds4 repaint progress with `\\r` and print a newline only at the end of a render
or prefill; a `\\r\\n` split across two reads must still be one line end.
"""

from __future__ import annotations

import sys

from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.process import EngineProcess
from tests.helpers.waiting import wait_until

# The child writes each piece as its own read (a slow writer), then stays up until the test
# has seen "step 1/3" and made the go file, so a line held back until exit cannot pass.
CHILD = r"""
import os, sys, time
out = sys.stdout.buffer
for piece in (b"first\r\n", b"step 1/3\r", b"step 2/3\r", b"ends with cr\r", b"\nafter", b"\n"):
    out.write(piece); out.flush(); time.sleep(0.15)  # simulates a slow peer: one read per piece
out.write(b"step 3/3\r"); out.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)  # paces the poll for the go file
"""


def test_lone_carriage_returns_end_lines_as_they_arrive(tmp_path):
    go = tmp_path / "go"
    spec = LaunchSpec(binary=sys.executable, argv=(sys.executable, "-c", CHILD, str(go)), env=(),
                      drop_env_prefixes=(), secret_env=(), host="127.0.0.1", port=1)
    proc = EngineProcess.start(spec, log_dir=tmp_path, run_dir=tmp_path)
    try:
        # "step 1/3" was followed by the next repaint: it is a line already, while the child runs.
        assert wait_until(lambda: "step 1/3" in proc.tail(), 30), proc.tail()
        assert proc.poll() is None
        go.touch()
        proc.wait(timeout=30)
        # The last repaint ends at the end of the output, once the reader has read to it.
        want = ("first", "step 1/3", "step 2/3", "ends with cr", "after", "step 3/3")
        assert wait_until(lambda: proc.tail() == want, 30), proc.tail()
    finally:
        proc.stop(grace_s=1)
