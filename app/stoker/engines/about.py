"""What `stoker --version` and the tray's About box say: the version, the engine builds,
the folders. Values in, lines out; finding them on disk is stoker.engines.about_facts.

Unknown stays None and is said as unknown (a source tree that was never installed has
no distribution metadata; a machine without `stoker setup` has no engine build).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstalledEngine:
    id: str  # "b11434-cpu"
    version: str | None  # llama-server's own version string, from the manifest
    folder: str


@dataclass(frozen=True)
class AboutInfo:
    version: str | None  # the stoker distribution's version; None: not installed
    frozen: bool  # running from a PyInstaller bundle
    python: str
    qt: str | None  # PySide6's version; None when Qt was not asked (the CLI never imports it)
    engines: tuple[InstalledEngine, ...]
    folders: tuple[tuple[str, str], ...]  # (what, path): config, data, cache, logs


def version_line(info: AboutInfo) -> str:
    """`stoker --version`: one line, the engine builds Stoker installed after a semicolon."""
    kind = "bundle" if info.frozen else f"Python {info.python}"
    line = f"stoker {info.version or 'unknown (not installed)'} ({kind})"
    if info.engines:
        line += "; engine " + ", ".join(
            f"{e.id} (llama-server {e.version})" if e.version else e.id for e in info.engines)
    else:
        line += "; no engine build installed (run `stoker setup`)"
    return line


def about_lines(info: AboutInfo) -> tuple[str, ...]:
    """The About box: version, runtime, each engine build with its folder, each folder."""
    lines = [f"Stoker {info.version or 'unknown (not installed)'}",
             ("Frozen bundle" if info.frozen else f"Python {info.python}")
             + (f", Qt {info.qt}" if info.qt else "")]
    if info.engines:
        lines += [f"Engine {e.id}" + (f" (llama-server {e.version})" if e.version else "")
                  + f": {e.folder}" for e in info.engines]
    else:
        lines.append("Engine: none installed; run `stoker setup`")
    lines += [f"{what.capitalize()}: {path}" for what, path in info.folders]
    return tuple(lines)
