"""Incident JSON lines (bounded, rotated, corrupt lines skipped) and the ledger on disk."""

from __future__ import annotations

import json
import shutil

from stoker.diagnosis.classify import classify_exit
from stoker.diagnosis.exit_report import ExitReport
from stoker.diagnosis.incidents import IncidentLog
from stoker.engines.identity import binary_identity
from stoker.fleet.ledger import LedgerStore
from stoker.fleet.quarantine import Ledger, is_quarantined, mark_drafter_broken, record_strike

OOM = classify_exit(ExitReport(None, "SIGKILL", False, "ready", 60.0, (), "cpu", oom_killed=True))
SEGV = classify_exit(ExitReport(None, "SIGSEGV", False, "starting", 1.0, (), "cuda"))


def test_append_and_latest_newest_first(tmp_path):
    log = IncidentLog.in_data_dir(tmp_path)
    log.append(SEGV, at=1.0, model="a.gguf", build="b1-cuda", action="retried")
    log.append(OOM, at=2.0, model="b.gguf", build="b1-cpu", action="restarted with more headroom")
    views = log.latest(5)
    assert [v.kind for v in views] == ["host-oom", "unknown"]
    assert views[0].summary == OOM.title and views[0].action == "restarted with more headroom"
    rec = json.loads((tmp_path / "incidents.jsonl").read_text().splitlines()[0])
    assert set(rec) >= {"at", "model", "build", "kind", "title", "evidence", "advice", "action"}
    assert rec["model"] == "a.gguf" and rec["build"] == "b1-cuda"


def test_corrupt_lines_are_skipped(tmp_path):
    log = IncidentLog(tmp_path / "incidents.jsonl")
    log.append(SEGV, at=1.0, model=None, build=None, action="x")
    with open(log.path, "a") as f:
        f.write('{"at": 2, "kind": "host-oom", "tit\n[1,2]\n\n{"at":"later","kind":"x","title":"y"}\n')
    log.append(OOM, at=3.0, model=None, build=None, action="y")
    assert [v.at for v in log.latest(10)] == [3.0, 1.0]


def test_rotation_keeps_the_file_bounded_and_two_files_at_most(tmp_path):
    log = IncidentLog(tmp_path / "incidents.jsonl", max_bytes=4000)
    for i in range(200):
        log.append(SEGV, at=float(i), model="m", build="b", action="retried")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["incidents.jsonl", "incidents.jsonl.1"]
    assert all(p.stat().st_size <= 4000 for p in tmp_path.iterdir())
    in_current = len(log.path.read_text().splitlines())
    latest = log.latest(in_current + 3)
    assert latest[0].at == 199.0
    assert len(latest) == in_current + 3  # reaches into the rotated file
    assert [v.at for v in latest] == [199.0 - i for i in range(in_current + 3)]


def test_ledger_round_trip_and_a_corrupt_file(tmp_path):
    store = LedgerStore.in_data_dir(tmp_path)
    assert store.load() == (Ledger(), ())
    ledger = Ledger()
    for t in (0.0, 1.0, 2.0):
        ledger, _ = record_strike(ledger, "b1-cuda", "id", t, SEGV)
    ledger = mark_drafter_broken(ledger, "b1-cuda", "/d.gguf", 3.0)
    store.save(ledger)
    loaded, problems = store.load()
    assert loaded == ledger and problems == () and is_quarantined(loaded, "b1-cuda", "id")
    store.path.write_text("{ not json")
    loaded, problems = store.load()
    assert loaded == Ledger() and len(problems) == 1


def test_binary_identity_changes_when_the_binary_is_replaced(tmp_path):
    a = tmp_path / "llama-server"
    a.write_bytes(b"\x7fELF" + b"a" * 100)
    first = binary_identity(a)
    assert first == binary_identity(a)
    b = tmp_path / "other"
    b.write_bytes(b"\x7fELF" + b"b" * 100)
    shutil.copy(b, a)
    assert binary_identity(a) != first
    assert binary_identity(tmp_path / "missing") is None
