"""The gateway's pure parts: model ids, residency decisions and request rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.fleet.residency import AdmissionKind, Resident, admit, budget_machine, expired, next_expiry
from stoker.gateway.rules import error_body, host_allowed, key_matches, origin_allowed, requested_model
from stoker.library.model_ids import ModelKind, assign_ids, base_id, build_catalog, model_kind
from stoker.planning.machine import Device, Machine

MIB = 1024 ** 2


def test_ids_come_from_the_file_name():
    assert base_id("SmolLM2-135M-Instruct.Q4_1.gguf") == "smollm2-135m-instruct:q4_1"
    assert base_id("gemma-3-270m-Q4_K_M.gguf") == "gemma-3-270m:q4_k_m"
    assert base_id("Qwen3-30B-A3B-Q4_K_M-00001-of-00003.gguf") == "qwen3-30b-a3b:q4_k_m"
    assert base_id("/home/ann/models/Llama-3.1-8B-Instruct-IQ4_XS.gguf") == "llama-3.1-8b-instruct:iq4_xs"
    assert base_id("phi-4-f16.gguf") == "phi-4:f16"
    assert base_id("my model.gguf") == "my-model"
    assert base_id("llama3.2:3b") == "llama3.2:3b"  # an Ollama blob is named by its store name


def test_ids_are_unique_and_stable():
    files = [("/b/x.Q4_0.gguf", "x.Q4_0.gguf"), ("/a/x.Q4_0.gguf", "x.Q4_0.gguf"), ("/c/y.gguf", "y.gguf")]
    ids = assign_ids(files)
    assert ids == {"/a/x.Q4_0.gguf": "x:q4_0", "/b/x.Q4_0.gguf": "x-2:q4_0", "/c/y.gguf": "y"}
    assert assign_ids(list(reversed(files))) == ids


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=30))
def test_every_id_is_unique(names):
    ids = assign_ids([(f"/m/{i}", n + ".gguf") for i, n in enumerate(names)])
    assert len(set(ids.values())) == len(names)


def test_catalog_resolves_ids_aliases_and_file_names_and_suggests_close_ones():
    cat, problems = build_catalog(
        [("/m/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf", ModelKind.CHAT, "library"),
         ("/m/e.Q8_0.gguf", "e.Q8_0.gguf", ModelKind.EMBEDDING, "library")],
        {"/m/SmolLM2-135M-Instruct.Q4_1.gguf": ("GPT-4o-mini", "e:q8_0", "bad alias")})
    assert cat.resolve("smollm2-135m-instruct:q4_1").path.endswith("Q4_1.gguf")
    assert cat.resolve("gpt-4o-mini").id == "smollm2-135m-instruct:q4_1"
    assert cat.resolve("SmolLM2-135M-Instruct.Q4_1").id == "smollm2-135m-instruct:q4_1"
    assert cat.resolve("gpt-4o") is None
    assert (cat.closest("smollm2") == ("smollm2-135m-instruct:q4_1",)
            or "smollm2-135m-instruct:q4_1" in cat.closest("smollm2"))
    assert [e.id for e in cat.serving(ModelKind.EMBEDDING)] == ["e:q8_0"]
    assert len(problems) == 2 and any("already the name of e:q8_0" in p for p in problems)


def test_model_kind_reads_pooling_before_architecture():
    assert model_kind("llama", None, None) is ModelKind.CHAT
    assert model_kind("llama", 0, None) is ModelKind.CHAT
    assert model_kind("bert", None, None) is ModelKind.EMBEDDING
    assert model_kind("qwen3", 3, None) is ModelKind.EMBEDDING
    assert model_kind("bert", 4, None) is ModelKind.RERANK


def r(key, mib, busy=False, pinned=False, used=None, timeout=None):
    return Resident(key=key, model_id=key, bytes_by_device=(("CPU", mib * MIB),), busy=busy,
                    pinned=pinned, last_used_at=used, idle_timeout_s=timeout)


def test_admission_fits_evicts_lru_waits_for_busy_and_refuses_beside_pins():
    budget = {"CPU": 1000 * MIB}
    assert admit("new", {"CPU": 300 * MIB}, budget, [r("a", 600)]).kind is AdmissionKind.FITS
    d = admit("new", {"CPU": 500 * MIB}, budget, [r("a", 300, used=5.0), r("b", 300, used=1.0)])
    assert d.kind is AdmissionKind.EVICT and d.evict == ("b",)  # least recently used first
    d = admit("new", {"CPU": 900 * MIB}, budget, [r("a", 300, used=5.0), r("b", 300, used=1.0)])
    assert d.kind is AdmissionKind.EVICT and d.evict == ("b", "a")
    d = admit("new", {"CPU": 500 * MIB}, budget, [r("a", 600, busy=True)])
    assert d.kind is AdmissionKind.WAIT and d.blocking == ("a",)
    d = admit("new", {"CPU": 500 * MIB}, budget, [r("a", 600, pinned=True)])
    assert d.kind is AdmissionKind.REFUSE and "pinned a" in d.reason and "short on CPU" in d.reason
    # The model itself is never its own obstacle (a restart of a resident model).
    assert admit("a", {"CPU": 600 * MIB}, budget, [r("a", 600, busy=True)]).kind is AdmissionKind.FITS


def test_idle_expiry_starts_after_the_last_request_and_spares_busy_and_pinned():
    rs = [r("a", 1, used=100.0, timeout=60), r("b", 1, used=100.0, timeout=60, pinned=True),
          r("c", 1, used=100.0, timeout=60, busy=True), r("d", 1, used=None, timeout=60),
          r("e", 1, used=100.0, timeout=None)]
    assert expired(rs, 159.9) == ()
    assert expired(rs, 160.0) == ("a",)
    assert next_expiry(rs) == 160.0


def test_budget_machine_adds_back_what_stoker_holds_and_caps_it():
    m = Machine(os="linux", arch="x86_64", ram_total_bytes=16 * 1024 * MIB, ram_available_bytes=4 * 1024 * MIB,
                physical_cores=4, logical_cores=8,
                devices=(Device("CUDA0", "RTX", "cuda", 12 * 1024 * MIB, 2 * 1024 * MIB, "discrete"),))
    out = budget_machine(m, {"CPU": 1024 * MIB, "CUDA0": 8 * 1024 * MIB}, None, 2048 * MIB, 1024 * MIB)
    assert out.ram_available_bytes == 5 * 1024 * MIB and out.devices[0].free_bytes == 10 * 1024 * MIB
    capped = budget_machine(m, {}, 512 * MIB, 2048 * MIB, 1024 * MIB)
    assert capped.ram_available_bytes == 2560 * MIB and capped.devices[0].free_bytes == 1536 * MIB


def test_request_rules():
    assert requested_model(b'{"model": "a:b", "messages": []}', "application/json", "") == "a:b"
    assert requested_model(b'{"model": "a"}', "application/x-www-form-urlencoded", "") == "a"
    assert requested_model(b"model=x&prompt=1", "application/x-www-form-urlencoded", "") == "x"
    form = (b'--XX\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n--XX--\r\n')
    assert requested_model(form, "multipart/form-data; boundary=XX", "") == "whisper"
    assert requested_model(b"", None, "model=q&x=1") == "q"
    assert requested_model(b"{}", "application/json", "") is None
    assert host_allowed("127.0.0.1:7857") and host_allowed("localhost") and host_allowed("[::1]:7857")
    assert not host_allowed("evil.example:7857") and not host_allowed(None) and not host_allowed("10.0.0.2")
    assert origin_allowed(None) and origin_allowed("http://localhost:3000")
    assert not origin_allowed("https://evil.example") and not origin_allowed("null")
    assert origin_allowed("https://chat.example", ("https://chat.example",))
    assert key_matches(None, None, None) and key_matches("k", "Bearer k", None)
    assert key_matches("k", None, "k") and not key_matches("k", "Bearer x", None)
    assert not key_matches("k", None, None)
    assert error_body("/v1/messages", 404, "m")["error"]["type"] == "not_found_error"
    assert error_body("/v1/chat/completions", 404, "m", code="model_not_found")["error"]["code"] == "model_not_found"
