"""`stoker diagnose LOGFILE`: the supervisor's failure classifier for any llama-server log.

A user with a log from anywhere (Stoker, a shell, another app) gets the same kind,
evidence and advice the tray would show. Without `--exit-code`/`--signal` the log alone
decides (an exit a wrapper wrote into it, like Ollama's `exit status 0xc0000135`, counts);
the phase is read from the log (`model loaded` means it was serving) unless given.
Reads only the end of the file, so a huge log is fine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stoker.diagnosis.classify import classify_exit, report_from_log
from stoker.diagnosis.evidence import draft_scoped, gather
from stoker.diagnosis.exit_codes import signal_name
from stoker.diagnosis.log_lines import strip_log_prefix
from stoker.errors import UserError

TAIL_BYTES = 512 * 1024
TAIL_LINES = 400
_SIGNALS = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
            "SIGKILL", "SIGSEGV", "SIGPIPE", "SIGTERM", "SIGSYS")


def add_arguments(parser) -> None:
    parser.add_argument("logfile", metavar="LOGFILE", help="a llama-server log (stderr or --log-file)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--exit-code", metavar="N", help="the exit code it ended with (decimal or 0x hex; "
                     "Windows codes in any form, e.g. 18446744072635812000)")
    how.add_argument("--signal", metavar="NAME", help="the signal that ended it, e.g. SIGKILL or 9")
    parser.add_argument("--phase", choices=("starting", "ready"),
                        help="whether it had finished loading (default: read from the log)")
    parser.add_argument("--backend", choices=("cuda", "rocm", "vulkan", "metal", "cpu"),
                        help="the engine build's backend (default: read from the log)")
    parser.add_argument("--json", action="store_true", help="print a JSON object (schema 2: adds the "
                        "rule that decided, every evidence line with its catalogue entry, and on a "
                        "conflict the two candidate kinds)")


def _parse_exit_code(text: str) -> int:

    try:
        return int(text, 0)
    except ValueError:
        raise UserError(f"--exit-code {text!r} is not a number; give it like 1, -9 or 0xC0000409.") from None


def _parse_signal(text: str) -> str:

    t = text.strip().upper()
    if t.isdigit():
        return signal_name(int(t))
    if not t.startswith("SIG"):
        t = "SIG" + t
    if t not in _SIGNALS:
        raise UserError(f"--signal {text!r} is not a signal name; give it like SIGKILL, SIGABRT or 9.")
    return t


def read_log_tail(path: Path) -> tuple[str, ...]:
    """The last lines of a log; `--log-jsonl` lines are unwrapped to their message."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - TAIL_BYTES))
        data = f.read()
    lines = data.decode("utf-8", "replace").splitlines()
    if size > TAIL_BYTES and lines:
        lines = lines[1:]  # the first one is probably cut
    out = []
    for line in lines[-TAIL_LINES:]:
        if line.startswith('{"type"'):
            try:
                obj = json.loads(line)
                line = str(obj.get("msg", line)).rstrip("\n")
            except ValueError:
                pass
        out.append(line)
    return tuple(out)


def run(args) -> int:

    path = Path(args.logfile)
    if not path.is_file():
        raise UserError(f"there is no log file at {path}; give the path of a llama-server log.")
    try:
        lines = read_log_tail(path)
    except OSError as exc:
        raise UserError(f"could not read {path} ({exc.strerror}); check the path and its permissions.") from None
    code = _parse_exit_code(args.exit_code) if args.exit_code is not None else None
    sig = _parse_signal(args.signal) if args.signal is not None else None
    os_name = {"win32": "windows", "darwin": "darwin"}.get(sys.platform, "linux")
    report = report_from_log(lines, exit_code=code, signal=sig, phase=args.phase,
                             backend=args.backend, os=os_name)
    inc = classify_exit(report)
    if args.json:
        pieces = draft_scoped(lines, gather(lines, strip_log_prefix))
        print(json.dumps({
            "schema": 2, "log": str(path), "kind": inc.kind, "title": inc.title,
            "evidence": inc.evidence, "advice": inc.advice, "exit": inc.exit_description,
            "phase": report.phase, "backend": report.backend, "counts_as_strike": inc.counts_as_strike,
            "recoverable_by": inc.recoverable_by,
            "rule": inc.rule, "candidates": list(inc.candidates),
            "evidence_lines": [{"line": p.line, "entry": p.entry.name, "kind": p.kind,
                                "strength": p.strength.name.lower(), "rank": p.rank,
                                "source": p.entry.source} for p in pieces],
        }, indent=2))
    else:
        print(f"kind:     {inc.kind}")
        print(f"what:     {inc.title}")
        print(f"evidence: {inc.evidence}")
        print(f"advice:   {inc.advice}")
        print(f"exit:     {inc.exit_description}")
        if inc.rule:
            print(f"rule:     {inc.rule}" + (f" (candidates: {', '.join(inc.candidates)})"
                                             if inc.candidates else ""))
    return 0
