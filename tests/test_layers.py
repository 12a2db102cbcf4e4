"""The layer rules of DESIGN.md §1, checked on every import statement in app/stoker.

Pure modules: stdlib and other pure modules only. Effect modules: never Qt, never the
desktop. desktop: never subprocess, psutil, httpx or gguf. Imports inside functions count too.

The import contract itself is import-linter's (`[tool.importlinter]` in pyproject.toml, run
as `lint-imports` in CI): the rooms' layers, and that no pure module reaches an effect
library (psutil, gguf, httpx, keyring, PySide6, aiohttp, huggingface_hub, numpy) or a
process, socket or thread module of the standard library (import-linter 2 does see the
standard library with include_external_packages). This file keeps what a forbidden-list
contract cannot say: the allowlist "a pure module imports only the standard library and
other pure modules", the desktop's own rules, the classification of every module as pure or
effect (which the contract's source list is tested against), and the bounds on cycles,
upward imports and imports inside functions that tests/import_graph.py measures.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from tests import import_graph
from tests.import_graph import lazy_imports, module_cycles, modules, room_cycles, upward

APP = Path(__file__).resolve().parents[1] / "app"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
PURE = frozenset({
    "stoker.base.overrides",
    "stoker.base.rpc_address",
    "stoker.integration.app_configs",
    "stoker.gateway.metrics_text",
    "stoker.gateway.responses_chain",
    "stoker.base.line_throttle",
    "stoker.desktop.notifications",
    "stoker.desktop.tray_view",
    "stoker.diagnosis.blockers",
    "stoker.diagnosis.catalogue",
    "stoker.diagnosis.classify",
    "stoker.diagnosis.evidence",
    "stoker.diagnosis.exit_codes",
    "stoker.diagnosis.log_lines",
    "stoker.diagnosis.silent_fallbacks",
    "stoker.diagnosis.wrapper_memory",
    "stoker.diagnosis.crash_reports",
    "stoker.diagnosis.open_readings",
    "stoker.diagnosis.exit_report",
    "stoker.diagnosis.incident_words",
    "stoker.diagnosis.views",
    "stoker.diagnosis.wordings",
    "stoker.diagnosis.wordings.entry",
    "stoker.diagnosis.wordings.arguments",
    "stoker.diagnosis.wordings.build_faults",
    "stoker.diagnosis.wordings.gpu_errors",
    "stoker.diagnosis.wordings.loaders",
    "stoker.diagnosis.wordings.memory",
    "stoker.diagnosis.wordings.model_files",
    "stoker.diagnosis.wordings.runtime_tables",
    "stoker.diagnosis.wordings.wrappers",
    "stoker.engines.about",
    "stoker.engines.argv",
    "stoker.engines.builds",
    "stoker.engines.drivers.inputs",
    "stoker.engines.ds4_launch",
    "stoker.engines.engine_exit",
    "stoker.engines.engine_log",
    "stoker.engines.kind",
    "stoker.engines.launch",
    "stoker.engines.launch_spec",
    "stoker.engines.rpc",
    "stoker.engines.sd_server",
    "stoker.engines.slot_keep",
    "stoker.errors",
    "stoker.fleet.commands",
    "stoker.fleet.fleet_state",
    "stoker.fleet.lifecycle",
    "stoker.fleet.quarantine",
    "stoker.fleet.recovery",
    "stoker.fleet.residency",
    "stoker.fleet.restart",
    "stoker.fleet.snapshot",
    "stoker.fleet.status_report",
    "stoker.gateway.listing",
    "stoker.gateway.ollama_rules",
    "stoker.gateway.rules",
    "stoker.integration.login_items",
    "stoker.library.gguf_summary",
    "stoker.library.image_parts",
    "stoker.library.model_ids",
    "stoker.library.quant_options",
    "stoker.library.store_layouts",
    "stoker.planning.devices",
    "stoker.planning.ds4",
    "stoker.planning.machine",
    "stoker.planning.measured",
    "stoker.planning.memory",
    "stoker.planning.plan",
    "stoker.planning.planner",
    "stoker.planning.quant_choice",
    "stoker.planning.speed",
})
EFFECTS = frozenset({
    "stoker.engines.free_memory",
    "stoker.engines.load_times",
    "stoker.fleet.memory_watch",
    "stoker.integration.app_connect",
    "stoker.gateway.metrics",
    "stoker.gateway.responses_state",
    "stoker.base.applog",
    "stoker.base.heap",
    "stoker.base.log_tail",
    "stoker.base.paths",
    "stoker.base.secrets",
    "stoker.base.store",
    "stoker.diagnosis.incidents",
    "stoker.diagnosis.memory_cgroup",
    "stoker.diagnosis.oom_evidence",
    "stoker.engines.about_facts",
    "stoker.engines.bandwidth",
    "stoker.engines.drivers",
    "stoker.engines.drivers.ds4",
    "stoker.engines.drivers.llama",
    "stoker.engines.drivers.rpc",
    "stoker.engines.drivers.sd",
    "stoker.engines.ds4_files",
    "stoker.engines.find",
    "stoker.engines.health",
    "stoker.engines.identity",
    "stoker.engines.measurements",
    "stoker.engines.memory_probe",
    "stoker.engines.probe",
    "stoker.engines.process",
    "stoker.engines.sd_files",
    "stoker.engines.slot_files",
    "stoker.engines.slot_http",
    "stoker.engines.setup",
    "stoker.fleet.build_choice",
    "stoker.fleet.engine_record",
    "stoker.fleet.exit_diagnosis",
    "stoker.fleet.fleet_runner",
    "stoker.fleet.health_watch",
    "stoker.fleet.kv_keeper",
    "stoker.fleet.launch_lessons",
    "stoker.fleet.launcher",
    "stoker.fleet.ledger",
    "stoker.fleet.pipeline",
    "stoker.fleet.routes",
    "stoker.fleet.rpc_roster",
    "stoker.fleet.rpc_worker",
    "stoker.fleet.snapshot_assembly",
    "stoker.fleet.snapshot_hub",
    "stoker.fleet.supervisor",
    "stoker.fleet.worker_tray",
    "stoker.gateway.child",
    "stoker.gateway.forwarder",
    "stoker.gateway.guard",
    "stoker.gateway.images",
    "stoker.gateway.link",
    "stoker.gateway.ollama",
    "stoker.gateway.ollama_port",
    "stoker.gateway.process",
    "stoker.gateway.seams",
    "stoker.gateway.server",
    "stoker.instance.control",
    "stoker.instance.instance",
    "stoker.gateway.upstream",
    "stoker.integration.autostart",
    "stoker.integration.desktop_entry",
    "stoker.integration.qt_platform",
    "stoker.fleet.library_ops",
    "stoker.library.catalog",
    "stoker.library.gguf_io",
    "stoker.library.gguf_write",
    "stoker.library.hf_hub",
    "stoker.library.models",
    "stoker.library.pull_record",
    "stoker.library.real_shapes",
    "stoker.library.removal",
    "stoker.library.stores",
    "stoker.planning.pull",
    "stoker.resources",
})


def submodules(module: str, names) -> list[str]:
    """`from stoker.planning import memory` imports the module stoker.planning.memory."""
    found = []
    for alias in names:
        sub = f"{module}.{alias.name}"
        where = APP.joinpath(*sub.split("."))
        found.append(sub if where.with_suffix(".py").exists() or where.is_dir() else module)
    return found


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package
                pkg = path.relative_to(APP).with_suffix("").parts[: -node.level]
                base = ".".join(pkg)
                found.append((node.lineno, f"{base}.{node.module}" if node.module else base))
            elif node.module:
                found += [(node.lineno, sub) for sub in submodules(node.module, node.names)]
    return found


def module_of(path: Path) -> str:
    parts = path.relative_to(APP).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def violations(modules, allowed) -> list[str]:
    bad = []
    for path in sorted((APP / "stoker").rglob("*.py")):
        if module_of(path) not in modules and not any(module_of(path).startswith(m + ".") for m in modules
                                                      if m == "stoker.desktop"):
            continue
        for line, name in imports_of(path):
            if not allowed(name):
                bad.append(f"{path.relative_to(APP.parent)}:{line} imports {name}")
    return bad


def top(name: str) -> str:
    return name.split(".")[0]


def test_pure_modules_import_only_stdlib_and_pure_modules():
    def allowed(name):
        if name in PURE:
            return True
        return top(name) in STDLIB and top(name) not in {"subprocess", "socket", "threading",
                                                          "multiprocessing", "asyncio"}

    assert violations(PURE, allowed) == []


def test_effect_modules_never_import_qt_or_the_desktop():
    def allowed(name):
        return top(name) not in {"PySide6", "shiboken6"} and not name.startswith("stoker.desktop")

    assert violations(EFFECTS, allowed) == []


def test_the_desktop_never_spawns_or_probes():
    forbidden = {"subprocess", "psutil", "httpx", "gguf"}
    assert violations({"stoker.desktop"}, lambda n: top(n) not in forbidden) == []


def test_the_checker_catches_a_violation(tmp_path, monkeypatch):
    bad = APP / "stoker" / "planning" / "_layer_probe_tmp.py"
    bad.write_text("import psutil\n")
    try:
        probe = {"stoker.planning._layer_probe_tmp"}
        assert any("psutil" in v for v in violations(probe, lambda n: top(n) in STDLIB))
    finally:
        bad.unlink()


# Rooms whose modules are neither pure nor effect modules in this sense: the desktop (Qt), the
# CLI and the benchmarks sit on top and may use anything below them.
TOP_ROOMS = ("stoker.desktop", "stoker.cli", "stoker.bench")
# At most this many imports of stoker's own modules may sit inside functions, each with a
# comment saying why (start-up time); tests/import_graph.py lists them.
MAX_LAZY_IMPORTS = 20


def _is_docstring_only(module: str) -> bool:
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in tree.body)


def test_every_module_is_classified():
    """A new module must be added to PURE or EFFECTS (or live in a top room), so the layer
    rules and the import contract cover it from its first commit."""
    unclassified = [m for m in modules() if m not in PURE and m not in EFFECTS
                    and not m.startswith(tuple(r + "." for r in TOP_ROOMS)) and m not in TOP_ROOMS
                    and m != "stoker.__main__" and not _is_docstring_only(m)]
    assert unclassified == []
    assert sorted((PURE | EFFECTS) - set(modules())) == []  # no stale names
    assert not PURE & EFFECTS


def test_the_import_contract_checks_exactly_the_pure_modules():
    config = tomllib.loads((APP.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    pure = next(c for c in contracts if c["id"] == "pure-modules")
    assert sorted(pure["source_modules"]) == sorted(PURE)


def test_the_room_graph_is_a_dag_with_no_import_running_up():
    assert room_cycles() == []
    assert module_cycles() == []
    assert upward() == []


def test_few_imports_of_our_own_modules_sit_inside_functions():
    lazy = lazy_imports()
    assert len(lazy) <= MAX_LAZY_IMPORTS, "\n".join(lazy)
    for entry in lazy:  # each lazy import says why, in a comment just above it
        where = entry.split()[0]
        path, line = where.rsplit(":", 1)
        lines = (APP.parent / path).read_text(encoding="utf-8").splitlines()
        above = []
        i = int(line) - 2
        while i >= 0 and (lines[i].strip().startswith(("#", "from ", "import ")) or not lines[i].strip()):
            above.append(lines[i])
            i -= 1
        assert any("start-up" in a.lower() or "lazy" in a.lower() for a in above if a.strip().startswith("#")), entry


def test_the_graph_check_catches_a_cycle_and_an_upward_import(tmp_path):
    assert import_graph._cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    bad = APP / "stoker" / "base" / "_layer_probe_tmp.py"
    bad.write_text("from stoker.fleet import snapshot\n")
    try:
        assert any("stoker.base._layer_probe_tmp" in u for u in upward())
    finally:
        bad.unlink()


CLASS_BOUND, FUNCTION_BOUND = 400, 120  # lines, the house issue's bounds


def oversized(root: Path) -> list[str]:
    """Classes and functions longer than the bounds, as `path:line name (lines)`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            bound = CLASS_BOUND if isinstance(node, ast.ClassDef) else FUNCTION_BOUND
            if lines > bound:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines})")
    return found


def test_no_class_over_400_lines_and_no_function_over_120():
    assert oversized(APP / "stoker") == []


def test_the_size_check_catches_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_BOUND))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    assert oversized(tmp_path) == [f"long.py:1 long ({FUNCTION_BOUND + 1})"]
