"""The GGUF header walk: agreement with gguf.GGUFReader, splits, caches, hostile files."""

from __future__ import annotations

import json
import os
import struct
import time

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.library import gguf_io
from stoker.library.gguf_io import GGUFError, clear_memory_cache, load_summary, read_gguf_header
from stoker.library.gguf_summary import SkippedArray
from tests.helpers.gguf_fixtures import Typed, raw_gguf, write_header_only_gguf

T = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType
TINY_TENSORS = [("token_embd.weight", (64, 300), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.Q8_0),
                ("blk.0.attn_norm.weight", (64,), Q.F32), ("output_norm.weight", (64,), Q.F32)]
TINY_META = {"llama.block_count": 1, "llama.context_length": 256, "llama.embedding_length": 64,
             "llama.attention.head_count": 4, "llama.attention.head_count_kv": 2}


def tiny(path, version=3, **extra):
    return write_header_only_gguf(path, "llama", {**TINY_META, **extra}, TINY_TENSORS,
                                  vocab_size=300, version=version)


@pytest.fixture(autouse=True)
def _isolated(stoker_home):
    clear_memory_cache()
    yield
    clear_memory_cache()


# ---- the demo model -------------------------------------------------------------------

def test_demo_model_header_matches_gguf_reader(demo_model):
    header = read_gguf_header(demo_model)
    reader = gguf.GGUFReader(str(demo_model))
    assert header.version == 3
    assert header.metadata["general.architecture"] == "llama"
    assert header.metadata["tokenizer.ggml.tokens"] == SkippedArray(int(T.STRING), 49152)
    assert header.file_type_name == "Q4_1"
    assert len(header.tensors) == len(reader.tensors)
    for ours, theirs in zip(header.tensors, reader.tensors, strict=True):
        assert ours.name == theirs.name
        assert ours.shape == tuple(int(d) for d in theirs.shape)
        assert ours.ggml_type == int(theirs.tensor_type)
        assert ours.offset == theirs.data_offset - reader.data_offset
        assert ours.nbytes == theirs.n_bytes


def test_demo_model_summary(demo_model):
    s = load_summary(demo_model)
    assert (s.architecture, s.n_layer, s.n_ctx_train, s.file_type, s.n_vocab) == \
        ("llama", 30, 8192, "Q4_1", 49152)
    assert set(s.n_head) == {9} and set(s.n_head_kv) == {3}
    assert 130e6 < s.parameter_count < 140e6


def test_demo_model_summary_is_fast(demo_model):
    load_summary(demo_model, use_disk_cache=False)  # imports and page cache
    times = []
    for _ in range(3):
        clear_memory_cache()
        t = time.perf_counter()
        load_summary(demo_model, use_disk_cache=False)
        times.append(time.perf_counter() - t)
    assert min(times) < 0.2  # generous for a loaded CI box; the bench measures the real figure


# ---- value types, versions, arrays ----------------------------------------------------

def test_every_value_type_round_trips_against_gguf_writer_and_reader(tmp_path):
    path = tmp_path / "types.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    values = {
        "t.u8": (255, T.UINT8), "t.i8": (-5, T.INT8), "t.u16": (65535, T.UINT16),
        "t.i16": (-300, T.INT16), "t.u32": (4_000_000_000, T.UINT32), "t.i32": (-70000, T.INT32),
        "t.f32": (1.5, T.FLOAT32), "t.bool": (True, T.BOOL), "t.str": ("héllo", T.STRING),
        "t.u64": (2**63 + 5, T.UINT64), "t.i64": (-(2**40), T.INT64), "t.f64": (0.1, T.FLOAT64),
    }
    for key, (v, vt) in values.items():
        w.add_key_value(key, v, vt)
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, 1.5])
    w.add_array("t.arr_bool", [True, False, True])
    w.add_array("t.arr_str", ["a", "bc", ""])
    w.add_array("t.arr_nested", [[1, 2], [3]])
    w.add_array("t.long", list(range(gguf_io.KEEP_ARRAY_MAX + 1)))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    md = read_gguf_header(path).metadata
    reader = gguf.GGUFReader(str(path))
    for key, (v, _) in values.items():
        expect = reader.fields[key].contents()
        assert md[key] == pytest.approx(expect) if isinstance(v, float) else md[key] == expect
    assert md["t.arr_i32"] == (1, -2, 3)
    assert md["t.arr_f32"] == (0.5, 1.5)
    assert md["t.arr_bool"] == (True, False, True)
    assert md["t.arr_str"] == ("a", "bc", "")
    assert md["t.arr_nested"] == ((1, 2), (3,))
    assert md["t.long"] == SkippedArray(int(T.INT32), gguf_io.KEEP_ARRAY_MAX + 1)
    (t,) = read_gguf_header(path).tensors
    assert (t.shape, t.type_name, t.nbytes) == ((32, 4), "F32", 512)


