"""Walk the model stores of Ollama, the Hugging Face cache, LM Studio and llama.cpp, read-only.

Each store keeps its files where its tool put them; Stoker only reads them (manifests,
symlinks, directory entries) and hands llama-server their paths. Nothing here copies,
moves, renames or writes a file in a store. What a name means and how a store is laid
out is decided in stoker.library.store_layouts; this module does the file walking and keeps
what it read cached by (path, size, mtime), so listing a store again costs a few stat
calls. It does not read GGUF headers (stoker/library/models.py asks shell/gguf_io for those).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from stoker.base.store import SettingsStore
from stoker.library.store_layouts import (
    MAX_MANIFEST_BYTES,
    ModelOrigin,
    OllamaManifest,
    StoreLayout,
    StoreRoot,
    digest_of_blob_name,
    hf_model_name,
    hf_repo_of_folder,
    is_projector_name,
    lmstudio_name,
    ollama_name,
    parse_ollama_manifest,
    quant_of,
    quant_rank,
    split_of,
    store_roots,
)

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class StoreModel:
    """One model file (or split set) a store holds, with the store's own name for it."""

    path: Path  # what llama-server gets: the first part; for the hub, the snapshot link
    origin: ModelOrigin
    origin_name: str  # `llama3.2:3b`, `org/repo:Q4_K_M`, `publisher/repo/file.gguf`
    size_bytes: int
    split_parts: int = 1
    mmproj: Path | None = None
    digest: str | None = None  # the sha256 the store names the blob by, when it does
    aliases: tuple[str, ...] = ()  # other names for the same file (`org/repo:file-stem`)


@dataclass(frozen=True)
class SkippedFile:
    path: Path
    origin: ModelOrigin
    origin_name: str | None
    reason: str  # one sentence


@dataclass(frozen=True)
class StoreScan:
    models: tuple[StoreModel, ...]
    skipped: tuple[SkippedFile, ...]
    roots: tuple[StoreRoot, ...]


def roots_here() -> tuple[StoreRoot, ...]:
    return store_roots(os.environ, str(Path.home()), sys.platform, ollama_service=_reads_ollama_service())


def _reads_ollama_service() -> bool:
    """Settings' "Also list the Linux Ollama service's models" (off unless turned on)."""
    try:
        return SettingsStore().load().read_ollama_service_store
    except (OSError, ValueError):
        return False


# ---- the cache: what was read from a file, keyed by (path, size, mtime_ns) ----

_cache: dict[tuple[str, str], tuple[tuple[int, int], object]] = {}
_cache_lock = threading.Lock()


def _stat_key(st: os.stat_result) -> tuple[int, int]:
    return st.st_size, st.st_mtime_ns


def _cached(kind: str, path: Path, st: os.stat_result, compute):
    key = (kind, str(path))
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == _stat_key(st):
        return hit[1]
    value = compute()
    with _cache_lock:
        _cache[key] = (_stat_key(st), value)
    return value


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
        _scans.clear()


