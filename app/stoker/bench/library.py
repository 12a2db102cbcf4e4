"""`stoker bench library`: listing 200 models across the other tools' stores, cold and cached.

Builds, in a temporary HOME, an Ollama store (manifests + sha256-named blobs), a Hugging
Face cache (snapshot links to blobs) and an LM Studio folder holding `--models` distinct
GGUF files in all (header-only files with a sparse data section, so the tree is small),
then times `list_models()` side by side: cold (nothing cached), with only the on-disk
summary cache (a new Stoker process), and warm (the same process listing again, as the
tray and the gateway do). The target is the warm list under 100 ms.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from stoker.library import gguf_io
from stoker.library import models as shell_models
from stoker.library import stores as model_stores
from stoker.library.gguf_write import write_header_only_gguf
from stoker.library.models import list_models

TARGET_MS = 100.0
STORE_VARIABLES = ("OLLAMA_MODELS", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                   "LLAMA_CACHE")


def add_arguments(parser) -> None:
    parser.add_argument("--models", type=int, default=200, help="models in the stores (200)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each cached measurement (median shown)")


def _small_gguf(path: Path, i: int) -> Path:
    import gguf


    Q = gguf.GGMLQuantizationType
    a, e, n, vocab = "llama", 256, 4, 4096
    md = {"general.name": f"bench-{i}", "general.file_type": int(gguf.LlamaFileType.MOSTLY_Q4_K_M),
          f"{a}.block_count": n, f"{a}.context_length": 4096, f"{a}.embedding_length": e,
          f"{a}.feed_forward_length": 512, f"{a}.attention.head_count": 4, f"{a}.attention.head_count_kv": 4,
          f"{a}.attention.layer_norm_rms_epsilon": 1e-5}
    tensors = [("token_embd.weight", (e, vocab), Q.Q4_K), ("output_norm.weight", (e,), Q.F32)]
    for b in range(n):
        tensors += [(f"blk.{b}.attn_q.weight", (e, e), Q.Q4_K), (f"blk.{b}.attn_k.weight", (e, e), Q.Q4_K),
                    (f"blk.{b}.attn_v.weight", (e, e), Q.Q4_K), (f"blk.{b}.ffn_up.weight", (e, 512), Q.Q4_K)]
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_header_only_gguf(path, a, md, tensors, vocab)


def build_stores(home: Path, count: int) -> None:
    """Ollama, the hub cache and LM Studio in their real layouts, `count` models in all."""
    for i in range(count):
        digest = hashlib.sha256(f"bench-{i}".encode()).hexdigest()  # a blob name; content is not hashed
        kind = i % 3
        if kind == 0:
            root = home / ".ollama" / "models"
            _small_gguf(root / "blobs" / f"sha256-{digest}", i)
            m = root / "manifests" / "registry.ollama.ai" / "library" / f"bench{i}" / "q4_k_m"
            m.parent.mkdir(parents=True, exist_ok=True)
            m.write_text(json.dumps({"schemaVersion": 2, "layers": [
                {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": 1}]}))
        elif kind == 1:
            storage = home / ".cache" / "huggingface" / "hub" / f"models--bench--model{i}-GGUF"
            blob = _small_gguf(storage / "blobs" / digest, i)
            link = storage / "snapshots" / ("c" * 40) / f"model{i}-Q4_K_M.gguf"
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
            (storage / "refs").mkdir(exist_ok=True)
            (storage / "refs" / "main").write_text("c" * 40)
        else:
            _small_gguf(home / ".lmstudio" / "models" / "bench" / f"model{i}-GGUF" / f"model{i}-Q4_K_M.gguf", i)


def _ms(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def run(args) -> int:

    saved = {k: os.environ.get(k) for k in (*STORE_VARIABLES, "HOME", "STOKER_HOME")}
    with tempfile.TemporaryDirectory(prefix="stoker-bench-library-") as tmp:
        home = Path(tmp) / "home"
        try:
            for k in STORE_VARIABLES:
                os.environ.pop(k, None)
            os.environ["HOME"] = str(home)
            os.environ["STOKER_HOME"] = str(Path(tmp) / "stoker-home")
            build_stores(home, args.models)

            def cold_caches():
                gguf_io.clear_memory_cache()
                model_stores.clear_cache()
                shell_models.clear_cache()

            cold_caches()
            listed: list = []
            cold = _ms(lambda: listed.append(list_models()))
            count = len(listed[0])
            disk = []
            for _ in range(args.runs):
                cold_caches()
                disk.append(_ms(list_models))
            warm = [_ms(list_models) for _ in range(args.runs)]
            names = [_ms(lambda: list_models(with_summary=False)) for _ in range(args.runs)]
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    rows = [("cold: nothing cached (headers read)", cold),
            ("on-disk summary cache only (a new process)", statistics.median(disk)),
            ("warm: the same process lists again", statistics.median(warm)),
            ("warm, names only (resolving `stoker run NAME`)", statistics.median(names))]
    print(f"stoker bench library: {count} models listed from Ollama, the HF cache and LM Studio "
          f"({args.models} built; median of {args.runs} runs for the cached rows)")
    print(f"  {'measurement':<50} {'ms':>9} {'vs cold':>8}")
    for label, ms in rows:
        print(f"  {label:<50} {ms:9.1f} {ms / cold:8.3f}")
    ok = statistics.median(warm) < TARGET_MS
    print(f"  target: warm list under {TARGET_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    return 0 if count == args.models else 1