def test_version_2_files_read_like_version_3(tmp_path):
    a = read_gguf_header(tiny(tmp_path / "v3.gguf", 3))
    b = read_gguf_header(tiny(tmp_path / "v2.gguf", 2))
    assert b.version == 2
    assert a.metadata == b.metadata and a.tensors == b.tensors


@pytest.mark.parametrize("tokens", [
    ["x" * 300, "y"] * 1200,  # over 255 bytes: the second fast-path pass
    ["z" * 70000] + ["a"] * 2000,  # over 64 KiB: the plain walk
    [""] * 3000,  # empty strings: all-zero length fields
    ["\x00" * 9, "a\x00\x00\x00\x00\x00\x00\x00b"] * 1500,  # zero bytes inside strings
])
def test_string_arrays_are_skipped_exactly(tmp_path, tokens):
    path = write_header_only_gguf(tmp_path / "s.gguf", "llama", {
        **TINY_META, "tokenizer.ggml.tokens": Typed(T.ARRAY, tokens, T.STRING),
        "after.marker": 12345}, TINY_TENSORS)
    md = read_gguf_header(path).metadata
    assert md["tokenizer.ggml.tokens"] == SkippedArray(int(T.STRING), len(tokens))
    assert md["after.marker"] == 12345


def test_vocab_of_150k_is_counted(tmp_path):
    from tests.helpers.gguf_fixtures import header_only_150k_vocab

    s = load_summary(header_only_150k_vocab(tmp_path / "v.gguf"))
    assert s.n_vocab == 150_000


# ---- split sets and vision projectors -------------------------------------------------

