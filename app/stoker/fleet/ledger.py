"""The quarantine ledger on disk: strikes, quarantined builds and broken drafters.

Kept in `<data>/quarantine.json` through stoker.base.store (atomic replace, a corrupt file
moved aside), so a crash while saving never loses the ledger and a hand-edited file that
does not parse never stops Stoker: it starts from an empty ledger and says so. The
decisions are stoker/fleet/quarantine.py's; this module only loads and saves. `binary_identity`
is the fingerprint strikes are keyed to, so a replaced binary starts clean.
"""

from __future__ import annotations

from pathlib import Path

from stoker.base.store import read_json, write_json_atomic
from stoker.fleet.quarantine import Ledger, ledger_from_json, ledger_to_json

FILE_NAME = "quarantine.json"


class LedgerStore:
    def __init__(self, path: Path | str):
        self.path = Path(path)

    @classmethod
    def in_data_dir(cls, data_dir: Path | str) -> LedgerStore:
        return cls(Path(data_dir) / FILE_NAME)

    def load(self) -> tuple[Ledger, tuple[str, ...]]:
        """The ledger, and sentences about anything in the file that could not be used."""
        obj, problem = read_json(self.path)
        if obj is None:
            return Ledger(), ((problem,) if problem else ())
        ledger, problems = ledger_from_json(obj)
        return ledger, problems

    def save(self, ledger: Ledger) -> None:
        write_json_atomic(self.path, ledger_to_json(ledger))


