"""The incidents ledger: one JSON line per engine failure, in the data folder, bounded.

Each line holds when it happened, the model, the engine build, the kind, title, evidence,
advice and what Stoker did next. The file rotates at MAX_BYTES keeping one older file, so
it never grows without bound; a corrupt or half-written line (a crash mid-append) is
skipped on reading, never fatal. The latest incidents go into every snapshot. Only the
supervisor thread appends; a lock keeps a second writer in this process safe anyway.
Deciding what an incident is belongs to stoker/diagnosis/classify.py, not here.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from stoker.diagnosis.views import IncidentView

MAX_BYTES = 1024 * 1024
FILE_NAME = "incidents.jsonl"


class IncidentLog:
    def __init__(self, path: Path | str, max_bytes: int = MAX_BYTES):
        self.path = Path(path)
        self.backup = self.path.with_name(self.path.name + ".1")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    @classmethod
    def in_data_dir(cls, data_dir: Path | str) -> IncidentLog:
        return cls(Path(data_dir) / FILE_NAME)

    def append(self, incident, *, at: float, model: str | None, build: str | None, action: str) -> dict:
        """Record one incident (a core.diagnosis.Incident or anything with its fields)."""
        record = {
            "at": at, "model": model, "build": build,
            "kind": incident.kind, "title": incident.title, "evidence": incident.evidence,
            "advice": incident.advice, "action": action,
            "exit": getattr(incident, "exit_description", None),
        }
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(line.encode()) > self.max_bytes:
                os.replace(self.path, self.backup)  # the older file is dropped: two files at most
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
        return record

    def latest_records(self, n: int = 10) -> tuple[dict, ...]:
        """The newest `n` records, newest first; unreadable lines are skipped."""
        out: list[dict] = []
        for path in (self.path, self.backup):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except (FileNotFoundError, OSError):
                continue
            for line in reversed(text.splitlines()):
                if len(out) >= n:
                    return tuple(out)
                rec = _parse(line)
                if rec is not None:
                    out.append(rec)
        return tuple(out)

    def latest(self, n: int = 5) -> tuple[IncidentView, ...]:
        """The newest `n` incidents as snapshot values, newest first."""
        return tuple(IncidentView(at=r["at"], kind=r["kind"], summary=r["title"], evidence=r.get("evidence"),
                                  advice=r.get("advice") or "", action=r.get("action") or "")
                     for r in self.latest_records(n))


def _parse(line: str) -> dict | None:
    line = line.strip()
    if not line:
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("kind"), str) or not isinstance(rec.get("title"), str):
        return None
    if not isinstance(rec.get("at"), (int, float)):
        return None
    return rec
