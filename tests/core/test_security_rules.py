"""The pure decisions behind issue 21's fixes, edge by edge (stoker/gateway/rules.py and the
other rooms' pure checks)."""

from __future__ import annotations

from stoker.gateway.rules import (
    GatewayKey,
    KeyVerdict,
    key_after_read,
    key_verdict,
)

# ------------------------------------------------------------------ 1. the key never fails open


def test_a_read_gives_the_value_read_and_an_empty_one_is_no_key():
    assert key_after_read(None, "k", failed=False) == GatewayKey("k")
    assert key_after_read(GatewayKey("old"), "new", failed=False) == GatewayKey("new")
    assert key_after_read(GatewayKey("old"), None, failed=False) == GatewayKey(None)  # deleted
    assert key_after_read(None, "", failed=False) == GatewayKey(None)
    assert key_after_read(GatewayKey(None, unreadable=True), "k", failed=False) == GatewayKey("k")


def test_a_failed_read_keeps_the_last_key_known_and_never_opens():
    assert key_after_read(GatewayKey("k"), None, failed=True) == GatewayKey("k")
    assert key_after_read(GatewayKey(None), None, failed=True) == GatewayKey(None)  # had none: still none
    assert key_after_read(None, None, failed=True) == GatewayKey(None, unreadable=True)
    unreadable = GatewayKey(None, unreadable=True)
    assert key_after_read(unreadable, None, failed=True) == unreadable


def test_the_verdict_is_503_while_unreadable_whatever_the_request_carries():
    unreadable = GatewayKey(None, unreadable=True)
    assert key_verdict(unreadable, None, None) is KeyVerdict.UNREADABLE
    assert key_verdict(unreadable, "Bearer anything", "anything") is KeyVerdict.UNREADABLE
    assert key_verdict(GatewayKey(None), None, None) is KeyVerdict.PASS
    assert key_verdict(GatewayKey("k"), None, None) is KeyVerdict.MISSING
    assert key_verdict(GatewayKey("k"), "Bearer x", "y") is KeyVerdict.MISSING
    assert key_verdict(GatewayKey("k"), "bearer k", None) is KeyVerdict.PASS
    assert key_verdict(GatewayKey("k"), None, "k") is KeyVerdict.PASS

