"""What an exit says by itself: signal names and meanings, the NTSTATUS codes in their hex,
unsigned and signed decimal forms, a shell's 128+N, and the exit lines wrappers and shells write
into a log (Go's `exit status`, LM Studio's `Exit code`, docker's, systemd's), read back when the
caller does not know how the process ended.

Pure: no files, no clock, no processes. Naming the failure from the exit and the log together is
classify.py's; this module only decodes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stoker.diagnosis.log_lines import strip_log_prefix

# Linux numbering; darwin differs for a few (below).
_LINUX_SIGNALS = {
    1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
    7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
    13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ", 31: "SIGSYS",
}
_DARWIN_SIGNALS = {**_LINUX_SIGNALS, 7: "SIGEMT", 10: "SIGBUS", 12: "SIGSYS", 30: "SIGUSR1",
                   31: "SIGUSR2"}
SIGNAL_MEANING = {
    "SIGILL": "an instruction this CPU (or GPU library) cannot run",
    "SIGABRT": "the engine aborted itself after an error",
    "SIGKILL": "killed outright",
    "SIGSEGV": "a crash (invalid memory access)",
    "SIGBUS": "a crash (bad memory access, e.g. a model file that shrank while mapped)",
    "SIGTERM": "asked to stop",
    "SIGINT": "interrupted",
    "SIGFPE": "an arithmetic fault",
    "SIGTRAP": "a trap (a GPU kernel without code for this device, or a debugger)",
}

# NTSTATUS codes a Windows process ends with, and what they mean to a user.
NTSTATUS = {
    0xC0000005: ("STATUS_ACCESS_VIOLATION", "a crash (invalid memory access)"),
    0xC0000409: ("STATUS_STACK_BUFFER_OVERRUN", "a fast-fail abort: the engine stopped itself "
                 "after an error it could not handle"),
    0xC000001D: ("STATUS_ILLEGAL_INSTRUCTION", "an instruction this CPU cannot run"),
    0xC0000135: ("STATUS_DLL_NOT_FOUND", "a DLL the engine needs was not found"),
    0xC0000142: ("STATUS_DLL_INIT_FAILED", "a DLL failed to initialise (often a missing or "
                 "mismatched Visual C++ runtime)"),
    0xC00000FD: ("STATUS_STACK_OVERFLOW", "a stack overflow"),
    0xC0000017: ("STATUS_NO_MEMORY", "Windows could not give it more memory"),
    0xC000012D: ("STATUS_COMMITMENT_LIMIT", "the system ran out of memory (page file full)"),
    0xC0000374: ("STATUS_HEAP_CORRUPTION", "heap corruption"),
    0xC0000094: ("STATUS_INTEGER_DIVIDE_BY_ZERO", "an integer division by zero"),
    0xC000013A: ("STATUS_CONTROL_C_EXIT", "stopped with Ctrl+C"),
    0xC0000139: ("STATUS_ENTRYPOINT_NOT_FOUND", "a DLL is the wrong version (missing entry point)"),
    0xE06D7363: ("an uncaught C++ exception", "the engine stopped on an error it did not catch"),
    0xC0000006: ("STATUS_IN_PAGE_ERROR", "a mapped file could not be read (disk or network error)"),
    0xC000007B: ("STATUS_INVALID_IMAGE_FORMAT", "a DLL of the wrong architecture (often a 32-bit copy "
                 "found first on PATH) or a damaged one was loaded"),
}
# STATUS_INTEGER_DIVIDE_BY_ZERO and STATUS_INTEGER_OVERFLOW: the engine's own arithmetic trapped
# (a divisor it read from a model field and never checked: ollama#16479, a projector's n_head of 0),
# a defect of the engine like a failed assertion; SIGFPE is the same elsewhere.
ARITHMETIC_TRAPS = frozenset({0xC0000094, 0xC0000095})
NTSTATUS_KIND = {
    0xC000001D: "illegal-instruction", 0xC0000135: "missing-library",
    0xC0000142: "missing-library",
    # The DLL was found but lacks an entry point: another version of it shadows the build's own.
    0xC0000139: "stale-library", 0xC000007B: "stale-library",
    0xC0000017: "host-oom", 0xC000012D: "host-oom",
    **{status: "assertion-failed" for status in ARITHMETIC_TRAPS},
}
# Error-severity NTSTATUS values (and 0xE06D7363, an uncaught C++ exception); the range
# stops short of 0xFFFFFFxx so a POSIX -9 read as unsigned is never taken for one.
_NT_LOW, _NT_HIGH = 0xC0000000, 0xEFFFFFFF
_U64_BASE = 2**64 - 2**32  # a 32-bit NTSTATUS sign-extended, then read as unsigned 64-bit
# Values like 18446744072635812000 went through a double on their way to the user
# (spacing 4096 at that size), so they are matched to a known code within half a step.
_FLOAT_SLACK = 2048


def ntstatus_of(code: int) -> int | None:
    """The NTSTATUS a Windows exit code carries, from any of the forms it reaches us in.

    Unsigned 32-bit (3221226505), signed 32-bit (-1073740791), sign-extended unsigned
    64-bit (18446744072635810825) and that number rounded through a double
    (18446744072635812000) all give 0xC0000409. None when the code is not an NTSTATUS.
    """
    if -(2**31) <= code < 0:
        code &= 0xFFFFFFFF
    if _NT_LOW <= code <= _NT_HIGH:
        return code
    if code > 0xFFFFFFFF:
        low = code - _U64_BASE
        if low in NTSTATUS:
            return low
        near = [k for k in NTSTATUS if abs(low - k) <= _FLOAT_SLACK]
        if near:
            return min(near, key=lambda k: abs(low - k))
        if _NT_LOW <= low <= _NT_HIGH:
            return low
    return None


def signal_name(number: int, os: str = "linux") -> str:
    """`9` -> "SIGKILL" (numbers differ between Linux and macOS)."""
    table = _DARWIN_SIGNALS if os == "darwin" else _LINUX_SIGNALS
    return table.get(number, f"signal {number}")


# A wrapper's -1 is "no exit code", never signal 1: Go's os.ProcessState.ExitCode() returns -1 for
# a process a signal ended (Ollama, llama-swap), and Rust wrappers print ExitStatus::code()'s None
# as -1 (tabby's `exited with status code -1`). Python's returncode -N is signal N, but Stoker's
# own supervisor passes signals by name, so a -1 given to diagnosis is a wrapper's.
NO_EXIT_CODE = -1


def describe_exit_code(code: int | None, os: str = "linux") -> str:
    """One phrase for an exit status: decodes NTSTATUS forms, negative POSIX returncodes
    (a signal) and a shell's 128+N."""
    if code is None:
        return "the exit status is unknown"
    status = ntstatus_of(code)
    if status is not None:
        name, meaning = NTSTATUS.get(status, ("an NTSTATUS error", "a Windows error"))
        return f"exit code 0x{status:08X} ({name}: {meaning})"
    if code == NO_EXIT_CODE and os != "windows":
        return ("exit code -1 (a wrapper's word for no exit code: Go's ExitCode() and Rust wrappers give it "
                "for a process a signal ended, without saying which)")
    if code < 0 and os != "windows":
        sig = signal_name(-code, os)
        sig_meaning = SIGNAL_MEANING.get(sig)
        return f"ended by {sig}" + (f" ({sig_meaning})" if sig_meaning else "")
    if code == 0:
        return "exit code 0 (a normal exit)"
    if code == 127 and os != "windows":
        return "exit code 127 (the program or one of its shared libraries could not be loaded)"
    if 128 < code < 160 and os != "windows":
        sig = signal_name(code - 128, os)
        return f"exit code {code} (a shell's way of saying it was ended by {sig})"
    if code == 3 and os == "windows":
        return "exit code 3 (the engine aborted itself after an error)"
    return f"exit code {code}"


