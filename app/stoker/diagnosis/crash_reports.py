"""Windows' own crash reports, read for fields that only mean something together.

When a program faults, Windows Error Reporting writes an APPCRASH signature (`Sig[3].Value=` the
faulting module, `Sig[4].Value=` its version, `Sig[6].Value=` the exception code) and the
Application log an event 1000 (`Faulting module name: X, version: V` / `Exception code: 0x…` as
text, or `<Data>` fields in that order as XML). Users paste these when an engine dies without a
word of its own (a Windows llama-box or llama-server that only exits).

Pure: log lines in, the index of the line a reading rests on (or None) out. It must not decide a
kind; the catalogue entry cited with it (evidence.py) says what it proves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The faulting module's field, in the three forms of the report.
_MODULE_FIELD = re.compile(r"(?:Faulting module name:|Sig\[3\]\.Value=|<Data>)\s*msvcp140\.dll\b", re.IGNORECASE)
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
