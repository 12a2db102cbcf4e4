"""The import graph of app/stoker as the files say it: rooms, layers, cycles and lazy imports.

Run `python -m tests.import_graph` for the numbers NOTES/README quote; tests/test_layers.py
asserts the same bounds. Imports inside functions count as edges (a lazy import still
couples two modules), and `if TYPE_CHECKING:` blocks count too.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
PACKAGE = APP / "stoker"

# Top to bottom: a room may import only rooms below it. Rooms on one line are independent
# of each other (neither imports the other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli", "bench"),
    ("desktop",),
    ("integration",),
    ("instance",),
    ("gateway",),
    ("fleet",),
    ("engines",),
    ("diagnosis",),
    ("planning",),
    ("library",),
    ("base",),
)
RANK = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
# Modules directly in stoker/ that are not rooms: the entry point sits on top, errors at the
# bottom with base, resources is data.
LOOSE = {"stoker": "base", "stoker.errors": "base", "stoker.__main__": "cli",
         "stoker.resources": "base"}


def module_of(path: Path) -> str:
    parts = path.relative_to(APP).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> str:
    if module in LOOSE:
        return LOOSE[module]
    return module.split(".")[1]


def modules() -> dict[str, Path]:
    return {module_of(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _in_function(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.walk(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    inside.add(id(child))
    return inside


def edges() -> list[tuple[str, str, int, bool]]:
    """(importer, imported, line, inside a function) for every import of stoker's own modules."""
    known = modules()
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        lazy = _in_function(tree)
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join(pkg)
                    mod = f"{base}.{node.module}" if node.module else base
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
            for target in targets:
                if not target.startswith("stoker"):
                    continue
                hit = _resolve(target, known)
                if hit and hit != module:
                    found.append((module, hit, node.lineno, id(node) in lazy))
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def module_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _, _ in edges():
        # A package's __init__ importing its own submodules is not a cycle of meaning.
        graph[a].add(b)
    return _cycles(graph)


def room_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _, _ in edges():
        ra, rb = room_of(a), room_of(b)
        if ra != rb:
            graph[ra].add(rb)
    return _cycles(graph)


def upward() -> list[str]:
    """Imports that run up (or sideways across one line of) the layer order."""
    bad = []
    for a, b, line, _ in edges():
        ra, rb = room_of(a), room_of(b)
        if ra != rb and RANK[rb] <= RANK[ra]:
            bad.append(f"{a}:{line} -> {b} ({ra} -> {rb})")
    return bad


def lazy_imports() -> list[str]:
    known = modules()
    out = []
    for a, b, line, lazy in edges():
        if lazy:
            out.append(f"{known[a].relative_to(APP.parent)}:{line} {a} -> {b}")
    return sorted(set(out))


def main() -> int:
    e = edges()
    print(f"imports of stoker's own modules: {len(e)}")
    lazy = lazy_imports()
    print(f"inside functions: {len(lazy)}")
    for line in lazy:
        print("  lazy", line)
    rc = room_cycles()
    mc = module_cycles()
    up = upward()
    print(f"room-level cycles: {len(rc)}")
    for c in rc:
        print("  room cycle", c)
    print(f"module-level cycles: {len(mc)}")
    for c in mc:
        print("  module cycle", c)
    print(f"upward imports: {len(up)}")
    for u in up:
        print("  up", u)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