# How the process ended, as the wrapper around it (Ollama, LM Studio, llama-swap, tabby,
# docker, systemd, a shell) wrote it into the same log. Each pattern's group is the code
# or the signal word; `_exit_from_words` turns it into (exit_code, signal).
_SIGNAL_WORDS = {
    "killed": "SIGKILL", "kill": "SIGKILL", "aborted": "SIGABRT", "abort": "SIGABRT",
    "segmentation fault": "SIGSEGV", "terminated": "SIGTERM", "term": "SIGTERM",
    "illegal instruction": "SIGILL", "bus error": "SIGBUS", "interrupt": "SIGINT",
    "int": "SIGINT", "segv": "SIGSEGV", "ill": "SIGILL", "trace/breakpoint trap": "SIGTRAP",
    "trace/bpt trap": "SIGTRAP",
    "floating-point exception": "SIGFPE", "floating point exception": "SIGFPE",
}
_WRAPPER_EXIT = (
    # Go's os/exec (Ollama, llama-swap): `exit status 0xc0000135`, `signal: killed`
    re.compile(r"\bexit status (0x[0-9a-fA-F]+|-?\d+)"),
    re.compile(r"\bsignal: (killed|aborted|segmentation fault|terminated|illegal instruction"
               r"|bus error|interrupt|trace/breakpoint trap|floating point exception)", re.IGNORECASE),
    # older Ollama: `llama runner process no longer running: 3221226505`
    re.compile(r"process no longer running: (-?\d+)"),
    # llama-server's router mode (tools/server/server-models.cpp, b11434; Jan 0.8 runs it): its
    # child instance's end, `instance name=%s exited with status %d` (a Windows status signed)
    re.compile(r"\binstance name=\S+ exited with status (-?\d+)"),
    # LM Studio: `(Exit code: 18446744072635812000)`; launchers: `exited with code 137`,
    # `Process exited with code 1`, tabby: `exited with status code -1`
    re.compile(r"\bexit(?:ed)? (?:with )?(?:status )?code:? (-?\d+)", re.IGNORECASE),
    # systemd: `Main process exited, code=killed, status=9/KILL`, `status=1/FAILURE`
    re.compile(r"code=(?:killed|dumped), status=\d+/(KILL|ABRT|SEGV|ILL|TERM|INT)"),
    re.compile(r"code=exited, status=(\d+)/"),
    # a shell: `Illegal instruction (core dumped)`, `Aborted (core dumped)`, `Killed`,
    # `./entrypoint.sh: line 28:  7 Killed  ...`, zsh's `[1]  71063 abort  ./server`; bash
    # pads the signal's words to a column and then writes the command that took it
    # (jobs.c pretty_print_job: `Illegal instruction     (core dumped) LD_LIBRARY_PATH=… ./llama-server-bin`,
    # `Killed                  ./llama-server`), so a command may follow the core note or
    # two spaces; one space and more words is prose (`Killed process 1234`, `Aborted due to …`)
    re.compile(r"^\s*(Illegal instruction|Aborted|Segmentation fault|Killed|Bus error)"
               r"(?:\s*$|\s+\(core dumped\)(?:\s.*)?$|\s{2,}\S.*$)"),
    re.compile(r"line \d+:\s+\d+ (Killed|Aborted|Illegal instruction|Segmentation fault)\s"),
    # bash on macOS: the C library's signal words carry the number (`Illegal instruction: 4`,
    # `Segmentation fault: 11`, `Abort trap: 6`, `Killed: 9`, `Bus error: 10`, `Trace/BPT trap: 5`),
    # alone or in a script's `line N: PID …` report, the command after them; each word with its
    # own number (`Killed: 3 processes` is prose)
    re.compile(r"^\s*(?:\S+: line \d+:\s+\d+\s+)?(Illegal instruction(?=: 4\b)|Abort trap(?=: 6\b)"
               r"|Segmentation fault(?=: 11\b)|Killed(?=: 9\b)|Bus error(?=: 10\b)"
               r"|Floating point exception(?=: 8\b)|Trace/BPT trap(?=: 5\b))"),
    re.compile(r"^\[\d+\]\s+\d+ (abort|killed|segmentation fault|illegal)\w*\s"),
    # zsh's foreground job (Src/signames: `zsh: killed  ./llama-server`, `zsh: illegal hardware
    # instruction  ./main` on a Mac running an x86 build the CPU cannot), bash's finished
    # background job (`[1]+  Killed  ./llama-server`)
    re.compile(r"^zsh: (killed|abort|segmentation fault|illegal hardware instruction|bus error|terminated)\s"),
    re.compile(r"^\[\d+\][+-]?\s+(Killed|Aborted|Segmentation fault|Illegal instruction|Bus error)\b"),
    # the kernel log: `traps: python3[213941] trap invalid opcode ip:...`
    re.compile(r"traps: \S+ trap (invalid opcode)"),
    # a signal named in a launcher's own words for the end: fish (src/proc.cpp, `fish: Job 1,
    # './llama-server' terminated by signal SIGILL (Illegal instruction)`), Node's child_process
    # (`exit` gives (code, signal): launchers print `exited with code null, signal SIGSEGV`),
    # CPython's subprocess (CalledProcessError: `Command '[…]' died with <Signals.SIGILL: 4>.`),
    # cargo (`process didn't exit successfully: `…` (signal: 4, SIGILL: illegal instruction)`) and
    # GNU time (`Command terminated by signal 4`, Linux's numbering). A signal sent or received
    # (`sending signal SIGKILL`, `received signal SIGTERM`) is not an end and is not read.
    re.compile(r"\b(?:terminated|killed|died|exited|crashed)\b[^.;]{0,60}?\bsignal:? ?(?:\d+ \()?(SIG[A-Z]{2,6})\b"),
    re.compile(r"\bdied with <Signals\.(SIG[A-Z]{2,6}): \d+>"),
    re.compile(r"\(signal: \d+, (SIG[A-Z]{2,6}): "),
    re.compile(r"^Command (terminated by signal \d+)\s*$"),
    # CPython's faulthandler (Modules/faulthandler.c, 3.3 on; on with `-X faulthandler`,
    # PYTHONFAULTHANDLER or faulthandler.enable(), as pytest does): the fatal signal's own name,
    # printed before the Python traceback of the thread that took it; docker compose writes its
    # service's name in front (`backend   | Fatal Python error: …`)
    re.compile(r"^(?:[\w.-]+\s+\|\s)?\s*Fatal Python error: (Segmentation fault|Illegal instruction"
               r"|Aborted|Bus error|Floating[- ]point exception)\b"),
)


