"""Removing a model: delete the files Stoker downloaded, hide everyone else's.

A model in the library (`stoker setup`) or pulled by `stoker pull` (recorded in
<data>/pulled.json) is Stoker's own: removing it deletes exactly its files (every split
part, the hub cache's snapshot link and blob). A model from Ollama, LM Studio, llama.cpp,
another tool's hub download or an added folder is never touched: it is hidden from the
list (setting `hidden_models`) and can be shown again. Which of the two is
core.model_stores.may_delete's decision; this module only carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stoker.base.store import SettingsStore
from stoker.library.gguf_io import split_paths_of
from stoker.library.models import ModelFile
from stoker.library.pull_record import PullRecord
from stoker.library.store_layouts import ModelOrigin, may_delete


@dataclass(frozen=True)
class Removal:
    model: ModelFile
    delete: tuple[Path, ...]  # empty: the model is hidden instead
    size_bytes: int

    @property
    def hides(self) -> bool:
        return not self.delete


def _parts(model: ModelFile) -> list[Path]:

    return list(split_paths_of(model.path) or (model.path,))


def plan_removal(model: ModelFile) -> Removal:
    if not may_delete(model.origin):
        return Removal(model, (), 0)
    files: list[Path] = []
    if model.origin is ModelOrigin.PULLED:  # the hub cache: the link and the blob it points at
        record = PullRecord()
        for part in _parts(model):
            for pulled in record.for_blob(str(part.resolve())):
                files += [Path(pulled.link), Path(pulled.blob)]
    else:
        files = _parts(model)
    files = list(dict.fromkeys(f for f in files if f.is_file() or f.is_symlink()))
    size = sum(f.stat().st_size for f in files if not f.is_symlink())
    return Removal(model, tuple(files), size)


def carry_out(removal: Removal) -> None:
    if removal.hides:
        store = SettingsStore()
        hidden = list(store.load().hidden_models)
        target = str(removal.model.path.resolve())
        if target not in hidden:
            store.update(hidden_models=hidden + [target])
        return
    blobs = {str(f.resolve()) for f in removal.delete if not f.is_symlink()}
    for f in removal.delete:
        f.unlink(missing_ok=True)
    PullRecord().forget(blobs)


def unhide(model: ModelFile) -> bool:
    store = SettingsStore()
    hidden = list(store.load().hidden_models)
    target = str(model.path.resolve())
    if target not in hidden:
        return False
    store.update(hidden_models=[h for h in hidden if h != target])
    return True
