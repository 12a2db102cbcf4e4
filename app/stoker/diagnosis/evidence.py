"""Evidence, then a verdict: which of the failure lines a log holds is the root cause.

`gather(lines)` turns every line the catalogue (stoker/diagnosis/catalogue.py) knows into a
piece of evidence with its kind, rank and strength. `decide(pieces)` settles which one wins
by the root-cause order below (ORDER): each rule names the kinds that are the cause when
they meet the kinds that are their echo, with the reason. A piece with no rule relating it
to the winner and a strength equal to the winner's is a conflict: the verdict is then
`unknown`, carrying both candidates and their lines, rather than a guess.

Pure: lines in, a frozen verdict out. It must not look at exits, phases or backends; that
is classify.py's part (it resolves "gpu-oom" and "device-oom" to a device and weighs the exit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from stoker.diagnosis.catalogue import DRAFTER_DROPPED, Entry, Strength, entry, matches
from stoker.diagnosis.crash_reports import crashed_inside_a_gpu_driver, old_msvc_runtime_faulted
from stoker.diagnosis.wrapper_memory import host_share_near_free, lmstudio_ram_exhausted, size_in_bytes

MEMORY = frozenset({"gpu-oom", "device-oom", "cuda-oom", "rocm-oom", "vulkan-oom", "metal-oom", "host-oom"})
BUILD = frozenset({"cuda-driver-too-old", "no-kernel-image", "illegal-instruction"})
LOADER = frozenset({"system-too-old", "stale-library", "missing-library"})
# What a cause leaves behind: the abort, the GPU error, the wrapped load error, the wait.
ECHOES = frozenset({"assertion-failed", "gpu-error", "bad-model", "startup-timeout", "stopped"})
_ALL = frozenset({"rpc-worker-lost", "drafter-failure", "port-in-use", "bad-argument"}
                 | MEMORY | BUILD | LOADER | ECHOES)


@dataclass(frozen=True)
class OrderRule:
    name: str
    causes: frozenset[str]
    echoes: frozenset[str]
    why: str


# The root-cause order, most fundamental first. tests/core/test_diagnosis_evidence.py holds,
# for each rule, a log where it decides and the same log read with the order reversed.
ORDER = (
    OrderRule("build-fault-first", BUILD, _ALL - BUILD,
              "a build that cannot run on this GPU or CPU makes every later line an echo"),
    OrderRule("lost-worker-first", frozenset({"rpc-worker-lost"}), _ALL - BUILD - {"rpc-worker-lost"},
              "after an RPC worker is lost, every failure is the engine finding it gone"),
    OrderRule("drafter-before-its-echoes", frozenset({"drafter-failure"}), MEMORY | ECHOES | {"bad-argument"},
              "a drafter that failed names the culprit even when an allocation or abort follows"),
    OrderRule("device-lost-is-the-allocation", MEMORY, frozenset({"gpu-error"}),
              "a device lost (or a GPU error) right after an allocation failure is that allocation failure"),
    OrderRule("allocation-before-abort", MEMORY, frozenset({"assertion-failed"}),
              "the first failing allocation beats the GGML_ASSERT/abort that follows it"),
    OrderRule("allocation-inside-load-error", MEMORY, frozenset({"bad-model", "startup-timeout", "stopped"}),
              "llama.cpp wraps an allocation failure in `error loading model:`; a wrapper then gives up"),
    OrderRule("memory-over-optional-backend", MEMORY, LOADER,
              "an optional backend that failed to load leaves the engine running; it then ran out of memory"),
    OrderRule("versioned-symbol-over-cannot-open", frozenset({"system-too-old"}),
              frozenset({"missing-library", "stale-library"}),
              "`version GLIBC_2.xx not found` (or dyld's `Expected in: /usr/lib`) says why a library "
              "could not be opened or lacks a symbol"),
    OrderRule("symbol-over-cannot-open", frozenset({"stale-library"}), frozenset({"missing-library"}),
              "a library was found and loaded but is another build's; a sibling's `cannot open` is optional"),
    OrderRule("loader-before-load", LOADER, ECHOES | {"bad-argument", "device-oom", "port-in-use"},
              "a library that cannot be loaded ends the start before anything else can fail"),
    OrderRule("port-before-its-exit", frozenset({"port-in-use"}), ECHOES,
              "the server exits when it cannot bind; what follows is the exit"),
    OrderRule("argument-before-load", frozenset({"bad-argument"}), ECHOES,
              "a refused option ends the start before the model is read"),
    OrderRule("named-device-over-unnamed", MEMORY - {"device-oom"}, frozenset({"device-oom"}),
              "an allocation that names its memory (CUDA0, the CPU) says which memory a wrapper's or "
              "an unnamed buffer's failure was, wherever the paste puts either"),
    OrderRule("allocation-named-by-its-first-line", MEMORY, MEMORY,
              "of two allocation failures, the first one is the root cause"),
    OrderRule("load-error-before-abort", frozenset({"bad-model"}), frozenset({"assertion-failed", "gpu-error"}),
              "a model file that cannot be read ends in an abort"),
    OrderRule("timeout-over-stop", frozenset({"startup-timeout"}), frozenset({"stopped"}),
              "a wrapper that gave up waiting then stops the engine"),
    OrderRule("gpu-error-before-its-abort", frozenset({"gpu-error"}), frozenset({"assertion-failed"}),
              "ggml's CUDA_CHECK prints the error, then GGML_ABORT"),
)


@dataclass(frozen=True)
class Evidence:
    index: int  # the line's place in the log tail
    line: str  # the line, prefix stripped
    entry: Entry  # the highest-ranked catalogue entry it matched

    @property
    def kind(self) -> str:
        return self.entry.kind

    @property
    def rank(self) -> int:
        return self.entry.rank

    @property
    def strength(self) -> Strength:
        return self.entry.strength


@dataclass(frozen=True)
class Verdict:
    kind: str | None  # a catalogue kind; "unknown" on conflict or weak evidence; None: nothing matched
    winner: Evidence | None
    rule: str  # the ORDER rule (or "sole-evidence", "conflict", "weak-evidence", "no-evidence", …)
    pieces: tuple[Evidence, ...]  # every line read as evidence, in log order
    candidates: tuple[Evidence, ...] = ()  # on conflict: the two pieces that disagree


# Where a drafter's load begins, as each launcher announces it: llama-server's `loading draft
# model '%s'` (server.cpp since the server gained speculative decoding; server-context.cpp in b11434;
# common_speculative_init_result in the MTP/DFlash era), older `srv load_model: loading draft
# model`, the speculative example's `-md`/`--model-draft` echo, and KoboldCpp's `Attempting to
# load draft model for speculative decoding.` (gpttype_adapter.cpp, printed right before
# speculative_decoding_setup; by 1.82, koboldcpp#1330). Each loads the draft AFTER the target.
_DRAFT_LOAD = re.compile(r"loading draft model|load_model: loading draft|draft model: loading"
                         r"|load draft model for speculative decoding"
                         r"|llama_model_load_from_file.{0,40}draft|speculative.{0,20}loading", re.IGNORECASE)
# Where the target's own load is announced: llama-server's `srv load_model: loading model '%s'`
# (server.cpp, server-context.cpp b11434; llama-box the same). A line naming the draft is not it.
_TARGET_LOAD = re.compile(r"loading model '", re.IGNORECASE)
# Where a load is over (the server is up): a load error after this is no load's.
_LOAD_OVER = re.compile(r"model loaded\b|server is listening|main loop", re.IGNORECASE)
# Any model's load, as llama_model_loader prints its first line, naming the file: this line
# does not say whose load it is (the draft's own load prints it too, koboldcpp#2262).
_LOADER_FILE = re.compile(r"llama_model_loader: loaded meta data .*? from (.+?)(?: \(version .*)?$")
_QUOTED = re.compile(r"'([^']+)'")


def _file_name(path: str) -> str:
    return re.split(r"[\\/]", path.strip().strip("'\""))[-1].lower()


def _load_is_over(raw: str) -> bool:
    """Whether the line says the server is up (a line naming the draft is the draft's own)."""
    return bool(_LOAD_OVER.search(raw)) and not re.search("draft", raw, re.IGNORECASE)


class LoadPlace(Enum):
    """Whose model load a log line falls in."""

    DRAFT = "draft"  # after the launcher announced the draft's load
    TARGET = "target"  # after llama-server announced the target's


def load_places(lines: Iterable[str]) -> tuple[LoadPlace | None, ...]:
    """For each line, whose model load it falls in: DRAFT (after the launcher announced the
    draft's load), TARGET (after llama-server announced the target's), or None (the log does
    not say: no announcement, a load that names another file than the announced draft, or the
    server already up). llama_model_loader's own lines never place a load: the draft's load
    prints them too, and a log's tail may begin inside either load."""
    place: LoadPlace | None = None
    draft_file: str | None = None
    out: list[LoadPlace | None] = []
    for raw in lines:
        if _DRAFT_LOAD.search(raw):
            place = LoadPlace.DRAFT
            quoted = _QUOTED.search(raw)
            draft_file = _file_name(quoted.group(1)) if quoted else None
        elif _TARGET_LOAD.search(raw) and not re.search("draft", raw, re.IGNORECASE):
            place, draft_file = LoadPlace.TARGET, None
        elif _load_is_over(raw):
            place, draft_file = None, None
        else:
            loader = _LOADER_FILE.search(raw)
            if loader and place is LoadPlace.DRAFT and draft_file and _file_name(loader.group(1)) != draft_file:
                place, draft_file = None, None  # another file's load than the draft announced
        out.append(place)
    return tuple(out)


# A paste hard-wrapped at a terminal's or a traceback printer's width (Modal's RemoteError at 80
# columns: "… version `GLIBCXX_3.4.29' not" / "found (required by …", modal-client#1062) splits a
# wording over two lines at the margin, with no indent for log_lines.unwrapped to follow. A line
# this long that ends where the next begins is read joined too.
_WRAP_WIDTH = 70
# ... and a shorter line that ends in a blank was cut at a word by the window it was copied from (an
# editor's or a browser's soft wrap kept as a break: llm-gpt4all#6, "… version `GLIBCXX_3.4.26' not "
# at 63 columns): a program's own line does not end in a space before its newline.
_ENDS_IN_A_BLANK = re.compile(r"\S.{18,} $")
# A line that begins as a log line of its own (a `func: ` or `name: ` prefix, a timestamp, a
# bracketed tag, Go's key=value) is not a wrapped tail, whatever the line before it.
_OWN_LINE_START = re.compile(r"^\s*(\[|\d{4}-\d\d-\d\d|\d\d:\d\d|time=|level=|[A-Za-z_][\w.-]*: )")


def _hits(line: str) -> tuple[Entry, ...]:
    hits = matches(line)
    inner = tuple(h for h in hits[1:] if h.strength is not Strength.WEAK)
    if hits and hits[0].name == "model.load" and inner:
        return inner  # `error loading model: <cause>`: the words after it name the cause
    return hits


def _across_the_wrap(line: str, following: str) -> Entry | None:
    """The entry a wording split at a hard wrap matches once joined; the caller has seen that
    neither half matches anything alone (a line the catalogue reads is a line of its own), and
    a second half that begins as a log line is one too."""
    if (len(line) < _WRAP_WIDTH and not _ENDS_IN_A_BLANK.search(line)) or not following.strip() \
            or _OWN_LINE_START.match(following):
        return None
    return next((h for h in _hits(line.rstrip() + " " + following.strip()) if h.strength is not Strength.WEAK),
                None)


# The debugger ggml's abort runs for its backtrace (ggml.c ggml_print_backtrace, b11434: a forked
# child execs `gdb --batch`, then `lldb`) speaks in its own name, `gdb: …`, about itself: it runs in
# the engine's environment, so in a PyInstaller bundle (koboldcpp#888) it loads the bundle's older
# libstdc++ and says `version `CXXABI_1.3.15' not found`. Its lines come after the abort and are
# not the engine's failure.
_DEBUGGER_OWN_LINE = re.compile(r"^\s*(gdb|lldb): ")


def gather(lines: Iterable[str], strip: Callable[[str], str] = lambda s: s) -> tuple[Evidence, ...]:
    """A piece of evidence for every line the catalogue knows (its highest-ranked entry), a line
    hard-wrapped into the next read joined, and the line a wrapper's figures make telling
    (_FIGURES); an allocation no machine could grant reads as a miscount (ADDRESSABLE_BYTES)."""
    lines = tuple(lines)
    stripped = tuple(strip(raw) for raw in lines)
    hits = tuple(_hits(line) if line.strip() and not _DEBUGGER_OWN_LINE.match(line) else () for line in stripped)
    pieces = []
    for i, line in enumerate(stripped):
        if hits[i]:
            pieces.append(Evidence(i, line, hits[i][0]))
        elif (line.strip() and i + 1 < len(stripped) and not hits[i + 1]
              and (split := _across_the_wrap(line, stripped[i + 1])) is not None):
            pieces.append(Evidence(i, line.rstrip() + " " + stripped[i + 1].strip(), split))
    return _impossible_sizes_as_miscounts(_with_figures(lines, tuple(pieces), strip))


# The most memory a process can address anywhere: x86-64 with 5-level paging maps 57 bits of
# virtual address (ARM64 and 4-level x86-64 map 48). An allocation asked beyond it cannot be
# granted on any machine, so its size is the engine's miscount (an overflow, a garbage
# dimension: stable-diffusion.cpp#43 asked ggml_aligned_malloc for 2.2 EB), not memory running
# out. A request merely larger than this machine (25.9 TB for an absurd image size) is memory.
ADDRESSABLE_BYTES = 1 << 57
_STATED_SIZE = re.compile(r"(?:allocat\w*|of size|size\s*=)\D{0,40}?(\d[\d,]*(?:\.\d+)?)\s*"
                          r"([KMGT]?i?B|bytes)?\b", re.IGNORECASE)
# ggml_init's `GGML_ASSERT(ctx->mem_buffer != NULL)` checks the malloc the line before it asked:
# after an impossible request it is that request's echo, not the host's memory.
_MALLOC_ECHO_LINES = 3


def stated_bytes(line: str) -> int | None:
    """The largest allocation size a line states (`allocate 2268047721628.89 MB`, `buffer of
    size 27188624053504`), in bytes; None when it states none."""
    sizes = []
    for m in _STATED_SIZE.finditer(line):
        unit = m.group(2) if m.group(2) and m.group(2).lower() != "bytes" else "B"
        size = size_in_bytes(f"{m.group(1).replace(',', '')} {unit}")
        if size is not None:
            sizes.append(size)
    return int(max(sizes)) if sizes else None


_MISCOUNT_ENTRY = Entry("alloc.impossible-size", "assertion-failed", 79, Strength.STRONG,
                        "an allocation line (ggml_aligned_malloc, a backend's buffer) whose size is "
                        "beyond any machine's address space (2^57 bytes)",
                        "the engine computed an impossible size: a miscount, not memory running out",
                        re.compile("(?!)"))


def _impossible_sizes_as_miscounts(pieces: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """The pieces with an allocation failure of an impossible size (and ggml_init's assert of
    that malloc just after it) read as the engine's miscount rather than memory."""
    out: list[Evidence] = []
    last_miscount: int | None = None
    for p in pieces:
        size = stated_bytes(p.line) if p.kind in MEMORY else None
        echo = (p.entry.name == "ggml.context-malloc" and last_miscount is not None
                and p.index - last_miscount <= _MALLOC_ECHO_LINES)
        if (size is not None and size > ADDRESSABLE_BYTES) or echo:
            last_miscount = p.index
            p = Evidence(p.index, p.line, _MISCOUNT_ENTRY)
        out.append(p)
    return tuple(out)


# A wrapper's figures that say something only read together (wrapper_memory.py): the piece
# sits on the line the reader names, with the catalogue entry for it; a line the catalogue
# already read keeps its own piece.
_FIGURES: tuple[tuple[Callable[[Iterable[str]], int | None], str], ...] = (
    (lmstudio_ram_exhausted, "lmstudio.ram-exhausted"),
    (host_share_near_free, "ollama.estimate-host-tight"),
    # (not a wrapper's: Windows' crash report, whose fields are read together the same way)
    (old_msvc_runtime_faulted, "windows.msvc-runtime-too-old"),
    (crashed_inside_a_gpu_driver, "gpu.driver-crash-report"),
)


FIGURE_ENTRIES = frozenset(name for _, name in _FIGURES)
# A figure is the machine's state as a wrapper took it, not a line about the failure: it explains
# a load failure that gives no reason (lmstudio-bug-tracker#14's empty `cause`), never one whose
# own line states a different one (lms#68: `wrong number of tensors` beside 62.72 KB "unused").
REASON_OVER_FIGURE = OrderRule("stated-reason-over-figure", frozenset(), frozenset(),
                               "a line stating why the engine failed outranks a wrapper's memory figure")
# llama.cpp's `error loading model:` wraps whatever llama_model_load caught, an allocation
# included (`vector::_M_default_append`, `unable to allocate`): by itself it states no reason.
_LOAD_WRAPPER = re.compile(r"error loading model:\s*", re.IGNORECASE)


def _states_a_reason(p: Evidence) -> bool:
    """A decisive line whose words say why, beyond llama.cpp's wrapper around any load error."""
    return p.strength is Strength.DECISIVE and p.entry.pattern.search(_LOAD_WRAPPER.sub("", p.line)) is not None


def _with_figures(lines: tuple[str, ...], pieces: tuple[Evidence, ...],
                  strip: Callable[[str], str]) -> tuple[Evidence, ...]:
    taken = {p.index for p in pieces}
    added = []
    for reader, name in _FIGURES:
        at = reader(lines)
        if at is not None and at not in taken:
            added.append(Evidence(at, strip(lines[at]), entry(name)))
            taken.add(at)
    return tuple(sorted(pieces + tuple(added), key=lambda p: p.index)) if added else pieces


def draft_scoped(lines: Iterable[str], pieces: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """The pieces with a model-load failure that happened while the DRAFT model loaded read
    as a drafter failure: `error loading model:` after `loading draft model` is the drafter's.
    A drafter the server dropped and loaded on without is no evidence once the load is over."""
    lines = tuple(lines)
    places = load_places(lines)
    # llama-server drops a drafter it could not set up and loads on (catalogue.DRAFTER_DROPPED): a
    # failure after the load is over is not that drafter's, which is no longer there
    last_over = max((i for i, raw in enumerate(lines) if _load_is_over(raw)), default=-1)
    return tuple(Evidence(p.index, p.line, _DRAFT_ENTRY)
                 if p.kind == "bad-model" and p.index < len(places) and places[p.index] is LoadPlace.DRAFT else p
                 for p in pieces
                 if not (p.kind == "drafter-failure" and p.index < last_over and DRAFTER_DROPPED.search(p.line)))


_DRAFT_ENTRY = Entry("drafter.load-error", "drafter-failure", 85, Strength.STRONG,
                     "llama.cpp server: a model load error while the draft model loads",
                     "the draft model's file could not be loaded", re.compile("(?!)"))


def rule_between(cause: str, echo: str) -> OrderRule | None:
    """The first ORDER rule saying `cause` is the root cause when it meets `echo`."""
    for rule in ORDER:
        if cause in rule.causes and echo in rule.echoes:
            return rule
    return None


def _best_per_kind(pieces: tuple[Evidence, ...]) -> dict[str, Evidence]:
    best: dict[str, Evidence] = {}
    for p in pieces:
        cur = best.get(p.kind)
        if cur is None or p.strength.value > cur.strength.value:
            best[p.kind] = p  # equal strength: the earlier line stays
    return best


def decide(pieces: tuple[Evidence, ...], order: tuple[OrderRule, ...] = ORDER,
           reason_over_figure: bool = True) -> Verdict:
    """The root cause among the pieces, the rule that decided, or `unknown` with the two
    candidates when they conflict. `order` and `reason_over_figure` are parameters so a test can
    reverse or drop a rule."""
    if not pieces:
        return Verdict(None, None, "no-evidence", pieces)
    # A weak sign (a wrapper's "Failed to load model") is shown but never decides, nor
    # outweighs a stronger line: with nothing else, the exit decides (classify.py).
    best = _best_per_kind(tuple(p for p in pieces if p.strength is not Strength.WEAK))
    if not best:
        return Verdict(None, None, "weak-evidence", pieces)

    def beats(a: Evidence, b: Evidence) -> OrderRule | None:
        # (an allocation line beside a figure is memory meeting memory: the rules below decide)
        if reason_over_figure and not (a.kind in MEMORY and b.kind in MEMORY):
            if b.entry.name in FIGURE_ENTRIES and _states_a_reason(a):
                return REASON_OVER_FIGURE
            if a.entry.name in FIGURE_ENTRIES and _states_a_reason(b):
                return None
        # the first rule relating the two decides, whichever way it points: a later rule that
        # points back (every allocation names its first line) does not undo an earlier one
        for r in order:
            if a.kind in r.causes and b.kind in r.echoes:
                return r
            if b.kind in r.causes and a.kind in r.echoes:
                return None
        return None

    # The winner is the piece every other kind yields to: by rule, else by strength.
    ranked = sorted(best.values(), key=lambda p: (-p.rank, p.index))
    for top in ranked:
        rule_used: str | None = None
        conflict: Evidence | None = None
        for other in ranked:
            if other is top:
                continue
            rule = beats(top, other)
            if rule is not None and beats(other, top) is None or (
                    rule is not None and rule.causes == rule.echoes and top.index < other.index):
                rule_used = rule_used or rule.name
                continue
            if beats(other, top) is not None:
                break  # the other is the cause of this one: try the next candidate
            if top.strength.value > other.strength.value:
                rule_used = rule_used or "stronger-evidence"
                continue
            conflict = conflict or other
        else:
            if conflict is not None:
                return Verdict("unknown", top, "conflict", pieces, (top, conflict))
            return Verdict(top.kind, top, rule_used or "sole-evidence", pieces)
    # Every candidate yields to another (a cycle in `order`): no root cause can be named.
    return Verdict("unknown", ranked[0], "conflict", pieces, tuple(ranked[:2]))
