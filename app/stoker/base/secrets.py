"""The engine's API key, kept in the OS keyring and nowhere else.

The key must never sit in settings.json or in argv (seed-behaviours.md §Secrets: it
reaches the engine as LLAMA_API_KEY). Many Linux machines have no keyring backend at all;
then every call here degrades to an explained "unavailable" (what is missing and what to
install) instead of raising. Must not log or print the key.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

SERVICE = "stoker"
# The key chat clients must send to Stoker's gateway (the entry's name is older than the
# gateway: it once went to the engine itself; engines now get a random key per launch).
API_KEY_ENTRY = "llama-server-api-key"

_listeners: list[Callable[[], None]] = []
_listeners_lock = threading.Lock()


def on_api_key_change(callback: Callable[[], None]) -> Callable[[], None]:
    """Call `callback()` after the key is saved in this process (the gateway re-reads it at
    once); returns a function that stops it."""
    with _listeners_lock:
        _listeners.append(callback)

    def stop() -> None:
        with _listeners_lock:
            if callback in _listeners:
                _listeners.remove(callback)

    return stop


def _changed() -> None:
    with _listeners_lock:
        callbacks = list(_listeners)
    for cb in callbacks:
        with contextlib.suppress(Exception):  # a listener's failure must not undo the save
            cb()

INSTALL_HINT = ("install gnome-keyring or KWallet (and log in to a desktop session), "
                "or run `pip install keyrings.alt` for a file-based store")


class SecretsUnavailable(Exception):
    """No keyring backend can store the key; the message says what to install."""


class KeyUnreadable(Exception):
    """A keyring exists but could not be read just now (locked, its service gone): not the
    same as "no key stored", which would open the gateway to everyone. The message says
    what to do."""


def _backend():
    import keyring  # imported late: it probes D-Bus and backends on first use

    return keyring.get_keyring()


def _is_usable(backend) -> bool:
    from keyring.backends import fail

    if isinstance(backend, fail.Keyring):
        return False
    children = getattr(backend, "backends", None)  # ChainerBackend
    if children is not None:
        return any(not isinstance(b, fail.Keyring) for b in children)
    return True


def keyring_status() -> tuple[bool, str]:
    """(available, one sentence) about where the API key would be kept."""
    try:
        backend = _backend()
    except Exception as exc:  # a broken backend configuration must not stop the app
        return False, f"The keyring could not be opened ({exc}); {INSTALL_HINT}."
    if not _is_usable(backend):
        return False, f"No keyring backend is available to store the API key; {INSTALL_HINT}."
    name = getattr(backend, "name", type(backend).__name__)
    return True, f"The API key is kept in the system keyring ({name})."


def get_api_key(entry: str = API_KEY_ENTRY) -> str | None:
    """The stored key, or None when none is stored or no keyring backend exists at all.
    Raises KeyUnreadable when a keyring exists but refuses the read (a locked GNOME keyring
    raises KeyringLocked): the caller must not take that for "no key". Each call may make
    the desktop ask to unlock the keyring, so callers read it when the user acts (start,
    a save in Settings), never on a timer."""
    available, _ = keyring_status()
    if not available:
        return None
    import keyring

    try:
        return keyring.get_password(SERVICE, entry)
    except Exception as exc:  # KeyringLocked, a D-Bus error, a backend's own failure
        reason = str(exc) or type(exc).__name__
        raise KeyUnreadable(f"The keyring could not be read ({reason}); unlock it (log in to the "
                            "desktop session), then save the key again in Stoker's Settings or "
                            "restart Stoker.") from None


def set_api_key(value: str | None, entry: str = API_KEY_ENTRY) -> None:
    """Store the key (None or "" deletes it). Raises SecretsUnavailable with advice."""
    available, sentence = keyring_status()
    if not available:
        raise SecretsUnavailable(sentence)
    import keyring
    from keyring.errors import KeyringError, PasswordDeleteError

    try:
        if value:
            keyring.set_password(SERVICE, entry, value)
        else:
            with contextlib.suppress(PasswordDeleteError):  # nothing stored: already done
                keyring.delete_password(SERVICE, entry)
    except KeyringError as exc:
        raise SecretsUnavailable(f"The keyring refused the API key ({exc}); {INSTALL_HINT}.") \
            from None
    _changed()