def _split_set(tmp_path, count=3):
    """A real split set written by gguf.GGUFWriter (the converter's own splitter)."""
    base = tmp_path / "model.gguf"
    w = gguf.GGUFWriter(str(base), "llama", split_max_tensors=2)
    for k, v in TINY_META.items():
        w.add_uint32(k, v)
    for i in range(count * 2):
        w.add_tensor(f"blk.0.t{i}.weight", np.zeros((8, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sorted(tmp_path.glob("model-*-of-*.gguf"))


def test_split_sets_are_read_whole_from_any_part(tmp_path):
    parts = _split_set(tmp_path)
    assert len(parts) == 3
    total = sum(p.stat().st_size for p in parts)
    for given_part in parts:
        h = read_gguf_header(given_part)
        assert h.split_paths == tuple(map(str, parts))
        assert h.file_bytes == total
        assert [t.name for t in h.tensors] == [f"blk.0.t{i}.weight" for i in range(6)]
    assert load_summary(parts[1]).split_count == 3


def test_a_missing_split_part_is_named(tmp_path):
    parts = _split_set(tmp_path)
    parts[2].unlink()
    with pytest.raises(GGUFError, match="00003-of-00003.gguf is missing"):
        read_gguf_header(parts[0])


def test_clip_projector_is_recognised(tmp_path):
    path = write_header_only_gguf(tmp_path / "mmproj.gguf", "clip", {
        "clip.has_vision_encoder": True, "clip.vision.block_count": 2},
        [("v.patch_embd.weight", (14, 14, 3, 64), Q.F16)])
    s = load_summary(path)
    assert s.is_vision_projector and s.architecture == "clip"


# ---- caches ---------------------------------------------------------------------------

def test_summary_cache_hits_and_invalidates_on_mtime_and_size(tmp_path, monkeypatch):
    path = tiny(tmp_path / "m.gguf")
    calls = []
    real = gguf_io.read_gguf_header
    monkeypatch.setattr(gguf_io, "read_gguf_header", lambda p: calls.append(p) or real(p))
    first = load_summary(path)
    assert load_summary(path) is first and len(calls) == 1  # memory
    clear_memory_cache()
    assert load_summary(path) == first and len(calls) == 1  # disk
    st_ = path.stat()
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    load_summary(path)
    assert len(calls) == 2  # mtime changed
    tiny(path, **{"llama.context_length": 512})  # size/content changed
    assert load_summary(path).n_ctx_train == 512 and len(calls) == 3


def test_corrupt_disk_cache_entry_is_ignored_and_rewritten(tmp_path, stoker_home):
    path = tiny(tmp_path / "m.gguf")
    good = load_summary(path)
    (entry,) = (stoker_home / "cache" / "gguf").glob("*.json")
    for junk in ("{not json", json.dumps({"format": 1, "key": [], "summary": {}}),
                 json.dumps({"format": 1, "key": json.loads(entry.read_text())["key"],
                             "summary": {"path": 3}})):
        entry.write_text(junk)
        clear_memory_cache()
        assert load_summary(path) == good
        assert json.loads(entry.read_text())["summary"]["architecture"] == "llama"


# ---- hostile files --------------------------------------------------------------------

def _expect_error(path, match=None, limit_s=2.0):
    t = time.perf_counter()
    with pytest.raises(GGUFError, match=match) as info:
        read_gguf_header(path)
    assert time.perf_counter() - t < limit_s
    msg = str(info.value)
    assert str(path) in msg and msg.endswith(".") and "\n" not in msg
    return msg


def test_wrong_magic(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"GGML" + b"\0" * 60)
    _expect_error(p, "magic")


def test_unsupported_and_big_endian_versions(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(raw_gguf(version=1) + b"\0" * 32)
    _expect_error(p, "version 1")
    p.write_bytes(raw_gguf(version=3 << 24) + b"\0" * 32)
    _expect_error(p, "big-endian")


def test_absurd_lengths_and_counts_do_not_allocate(tmp_path):
    p = tmp_path / "x.gguf"
    huge = 2**60
    cases = {
        "key length": raw_gguf(n_kv=1) + struct.pack("<Q", huge),
        "string value": raw_gguf([(b"a", T.STRING, struct.pack("<Q", huge))]),
        "u8 array": raw_gguf([(b"a", T.ARRAY, struct.pack("<IQ", T.UINT8, huge))]),
        "string array": raw_gguf([(b"a", T.ARRAY, struct.pack("<IQ", T.STRING, huge))]),
        "kv count": raw_gguf(n_kv=huge),
        "tensor count": raw_gguf(n_tensors=huge),
        "tensor dims": raw_gguf(n_tensors=1) + struct.pack("<Q", 1) + b"t" + struct.pack("<I", 99),
        "tensor elements": raw_gguf(n_tensors=1) + struct.pack("<Q", 1) + b"t"
        + struct.pack("<I4QIQ", 4, 2**20, 2**20, 2**20, 2**20, 0, 0),
        "tensor type": raw_gguf(n_tensors=1) + struct.pack("<Q", 1) + b"t"
        + struct.pack("<IQIQ", 1, 32, 9999, 0),
        "value type": raw_gguf([(b"a", 77, b"")]),
        "nesting": raw_gguf([(b"a", T.ARRAY, struct.pack("<IQ", T.ARRAY, 1) * 10)]),
    }
    for data in cases.values():
        p.write_bytes(data + b"\0" * 64)
        _expect_error(p)


def test_absurd_layer_count_is_refused(tmp_path):
    _expect_error(tiny(tmp_path / "m.gguf", **{"llama.block_count": 4_000_000_000}), "layer count")


def test_tensor_outside_the_file_is_refused(tmp_path):
    path = tiny(tmp_path / "m.gguf")
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 64)
    _expect_error(path, "outside the file")


def test_truncated_at_every_offset_of_a_small_file(tmp_path):
    data = tiny(tmp_path / "m.gguf").read_bytes()
    header_len = len(data.rstrip(b"\0"))
    p = tmp_path / "cut.gguf"
    for cut in range(0, header_len + 1):
        p.write_bytes(data[:cut])
        _expect_error(p, limit_s=0.5)


@pytest.mark.parametrize("count", [2**33, gguf_io.MAX_STRING_ARRAY + 1, 2**18])
def test_a_huge_zero_filled_string_array_ends_in_bounded_time(tmp_path, count):
    # empty strings in a sparse 100 GiB file: every length field is a plausible zero
    p = tmp_path / "zeros.gguf"
    with open(p, "wb") as f:
        f.write(raw_gguf([(b"tokenizer.ggml.tokens", T.ARRAY, struct.pack("<IQ", T.STRING, count))]))
        f.truncate(100 << 30)
    _expect_error(p, limit_s=10)


_SMALL = None


def _small_file_bytes():
    global _SMALL
    if _SMALL is None:
        import tempfile
        from pathlib import Path

        with tempfile.TemporaryDirectory() as d:
            _SMALL = tiny(Path(d) / "s.gguf").read_bytes()
    return _SMALL


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_headers_give_a_summary_or_one_gguf_error(tmp_path, data):
    base = bytearray(_small_file_bytes())
    header_len = len(bytes(base).rstrip(b"\0"))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, header_len - 1))
        base[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(base))))
    blob = bytes(base if cut is None else base[:cut])
    p = tmp_path / "fuzz.gguf"
    p.write_bytes(blob)
    clear_memory_cache()
    t = time.perf_counter()
    try:
        load_summary(p, use_disk_cache=False)
    except GGUFError as exc:
        assert str(p) in str(exc)
    assert time.perf_counter() - t < 2.0
