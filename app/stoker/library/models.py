"""The models Stoker can run: its library, folders the user added, and other tools' stores.

The library is `<data>/models` (where `stoker setup` puts the demo model); more folders
come from the settings key `model_folders`; Ollama's, the Hugging Face cache's, LM
Studio's and llama.cpp's stores are read in place by stoker/library/stores.py. One file found
twice (a hard link, an Ollama blob and a hub blob of one sha256) is listed once, with the
other names kept as aliases. Models hidden in the settings (`hidden_models`) are left out.
A split set is listed once, by its first part, with the size of all parts; mmproj / CLIP
files are not models but are remembered as the vision projector of the model beside them.
Each model carries its header summary (`shell.gguf_io.load_summary`, cached by path, size
and mtime) or, for a file that is not a usable GGUF, the one sentence saying why: listing
never fails because of one bad file. It decides nothing about memory or launching.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import read_setting
from stoker.errors import UserError
from stoker.library.gguf_io import load_summary
from stoker.library.gguf_summary import ModelSummary
from stoker.library.pull_record import PullRecord
from stoker.library.store_layouts import PROJECTOR_RE, SPLIT_RE, ModelOrigin, is_projector_name
from stoker.library.stores import StoreModel, scan_stores

MAX_DEPTH = 4  # LM Studio style trees are publisher/repo/file.gguf; deeper is not a model folder

_SPLIT_RE = SPLIT_RE
_PROJECTOR_RE = PROJECTOR_RE


@dataclass(frozen=True)
class ModelFile:
    path: Path
    name: str  # the file name (the first part for a split set)
    size_bytes: int  # all parts of a split set together
    origin: ModelOrigin
    split_parts: int = 1
    vision_projector: Path | None = None  # an mmproj file beside it (or the store's projector)
    summary: ModelSummary | None = None  # None when unreadable
    error: str | None = None  # why the header could not be read, one sentence
    origin_name: str | None = None  # the store's own name: `llama3.2:3b`, `org/repo:Q4_K_M`
    folder: Path | None = None  # the added folder it was found in (origin FOLDER)
    aliases: tuple[str, ...] = ()  # the names other stores give the same file
    digest: str | None = None  # sha256 the store names the blob by, when it does

    @property
    def label(self) -> str:
        """What a person calls it: the store's name, else the file name without `.gguf`."""
        return self.origin_name or self.name.removesuffix(".gguf")

    @property
    def mmproj(self) -> str | None:
        return str(self.vision_projector) if self.vision_projector else None

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this model answers to, the file name first."""
        out = [self.name.removesuffix(".gguf")]
        out += [n for n in (self.origin_name, *self.aliases) if n]
        return tuple(dict.fromkeys(out))


def library_folder() -> Path:
    return stoker_paths().models


def added_folders() -> tuple[Path, ...]:
    value = read_setting("model_folders")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(Path(v).expanduser() for v in value if isinstance(v, str) and v.strip())


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


def _summary_or_error(path: Path) -> tuple[ModelSummary | None, str | None]:
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


def scan_folder(folder: Path, origin: ModelOrigin, with_summary: bool = True,
                added: Path | None = None) -> list[ModelFile]:
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
    for path, size, n_parts in sorted(entries, key=lambda e: str(e[0]).lower()):
        summary, error = _summary_or_error(path) if with_summary else (None, None)
        if summary is not None and getattr(summary, "is_vision_projector", False):
            continue  # a CLIP file with an unusual name: still not a model
        models.append(ModelFile(path=path, name=path.name, size_bytes=size, origin=origin, split_parts=n_parts,
                                vision_projector=_pick_projector(path, projectors, per_folder[path.parent]),
                                summary=summary, error=error, folder=added))
    return models


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def hidden_models() -> frozenset[str]:
    """Resolved paths of the models the user hid from the list (setting `hidden_models`)."""
    value = read_setting("hidden_models")
    if not isinstance(value, (list, tuple)):
        return frozenset()
    out = set()
    for v in value:
        if isinstance(v, str) and v:
            try:
                out.add(str(Path(v).resolve()))
            except OSError:
                continue
    return frozenset(out)


def pulled_blobs() -> frozenset[str]:
    """Resolved blob paths `stoker pull` downloaded (its record in <data>/pulled.json)."""

    return PullRecord().blob_paths()


_entries: dict[str, tuple[tuple, tuple]] = {}  # path -> ((size, mtime, inode), (summary, error))


def _cached_summary(path: Path) -> tuple:
    """_summary_or_error, remembered by the file's (size, mtime, inode): one stat when unchanged."""
    try:
        st = os.stat(path)
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        return _summary_or_error(path)
    hit = _entries.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1]
    value = _summary_or_error(path)
    _entries[str(path)] = (key, value)
    return value


