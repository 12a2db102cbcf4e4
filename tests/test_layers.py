"""The layer rules of DESIGN.md §1, checked on every import statement in app/.

core: stdlib and stoker.core only. shell: never Qt, never stoker.ui. ui: never subprocess,
psutil, httpx or gguf. Imports inside functions count too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                pkg = path.relative_to(APP.parent).with_suffix("").parts[: -node.level]
                base = ".".join(("stoker",) + pkg[1:])  # app/ is installed as stoker
                found.append((node.lineno, f"{base}.{node.module}" if node.module else base))
            elif node.module:
                found.append((node.lineno, node.module))
    return found


def violations(layer: str, allowed) -> list[str]:
    bad = []
    for path in sorted((APP / layer).rglob("*.py")):
        for line, name in imports_of(path):
            if not allowed(name):
                bad.append(f"{path.relative_to(APP.parent)}:{line} imports {name}")
    return bad


def top(name: str) -> str:
    return name.split(".")[0]


def test_core_imports_only_stdlib_and_core():
    def allowed(name):
        if name == "stoker.core" or name.startswith("stoker.core."):
            return True
        return top(name) in STDLIB and top(name) not in {"subprocess", "socket", "threading",
                                                          "multiprocessing", "asyncio"}

    assert violations("core", allowed) == []


def test_shell_never_imports_qt_or_ui():
    def allowed(name):
        return top(name) not in {"PySide6", "shiboken6"} and not name.startswith("stoker.ui")

    assert violations("shell", allowed) == []


def test_ui_never_spawns_or_probes():
    forbidden = {"subprocess", "psutil", "httpx", "gguf"}
    assert violations("ui", lambda n: top(n) not in forbidden) == []


def test_the_checker_catches_a_violation(tmp_path, monkeypatch):
    bad = APP / "core" / "_layer_probe_tmp.py"
    bad.write_text("import psutil\n")
    try:
        assert any("psutil" in v for v in violations("core", lambda n: top(n) in STDLIB))
    finally:
        bad.unlink()
