"""The pure decisions behind issue 21's fixes, edge by edge (stoker/gateway/rules.py and the
other rooms' pure checks)."""

from __future__ import annotations

from stoker.base.line_throttle import LineThrottle, line_shape
from stoker.gateway.rules import (
    FD_RESERVE,
    MAX_CONNECTIONS,
    OPEN_FILES_WANTED,
    Admission,
    GatewayKey,
    KeyVerdict,
    admission,
    connection_cap,
    fetch_site_allowed,
    key_after_read,
    key_verdict,
    may_load_model,
    open_files_soft_limit,
)
from stoker.library.store_layouts import hub_file_problem

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


# ------------------------------------------------------------------ 3. the gateway can't be starved


def test_the_soft_limit_is_raised_to_the_hard_one_and_never_lowered():
    assert open_files_soft_limit(1024, 524288, -1) == 524288
    assert open_files_soft_limit(1024, 1024, -1) is None  # nothing to raise to
    assert open_files_soft_limit(1024, -1, -1) == OPEN_FILES_WANTED  # hard: unlimited
    assert open_files_soft_limit(-1, -1, -1) is None
    assert open_files_soft_limit(200000, 524288, -1) == 524288
    assert open_files_soft_limit(OPEN_FILES_WANTED, -1, -1) is None


def test_the_cap_always_leaves_descriptors_for_the_engines_and_the_log():
    assert connection_cap(1024) == 1024 - FD_RESERVE
    assert connection_cap(524288) == MAX_CONNECTIONS
    assert connection_cap(None) == MAX_CONNECTIONS and connection_cap(-1) == MAX_CONNECTIONS
    assert connection_cap(100) == 16  # a tiny limit still serves someone


def test_past_the_cap_a_new_connection_takes_a_half_sent_ones_slot_or_is_refused():
    assert admission(0, 10, 0) is Admission.ADMIT
    assert admission(9, 10, 9) is Admission.ADMIT
    assert admission(10, 10, 1) is Admission.EVICT_OLDEST_WAITING
    assert admission(11, 10, 3) is Admission.EVICT_OLDEST_WAITING
    assert admission(10, 10, 0) is Admission.REFUSE  # every slot serves a request


def test_a_repeated_line_passes_a_few_times_per_window_then_is_counted():
    t = LineThrottle(window_s=10, same_line=2, total=100)
    first, second = "accept failed: Too many open files (fd 1021)", "accept failed: Too many open files (fd 1022)"
    assert t.offer(first, 0.0) == [first] and t.offer(second, 0.1) == [second]
    assert all(t.offer(f"accept failed: Too many open files (fd {n})", 1.0) == [] for n in range(1000))
    assert t.offer("something else", 2.0) == ["something else"]  # another line still passes
    assert t.offer("accept failed: Too many open files (fd 7)", 10.0) == [
        "(1000 repeated lines were left out of the log in the last 10 s)",
        "accept failed: Too many open files (fd 7)"]
    assert t.flush(15.0) == [] and t.flush(20.0) == []  # nothing held back: nothing to say


def test_the_total_per_window_is_capped_even_for_lines_that_all_differ():
    t = LineThrottle(window_s=10, same_line=5, total=3)
    out = [t.offer(f"line {c}", 0.0) for c in "abcdef"]
    assert out == [["line a"], ["line b"], ["line c"], [], [], []]
    assert t.flush(9.9) == []
    assert t.flush(10.0) == ["(3 repeated lines were left out of the log in the last 10 s)"]
    assert line_shape("port 7857 pid 12") == "port # pid #"


# ------------------------------------------------------------------ 5. hub names cannot escape

C = "0123456789abcdef0123456789abcdef01234567"
S = "a" * 64


def test_a_hub_answer_with_plain_names_a_commit_and_a_sha256_is_taken():
    assert hub_file_problem(C, "model.Q4_K_M.gguf", S) is None
    assert hub_file_problem(C, "Q4_K_M/model-00001-of-00002.gguf", S) is None  # a subfolder is fine
    assert hub_file_problem(C, "README.md", None) is None  # a small file: no LFS sha256
    assert hub_file_problem(C, "v1..2.gguf", S) is None  # dots inside a part are a name


