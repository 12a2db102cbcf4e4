"""The models the gateway can serve, by id: the library scanned, named and kept current.

Wraps shell/models (which files), shell/gguf_io (what each serves: chat, embedding,
rerank, image; an image model's VAE and text encoders are not listed, they go with the
diffusion model in their folder) and the overrides store (aliases set per model) around core/model_ids, which
decides the names. The catalog is an immutable value swapped in whole, so the gateway's
thread and the supervisor's read it without locks; `refresh` rescans (the headers are
cached by path, size and mtime, so a rescan costs milliseconds) and is called when a
request names something unknown, before answering 404.
Must not decide anything about names itself, nor launch anything.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore
from stoker.library.image_parts import ImageFile, ImagePart, image_models_from
from stoker.library.model_ids import Catalog, ModelFacts, ModelKind, build_catalog, model_kind
from stoker.library.models import is_projector_name, list_models, scan_file

log = logging.getLogger(__name__)


def _real(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(str(path)))


def _facts(m, s) -> ModelFacts:
    """The listing facts of one model file (`m` a models.ModelFile, `s` its summary or None)."""
    try:
        mtime: float | None = os.path.getmtime(m.path)
    except OSError:
        mtime = None
    return ModelFacts(
        architecture=s.architecture if s else None, quantization=s.file_type if s else None,
        parameter_count=(s.parameter_count or None) if s else None, size_bytes=m.size_bytes or None,
        n_ctx_train=s.n_ctx_train if s else None, n_embd=s.n_embd if s else None, modified_at=mtime,
        template_tools=s.template_tools if s else None, projector=m.mmproj is not None,
        fill_in_middle=bool(s and s.has_fim), digest=m.digest)


class ModelCatalog:
    def __init__(self, extra_paths: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._extra = tuple(_real(p) for p in extra_paths if p)
        self._catalog = Catalog()
        self.problems: tuple[str, ...] = ()
        self._listeners: list[Callable[[Catalog], None]] = []

    def on_change(self, callback: Callable[[Catalog], None]) -> Callable[[], None]:
        """Call `callback(catalog)` after each refresh that changed it; returns the unsubscriber."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    @property
    def current(self) -> Catalog:
        return self._catalog

    def add(self, path: str | Path) -> None:
        """Also serve this file (a model named on the command line outside the library)."""
        real = _real(path)
        with self._lock:
            if real not in self._extra:
                self._extra += (real,)
        self.refresh()

    def refresh(self) -> Catalog:

        found: dict[str, tuple[str, str, ModelKind, str]] = {}
        image_files: list[ImageFile] = []  # the parts of image models; only their models are listed
        store_names: dict[str, tuple[str, ...]] = {}  # the other tools' names: usable as aliases
        facts: dict[str, ModelFacts] = {}
        try:
            models = list(list_models(with_summary=True))
        except OSError as exc:
            log.warning("could not list the models: %s", exc)
            models = []
        for extra in self._extra:
            if extra not in {_real(m.path) for m in models} and os.path.isfile(extra):
                models.append(scan_file(Path(extra)))
        for m in models:
            if m.error or is_projector_name(m.name):
                continue
            s = m.summary
            if s is not None and s.is_vision_projector:
                continue
            real = _real(m.path)
            if s is not None and s.image_part:
                image_files.append(ImageFile(real, ImagePart(s.image_part)))
            kind = model_kind(s.architecture, s.pooling_type, s.general_type, s.image_part) if s \
                else ModelKind.CHAT
            if s is not None and s.image_part and kind is not ModelKind.IMAGE:
                continue  # a VAE or a text encoder: it goes with the image model in its folder
            # An Ollama blob is named by its hash: its id comes from the store's own name.
            file_name = m.name if not m.name.startswith("sha256-") else (m.origin_name or m.name)
            if real not in found:
                found[real] = (real, file_name, kind, str(m.origin))
                store_names[real] = tuple(n for n in (m.origin_name, *m.aliases) if n)
                facts[real] = _facts(m, s)
        store = OverridesStore(stoker_paths().config)
        try:
            aliases = {_real(k): v.aliases for k, v in store.all().items() if v.aliases}
        except OSError as exc:
            log.warning("could not read the model aliases: %s", exc)
            aliases = {}
        for real, names in store_names.items():
            aliases[real] = tuple(aliases.get(real, ())) + names
        # Exactly one of the two names an image model: its file is its key.
        images = {key: m for m in image_models_from(image_files)
                  if (key := m.checkpoint or m.diffusion_model) is not None}
        catalog, problems = build_catalog(list(found.values()), aliases, images, facts)
        for p in problems:
            log.warning("%s", p)
        with self._lock:
            changed = catalog != self._catalog
            self._catalog, self.problems = catalog, problems
        if changed:
            for callback in list(self._listeners):
                callback(catalog)
        return catalog

    def id_for(self, path: str) -> str | None:
        entry = self._catalog.by_path(_real(path)) if path else None
        return entry.id if entry else None