class _Seen:
    """Every directory listed and file read during one scan, with its (size, mtime, inode):
    if none changed, the next scan's answer is this one's (a stat each instead of a walk)."""

    def __init__(self) -> None:
        self.stats: dict[str, tuple | None] = {}

    def note(self, path) -> os.stat_result | None:
        try:
            st = os.stat(path)
        except OSError:
            self.stats[str(path)] = None
            return None
        self.stats[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return st

    def unchanged(self) -> bool:
        for path, was in self.stats.items():
            try:
                st = os.stat(path)
                now = (st.st_size, st.st_mtime_ns, st.st_ino)
            except OSError:
                now = None
            if now != was:
                return False
        return True


_scans: dict[tuple, tuple[_Seen, StoreScan]] = {}
_seen = threading.local()


def _note(path) -> os.stat_result | None:
    seen = getattr(_seen, "current", None)
    if seen is None:
        try:
            return os.stat(path)
        except OSError:
            return None
    return seen.note(path)


def _starts_with_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _magic(path: Path, st: os.stat_result) -> bool:
    return _cached("magic", path, st, lambda: _starts_with_gguf(path))


# ---- Ollama ----

def _scan_ollama(root: Path, models: list, skipped: list) -> None:
    manifests = root / "manifests"
    blobs = root / "blobs"
    _note(manifests)
    if not manifests.is_dir():
        return
    _note(blobs)
    for dirpath, dirnames, filenames in os.walk(manifests):
        dirnames.sort()
        _note(dirpath)
        rel = Path(dirpath).relative_to(manifests).parts
        if len(rel) != 3:
            continue
        registry, namespace, model = rel
        for tag in sorted(filenames):
            mpath = Path(dirpath) / tag
            name = ollama_name(registry, namespace, model, tag)
            try:
                _ollama_entry(mpath, name, blobs, models, skipped)
            except Exception as exc:  # one bad entry must never stop the listing (or Stoker starting)
                skipped.append(SkippedFile(mpath, ModelOrigin.OLLAMA, name,
                                           f"its manifest could not be used ({type(exc).__name__}: {exc})."[:300]))


def _read_manifest(path: Path) -> OllamaManifest:
    """The manifest, read no further than the size cap (a 100 MB "manifest" is not read whole)."""
    with open(path, "rb") as f:
        data = f.read(MAX_MANIFEST_BYTES + 1)
    return parse_ollama_manifest(data.decode("utf-8"))


def _ollama_entry(mpath: Path, name: str, blobs: Path, models: list, skipped: list) -> None:
    """One manifest: its model listed, or skipped with the reason."""
    try:
        st = _note(mpath) or mpath.stat()
        manifest: OllamaManifest = _cached("ollama", mpath, st, lambda: _read_manifest(mpath))
    except (OSError, UnicodeDecodeError) as exc:
        skipped.append(SkippedFile(mpath, ModelOrigin.OLLAMA, name, f"its manifest cannot be read ({exc})."))
        return
    if manifest.model_blob is None:
        skipped.append(SkippedFile(mpath, ModelOrigin.OLLAMA, name, f"{manifest.skip_reason}."))
        return
    blob = blobs / manifest.model_blob
    bst = _note(blob)
    if bst is None:
        skipped.append(SkippedFile(blob, ModelOrigin.OLLAMA, name,
                                   f"its model blob {manifest.model_blob} is missing; "
                                   f"`ollama pull {name}` fetches it again."))
        return
    if manifest.skip_reason:
        skipped.append(SkippedFile(blob, ModelOrigin.OLLAMA, name, f"{manifest.skip_reason}."))
        return
    if not _magic(blob, bst):
        skipped.append(SkippedFile(blob, ModelOrigin.OLLAMA, name,
                                   "its model blob is not a GGUF file (a newer Ollama format), so "
                                   "llama-server cannot load it."))
        return
    mmproj = None
    if manifest.projector_blob:
        p = blobs / manifest.projector_blob
        mmproj = p if p.is_file() else None
    models.append(StoreModel(path=blob, origin=ModelOrigin.OLLAMA, origin_name=name,
                             size_bytes=bst.st_size, mmproj=mmproj,
                             digest=digest_of_blob_name(manifest.model_blob)))


# ---- Hugging Face hub layout (also llama.cpp's LLAMA_CACHE) ----

def _current_snapshot(repo_dir: Path) -> Path | None:
    """The snapshot `refs/main` points at, else the newest one."""
    snaps = repo_dir / "snapshots"
    _note(snaps)
    _note(repo_dir / "refs" / "main")
    try:
        commit = (repo_dir / "refs" / "main").read_text(encoding="utf-8").strip()
        if commit and (snaps / commit).is_dir():
            return snaps / commit
    except OSError:
        pass
    try:
        candidates = [p for p in snaps.iterdir() if p.is_dir()]
    except OSError:
        return None
    return max(candidates, key=lambda p: p.stat().st_mtime_ns) if candidates else None


def _group_gguf(files: list[Path]) -> tuple[list[tuple[Path, list[Path]]], list[Path]]:
    """(model, its parts) for single files and complete split sets; projectors apart."""
    projectors = [p for p in files if is_projector_name(p.name)]
    singles: list[tuple[Path, list[Path]]] = []
    sets: dict[tuple[Path, str, int], list[Path]] = {}
    for p in files:
        if p in projectors:
            continue
        s = split_of(p.name)
        if s:
            sets.setdefault((p.parent, s[0], s[2]), []).append(p)
        else:
            singles.append((p, [p]))
    for parts in sets.values():
        parts.sort()
        singles.append((parts[0], parts))
    return sorted(singles, key=lambda e: str(e[0]).lower()), projectors


def _hub_files(snapshot: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(snapshot):
        _note(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames) if f.lower().endswith(".gguf")]
    return out


def _scan_hub(root: Path, origin: ModelOrigin, models: list, skipped: list, pulled: frozenset[str]) -> None:
    _note(root)
    try:
        repos = sorted(p for p in root.iterdir() if p.name.startswith("models--"))
    except OSError:
        return
    for repo_dir in repos:
        try:
            _hub_repo(repo_dir, origin, models, skipped, pulled)
        except Exception as exc:  # one bad entry must never stop the listing
            skipped.append(SkippedFile(repo_dir, origin, None,
                                       f"it could not be read ({type(exc).__name__}: {exc})."[:300]))


def _hub_repo(repo_dir: Path, origin: ModelOrigin, models: list, skipped: list, pulled: frozenset[str]) -> None:
    """One `models--org--repo` folder: the models of its current snapshot, or skipped with why."""
    repo = hf_repo_of_folder(repo_dir.name)
    if not repo:
        return
    snapshot = _current_snapshot(repo_dir)
    if snapshot is None:
        return
    groups, projectors = _group_gguf(_hub_files(snapshot))
    names: dict[str, int] = {}
    for first, _ in groups:
        n = hf_model_name(repo, str(first.relative_to(snapshot)))
        names[n] = names.get(n, 0) + 1
    for first, parts in groups:
        rel = str(first.relative_to(snapshot)).replace(os.sep, "/")
        name = hf_model_name(repo, rel)
        s = split_of(first.name)
        stem = s[0] if s else first.name.removesuffix(".gguf")
        file_name = f"{repo}:{stem}"
        aliases: tuple[str, ...]
        if names[name] > 1:  # two files claim one quant (two models in one repo): the file decides
            name, aliases = file_name, ()
        else:
            aliases = (file_name,) if file_name != name else ()
        if s and len(parts) != s[2]:
            skipped.append(SkippedFile(first, origin, name, f"it is a split set of {s[2]} parts but only "
                                       f"{len(parts)} are in the cache; pull it again to get the rest."))
            continue
        try:
            real = [p.resolve(strict=True) for p in parts]
            size = sum((_note(p) or p.stat()).st_size for p in real)
        except OSError:
            skipped.append(SkippedFile(first, origin, name, "its link points at a blob that is missing."))
            continue
        mmproj = _projector_for(first, projectors)
        file_origin = ModelOrigin.PULLED if str(real[0]) in pulled else origin
        models.append(StoreModel(path=first, origin=file_origin, origin_name=name, size_bytes=size,
                                 split_parts=len(parts), mmproj=mmproj,
                                 digest=digest_of_blob_name(real[0].name), aliases=aliases))


def _projector_for(model: Path, projectors: list[Path]) -> Path | None:
    """The repository's mmproj for a model: the one beside it, the best quality when several."""
    here = [p for p in projectors if p.parent == model.parent] or projectors
    if not here:
        return None
    return min(here, key=lambda p: (quant_rank(quant_of(p.name)), p.name))


# ---- LM Studio and flat folders ----

def _scan_lmstudio(root: Path, models: list, skipped: list) -> None:
    _note(root)
    try:
        publishers = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for pub in publishers:
        _note(pub)
        for repo_dir in sorted(p for p in pub.iterdir() if p.is_dir() and not p.name.startswith(".")):
            _note(repo_dir)
            files = sorted(p for p in repo_dir.iterdir() if p.name.lower().endswith(".gguf"))
            groups, projectors = _group_gguf(files)
            for first, parts in groups:
                name = lmstudio_name(pub.name, repo_dir.name, first.name)
                try:
                    size = sum((_note(p) or p.stat()).st_size for p in parts)
                except OSError:
                    continue
                alias = hf_model_name(f"{pub.name}/{repo_dir.name}", first.name)
                models.append(StoreModel(path=first, origin=ModelOrigin.LMSTUDIO, origin_name=name,
                                         size_bytes=size, split_parts=len(parts),
                                         mmproj=_projector_for(first, projectors), aliases=(alias,)))


def _scan_flat(root: Path, origin: ModelOrigin, models: list, skipped: list) -> None:
    _note(root)
    try:
        files = sorted(p for p in root.iterdir() if p.is_file() and p.name.lower().endswith(".gguf"))
    except OSError:
        return
    groups, projectors = _group_gguf(files)
    for first, parts in groups:
        try:
            size = sum((_note(p) or p.stat()).st_size for p in parts)
        except OSError:
            continue
        s = split_of(first.name)
        name = s[0] if s else first.name.removesuffix(".gguf")
        models.append(StoreModel(path=first, origin=origin, origin_name=name, size_bytes=size,
                                 split_parts=len(parts), mmproj=_projector_for(first, projectors)))


def scan_stores(roots: tuple[StoreRoot, ...] | None = None,
                pulled: frozenset[str] = frozenset()) -> StoreScan:
    """Every model the other tools' stores hold, in root order; a missing store is no error.

    `pulled`: resolved blob paths `stoker pull` downloaded (listed as origin `pulled`).
    """
    roots = roots_here() if roots is None else roots
    key = (roots, pulled)
    with _cache_lock:
        hit = _scans.get(key)
    if hit is not None and hit[0].unchanged():
        return hit[1]
    seen = _Seen()
    _seen.current = seen
    try:
        scan = _scan(roots, pulled)
    finally:
        _seen.current = None
    with _cache_lock:
        _scans[key] = (seen, scan)
    return scan


def _scan(roots: tuple[StoreRoot, ...], pulled: frozenset[str]) -> StoreScan:
    models: list[StoreModel] = []
    skipped: list[SkippedFile] = []
    seen_roots: set[tuple[str, StoreLayout]] = set()
    for root in roots:
        path = Path(root.path).expanduser()
        try:
            key = (str(path.resolve()), root.layout)
        except OSError:
            continue
        _note(path)
        if key in seen_roots or not path.is_dir():
            continue
        seen_roots.add(key)
        try:
            if root.layout is StoreLayout.OLLAMA:
                _scan_ollama(path, models, skipped)
            elif root.layout is StoreLayout.HF:
                _scan_hub(path, root.origin, models, skipped, pulled)
            elif root.layout is StoreLayout.LMSTUDIO:
                _scan_lmstudio(path, models, skipped)
            else:
                _scan_flat(path, root.origin, models, skipped)
        except Exception as exc:  # a store that breaks the walk is skipped whole, never the listing
            skipped.append(SkippedFile(path, root.origin, None,
                                       f"{root.why} could not be read ({type(exc).__name__}: {exc})."[:300]))
    return StoreScan(tuple(models), tuple(skipped), tuple(roots))
