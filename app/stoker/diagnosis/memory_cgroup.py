"""A memory cgroup of the engine's own: a real RAM limit, for tests of the OOM recovery ladder.

RLIMIT_AS limits address space, which counts thread stacks, allocator arenas and mapped
files that vary from run to run, so a launch that fits standalone failed inside pytest. A
memory cgroup limits what the engine really keeps in RAM: when the KV cache is touched
past the limit the kernel's OOM killer ends the engine (SIGKILL, the group's oom_kill
counter goes up), exactly the failure a full machine gives. Linux only, and only where
the cgroup tree is writable (root, or a delegated v2 subtree); `available()` says so.
This module makes and removes groups; it does not decide when to use one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

from stoker.diagnosis.oom_evidence import oom_kill_count

CGROUP_ROOT = Path("/sys/fs/cgroup")
_ids = itertools.count()


def _roots(root: Path = CGROUP_ROOT) -> list[tuple[Path, int]]:
    """Candidate parents: the v1 memory hierarchy, then a v2 tree with the memory controller."""
    found = []
    if (root / "memory" / "memory.limit_in_bytes").is_file():
        found.append((root / "memory", 1))
    for v2 in (root, root / "unified"):
        try:
            if "memory" in (v2 / "cgroup.subtree_control").read_text().split():
                found.append((v2, 2))
        except OSError:
            continue
    return found


class MemoryCgroup:
    """One group with a limit. `enter_fn()` gives a preexec function that moves the child in."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @classmethod
    def create(cls, limit_bytes: int, root: Path = CGROUP_ROOT) -> MemoryCgroup:
        """A new group limited to `limit_bytes` (swap included); OSError when none can be made."""
        last: OSError | None = None
        for parent, version in _roots(root):
            path = parent / f"stoker-engine-{os.getpid()}-{next(_ids)}"
            try:
                path.mkdir()
            except OSError as exc:
                last = exc
                continue
            group = cls(path, version)
            try:
                group._set_limit(limit_bytes)
            except OSError as exc:
                group.remove()
                last = exc
                continue
            return group
        raise OSError(f"no writable memory cgroup for the engine ({last or 'no memory controller'}); "
                      "run as root or delegate a cgroup v2 subtree")

    def _set_limit(self, limit: int) -> None:
        set_memory_limit(self.path, self.version, limit)

    def enter_fn(self):
        """A preexec function: the child writes itself into the group before it execs.

        It only does raw os calls on a path prepared here (no imports, no allocation of
        Python objects that could take a lock another thread held at fork time).
        """
        procs = os.fsencode(str(self.path / "cgroup.procs"))

        def enter() -> None:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0" is the writing process itself, v1 and v2 alike
            finally:
                os.close(fd)

        return enter

    def oom_kills(self) -> int | None:
        """The group's OOM-kill count (v1 memory.oom_control, v2 memory.events), or None."""

        return oom_kill_count(self.path)

    def remove(self) -> None:
        """Remove the group once its processes are gone; a group still busy is left (empty soon)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


def available(root: Path = CGROUP_ROOT) -> bool:
    """Whether a memory cgroup can be made here right now (tests skip without one)."""
    try:
        MemoryCgroup.create(1 << 30, root).remove()
    except OSError:
        return False
    return True


def set_memory_limit(path: Path, version: int, limit: int) -> None:
    """Cap a group's memory (v1 or v2) and close the escape into swap where the kernel allows."""
    if version == 1:
        (path / "memory.limit_in_bytes").write_text(str(limit))
        sw = path / "memory.memsw.limit_in_bytes"
        if sw.exists():
            with contextlib.suppress(OSError):  # swap accounting off: there is no swap to escape into
                sw.write_text(str(limit))
    else:
        (path / "memory.max").write_text(str(limit))
        if (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
