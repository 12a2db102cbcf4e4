"""How one engine process ended, as a value: what the process runner (stoker/engines/process.py)
reports, diagnosis classifies and the fleet's lifecycle reacts to. It lives in engines
because the process that measures it does; nothing here signals, waits or reads a file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineExit:
    """How one engine process ended; what diagnosis (stoker/diagnosis/classify.py) classifies."""

    pid: int | None
    exit_code: int | None  # None when a signal ended it
    signal: int | None  # POSIX signal number that ended it, else None
    signalled_by_us: bool  # Stoker sent the stop/kill (an expected exit)
    phase: str  # "starting" (never answered /health 200) or "ready"
    uptime_s: float | None  # since spawn
    ready_for_s: float | None  # how long it was READY; None if it never was
    log_tail: tuple[str, ...] = ()
    oom_killed: bool | None = None  # the kernel OOM killer ended it; None when unknown
    # Set by the shell from diagnosis when the same launch would fail the same way again
    # (a bad argument, a broken model file): a sentence saying why, and no retry loop.
    hopeless: str | None = None

    def describe(self) -> str:
        how = f"was ended by signal {self.signal}" if self.signal is not None else f"exited with code {self.exit_code}"
        return f"the engine {how} while {self.phase}"
