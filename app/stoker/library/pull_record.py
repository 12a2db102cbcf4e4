"""Which files in the Hugging Face cache `stoker pull` downloaded: `<data>/pulled.json`.

The hub cache is shared with every other tool, so a file there is Stoker's to delete only
when Stoker fetched it. This record says so (repository, file, blob and snapshot link);
removing a pulled model deletes exactly those files and nothing another tool put there.
Written atomically through stoker/base/store.py. It decides nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import read_json, write_json_atomic

SCHEMA = 1
_lock = threading.Lock()


@dataclass(frozen=True)
class PulledFile:
    repo: str
    filename: str  # path inside the repository
    blob: str  # <cache>/models--org--repo/blobs/<sha256>
    link: str  # <cache>/models--org--repo/snapshots/<commit>/<filename>
    sha256: str
    size_bytes: int


class PullRecord:
    def __init__(self, data_dir: Path | None = None):
        self.path = (data_dir or stoker_paths().data) / "pulled.json"

    def files(self) -> tuple[PulledFile, ...]:
        value, _ = read_json(self.path)
        out = []
        for item in (value or {}).get("files", []) if isinstance(value, dict) else []:
            try:
                out.append(PulledFile(str(item["repo"]), str(item["filename"]), str(item["blob"]),
                                      str(item["link"]), str(item["sha256"]), int(item["size_bytes"])))
            except (KeyError, TypeError, ValueError):
                continue  # an entry a newer Stoker wrote differently: not ours to act on
        return tuple(out)

    def blob_paths(self) -> frozenset[str]:
        out = set()
        for f in self.files():
            try:
                out.add(str(Path(f.blob).resolve()))
            except OSError:
                continue
        return frozenset(out)

    def _save(self, files: list[PulledFile]) -> None:
        write_json_atomic(self.path, {"schema": SCHEMA, "files": [f.__dict__ for f in files]})

    def add(self, new: PulledFile) -> None:
        with _lock:
            files = [f for f in self.files() if f.link != new.link]
            files.append(new)
            self._save(files)

    def forget(self, blobs: set[str]) -> None:
        with _lock:
            self._save([f for f in self.files() if str(Path(f.blob).resolve()) not in blobs])

    def for_blob(self, blob: str) -> tuple[PulledFile, ...]:
        target = str(Path(blob).resolve())
        return tuple(f for f in self.files() if str(Path(f.blob).resolve()) == target)