def test_a_hub_answer_that_could_leave_the_cache_is_refused():
    for name in ("../x.gguf", "a/../../x.gguf", "a/./x.gguf", "/etc/x.gguf", "a//x.gguf", "..",
                 "a\\..\\x.gguf", "C:x.gguf", "c:/x.gguf", "x\0.gguf", "", "a/"):
        assert hub_file_problem(C, name, S) is not None, name
    for commit in ("main", C[:39], C + "0", C.upper(), "../../x", ""):
        assert "commit" in hub_file_problem(commit, "x.gguf", S), commit
    for sha in ("A" * 64, "a" * 63, "../" + "a" * 61, "g" * 64):
        assert "sha256" in hub_file_problem(C, "x.gguf", sha), sha


# ------------------------------------------------------------------ 7. engines without a key


def test_the_engines_without_a_key_are_named_beside_the_key():
    from stoker.engines.kind import DESCRIPTIONS, EngineKind, keyless_engines_note

    keyless = {k for k, d in DESCRIPTIONS.items() if d.api_key_env is None}
    # none of these binaries has a key option (rpc-server's worker also warns when it leaves loopback)
    assert keyless == {EngineKind.DS4, EngineKind.SD_SERVER, EngineKind.RPC_SERVER}
    note = keyless_engines_note()
    assert "ds4-server" in note and "sd-server" in note and "rpc-server" in note and "llama-server" in note
    assert "another user" in note


# ------------------------------------------------------------------ 8. the smaller ones


def test_a_host_header_must_end_in_a_port_of_digits():
    from stoker.gateway.rules import host_allowed, host_name

    assert host_allowed("localhost:7857") and host_allowed("127.0.0.1:7857") and host_allowed("[::1]:7857")
    assert host_allowed("localhost") and host_allowed("[::1]")
    for bad in ("localhost:7857@evil.com", "localhost:@evil.com", "localhost:", "127.0.0.1:80x",
                "[::1]:7857@evil.com", "[::1]evil", "[::1]:", "localhost:７８５７", "[::1"):
        assert not host_allowed(bad), bad
    assert host_name("LOCALHOST:7857") == "localhost"


def test_extra_args_that_reach_out_are_refused_with_a_sentence_and_others_pass():
    from stoker.base.overrides import extra_arg_problem, validate_overrides

    for arg in ("--rpc", "--rpc=203.0.113.7:50052", "-hf", "--hf-repo", "-mu", "--model-url=http://x",
                "--api-prefix", "--mmproj-url", "--tools", "--agent", "--mcp-servers-json", "--media-path"):
        problem = extra_arg_problem(arg)
        assert problem is not None and arg.split("=")[0] in problem and "refuses" in problem, arg
    assert "routes" in extra_arg_problem("--api-prefix")
    for fine in ("--jinja", "--temp", "0.7", "--lora", "--reasoning-budget", "203.0.113.7:50052"):
        assert extra_arg_problem(fine) is None, fine
    ov, errors = validate_overrides({"extra_args": "--jinja --rpc 203.0.113.7:50052"})
    assert ov.extra_args == () and "--rpc" in errors[0]


def test_no_part_of_a_key_is_left_in_an_engine_log_line():
    from stoker.engines.engine_log import REDACTED, redact_secrets

    assert redact_secrets("0.00.022.973 I srv  init_listene: api_keys: ****zq9X") == (
        f"0.00.022.973 I srv  init_listene: api_keys: {REDACTED}")
    assert redact_secrets("srv  init: api_key: abc") == f"srv  init: api_key: {REDACTED}"
    assert redact_secrets("Authorization: Bearer s3cret-long-key", ("s3cret-long-key",)) == (
        f"Authorization: Bearer {REDACTED}")
    assert redact_secrets("load_tensors: CPU model buffer size = 92.10 MiB", ("short",)) == (
        "load_tensors: CPU model buffer size = 92.10 MiB")  # a short value is never searched for
    assert redact_secrets("the key is abcd", ("abcd",)) == "the key is abcd"
    # One read's lines, joined: only the key's part of its own line goes, whatever its case.
    lines = ["srv  init_listene: API_KEYS: ****zq9X", "srv  listening on http://127.0.0.1:8080",
             "send s3cret-long-key", "api_key: x"]
    assert redact_secrets("\n".join(lines), ("s3cret-long-key",)).split("\n") == [
        f"srv  init_listene: API_KEYS: {REDACTED}", "srv  listening on http://127.0.0.1:8080",
        f"send {REDACTED}", f"api_key: {REDACTED}"]
