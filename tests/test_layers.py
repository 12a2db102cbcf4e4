"""The layer rules of DESIGN.md §1, checked on every import statement in app/stoker.

Pure modules: stdlib and other pure modules only. Effect modules: never Qt, never the
desktop. desktop: never subprocess, psutil, httpx or gguf. Imports inside functions count too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
PURE = frozenset({
    "stoker.desktop.notifications",
    "stoker.desktop.tray_view",
    "stoker.diagnosis.blockers",
    "stoker.diagnosis.catalogue",
    "stoker.diagnosis.classify",
    "stoker.diagnosis.evidence",
    "stoker.engines.about",
    "stoker.engines.argv",
    "stoker.engines.builds",
    "stoker.engines.ds4_launch",
    "stoker.engines.engine_log",
    "stoker.engines.kind",
    "stoker.engines.launch_spec",
    "stoker.engines.rpc",
    "stoker.engines.sd_server",
    "stoker.fleet.commands",
    "stoker.fleet.lifecycle",
    "stoker.fleet.quarantine",
    "stoker.fleet.recovery",
    "stoker.fleet.residency",
    "stoker.fleet.restart",
    "stoker.fleet.snapshot",
    "stoker.fleet.status_report",
    "stoker.gateway.rules",
    "stoker.integration.login_items",
    "stoker.library.gguf_summary",
    "stoker.library.image_parts",
    "stoker.library.model_ids",
    "stoker.library.quant_choice",
    "stoker.library.store_layouts",
    "stoker.planning.devices",
    "stoker.planning.ds4",
    "stoker.planning.machine",
    "stoker.planning.measured",
    "stoker.planning.memory",
    "stoker.planning.overrides",
    "stoker.planning.plan",
    "stoker.planning.planner",
    "stoker.planning.speed",
})
EFFECTS = frozenset({
    "stoker.base.applog",
    "stoker.base.log_tail",
    "stoker.base.paths",
    "stoker.base.secrets",
    "stoker.base.store",
    "stoker.diagnosis.incidents",
    "stoker.diagnosis.memory_cgroup",
    "stoker.diagnosis.oom_evidence",
    "stoker.engines.about_facts",
    "stoker.engines.ds4_files",
    "stoker.engines.find",
    "stoker.engines.health",
    "stoker.engines.process",
    "stoker.engines.rpc_worker",
    "stoker.engines.sd_files",
    "stoker.engines.setup",
    "stoker.fleet.control",
    "stoker.fleet.instance",
    "stoker.fleet.launcher",
    "stoker.fleet.ledger",
    "stoker.fleet.supervisor",
    "stoker.gateway.child",
    "stoker.gateway.images",
    "stoker.gateway.link",
    "stoker.gateway.process",
    "stoker.gateway.routes",
    "stoker.gateway.server",
    "stoker.integration.autostart",
    "stoker.integration.desktop_entry",
    "stoker.integration.qt_platform",
    "stoker.library.catalog",
    "stoker.library.gguf_io",
    "stoker.library.gguf_write",
    "stoker.library.hf_hub",
    "stoker.library.models",
    "stoker.library.pull",
    "stoker.library.pull_record",
    "stoker.library.real_shapes",
    "stoker.library.removal",
    "stoker.library.stores",
    "stoker.planning.bandwidth",
    "stoker.planning.measurements",
    "stoker.planning.memory_probe",
    "stoker.planning.pipeline",
    "stoker.planning.probe",
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

    assert violations("shell", allowed) == []


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
