"""The API key store: works with a real backend, explains itself without one."""

from __future__ import annotations

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import chainer, fail

from stoker.base import secrets


class MemoryKeyring(KeyringBackend):
    priority = 1

    def __init__(self):
        super().__init__()
        self.store = {}

    def get_password(self, service, username):
        return self.store.get((service, username))

    def set_password(self, service, username, password):
        self.store[(service, username)] = password

    def delete_password(self, service, username):
        from keyring.errors import PasswordDeleteError

        if (service, username) not in self.store:
            raise PasswordDeleteError("not there")
        del self.store[(service, username)]


@pytest.fixture
def use_backend():
    before = keyring.get_keyring()
    yield keyring.set_keyring
    keyring.set_keyring(before)


def test_round_trip_and_delete_with_a_real_backend(use_backend):
    mem = MemoryKeyring()
    use_backend(mem)
    assert secrets.keyring_status()[0] is True
    secrets.set_api_key("s3cret")
    assert mem.store == {("stoker", secrets.API_KEY_ENTRY): "s3cret"}
    assert secrets.get_api_key() == "s3cret"
    secrets.set_api_key("")
    assert secrets.get_api_key() is None
    secrets.set_api_key(None)  # deleting twice is fine


@pytest.mark.parametrize("backend", [fail.Keyring(), chainer.ChainerBackend()],
                         ids=["fail", "empty-chainer"])
def test_no_backend_says_what_to_install(use_backend, backend, monkeypatch):
    if isinstance(backend, chainer.ChainerBackend):
        monkeypatch.setattr(chainer.ChainerBackend, "backends", property(lambda self: []))
    use_backend(backend)
    available, sentence = secrets.keyring_status()
    assert available is False
    assert "keyrings.alt" in sentence and "gnome-keyring" in sentence
    assert secrets.get_api_key() is None
    with pytest.raises(secrets.SecretsUnavailable, match="keyrings.alt"):
        secrets.set_api_key("x")


def test_a_locked_keyring_is_unreadable_not_no_key(use_backend, tmp_path):
    from tests.helpers.locking_keyring import LockingKeyring

    locking = LockingKeyring(tmp_path)
    use_backend(locking)
    secrets.set_api_key("s3cret")
    assert secrets.get_api_key() == "s3cret"
    locking.lock()
    with pytest.raises(secrets.KeyUnreadable, match="unlock it"):
        secrets.get_api_key()
