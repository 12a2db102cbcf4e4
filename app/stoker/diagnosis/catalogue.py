"""The catalogue of failure wordings: what engines, GPU runtimes, loaders, kernels and wrappers print.

Each entry is one wording (or a family of wordings of one message across releases) with
the kind of failure it proves, where it comes from (the file and release of llama.cpp/ggml
that prints it, the runtime's error name, or the wrapper's project), what it proves, a
strength, and a rank in the root-cause order (stoker/diagnosis/evidence.py): a higher rank
is nearer the root cause, so an allocation failure (80) outranks the GGML_ABORT that follows
it (30). The catalogue was written from the sources, not from users' threads, so that a
wording no thread showed yet is still read: b11434's tree (ggml/src, src, common, tools),
older wordings from llama.cpp's history as the rules before this catalogue recorded them,
the runtimes' error enums (cudaError_t, hipError_t, VkResult, MTLCommandBufferError,
SYCL/Level Zero), glibc's ld.so, dyld, the Windows loader (NTSTATUS), the Linux kernel,
systemd and docker, and the wrappers' own Go/Python/JS sources (Ollama, LM Studio, Jan,
koboldcpp, llama-swap, llama-cpp-python, text-generation-webui, LocalAI).

The entries live in stoker/diagnosis/wordings/, one module per family of failure; this module
joins them into ENTRIES and finds, through their literals, the entries a log line matches.

Kinds are those of classify.KINDS, plus two the verdict resolves from the rest of the log:
"gpu-oom" (ggml-cuda's words, spoken by CUDA and HIP builds alike: the ROCm signs decide)
and "device-oom" (an allocation whose line names no device: the buffer or backend decides).

Pure data: no files, no clock, nothing run. Frozen (with the wordings) before each fresh
benchmark batch at the commit bench/diagnose.py FRESH_BATCHES names; a change after a batch's
score spends that batch, and the README says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stoker.diagnosis.wordings import (
    arguments,
    build_faults,
    gpu_errors,
    loaders,
    memory,
    model_files,
    runtime_tables,
    wrappers,
)
from stoker.diagnosis.wordings.build_faults import DRAFTER_DROPPED
from stoker.diagnosis.wordings.entry import Entry, Strength

if TYPE_CHECKING:  # typeshed stubs these modules under their old public names only
    import sre_constants as _sre
    import sre_parse as _sre_parse
else:
    import re._constants as _sre  # the parsed-pattern opcodes, to find each pattern's literals
    import re._parser as _sre_parse

__all__ = ["DRAFTER_DROPPED", "ENTRIES", "Entry", "Strength", "entry", "matches"]

# The families in the order the root-cause ranks were written in; matching sorts by rank and
# name, so the order only fixes ENTRIES' own.
ENTRIES: tuple[Entry, ...] = (build_faults.ENTRIES + memory.ENTRIES
                              + loaders.ENTRIES + arguments.ENTRIES + model_files.ENTRIES
                              + wrappers.ENTRIES + gpu_errors.ENTRIES + runtime_tables.ENTRIES)
_BY_NAME = {e.name: e for e in ENTRIES}
assert len(_BY_NAME) == len(ENTRIES), "entry names are unique"


def _literals(items: _sre_parse.SubPattern) -> frozenset[str] | None:
    """Lower-case strings at least one of which every match of the parsed pattern contains,
    or None when the pattern has no such literal (it must then be tried on every line)."""
    best = ""
    run = ""
    nested: frozenset[str] | None = None
    # Iterating a SubPattern is iterating its data. The stubs type each argument as the union of
    # every opcode's, so the shapes are checked here: LITERAL an int, SUBPATTERN (group,
    # add_flags, del_flags, pattern), BRANCH (None, patterns); always so at run time.
    for op, arg in items.data:
        if op is _sre.LITERAL and isinstance(arg, int):
            run += chr(arg)
            best = max(best, run, key=len)
            continue
        run = ""
        if op is _sre.SUBPATTERN and nested is None and isinstance(arg, tuple) and len(arg) == 4:
            nested = _literals(arg[3])
        elif op is _sre.BRANCH and nested is None and isinstance(arg, tuple) and isinstance(arg[1], list):
            branches = [_literals(b) for b in arg[1]]
            found = [b for b in branches if b is not None]
            if len(found) == len(branches):
                nested = frozenset[str]().union(*found)
    if len(best) >= 3:
        return frozenset({best.lower()})
    return nested


def _needles(entry: Entry) -> frozenset[str] | None:
    return _literals(_sre_parse.parse(entry.pattern.pattern, entry.pattern.flags))


# A line is tried only against the entries one of whose literals it contains (lower-cased),
# found through the literals' first three letters, so the ~100 patterns cost one set
# intersection on the many lines that match none. Deciding is unchanged by this (every
# literal is one a match must contain); an entry without one would be tried on every line.
_NEEDLES = tuple((e, _needles(e)) for e in ENTRIES)
_ALWAYS = tuple(e for e, needles in _NEEDLES if needles is None)
_BY_TRIGRAM: dict[str, list[tuple[Entry, str]]] = {}
for _entry, _needle_set in _NEEDLES:
    for _needle in _needle_set or ():
        _BY_TRIGRAM.setdefault(_needle[:3], []).append((_entry, _needle))
_TRIGRAMS = frozenset(_BY_TRIGRAM)


def entry(name: str) -> Entry:
    return _BY_NAME[name]


def matches(line: str) -> tuple[Entry, ...]:
    """Every entry one (prefix-stripped) log line matches, highest rank first."""
    low = line.lower()
    seen = _TRIGRAMS.intersection(low[i:i + 3] for i in range(len(low) - 2))
    candidates = {e for tri in seen for e, needle in _BY_TRIGRAM[tri] if needle in low}
    candidates.update(_ALWAYS)
    hits = [e for e in candidates if e.pattern.search(line)]
    return tuple(sorted(hits, key=lambda e: (-e.rank, e.name)))
