"""Short, stable, human model ids for the gateway, and resolving what a request names.

A chat client names a model in its request (`"model": "smollm2-135m-instruct:q4_1"`). Every
model Stoker can run gets one id derived from its file name alone (never its folder, so the
user's home folder never leaks into `/v1/models`), unique across the library: the quant
tag becomes the id's `:tag` as Ollama writes it, a split set is named by its stem, and two
files that would share an id are told apart by a `-2`, `-3` … in a stable order. Aliases
(from Settings, the per-model dialog, or a store's own name such as Ollama's `llama3.2:3b`)
resolve to the same model. What a name does not match is answered with the closest ids.

Pure: it is given file names and aliases; it never lists folders or reads headers.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import StrEnum

from stoker.library.image_parts import ImageModel

# The quantisation tags llama.cpp writes into file names (llama-quantize's type names, plus
# the float types), matched case-insensitively at the end of the stem.
_QUANT_RE = re.compile(
    r"^(?P<name>.+?)[-_.](?P<quant>(?:u?i?q[1-8](?:_[0-9a-z]+)*(?:_xxs|_xs|_s|_m|_l|_nl)?)"
    r"|f16|f32|bf16|fp16|fp32|mxfp4(?:_moe)?|tq[12]_0)$", re.IGNORECASE)
_SPLIT_RE = re.compile(r"-\d{5}-of-\d{5}$", re.IGNORECASE)
_UNSAFE_RE = re.compile(r"[^a-z0-9._:+-]+")


class ModelKind(StrEnum):
    """What a model serves, read from its GGUF (pooling type, general.type, architecture)."""

    CHAT = "chat"  # text generation: chat, completions, responses, messages, infill
    EMBEDDING = "embedding"  # /v1/embeddings only
    RERANK = "rerank"  # /v1/rerank only
    IMAGE = "image"  # a diffusion model: /v1/images/generations, /sdapi/v1/txt2img, img2img


# Encoder architectures llama.cpp runs only as embedding models (src/llama-arch.cpp).
ENCODER_ARCHS = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3",
                           "modern-bert", "neo-bert", "eurobert", "t5encoder"})
POOLING_RANK = 4  # LLAMA_POOLING_TYPE_RANK: a reranker's classification head
POOLING_EMBEDDING = frozenset({1, 2, 3})  # mean, cls, last


def model_kind(architecture: str, pooling_type: int | None, general_type: str | None,
               image_part: str | None = None) -> ModelKind:
    """Chat, embedding, rerank or image, from the GGUF's own words (pooling beats
    architecture: a Qwen3 embedding model is a `qwen3` with last-token pooling; a file whose
    tensors are a diffusion model or a whole SD checkpoint is an image model)."""
    if image_part in ("diffusion", "checkpoint"):
        return ModelKind.IMAGE
    if pooling_type == POOLING_RANK or (general_type or "").lower() in ("rerank", "reranker"):
        return ModelKind.RERANK
    if pooling_type in POOLING_EMBEDDING or architecture in ENCODER_ARCHS \
            or (general_type or "").lower() in ("embedding", "embeddings"):
        return ModelKind.EMBEDDING
    return ModelKind.CHAT


@dataclass(frozen=True)
class ModelFacts:
    """What a model's header says about it, for listings that clients read (the gateway's
    /v1/models and Ollama's /api/tags, /api/show): never a plan, which the snapshot carries."""

    architecture: str | None = None
    quantization: str | None = None  # "Q4_1", from general.file_type
    parameter_count: int | None = None
    size_bytes: int | None = None  # every part of a split set together
    n_ctx_train: int | None = None  # the training maximum, not what is planned
    n_embd: int | None = None
    modified_at: float | None = None  # the file's mtime (unix time)
    template_tools: bool | None = None  # the chat template handles `tools`; None: no template
    projector: bool = False  # a vision projector (mmproj) goes with it
    fill_in_middle: bool = False  # /infill tokens in its vocabulary
    digest: str | None = None  # the sha256 a store names the blob by, when it does


@dataclass(frozen=True)
class CatalogEntry:
    """One model as the gateway knows it."""

    id: str
    path: str  # the file Stoker launches (first part of a split set); never shown to clients
    kind: ModelKind = ModelKind.CHAT
    aliases: tuple[str, ...] = ()
    origin: str = "library"  # where it was found: library, an added folder, a store
    image: ImageModel | None = None  # an image model's files (kind IMAGE); None otherwise
    facts: ModelFacts | None = None  # None: its header could not be read


def base_id(file_name: str) -> str:
    """The id a file would get with no other file competing for it.

    `SmolLM2-135M-Instruct.Q4_1.gguf` → `smollm2-135m-instruct:q4_1`;
    `Qwen3-30B-A3B-Q4_K_M-00001-of-00003.gguf` → `qwen3-30b-a3b:q4_k_m`; a name with no quant
    tag keeps its stem (`my-model.gguf` → `my-model`).
    """
    if ":" in file_name and not file_name.lower().endswith(".gguf"):
        return _clean(file_name) or "model"  # a store's own name with its tag (`llama3.2:3b`)
    stem = file_name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    if stem.lower().endswith(".gguf"):
        stem = stem[:-5]
    stem = _SPLIT_RE.sub("", stem)
    m = _QUANT_RE.match(stem)
    if m:
        name, quant = m.group("name"), m.group("quant")
        ident = f"{_clean(name)}:{_clean(quant).replace('.', '_')}"
    else:
        ident = _clean(stem)
    return ident or "model"


