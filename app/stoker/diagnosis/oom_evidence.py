"""Whether the kernel's OOM killer ended an engine: the memory cgroup's oom_kill counter.

The OOM killer writes nothing into the engine's log; the process just dies of SIGKILL.
The engine's memory cgroup counts OOM kills (cgroup v2 `memory.events`, v1
`memory.oom_control`), so a counter that went up between spawn and exit says it was the
kernel, not some other program. Unknown (None) where there is no readable cgroup (macOS,
Windows, locked-down containers): diagnosis then falls back to "SIGKILL from outside with
no error line". Resolve the group right after spawn: once the process is gone,
/proc/<pid>/cgroup is gone too.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def memory_cgroup_of(pid: int, proc: Path = Path("/proc"), root: Path = CGROUP_ROOT) -> Path | None:
    """The folder of the memory cgroup `pid` is in, or None when unknown."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    v2 = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if "memory" in controllers.split(","):
            group = root / "memory" / rel.lstrip("/")
            if group.is_dir():
                return group
        if controllers == "":
            v2 = root / rel.lstrip("/")
    if v2 is not None and (v2 / "memory.events").is_file():
        return v2
    return None


def oom_kill_count(group: Path | None) -> int | None:
    """The group's OOM-kill counter, or None when it cannot be read."""
    if group is None:
        return None
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (group / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


class OomWatch:
    """Take the counter at spawn, ask after exit: `killed_by_oom()` -> True/False/None."""

    def __init__(self, pid: int):
        self.group = memory_cgroup_of(pid)
        self.before = oom_kill_count(self.group)

    def killed_by_oom(self) -> bool | None:
        after = oom_kill_count(self.group)
        if self.before is None or after is None:
            return None
        return after > self.before
