"""The models Stoker can run: GGUF files in the library and in folders the user added.

The library is `<data>/models` (where `stoker setup` puts the demo model); more folders
come from the settings key `model_folders`. A split set is listed once, by its first
part, with the size of all parts; mmproj / CLIP files are not models but are remembered
as the vision projector of the model beside them. Each model carries its header summary
(`shell.gguf_io.load_summary`, cached by path, size and mtime) or, for a file that is not
a usable GGUF, the one sentence saying why: listing never fails because of one bad file.
It decides nothing about memory or launching.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from stoker.shell.engines import read_setting
from stoker.shell.paths import stoker_paths
from stoker.shell.setup import DEMO_MODEL_NAME  # noqa: F401  (resolve_model's default; re-exported)
MAX_DEPTH = 4  # LM Studio style trees are publisher/repo/file.gguf; deeper is not a model folder

_SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_PROJECTOR_RE = re.compile(r"(^|[-_.])(mmproj|clip)([-_.]|$)", re.IGNORECASE)


@dataclass(frozen=True)
class ModelFile:
    path: Path
    name: str  # the file name (the first part for a split set)
    size_bytes: int  # all parts of a split set together
    origin: str  # "library" or the added folder it was found in
    split_parts: int = 1
    vision_projector: Path | None = None  # an mmproj file beside it
    summary: object | None = None  # stoker.core.gguf_summary.ModelSummary when readable
    error: str | None = None  # why the header could not be read, one sentence

    @property
    def label(self) -> str:
        return self.name.removesuffix(".gguf")


def library_folder() -> Path:
    return stoker_paths().models


def added_folders() -> tuple[Path, ...]:
    value = read_setting("model_folders")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(Path(v).expanduser() for v in value if isinstance(v, str) and v.strip())


def is_projector_name(name: str) -> bool:
    return bool(_PROJECTOR_RE.search(name.removesuffix(".gguf")))


def _gguf_files(folder: Path) -> list[Path]:
    found = []
    base_depth = len(folder.parts)
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        if len(Path(dirpath).parts) - base_depth >= MAX_DEPTH:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames)
                  if f.lower().endswith(".gguf") and not f.startswith(".")]
    return found


def _summary_or_error(path: Path):
    try:
        from stoker.shell.gguf_io import load_summary
    except ImportError:
        return None, None
    try:
        return load_summary(path), None
    except (ValueError, OSError) as exc:
        return None, str(exc) or f"{path.name} could not be read."
    except Exception as exc:  # a reader bug must not hide every other model
        return None, f"{path.name} could not be summarised ({type(exc).__name__}: {exc})."


def _pick_projector(model: Path, projectors: list[Path], models_here: int) -> Path | None:
    """The mmproj beside a model: the only one in a one-model folder, else the best name match."""
    here = [p for p in projectors if p.parent == model.parent]
    if not here:
        return None
    if models_here == 1 or len(here) == 1:
        return here[0]
    stem = model.name.lower()

    def shared_prefix(p: Path) -> int:
        cleaned = _PROJECTOR_RE.sub("-", p.name.lower())
        return len(os.path.commonprefix([stem, cleaned.lstrip("-")]))

    return max(here, key=shared_prefix)


def scan_folder(folder: Path, origin: str, with_summary: bool = True) -> list[ModelFile]:
    files = _gguf_files(folder) if folder.is_dir() else []
    projectors = [p for p in files if is_projector_name(p.name)]
    candidates = [p for p in files if p not in projectors]
    splits: dict[tuple[Path, str], list[Path]] = {}
    singles = []
    for p in candidates:
        m = _SPLIT_RE.match(p.name)
        if m:
            splits.setdefault((p.parent, m.group("stem")), []).append(p)
        else:
            singles.append(p)
    entries: list[tuple[Path, int, int]] = []  # (first part, total bytes, parts)
    for p in singles:
        entries.append((p, _size(p), 1))
    for parts in splits.values():
        parts.sort()
        entries.append((parts[0], sum(_size(q) for q in parts), len(parts)))
    per_folder: dict[Path, int] = {}
    for p, _, _ in entries:
        per_folder[p.parent] = per_folder.get(p.parent, 0) + 1

    models = []
    for path, size, parts in sorted(entries, key=lambda e: str(e[0]).lower()):
        summary, error = _summary_or_error(path) if with_summary else (None, None)
        if summary is not None and getattr(summary, "is_vision_projector", False):
            continue  # a CLIP file with an unusual name: still not a model
        models.append(ModelFile(path=path, name=path.name, size_bytes=size, origin=origin, split_parts=parts,
                                vision_projector=_pick_projector(path, projectors, per_folder[path.parent]),
                                summary=summary, error=error))
    return models


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def list_models(folders: tuple[Path, ...] | None = None, with_summary: bool = True) -> tuple[ModelFile, ...]:
    """Models in the library, then in each added folder (a file seen twice is listed once)."""
    sources = [(library_folder(), "library")]
    sources += [(f, str(f)) for f in (added_folders() if folders is None else folders)]
    seen: set[Path] = set()
    found = []
    for folder, origin in sources:
        for m in scan_folder(folder, origin, with_summary):
            key = m.path.resolve()
            if key not in seen:
                seen.add(key)
                found.append(m)
    return tuple(found)


def resolve_model(arg: str | None) -> Path:
    """A model argument -> a file: a path, a name in the library or an added folder, or the demo model.

    Names match with or without `.gguf`, case-insensitively. Raises `stoker.cli.UserError`
    with one sentence when nothing matches.
    """
    from stoker.cli import UserError

    if arg is None:
        demo = library_folder() / DEMO_MODEL_NAME
        if demo.is_file():
            return demo
        raise UserError("no model given and the demo model is not installed; run `stoker setup` or name a "
                        "GGUF file.")
    direct = Path(arg).expanduser()
    if direct.is_file():
        return direct
    if direct.is_dir():
        raise UserError(f"{arg} is a folder; name a .gguf file inside it.")
    wanted = arg.lower().removesuffix(".gguf")
    models = list_models(with_summary=False)
    exact = [m for m in models if m.name.lower().removesuffix(".gguf") == wanted]
    if exact:
        return exact[0].path
    partial = [m for m in models if wanted in m.name.lower()]
    if len(partial) == 1:
        return partial[0].path
    if len(partial) > 1:
        names = ", ".join(m.name for m in partial[:5])
        raise UserError(f"'{arg}' matches several models ({names}); give more of the name or a path.")
    raise UserError(f"no model named '{arg}' in the library or added folders, and no such file; "
                    "see `stoker models` for the names.")


def scan_file(path: Path, origin: str = "command line") -> ModelFile:
    """One model file outside the library (named on the command line), read like the others."""
    summary, error = _summary_or_error(path)
    return ModelFile(path=path, name=path.name, size_bytes=_size(path), origin=origin,
                     summary=summary, error=error)