def _clean(text: str) -> str:
    return _UNSAFE_RE.sub("-", text.strip().lower()).strip("-.:") or ""


def assign_ids(files: list[tuple[str, str]]) -> dict[str, str]:
    """`{key: id}` for `(key, file name)` pairs: every id unique, the same files always get
    the same ids. Ties go by key order, so the earlier key keeps the plain id and a later
    one gets `name-2:quant` (the tag stays last, where clients look for it)."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for key, name in sorted(files, key=lambda kv: (base_id(kv[1]), kv[0])):
        ident = base_id(name)
        if ident in taken:
            head, sep, tag = ident.partition(":")
            n = 2
            while f"{head}-{n}{sep}{tag}" in taken:
                n += 1
            ident = f"{head}-{n}{sep}{tag}"
        taken.add(ident)
        out[key] = ident
    return out


def normalise_alias(alias: str) -> str | None:
    """An alias as it is matched (lower case, trimmed), or None when it is not usable."""
    text = alias.strip().lower()
    if not text or len(text) > 200 or any(c.isspace() for c in text):
        return None
    return text


@dataclass(frozen=True)
class Catalog:
    entries: tuple[CatalogEntry, ...] = ()

    def resolve(self, name: str | None) -> CatalogEntry | None:
        """The entry a request's `model` names: its id, an alias, or the file's own name."""
        if not name:
            return None
        want = name.strip().lower()
        for e in self.entries:
            if e.id == want:
                return e
        for e in self.entries:
            if want in e.aliases:
                return e
        # Clients that saved a model's file name (`SmolLM2-135M-Instruct.Q4_1.gguf`) still work.
        for e in self.entries:
            file_name = e.path.replace("\\", "/").rsplit("/", 1)[-1].lower()
            if want in (file_name, file_name.removesuffix(".gguf")):
                return e
        return None

    def by_path(self, path: str | None) -> CatalogEntry | None:
        for e in self.entries:
            if e.path == path:
                return e
        return None

    def closest(self, name: str, n: int = 3) -> tuple[str, ...]:
        """Up to `n` ids that look most like `name`, best first (for a 404's message)."""
        names = {e.id: e.id for e in self.entries}
        for e in self.entries:
            for a in e.aliases:
                names.setdefault(a, e.id)
        hits = difflib.get_close_matches(name.strip().lower(), list(names), n=n * 2, cutoff=0.3)
        out: list[str] = []
        for h in hits:
            if names[h] not in out:
                out.append(names[h])
        if not out:  # nothing alike: list the first few so the message still helps
            out = [e.id for e in self.entries[:n]]
        return tuple(out[:n])

    def serving(self, kind: ModelKind) -> tuple[CatalogEntry, ...]:
        return tuple(e for e in self.entries if e.kind is kind)


def build_catalog(models: list[tuple[str, str, ModelKind, str]],
                  aliases: dict[str, tuple[str, ...]] | None = None,
                  images: dict[str, ImageModel] | None = None,
                  facts: dict[str, ModelFacts] | None = None) -> tuple[Catalog, tuple[str, ...]]:
    """A catalog from `(path, file name, kind, origin)`, `{path: aliases}`, the image
    models' files by path and each model's header facts by path; also the sentences for
    aliases that could not be used (taken by another model's id or alias)."""
    ids = assign_ids([(path, name) for path, name, _, _ in models])
    taken = set(ids.values())
    problems: list[str] = []
    entries = []
    used: dict[str, str] = {}
    for path, _name, kind, origin in sorted(models, key=lambda m: ids[m[0]]):
        mine: list[str] = []
        for raw in (aliases or {}).get(path, ()):
            alias = normalise_alias(raw)
            if alias is None:
                problems.append(f"the alias {raw!r} for {ids[path]} is empty or has spaces; "
                                "aliases are one word such as gpt-4o-mini.")
                continue
            if alias == ids[path] or alias in mine:
                continue
            if alias in taken or alias in used:
                owner = used.get(alias, alias)
                problems.append(f"the alias {alias!r} for {ids[path]} is already the name of "
                                f"{owner}; pick another alias.")
                continue
            used[alias] = ids[path]
            mine.append(alias)
        entries.append(CatalogEntry(id=ids[path], path=path, kind=kind, aliases=tuple(mine),
                                    origin=origin, image=(images or {}).get(path),
                                    facts=(facts or {}).get(path)))
    return Catalog(tuple(entries)), tuple(problems)


def alias_problems(catalog: Catalog, path: str, aliases: tuple[str, ...]) -> tuple[str, ...]:
    """Sentences for the aliases the model at `path` could not be given beside the other
    models in `catalog`, by build_catalog's rules (one word; not another model's id or
    alias), so the per-model dialog can say so as they are typed instead of in a log."""
    me = catalog.by_path(path)
    my_id = me.id if me is not None else None
    owners = {}
    for e in catalog.entries:
        if e.path == path:
            continue
        owners[e.id] = e.id
        for a in e.aliases:
            owners.setdefault(a, e.id)
    problems = []
    for raw in aliases:
        alias = normalise_alias(raw)
        if alias is None:
            problems.append(f"The alias {raw!r} is empty or has spaces; aliases are one word "
                            "such as gpt-4o-mini.")
        elif alias != my_id and alias in owners:
            problems.append(f"The alias {alias!r} is already the name of {owners[alias]}; "
                            "pick another alias.")
    return tuple(problems)
