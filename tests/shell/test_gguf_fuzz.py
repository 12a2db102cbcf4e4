"""Hostile headers: the demo model's real header, mutated and truncated, under a memory limit.

Every mutated file must end in a summary or the one-line refusal (printable, at most 200
characters), within 1 s of CPU and within 64 MiB of memory beyond the header's size (the
worker caps its own address space, RLIMIT_AS, so an allocation driven by a hostile length
fails loudly instead of quietly succeeding on a big machine). The mutations aim at what
broke before: count and length fields inside the tokenizer arrays (`tokenizer.ggml.tokens`,
`merges`, `token_type`), random bytes anywhere in the header, and truncation.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "helpers" / "gguf_walk_worker.py"
HOSTILE = [0, 1, 7, 255, 256, 65535, 65536, 2**21, 2**21 + 1, 2**24, 2**31, 2**32 - 1, 2**32,
           2**40, 2**60, 2**63, 2**64 - 1]


def _string_array(data: bytes, key: bytes) -> tuple[int, list[int]]:
    """(offset of the array's count field, offsets of every item's length field)."""
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    count_at = at + 8  # value type u32, item type u32, then the count
    (n,) = struct.unpack_from("<Q", data, count_at)
    items, p = [], count_at + 8
    for _ in range(n):
        items.append(p)
        p += 8 + struct.unpack_from("<Q", data, p)[0]
    return count_at, items


@pytest.fixture(scope="module")
def header(demo_model):
    """The demo model's header bytes, where its length fields are, and the full file size."""
    size = demo_model.stat().st_size
    with open(demo_model, "rb") as f:
        data = f.read(2 << 20)
    tokens_count, tokens = _string_array(data, b"tokenizer.ggml.tokens")
    merges_count, merges = _string_array(data, b"tokenizer.ggml.merges")
    type_at = data.index(b"tokenizer.ggml.token_type") + len(b"tokenizer.ggml.token_type") + 8
    header_len = merges[-1] + 8 + struct.unpack_from("<Q", data, merges[-1])[0] + 200_000
    return {"data": data[:header_len], "size": size, "counts": [tokens_count, merges_count, type_at],
            "items": tokens + merges, "len": header_len}


@pytest.fixture(scope="module")
def worker(header, demo_model):
    proc = subprocess.Popen([sys.executable, str(WORKER), str(demo_model), str(header["len"])],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    ready = json.loads(proc.stdout.readline())
    assert ready["ready"]

    def ask(path: Path) -> dict:
        proc.stdin.write(f"{path}\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line, "the worker died (a crash the header walk should have refused)"
        return json.loads(line)

    yield ask
    proc.stdin.close()
    proc.wait(timeout=30)


def _check(answer: dict, path: Path) -> None:
    assert answer["outcome"] in ("summary", "refused"), answer
    assert answer["cpu_s"] < 1.0, answer
    assert answer["wall_s"] < 5.0, answer  # 2 shared cores: wall time also counts waiting
    if answer["outcome"] == "refused":
        msg = answer["message"]
        assert msg.isprintable() and len(msg) <= 200 and msg.endswith("."), msg
        assert path.name in msg


def _write(path: Path, blob: bytes, full_size: int | None) -> None:
    with open(path, "wb") as f:
        f.write(blob)
        if full_size is not None:
            f.truncate(full_size)  # sparse: the tensor data reads as zeros, offsets stay valid


def test_the_unmutated_header_is_summarised(header, worker, tmp_path):
    p = tmp_path / "same.gguf"
    _write(p, header["data"], header["size"])
    answer = worker(p)
    assert answer["outcome"] == "summary", answer


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_tokenizer_lengths_and_bytes(header, worker, tmp_path, data):
    blob = bytearray(header["data"])
    kind = data.draw(st.sampled_from(["count", "item-length", "bytes", "truncate"]), label="kind")
    value = data.draw(st.one_of(st.sampled_from(HOSTILE), st.integers(0, 2**64 - 1)), label="value")
    if kind == "count":
        struct.pack_into("<Q", blob, data.draw(st.sampled_from(header["counts"])), value)
    elif kind == "item-length":
        at = data.draw(st.sampled_from(header["items"]), label="item")
        struct.pack_into("<Q", blob, at, value)
    elif kind == "bytes":
        for _ in range(data.draw(st.integers(1, 8))):
            blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)), label="cut") if kind == "truncate" else None
    p = tmp_path / "fuzz.gguf"
    _write(p, bytes(blob[:cut]) if cut is not None else bytes(blob), None if cut is not None
           else header["size"])
    _check(worker(p), p)


@pytest.mark.parametrize("count", [49153, 60000, 100_000, 2**21])
def test_a_longer_token_count_walks_into_other_bytes_within_bounds(header, worker, tmp_path, count):
    """What took 3.7 GiB and > 10 s before: the tokens count raised, so the walk reads the
    next arrays and then the tensor data as if they were strings."""
    blob = bytearray(header["data"])
    struct.pack_into("<Q", blob, header["counts"][0], count)
    p = tmp_path / f"count-{count}.gguf"
    _write(p, bytes(blob), header["size"])
    _check(worker(p), p)


def test_refusals_escape_raw_bytes(header, worker, tmp_path):
    """A tensor name full of newlines and NULs is shown escaped, never raw."""
    blob = bytearray(header["data"])
    name = b"token_embd.weight"
    at = blob.index(name)
    blob[at:at + len(name)] = b"\n\x00evil\r\n\x1b[31m" + b"x" * (len(name) - 13)
    # and make that tensor claim an unknown type so the refusal names it
    type_at = at + len(name) + 4 + 8 * 2
    struct.pack_into("<I", blob, type_at, 9999)
    p = tmp_path / "names.gguf"
    _write(p, bytes(blob), header["size"])
    answer = worker(p)
    _check(answer, p)
    assert answer["outcome"] == "refused" and "\\n" in answer["message"], answer
