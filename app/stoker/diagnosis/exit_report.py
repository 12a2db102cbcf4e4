"""What is known of one engine process that ended, and what Stoker tells a person about it.

`ExitReport` is the facts the shell gathers (exit code or signal, who sent it, the phase, the log
tail, the build's backend); `Incident` is the reading classify.py returns (kind, title, evidence,
advice, what it means for the build). They live apart from the classifier so that the words
(incident_words.py), the classifier and the fleet share them without importing one another.

Pure: frozen values and the exit's description; it must not decide a kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from stoker.diagnosis.exit_codes import NO_EXIT_CODE, SIGNAL_MEANING, describe_exit_code, ntstatus_of, signal_name


@dataclass(frozen=True)
class ExitReport:
    exit_code: int | None  # the process's exit status; None when a signal ended it or unknown
    signal: str | None  # "SIGKILL" …; None when it exited by itself or unknown
    signalled_by_us: bool
    phase: str  # starting | ready | stopping
    uptime_s: float | None
    log_tail: tuple[str, ...]
    backend: str | None  # cuda | rocm | vulkan | metal | cpu; None when unknown
    plan_wanted_gpu: bool = False
    has_drafter: bool = False
    drafter_forced: bool = False  # the user chose the drafter, not the catalog
    os: str = "linux"  # linux | darwin | windows
    oom_killed: bool | None = None  # the kernel OOM killer fired for it; None when unknown
    timed_out: bool = False  # we killed it because it never became ready in time


@dataclass(frozen=True)
class Incident:
    kind: str  # one of KINDS
    title: str  # one sentence
    evidence: str  # the log line that shows it, or the exit description
    advice: str  # what a person can do
    counts_as_strike: bool
    recoverable_by: str | None  # smaller-plan | drop-drafter | next-build | None
    exit_description: str | None  # None when no process ended (a start-up timeout, a refused start)
    # How it was decided (stoker diagnose --json shows these): the order rule or exit rule
    # that decided, every log line read as evidence, and on a conflict the two kinds in it.
    rule: str | None = None
    evidence_lines: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()


def describe_exit(report: ExitReport) -> str:
    if report.signal:
        meaning = SIGNAL_MEANING.get(report.signal)
        who = " sent by Stoker" if report.signalled_by_us else ""
        text = f"ended by {report.signal}{who}" + (f" ({meaning})" if meaning else "")
    else:
        text = describe_exit_code(report.exit_code, report.os)
    when = {"starting": "while starting", "ready": "while serving",
            "stopping": "while stopping"}.get(report.phase, "")
    if report.uptime_s is not None:
        when += f" after {report.uptime_s:.1f} s"
    return f"{text} {when}".strip()


def effective_signal(report: ExitReport) -> str | None:
    """The signal that ended the process: given, or read from a shell's or docker's exit code."""
    if report.signal:
        return report.signal
    code = report.exit_code
    if code is None or report.os == "windows":
        return None
    if code < 0 and code != NO_EXIT_CODE and ntstatus_of(code) is None:
        return signal_name(-code, report.os)
    if 128 < code < 160:
        return signal_name(code - 128, report.os)  # a shell's or docker's way (137 = SIGKILL)
    return None
