"""ds4's effects: find the `ds4-server` binary, read what a ds4 model file is, and keep the
memory lines ds4 reports at READY, per (model file, ds4 build), for the next plan.

Discovery order (core/ds4_launch.choose_ds4_binary): the configured path (setting
`ds4_server`, or the STOKER_DS4_SERVER environment variable), then `ds4-server` on PATH,
then Stoker's own folder `<data>/engines/ds4/`. Measurements live in
`<data>/ds4-measurements.json`; an entry is dropped on read as soon as the model file or the
ds4 build it was taken with changed (same identities as stoker/engines/measurements.py).

It decides nothing about plans (stoker/engines/ds4_launch.py does); it finds, reads and remembers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.store import read_json, read_setting, write_json_atomic
from stoker.engines.ds4_launch import (
    Ds4Binary,
    Ds4Measurement,
    Ds4Model,
    Ds4Plan,
    choose_ds4_binary,
    measurement_from_line,
    parse_memory_line,
    plan_ds4,
)
from stoker.engines.identity import binary_identity
from stoker.engines.kind import DS4
from stoker.engines.measurements import model_identity
from stoker.library.gguf_io import load_summary
from stoker.planning.ds4 import Ds4Entry
from stoker.planning.machine import Machine
from stoker.planning.plan import PlanRefusal

SCHEMA = 1
CONFIG_ENV = "STOKER_DS4_SERVER"
MAX_PER_MODE = 4  # newest win; older ones describe the same line


def own_ds4_root() -> Path:
    return stoker_paths().engines / "ds4"


def kv_disk_dir() -> Path:
    return own_ds4_root() / "kv"


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def find_ds4_binary(configured: str | None = None) -> Ds4Binary | None:
    """The ds4-server to run, or None when there is none; a configured path that is not an
    executable file is skipped (the caller says so) rather than launched."""
    configured = configured or os.environ.get(CONFIG_ENV) or read_setting("ds4_server")
    conf = str(Path(configured).expanduser()) if configured and _executable(Path(configured).expanduser()) else None
    on_path = shutil.which(DS4.binary_name)
    root = own_ds4_root()
    own = sorted(str(p) for p in root.glob(f"*/{DS4.binary_name}") if _executable(p)) if root.is_dir() else []
    if _executable(root / DS4.binary_name):
        own.insert(0, str(root / DS4.binary_name))
    return choose_ds4_binary(conf, on_path, own)


def ds4_model_of(model_path: str, architecture: str | None = None, trained_ctx: int | None = None) -> Ds4Model:
    """A ds4 model as the planner needs it: size from the file, the rest from its header
    (`load_summary`) unless the caller already has them."""
    size = Path(model_path).stat().st_size
    if architecture is None:

        summary = load_summary(model_path)
        architecture, trained_ctx = summary.architecture, summary.n_ctx_train
    return Ds4Model(str(model_path), size, architecture, trained_ctx)


# --- measurements --------------------------------------------------------------------------


def _store() -> Path:
    return stoker_paths().data / "ds4-measurements.json"


def _entries() -> list[dict]:
    value, _problem = read_json(_store())
    if not isinstance(value, dict) or value.get("schema") != SCHEMA or not isinstance(value.get("entries"), list):
        return []
    return [e for e in value["entries"] if isinstance(e, dict)]


def _identities(model_path, binary) -> tuple[str, str] | None:
    try:
        mid = model_identity(model_path)
    except OSError:
        return None
    bid = binary_identity(binary)
    return None if bid is None else (mid, bid)


def ds4_measurements(model_path, binary) -> tuple[Ds4Measurement, ...]:
    """This machine's measured lines for (model, build), oldest first; () when none hold."""
    ids = _identities(model_path, binary)
    if ids is None:
        return ()
    out = []
    for e in _entries():
        if (e.get("model"), e.get("build")) != ids:
            continue
        try:
            out.append(Ds4Measurement(bool(e["ssd_streaming"]), int(e["bytes"]), int(e["ctx_tokens"]),
                                      int(e["bytes_per_token"])))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(out)


def record_ds4_measurement(model_path, binary, plan: Ds4Plan, output_lines) -> Ds4Measurement | None:
    """Read ds4's memory line from a launch's output (call at READY) and keep it; None when
    the output had none or the files are gone."""
    line = parse_memory_line(output_lines)
    ids = _identities(model_path, binary)
    if line is None or ids is None:
        return None
    m = measurement_from_line(line, plan)
    if m is None:
        return None
    keep = [e for e in _entries() if not ((e.get("model"), e.get("build")) == ids
                                          and e.get("ssd_streaming") == m.ssd_streaming)]
    same = [e for e in _entries() if (e.get("model"), e.get("build")) == ids
            and e.get("ssd_streaming") == m.ssd_streaming][-(MAX_PER_MODE - 1):]
    entry = {"model": ids[0], "build": ids[1], "ssd_streaming": m.ssd_streaming, "bytes": m.bytes,
             "ctx_tokens": m.ctx_tokens, "bytes_per_token": m.bytes_per_token}
    write_json_atomic(_store(), {"schema": SCHEMA, "entries": keep + same + [entry]})
    return m


def plan_ds4_model(model_path: str, machine: Machine, overrides: ModelOverrides | None = None, *,
                   binary: str | None = None, catalog: Ds4Entry | None = None,
                   model: Ds4Model | None = None) -> Ds4Plan | PlanRefusal:
    """plan_ds4 with what the shell knows: the file, this build's measurements, the KV folder."""
    measured = ds4_measurements(model_path, binary) if binary else ()
    return plan_ds4(model or ds4_model_of(model_path), machine, overrides, catalog=catalog, measured=measured,
                    kv_disk_dir=str(kv_disk_dir()))