def _exit_from_words(word: str) -> tuple[int | None, str | None]:
    w = word.strip().lower()
    if w == "invalid opcode":
        return None, "SIGILL"
    if w.startswith("0x"):
        return int(w, 16), None
    if w == str(NO_EXIT_CODE):
        return None, None  # no code, and no signal named
    if re.fullmatch(r"-?\d+", w):
        return int(w), None
    if w.upper() in ("KILL", "ABRT", "SEGV", "ILL", "TERM", "INT"):
        return None, "SIG" + w.upper()
    if w.upper() in _LINUX_SIGNALS.values():
        return None, w.upper()
    if m := re.fullmatch(r"terminated by signal (\d+)", w):
        return None, _LINUX_SIGNALS.get(int(m.group(1)))
    for key, sig in _SIGNAL_WORDS.items():
        if w.startswith(key):
            return None, sig
    return None, None


def exit_from_log(lines: Iterable[str]) -> tuple[int | None, str | None, str | None]:
    """(exit code, signal, the line) of the last exit a wrapper or shell wrote into the log.

    Used only when the caller does not know how the process ended (a log pasted into
    `stoker diagnose`): Ollama's `exit status 0xc0000135`, LM Studio's `(Exit code: N)`,
    llama-swap's `signal: terminated`, docker's `exited with code 137`, systemd's
    `status=9/KILL` and a shell's `Illegal instruction (core dumped)` all say it.
    """
    found: tuple[int | None, str | None, str | None] = (None, None, None)
    for raw in lines:
        line = strip_log_prefix(raw)
        for pattern in _WRAPPER_EXIT:
            m = pattern.search(line)
            if m:
                code, sig = _exit_from_words(m.group(1))
                if code is not None or sig is not None:
                    found = (code, sig, line.strip())
                break
    return found
