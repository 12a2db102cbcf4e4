"""How other tools' model stores name and lay out their files: pure parsing, no file access.

Stoker uses models that Ollama, the Hugging Face cache, LM Studio and llama.cpp already
downloaded, in place. This module decides, from names and manifest text only, what a file
in such a store is (a model, a projector, one part of a split set, something to skip and
why) and what the store itself calls it (`llama3.2:3b`, `org/repo:Q4_K_M`), so a user can
say the name they know. It also parses the `hf.co/org/repo:quant` references that
`stoker pull` and llama-server's `-hf` take, and ranks quantisations by quality.
It must not touch files, the network or the clock: stoker/library/stores.py walks the stores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class ModelOrigin(StrEnum):
    """Where a model file was found; decides its name and whether Stoker may delete it."""

    LIBRARY = "library"  # <data>/models: `stoker setup` put it there
    FOLDER = "folder"  # a folder the user added in the settings
    OLLAMA = "ollama"
    HF = "hf"  # the Hugging Face hub cache, downloaded by another tool
    LMSTUDIO = "lmstudio"
    LLAMA_CPP = "llama-cpp"  # llama.cpp's own cache (`-hf`, `-mu`)
    PULLED = "pulled"  # the Hugging Face cache, downloaded by `stoker pull`


# Files Stoker put there itself; everything else belongs to another tool or to the user.
DELETABLE_ORIGINS = frozenset({ModelOrigin.LIBRARY, ModelOrigin.PULLED})


def may_delete(origin: ModelOrigin) -> bool:
    return origin in DELETABLE_ORIGINS


# ---------------------------------------------------------------------------- file names

SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
PROJECTOR_RE = re.compile(r"(^|[-_.])(mmproj|clip)([-_.]|$)", re.IGNORECASE)

# Quantisation names as llama.cpp's quantize and the common uploaders write them, best first.
# The order is quality: more bits per weight first; within a bit width the K-quants and
# I-quants before the legacy ones (their own perplexity tables rank them so).
QUANT_QUALITY = (
    "F32", "BF16", "F16", "Q8_K_XL", "Q8_0", "Q6_K_XL", "Q6_K_L", "Q6_K", "Q5_K_XL", "Q5_K_L", "Q5_K_M",
    "Q5_K_S", "Q5_1", "Q5_0", "Q4_K_XL", "Q4_K_L", "Q4_K_M", "MXFP4", "Q4_K_S", "IQ4_NL", "IQ4_XS",
    "Q4_1", "Q4_0", "Q3_K_XL", "Q3_K_L", "Q3_K_M", "IQ3_M", "Q3_K_S", "IQ3_S", "IQ3_XS", "IQ3_XXS",
    "Q2_K_XL", "Q2_K_L", "Q2_K", "Q2_K_S", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S",
    "TQ2_0", "TQ1_0",
)
_QUANT_RANK = {q: i for i, q in enumerate(QUANT_QUALITY)}
_QUANT_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:UD-)?(?P<q>(?:I?Q\d(?:_[0-9A-Z]+)*)|BF16|F16|F32|FP16|FP32|MXFP4(?:_MOE)?|TQ\d_0)"
    r"(?![A-Za-z0-9])", re.IGNORECASE)


def is_projector_name(name: str) -> bool:
    return bool(PROJECTOR_RE.search(name.removesuffix(".gguf")))


def split_of(name: str) -> tuple[str, int, int] | None:
    """(stem, part number, part count) for `<stem>-00001-of-00003.gguf`, else None."""
    m = SPLIT_RE.match(name)
    if not m:
        return None
    return m.group("stem"), int(m.group("index")), int(m.group("count"))


def quant_of(filename: str) -> str | None:
    """The quantisation a file name states (`Q4_K_M`, `BF16`), upper-cased, or None.

    The last match wins: `Qwen3-4B-Q4_K_M.gguf` has no other, and a name like
    `model-q8_0-Q4_K_M` is a Q4_K_M made from a Q8_0.
    """
    stem = filename.rsplit("/", 1)[-1]
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    split = SPLIT_RE.match(stem + ".gguf")
    if split:
        stem = split.group("stem")
    found = [m.group("q").upper() for m in _QUANT_RE.finditer(stem)]
    if not found:
        return None
    q = found[-1]
    return {"FP16": "F16", "FP32": "F32", "MXFP4_MOE": "MXFP4"}.get(q, q)


def quant_rank(quant: str | None) -> int:
    """Lower is better quality; an unknown quantisation sorts after every known one."""
    if quant is None:
        return len(QUANT_QUALITY) + 1
    return _QUANT_RANK.get(quant.upper(), len(QUANT_QUALITY))


# ---------------------------------------------------------------------------- Hugging Face

def hf_repo_of_folder(folder_name: str) -> str | None:
    """`models--org--repo` -> `org/repo` (the hub cache's folder naming), else None."""
    if not folder_name.startswith("models--"):
        return None
    parts = folder_name[len("models--"):].split("--")
    return "/".join(parts) if all(parts) else None


def hf_folder_of_repo(repo: str) -> str:
    return "models--" + repo.replace("/", "--")


_COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def hub_file_problem(commit: str, name: str, sha256: str | None) -> str | None:
    """Why a hub's answer about one file must not be written into the cache, or None.

    `snapshots/<commit>/<name>` and `blobs/<sha256>` are built from what the hub (or
    whatever HF_ENDPOINT names) answered, so a hostile answer could name a path outside
    the cache: a commit is 40 hex digits, a sha256 64, and a name is a relative path of
    plain parts (no `..`, no absolute path or drive, no backslash, no empty part)."""
    if not _COMMIT_RE.fullmatch(commit or ""):
        return f"the hub named the commit {commit!r}, which is not 40 hexadecimal digits"
    if sha256 is not None and not _SHA256_RE.fullmatch(sha256):
        return f"the hub stated the sha256 {sha256[:80]!r} for {name[:200]!r}, which is not 64 hexadecimal digits"
    if not name or "\\" in name or "\0" in name or name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return f"the hub named a file {name[:200]!r}, which is not a relative path inside the repository"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return f"the hub named a file {name[:200]!r}, whose path would leave the repository's folder"
    return None


def hf_model_name(repo: str, filename: str) -> str:
    """`org/repo:Q4_K_M` (the `-hf` / Ollama spelling); the file's stem when no quant is named."""
    quant = quant_of(filename)
    if quant:
        return f"{repo}:{quant}"
    stem = filename.rsplit("/", 1)[-1]
    split = split_of(stem)
    return f"{repo}:{split[0] if split else stem.removesuffix('.gguf')}"


@dataclass(frozen=True)
class HFReference:
    """What `stoker pull` was asked for: a repository and maybe a quantisation or a file."""

    repo: str  # org/repo
    quant: str | None = None  # upper-cased; None: let the planner pick
    filename: str | None = None  # --file NAME: exactly this file (or the first of its split set)
    revision: str = "main"


_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def parse_hf_reference(text: str, filename: str | None = None) -> HFReference | str:
    """`hf.co/org/repo[:quant]`, `huggingface.co/...`, `https://huggingface.co/org/repo`, or
    `org/repo`; returns the reference, or one sentence saying what is wrong with `text`."""
    ref = text.strip()
    for prefix in ("https://", "http://"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
    for host in ("hf.co/", "huggingface.co/", "www.huggingface.co/"):
        if ref.startswith(host):
            ref = ref[len(host):]
            break
    ref = ref.rstrip("/")
    quant = None
    if ":" in ref:
        ref, quant = ref.rsplit(":", 1)
        if not quant:
            return f"'{text}' ends with ':' but names no quantisation; write e.g. {ref}:Q4_K_M."
    parts = ref.split("/")
    revision = "main"
    # A pasted browser address: org/repo/tree/<rev> or org/repo/blob/<rev>/<file>.
    if len(parts) >= 4 and parts[2] in ("tree", "blob", "resolve"):
        revision = parts[3]
        if len(parts) > 4 and filename is None:
            filename = "/".join(parts[4:])
        parts = parts[:2]
    repo = "/".join(parts)
    if not _REPO_RE.match(repo):
        return (f"'{text}' is not a Hugging Face repository; write it as hf.co/ORG/REPO[:QUANT] "
                "or ORG/REPO --file NAME.")
    if quant and filename:
        return f"give either a quantisation (:{quant}) or --file, not both."
    return HFReference(repo=repo, quant=quant.upper() if quant else None, filename=filename,
                       revision=revision)


# ---------------------------------------------------------------------------- Ollama

OLLAMA_DEFAULT_REGISTRY = "registry.ollama.ai"
OLLAMA_MODEL_MEDIA = "application/vnd.ollama.image.model"
OLLAMA_PROJECTOR_MEDIA = "application/vnd.ollama.image.projector"
OLLAMA_ADAPTER_MEDIA = "application/vnd.ollama.image.adapter"


def ollama_name(registry: str, namespace: str, model: str, tag: str) -> str:
    """The name `ollama list` shows: `llama3.2:3b`, `user/model:tag`, `hf.co/org/repo:Q4_K_M`."""
    if registry == OLLAMA_DEFAULT_REGISTRY:
        return f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
    return f"{registry}/{namespace}/{model}:{tag}"


@dataclass(frozen=True)
class OllamaManifest:
    """The blobs one Ollama tag points at (`sha256-<hex>` file names), or why it is skipped."""

    model_blob: str | None
    projector_blob: str | None = None
    model_bytes: int | None = None
    skip_reason: str | None = None  # a sentence when this tag is not a model Stoker can run


def _blob_name(digest: object) -> str | None:
    if not isinstance(digest, str) or not re.fullmatch(r"sha256[:-][0-9a-f]{64}", digest):
        return None
    return "sha256-" + digest[7:]


MAX_MANIFEST_BYTES = 1 << 20  # Ollama's are under 2 kB; anything this big is not one
MAX_MANIFEST_DEPTH = 100  # Ollama's nest 3 deep (its own parser allows 10,000)


def json_depth(text: str) -> int:
    """How deep a JSON text nests its brackets (strings skipped), without parsing it: the
    parser's own limit is the interpreter's recursion limit, which other code may have raised."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_ollama_manifest(text: str) -> OllamaManifest:
    if len(text) > MAX_MANIFEST_BYTES:
        return OllamaManifest(None, skip_reason=f"its manifest is over {MAX_MANIFEST_BYTES >> 20} MiB, "
                                                "which no Ollama manifest is")
    if json_depth(text) > MAX_MANIFEST_DEPTH:
        return OllamaManifest(None, skip_reason="its manifest is nested too deeply to be one")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return OllamaManifest(None, skip_reason="its manifest is not JSON")
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        return OllamaManifest(None, skip_reason="its manifest lists no layers")
    model = projector = None
    size = None
    adapters = 0
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        media = layer.get("mediaType")
        if media == OLLAMA_MODEL_MEDIA and model is None:
            model = _blob_name(layer.get("digest"))
            size = layer.get("size") if isinstance(layer.get("size"), int) else None
        elif media == OLLAMA_PROJECTOR_MEDIA and projector is None:
            projector = _blob_name(layer.get("digest"))
        elif media == OLLAMA_ADAPTER_MEDIA:
            adapters += 1
    if model is None:
        return OllamaManifest(None, skip_reason="its manifest has no model layer")
    if adapters:
        return OllamaManifest(model, projector, size,
                              skip_reason="it adds a LoRA adapter to its base model, which Stoker does not apply")
    return OllamaManifest(model, projector, size)


def digest_of_blob_name(name: str) -> str | None:
    """The sha256 an Ollama (`sha256-<hex>`) or hub (`<hex>`) blob file name states."""
    m = re.fullmatch(r"(?:sha256-)?([0-9a-f]{64})", name)
    return m.group(1) if m else None


def lmstudio_name(publisher: str, repo: str, filename: str) -> str:
    """LM Studio's own key for a model: `publisher/repo/file.gguf`."""
    return f"{publisher}/{repo}/{filename}"


# ---------------------------------------------------------------------------- where stores are

class StoreLayout(StrEnum):
    OLLAMA = "ollama"  # manifests/<registry>/<namespace>/<model>/<tag> + blobs/sha256-<hex>
    HF = "hf"  # models--<org>--<repo>/snapshots/<rev>/**.gguf -> ../../blobs/<sha>
    LMSTUDIO = "lmstudio"  # <publisher>/<repo>/*.gguf
    FLAT = "flat"  # *.gguf directly in the folder (llama.cpp's -mu cache)


@dataclass(frozen=True)
class StoreRoot:
    origin: ModelOrigin
    layout: StoreLayout
    path: str
    why: str  # which variable or default named it, for `stoker models --json`


def _join(base: str, *parts: str, sep: str) -> str:
    return sep.join([base.rstrip("/\\"), *parts])


def store_roots(env: Mapping[str, str], home: str, platform: str, *,
                ollama_service: bool = False) -> tuple[StoreRoot, ...]:
    """Every store folder the other tools use on this OS, in the order they are listed.

    `platform` is sys.platform ("linux", "darwin", "win32"). Folders that do not exist are
    listed too; the walker skips them. Mirrors each tool's own lookup: Ollama's
    OLLAMA_MODELS, huggingface_hub's HF_HUB_CACHE / HF_HOME / XDG_CACHE_HOME, and llama.cpp
    b11434's LLAMA_CACHE (its `-hf` files in hub layout, `-mu` files flat) with
    fs_get_cache_directory's per-OS default. The Linux Ollama service's store only with
    `ollama_service` (a Settings choice, off by default): another account owns it.
    """
    win = platform == "win32"
    sep = "\\" if win else "/"

    def j(base: str, *parts: str) -> str:
        return _join(base, *parts, sep=sep)

    roots: list[StoreRoot] = []
    if env.get("OLLAMA_MODELS"):
        roots.append(StoreRoot(ModelOrigin.OLLAMA, StoreLayout.OLLAMA, env["OLLAMA_MODELS"], "OLLAMA_MODELS"))
    roots.append(StoreRoot(ModelOrigin.OLLAMA, StoreLayout.OLLAMA, j(env.get("USERPROFILE") or home, ".ollama",
                                                                     "models") if win else j(home, ".ollama", "models"),
                           "Ollama's default store"))
    if platform.startswith("linux") and ollama_service:
        roots.append(StoreRoot(ModelOrigin.OLLAMA, StoreLayout.OLLAMA, "/usr/share/ollama/.ollama/models",
                               "the Linux Ollama service's store"))
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        roots.append(StoreRoot(ModelOrigin.HF, StoreLayout.HF, hub, "HF_HUB_CACHE"))
    elif env.get("HF_HOME"):
        roots.append(StoreRoot(ModelOrigin.HF, StoreLayout.HF, j(env["HF_HOME"], "hub"), "HF_HOME"))
    elif env.get("XDG_CACHE_HOME") and not win:
        roots.append(StoreRoot(ModelOrigin.HF, StoreLayout.HF, j(env["XDG_CACHE_HOME"], "huggingface", "hub"),
                               "XDG_CACHE_HOME"))
    else:
        roots.append(StoreRoot(ModelOrigin.HF, StoreLayout.HF, j(home, ".cache", "huggingface", "hub"),
                               "the Hugging Face default cache"))
    roots.append(StoreRoot(ModelOrigin.LMSTUDIO, StoreLayout.LMSTUDIO, j(home, ".lmstudio", "models"),
                           "LM Studio's models folder"))
    roots.append(StoreRoot(ModelOrigin.LMSTUDIO, StoreLayout.LMSTUDIO, j(home, ".cache", "lm-studio", "models"),
                           "LM Studio's older models folder"))
    if env.get("LLAMA_CACHE"):
        roots.append(StoreRoot(ModelOrigin.LLAMA_CPP, StoreLayout.HF, env["LLAMA_CACHE"], "LLAMA_CACHE"))
        roots.append(StoreRoot(ModelOrigin.LLAMA_CPP, StoreLayout.FLAT, env["LLAMA_CACHE"], "LLAMA_CACHE"))
    else:
        if win:
            base = env.get("LOCALAPPDATA") or j(home, "AppData", "Local")
        elif platform == "darwin":
            base = j(home, "Library", "Caches")
        else:
            base = env.get("XDG_CACHE_HOME") or j(home, ".cache")
        roots.append(StoreRoot(ModelOrigin.LLAMA_CPP, StoreLayout.FLAT, j(base, "llama.cpp"),
                               "llama.cpp's default cache"))
    return tuple(roots)
