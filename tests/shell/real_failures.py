"""Make the real llama-server fail in the ways a user meets, and capture what it says.

Each `make_*` function runs the real engine once (CPU build, demo model) into a failure
and returns the captured log lines and exit status. tests/shell/test_real_failures.py runs
them live; `python -m tests.shell.real_failures BINARY MODEL OUTDIR` writes the same
captures as fixtures (tests/data/logs), so `stoker diagnose` tests work without a build.
Only one engine runs at a time; each one takes well under a few seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from stoker.engines.process import free_loopback_port

TIMEOUT_S = 60
# A context far past what 300 MiB holds: the KV cache of the demo model at 65536 tokens is
# 1440 MiB, so the allocation (address-space limit) or the memset (cgroup limit) fails.
BIG_CTX = "65536"


@dataclass(frozen=True)
class Captured:
    name: str
    lines: tuple[str, ...]
    returncode: int
    oom_killed: bool | None = None

    @property
    def exit_code(self) -> int | None:
        return None if self.returncode < 0 else self.returncode

    @property
    def signal(self) -> str | None:
        return signal.Signals(-self.returncode).name if self.returncode < 0 else None


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_", "GGML_"))}
    xdg = tmp / "xdg"
    xdg.mkdir(parents=True, exist_ok=True)
    env.update(XDG_CONFIG_HOME=str(xdg), GGML_NO_BACKTRACE="1")
    return env


def _argv(binary, model, port, *extra) -> list[str]:
    return [str(binary), "-lv", "4", "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", "2048", "-np", "1", "--no-webui", *extra]


def _run(name, argv, tmp: Path, preexec=None, oom_probe=None) -> Captured:
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=_env(tmp), timeout=TIMEOUT_S,
                       preexec_fn=preexec)
    lines = tuple(p.stdout.decode("utf-8", "replace").splitlines())
    return Captured(name, lines, p.returncode, oom_probe() if oom_probe else None)


def make_truncated_model(binary, model, tmp: Path) -> Captured:
    """The first 1 MB of the demo model: the header's key-value pairs are cut off."""
    cut = tmp / "truncated.gguf"
    with open(model, "rb") as src:
        cut.write_bytes(src.read(1_000_000))
    return _run("truncated-gguf", _argv(binary, cut, free_loopback_port()), tmp)


def make_port_in_use(binary, model, tmp: Path) -> Captured:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        return _run("port-in-use", _argv(binary, model, port), tmp)


def make_unknown_flag(binary, model, tmp: Path) -> Captured:
    return _run("unknown-flag", _argv(binary, model, free_loopback_port(), "--no-mmap"), tmp)


def make_missing_library(binary, model, tmp: Path) -> Captured:
    """The binary copied alone, without the libllama/libggml*.so that sit beside it."""
    lonely = tmp / "lonely"
    lonely.mkdir(exist_ok=True)
    copy = lonely / Path(binary).name
    shutil.copy2(binary, copy)
    return _run("missing-library", _argv(copy, model, free_loopback_port()), tmp)


def make_host_oom_rlimit(binary, model, tmp: Path) -> Captured:
    """An address-space limit (prlimit --as) of 400 MiB: the KV allocation really fails."""
    import resource

    limit = 400 * 1024 * 1024

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    argv = _argv(binary, model, free_loopback_port(), "-c", BIG_CTX)
    return _run("host-oom-rlimit", argv, tmp, preexec=cap)


CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


def memory_cgroup(name: str, limit_bytes: int) -> Path | None:
    """A cgroup-v1 memory group with a limit, or None where this machine does not allow it."""
    group = CGROUP_ROOT / name
    try:
        group.mkdir(exist_ok=True)
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
        (group / "memory.oom_control").read_text()
    except OSError:
        return None
    return group


def oom_kill_count(group: Path) -> int:
    for line in (group / "memory.oom_control").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def make_host_oom_cgroup(binary, model, tmp: Path) -> Captured | None:
    """A 300 MiB memory cgroup: the kernel's OOM killer really ends the engine (SIGKILL)."""
    group = memory_cgroup(f"stoker-test-{os.getpid()}", 300 * 1024 * 1024)
    if group is None:
        return None
    before = oom_kill_count(group)
    procs = str(group / "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    try:
        argv = _argv(binary, model, free_loopback_port(), "-c", BIG_CTX)
        return _run("host-oom-cgroup", argv, tmp, preexec=join,
                    oom_probe=lambda: oom_kill_count(group) > before)
    finally:
        with contextlib.suppress(OSError):
            group.rmdir()


def make_drafter_failure(binary, model, tmp: Path) -> Captured:
    """A draft model cut short: the target loads, the drafter does not."""
    cut = tmp / "draft-truncated.gguf"
    with open(model, "rb") as src:
        cut.write_bytes(src.read(1_000_000))
    argv = _argv(binary, model, free_loopback_port(), "-md", str(cut), "--spec-type", "draft-simple")
    return _run("drafter-truncated", argv, tmp)


MAKERS = {
    "truncated-gguf": (make_truncated_model, dict(kind="bad-model", phase="starting")),
    "port-in-use": (make_port_in_use, dict(kind="port-in-use", phase="starting")),
    "unknown-flag": (make_unknown_flag, dict(kind="bad-argument", phase="starting")),
    "missing-library": (make_missing_library, dict(kind="missing-library", phase="starting")),
    "host-oom-rlimit": (make_host_oom_rlimit, dict(kind="host-oom", phase="starting")),
    "host-oom-cgroup": (make_host_oom_cgroup, dict(kind="host-oom", phase="starting")),
    "drafter-truncated": (make_drafter_failure, dict(kind="drafter-failure", phase="starting", has_drafter=True)),
}


def main(argv: list[str]) -> int:
    binary, model, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / "cases.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"stoker-capture-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    for name, (make, facts) in MAKERS.items():
        cap = make(binary, model, tmp)
        if cap is None:
            print(f"{name}: not possible on this machine", file=sys.stderr)
            continue
        # Paths of this machine would only be noise in a fixture.
        text = "\n".join(cap.lines).replace(str(tmp), "/tmp/capture").replace(
            str(model.parent), "/models") + "\n"
        (out / f"{name}.log").write_text(text)
        index[name] = dict(facts, exit_code=cap.exit_code, signal=cap.signal,
                           oom_killed=cap.oom_killed, backend="cpu",
                           source="captured from the real llama-server b11434 CPU build")
        print(f"{name}: returncode {cap.returncode}, {len(cap.lines)} lines")
    index_path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
