"""Crash reports, Windows' own and a debugger's, read for fields that only mean something together.

When a program faults, Windows Error Reporting writes an APPCRASH signature (`Sig[3].Value=` the
faulting module, `Sig[4].Value=` its version, `Sig[6].Value=` the exception code) and the
Application log an event 1000 (`Faulting module name: X, version: V` / `Exception code: 0x…` as
text, or `<Data>` fields in that order as XML). Users paste these when an engine dies without a
word of its own (a Windows llama-box or llama-server that only exits). gdb's stop report names
the signal on one line and the frame it stopped in, with that frame's library, on the next.

Pure: log lines in, the index of the line a reading rests on (or None) out. It must not decide a
kind; the catalogue entry cited with it (evidence.py) says what it proves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stoker.diagnosis.wordings.runtime_tables import GPU_RUNTIME_LIBRARY

# The faulting module's field as the event text and WER's signature name it (the XML writes it as a
# bare `<Data>`, read only where the module is named too).
_MODULE_FIELD_NAME = r"Faulting module name:|Sig\[3\]\.Value="
# msvcp140.dll as the faulting module, in the three forms of the report.
_MODULE_FIELD = re.compile(rf"(?:{_MODULE_FIELD_NAME}|<Data>)\s*msvcp140\.dll\b", re.IGNORECASE)
# The module's version: the event text puts it on the same line, the XML on the next, WER on the
# next field (two lines on, after its localised `Sig[4].Name=`).
_VERSION = re.compile(r"\b14\.(\d+)\.\d+(?:\.\d+)?\b")
# STATUS_ACCESS_VIOLATION, with or without its 0x (WER's Sig[6] and the XML write it bare).
_ACCESS_VIOLATION = re.compile(r"(?:0x)?c0000005\b", re.IGNORECASE)
# A report's fields after the module name: version, time stamp, exception code, offset.
_FIELDS_AFTER = 8
# Microsoft's STL from Visual Studio 2022 17.10 (MSVC 14.40) on: a program built with it calls
# msvcp140.dll's std::mutex in a way runtimes older than 14.40 do not support, and faults inside
# msvcp140.dll with an access violation (the STL changelog; gpustack#861's 14.34, llama-box#10's 14.29).
FIRST_RUNTIME_OF_THE_NEW_STL = 40


def old_msvc_runtime_faulted(lines: Iterable[str]) -> int | None:
    """The line naming msvcp140.dll as the faulting module of an access violation, when its
    version is older than 14.40; else None."""
    lines = tuple(lines)
    for i, line in enumerate(lines):
        if _MODULE_FIELD.search(line) is None:
            continue
        after = lines[i:i + _FIELDS_AFTER]
        version = next((m for m in map(_VERSION.search, after[:3]) if m is not None), None)
        if (version is not None and int(version.group(1)) < FIRST_RUNTIME_OF_THE_NEW_STL
                and any(_ACCESS_VIOLATION.search(x) for x in after)):
            return i
    return None


# A GPU vendor's driver or runtime library, as a whole file name at the end of a path (the list, and
# why the engine's own GPU backend is not on it, is in wordings/runtime_tables.py).
_GPU_DRIVER_MODULE = re.compile(rf"(?:^|[\\/]){GPU_RUNTIME_LIBRARY}$", re.IGNORECASE)
# gdb's stop on a fault (`Thread 1 received signal SIGSEGV, Segmentation fault.`, `Program received
# signal SIGBUS, …`), then the frame it stopped in: `0x… in ?? () from <library>`, or with `#0 ` as a
# backtrace's first line; gdb writes ` from <library>` on a line of its own when the frame is long
# (llama.cpp#8828: amdvlk64.dll under an overlay's Vulkan layer).
_DEBUGGER_STOP = re.compile(r"\breceived signal SIG(?:SEGV|BUS|ILL|FPE)\b")
_FIRST_FRAME = re.compile(r"^\s*(?:#0\s+)?0x[0-9a-f]+ in ", re.IGNORECASE)
_FRAME_LIBRARY = re.compile(r"(?:^|\s)from\s+(.+?)\s*$")
_LINES_TO_THE_FRAME = 4
# The faulting module in Windows' report, as text or as WER's signature.
_REPORTED_MODULE = re.compile(rf"(?:{_MODULE_FIELD_NAME})\s*([^\s,]+)", re.IGNORECASE)


def _stopped_in(lines: tuple[str, ...], stop: int) -> tuple[int, str] | None:
    """The line naming the library of the first frame after a debugger's stop line, and that
    library; else None."""
    for j in range(stop + 1, min(stop + 1 + _LINES_TO_THE_FRAME, len(lines))):
        if _FIRST_FRAME.search(lines[j]):
            here = _FRAME_LIBRARY.search(lines[j])
            if here is None and j + 1 < len(lines) and lines[j + 1].lstrip().startswith("from "):
                j, here = j + 1, _FRAME_LIBRARY.search(lines[j + 1])
            return (j, here.group(1)) if here is not None else None
    return None


def crashed_inside_a_gpu_driver(lines: Iterable[str]) -> int | None:
    """The line of a crash report (the frame gdb stopped in, Windows' faulting module) that puts
    the fault in a GPU vendor's driver or runtime library, else None."""
    lines = tuple(lines)
    for i, line in enumerate(lines):
        if _DEBUGGER_STOP.search(line):
            frame = _stopped_in(lines, i)
            if frame is not None and _GPU_DRIVER_MODULE.search(frame[1]):
                return frame[0]
        elif (m := _REPORTED_MODULE.search(line)) is not None and _GPU_DRIVER_MODULE.search(m.group(1)):
            return i
    return None