def clear_cache() -> None:
    _entries.clear()


def _store_entry(m: StoreModel, with_summary: bool) -> ModelFile:
    summary, error = _cached_summary(m.path) if with_summary else (None, None)
    return ModelFile(path=m.path, name=m.path.name, size_bytes=m.size_bytes, origin=m.origin,
                     split_parts=m.split_parts, vision_projector=m.mmproj, summary=summary, error=error,
                     origin_name=m.origin_name, aliases=m.aliases, digest=m.digest)


def _identity(path: Path) -> tuple | None:
    try:
        st = path.stat()  # follows the hub's symlinks to the blob
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def list_models(folders: tuple[Path, ...] | None = None, with_summary: bool = True,
                include_hidden: bool = False, stores: bool = True) -> tuple[ModelFile, ...]:
    """Models in the library, each added folder, then the other tools' stores, each file once.

    The first place a file is found names it; the names the other places give it become
    its aliases. `stores=False` keeps to the library and added folders.
    """
    found: list[ModelFile] = []
    by_identity: dict[tuple, int] = {}
    by_digest: dict[str, int] = {}

    def add(m: ModelFile) -> None:
        ident = _identity(m.path)
        index = by_identity.get(ident) if ident else None
        if index is None and m.digest:
            index = by_digest.get(m.digest)
        if index is not None:
            first = found[index]
            extra = tuple(n for n in (m.origin_name, *m.aliases) if n and n not in first.names)
            found[index] = dataclasses.replace(
                first, aliases=first.aliases + extra,
                vision_projector=first.vision_projector or m.vision_projector,
                digest=first.digest or m.digest)
            return
        if ident:
            by_identity[ident] = len(found)
        if m.digest:
            by_digest[m.digest] = len(found)
        found.append(m)

    for m in scan_folder(library_folder(), ModelOrigin.LIBRARY, with_summary):
        add(m)
    for f in (added_folders() if folders is None else folders):
        for m in scan_folder(f, ModelOrigin.FOLDER, with_summary, added=f):
            add(m)
    if stores:
        scan = scan_stores(pulled=pulled_blobs())
        for sm in scan.models:
            entry = _store_entry(sm, with_summary)
            if entry.summary is not None and getattr(entry.summary, "is_vision_projector", False):
                continue
            add(entry)
    if include_hidden:
        return tuple(found)
    hidden = hidden_models()
    if not hidden:
        return tuple(found)
    return tuple(m for m in found if str(m.path.resolve()) not in hidden)


def resolve_model(arg: str | None) -> Path:
    """A model argument -> a file: a path, a name in the library or an added folder, or the demo model.

    Names match with or without `.gguf`, case-insensitively. Raises `stoker.cli.UserError`
    with one sentence when nothing matches.
    """

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
    found = find_model(arg)
    if found is not None:
        return found.path
    wanted = arg.lower().removesuffix(".gguf")
    models = list_models(with_summary=False)
    partial = [m for m in models if any(wanted in n.lower() for n in m.names)]
    if len(partial) == 1:
        return partial[0].path
    if len(partial) > 1:
        names = ", ".join(m.label for m in partial[:5])
        raise UserError(f"'{arg}' matches several models ({names}); give more of the name or a path.")
    raise UserError(f"no model named '{arg}' in the library, the added folders or the other tools' "
                    "stores, and no such file; see `stoker models` for the names.")


def scan_file(path: Path) -> ModelFile:
    """One model file outside the library (named on the command line), read like the others:
    it counts as a file from an added folder, its own."""
    summary, error = _summary_or_error(path)
    return ModelFile(path=path, name=path.name, size_bytes=_size(path), origin=ModelOrigin.FOLDER,
                     folder=path.parent, summary=summary, error=error)


def find_model(name: str, models: tuple[ModelFile, ...] | None = None) -> ModelFile | None:
    """The model one of whose names is exactly `name` (case-insensitive, `.gguf` optional).

    Store names count: `llama3.2:3b` (Ollama; a bare `llama3.2` means its `:latest`, as in
    Ollama), `org/repo:Q4_K_M` (the hub cache), `publisher/repo/file.gguf` (LM Studio).
    """
    wanted = name.lower().removesuffix(".gguf")
    models = list_models(with_summary=False) if models is None else models
    for candidate in (wanted, wanted + ":latest"):
        for m in models:
            if any(n.lower().removesuffix(".gguf") == candidate for n in m.names):
                return m
    return None


DEMO_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
