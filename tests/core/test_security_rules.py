"""The pure decisions behind issue 21's fixes, edge by edge (stoker/gateway/rules.py and the
other rooms' pure checks)."""

from __future__ import annotations

from stoker.gateway.rules import (
    GatewayKey,
    KeyVerdict,
    fetch_site_allowed,
    key_after_read,
    key_verdict,
    may_load_model,
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


# ------------------------------------------------------------------ 2. no cross-site loads


def test_a_request_from_another_site_needs_an_allowed_origin():
    assert fetch_site_allowed(None, None) and fetch_site_allowed("none", None)
    assert fetch_site_allowed("same-origin", None)
    assert not fetch_site_allowed("cross-site", None)  # <img src=…>: no-cors, no Origin
    assert not fetch_site_allowed("same-site", None)
    assert not fetch_site_allowed("Cross-Site", "https://evil.example")
    assert not fetch_site_allowed("cross-site", "null")
    assert fetch_site_allowed("same-site", "http://localhost:3000")  # a local page, by its Origin
    assert fetch_site_allowed("cross-site", "https://chat.example", ("https://chat.example",))
    assert not fetch_site_allowed("cross-site", "https://chat.example.evil", ("https://chat.example",))


def test_only_a_post_to_a_models_route_may_load_or_name_a_model_by_query():
    assert may_load_model("POST", "/v1/chat/completions") and may_load_model("post", "/v1/embeddings")
    assert may_load_model("POST", "/v1/images/generations")
    assert not may_load_model("GET", "/v1/chat/completions")
    assert not may_load_model("HEAD", "/v1/completions")
    assert not may_load_model("GET", "/props") and not may_load_model("GET", "/metrics")
    assert may_load_model("POST", "/tokenize")  # a POST carries the page's Origin
    assert not may_load_model("POST", "/v1/models") and not may_load_model("POST", "/health")
