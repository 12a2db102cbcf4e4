"""`stoker bench inspect`: cold GGUF summary time beside gguf.GGUFReader, as ratios.

Files: the demo model (or --model) and a generated header-only file with a 150k-entry
vocabulary. "Cold" drops Stoker's summary caches before every run; the OS page cache
stays warm (dropping it needs root), and the table says so.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.errors import UserError
from stoker.library.gguf_io import GGUFError, clear_memory_cache, load_summary
from stoker.library.gguf_write import write_vocab_heavy_gguf

TARGET_MS = 20.0


def add_arguments(parser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="runs per file (median is shown)")
    parser.add_argument("--model", metavar="PATH", help="model to time instead of the demo model")
    parser.add_argument("--reader-runs", type=int, default=1,
                        help="runs of gguf.GGUFReader per file (it takes seconds)")


def _median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _write_150k_vocab(path: Path) -> Path:
    """The same file the tests build: a small llama whose header is mostly vocabulary."""

    return write_vocab_heavy_gguf(path, 150_000)


def run(args) -> int:
    import gguf


    if args.runs < 1 or args.reader_runs < 1:
        raise UserError("--runs and --reader-runs must be at least 1.")
    if args.model:
        model = Path(args.model).expanduser()
    else:
        found = sorted(stoker_paths().models.glob("SmolLM2-135M-Instruct*.gguf"))
        if not found:
            raise UserError("the demo model is not installed; run `stoker setup` or pass --model PATH.")
        model = found[0]
    if not model.is_file():
        raise UserError(f"{model} does not exist; pass --model with a .gguf file.")

    def cold(path):
        def once():
            clear_memory_cache()
            load_summary(path, use_disk_cache=False)
        return once

    rows = []
    with tempfile.TemporaryDirectory(prefix="stoker-bench-") as tmp:
        files = [(model.name, model), ("header-only, 150k vocab", _write_150k_vocab(Path(tmp) / "vocab150k.gguf"))]
        for label, path in files:
            try:
                cold(path)()  # warm the OS page cache and imports alike for both readers
            except GGUFError as exc:
                raise UserError(str(exc)) from None
            ours = _median_ms(cold(path), args.runs)
            theirs = _median_ms(lambda path=path: gguf.GGUFReader(str(path)), args.reader_runs)
            rows.append((label, ours, theirs))
    name_w = max(len(r[0]) for r in rows)
    print(f"Cold summary time (Stoker's caches dropped; the OS page cache is warm), "
          f"median of {args.runs} runs (GGUFReader: {args.reader_runs}).")
    print(f"{'file':<{name_w}}  {'stoker ms':>10}  {'GGUFReader ms':>14}  {'speed-up':>9}  verdict")
    ok = True
    for label, ours, theirs in rows:
        verdict = "under target" if ours < TARGET_MS else "OVER target"
        ok = ok and ours < TARGET_MS
        print(f"{label:<{name_w}}  {ours:>10.1f}  {theirs:>14.1f}  {theirs / ours:>8.0f}x  {verdict}")
    print(f"target: under {TARGET_MS:.0f} ms per cold summary -> {'met' if ok else 'NOT met'}")
    return 0
