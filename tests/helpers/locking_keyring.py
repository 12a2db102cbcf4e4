"""A keyring backend that locks like GNOME's Secret Service: once `locked` exists in its
folder, every read raises KeyringLocked (the real one also pops an unlock prompt each time).

File-backed, so a Stoker subprocess can use it too: PYTHON_KEYRING_BACKEND=
tests.helpers.locking_keyring.LockingKeyring with STOKER_TEST_KEYRING pointing at the folder.
Every read appends a line to `reads`, so a test can count how often Stoker asked.
"""

from __future__ import annotations

import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import KeyringLocked, PasswordDeleteError

FOLDER_ENV = "STOKER_TEST_KEYRING"


class LockingKeyring(KeyringBackend):
    @properties.classproperty
    def priority(cls) -> float:
        # keyring instantiates every backend class it knows of when it looks for one: this
        # one is chosen only by name (PYTHON_KEYRING_BACKEND) or set by a test.
        if FOLDER_ENV not in os.environ:
            raise RuntimeError(f"{FOLDER_ENV} names no folder")
        return 1

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__()
        self.folder = Path(folder or os.environ.get(FOLDER_ENV) or ".")

    def _file(self, service: str, username: str) -> Path:
        return self.folder / f"{service}--{username}"

    def lock(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "locked").touch()

    def reads(self) -> int:
        try:
            return len((self.folder / "reads").read_text().splitlines())
        except FileNotFoundError:
            return 0

    def get_password(self, service, username):
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "reads", "a") as f:
            f.write(f"{username}\n")
        if (self.folder / "locked").exists():
            raise KeyringLocked("Failed to unlock the collection!")
        try:
            return self._file(service, username).read_text()
        except FileNotFoundError:
            return None

    def set_password(self, service, username, password):
        if (self.folder / "locked").exists():
            raise KeyringLocked("Failed to unlock the collection!")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._file(service, username).write_text(password)

    def delete_password(self, service, username):
        try:
            self._file(service, username).unlink()
        except FileNotFoundError:
            raise PasswordDeleteError("not there") from None
