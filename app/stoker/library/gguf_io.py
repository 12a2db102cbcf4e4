"""Read a GGUF file's header (metadata and tensor table) in milliseconds, and cache summaries.

gguf.GGUFReader decodes every tokenizer entry into numpy objects (2 s on the 135M demo
model); planning needs only the hyperparameters and the tensor table. This module walks
the header itself with `struct`, keeps the small arrays the summary reads, and steps
over the tokenizer arrays by their lengths (string arrays are walked with a vectorised
numpy pass, checked exactly, with a plain loop as fallback). It uses the gguf package
only for its type and quantisation tables.

Every count and length is checked against the bytes that remain in the file before
anything is allocated, so a hostile file (wrong magic, truncation, a 2^60 length) ends in
one `GGUFError` sentence in bounded time and memory. It must not decide anything about
the model: that is `stoker.library.gguf_summary`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import threading
from pathlib import Path
from typing import NoReturn

import gguf
import numpy as np

from stoker.base.paths import stoker_paths
from stoker.library.gguf_summary import (
    GGUFHeader,
    MetaValue,
    ModelSummary,
    SkippedArray,
    TensorInfo,
    summarise,
    summary_from_dict,
    summary_to_dict,
)

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
# Beyond these a file is not a model we can plan, whatever it claims. Together they bound
# the memory a walk can use to a few tens of MiB, whatever the length fields say.
MAX_HEADER_BYTES = 128 << 20  # metadata + tensor table (real ones: a few MiB)
MAX_STRING_BYTES = 8 << 20  # one string (chat templates are tens of KiB)
MAX_KEPT_STRING_BYTES = 16 << 20  # all decoded strings together
MAX_KEPT_ITEMS = 1 << 19  # all decoded array items together (per-layer arrays are short)
MAX_NESTED_ARRAYS = 1 << 16  # arrays inside arrays, all together
MAX_KV_COUNT = 1 << 16
MAX_TENSOR_COUNT = 1 << 16  # the largest MoE files hold a few thousand
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_LAYERS = 1 << 14  # llama.cpp's LLAMA_MAX_LAYERS is 512; leave room, refuse absurd
MAX_ELEMENTS = 1 << 50  # per tensor
MAX_NESTING = 4  # arrays of arrays
KEEP_ARRAY_MAX = 4096  # longer arrays are counted, not decoded (per-layer arrays are short)
SKIP_ALWAYS = ("tokenizer.",)  # tokenizer arrays are counted only, whatever their length
MAX_STRING_ARRAY = 1 << 21  # items; real vocabularies and merge lists stay well under
READ_CHUNK = 256 << 10
VECTOR_WINDOW = 1 << 20  # bytes per vectorised pass: bounds its arrays to ~25 MiB
MAX_MESSAGE = 200  # a refusal is one printable line of at most this many characters

_T = gguf.GGUFValueType
# value type -> (struct code, item size) for fixed-size scalars
_FIXED: dict[int, tuple[str, int]] = {
    _T.UINT8: ("B", 1), _T.INT8: ("b", 1), _T.UINT16: ("H", 2), _T.INT16: ("h", 2),
    _T.UINT32: ("I", 4), _T.INT32: ("i", 4), _T.FLOAT32: ("f", 4), _T.BOOL: ("?", 1),
    _T.UINT64: ("Q", 8), _T.INT64: ("q", 8), _T.FLOAT64: ("d", 8),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
SPLIT_RE = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class GGUFError(ValueError):
    """The file is not a GGUF header we can read; the message is one printable sentence."""


def printable(text: str, limit: int = 60) -> str:
    """`text` with every unprintable character escaped (\\n, \\x00, \\ufffd …), cut to `limit`."""
    out = "".join(c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii")
                  for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _one_line(path: str, problem: str) -> str:
    """The refusal sentence: printable, at most MAX_MESSAGE characters. The problem is cut
    before the path; a path too long to leave it 60 characters is shown by its name."""
    fixed = len(" is not a usable GGUF file: .")
    shown = printable(path, MAX_MESSAGE)
    if MAX_MESSAGE - fixed - len(shown) < 60:
        shown = printable(Path(path).name, 60)
    return f"{shown} is not a usable GGUF file: {printable(problem, MAX_MESSAGE - fixed - len(shown))}."


class _Header:
    """A sliding in-memory window over the file's first bytes, read on demand.

    `pos` is an absolute file offset; `buf` holds the bytes from `base`. Bytes already
    stepped over are dropped when the window must grow, so skipping a long array never
    holds it in memory, and arrays that are skipped by their length are not read at all.
    """

    def __init__(self, f, size: int, path: str):
        self.f = f
        self.size = size
        self.path = path
        self.buf = bytearray()
        self.base = 0
        self.pos = 0
        self.kept_string_bytes = 0
        self.kept_items = 0
        self.nested_arrays = 0

    def fail(self, problem: str) -> NoReturn:
        raise GGUFError(_one_line(self.path, problem))

    def check_room(self, n: int) -> int:
        """Fail unless `n` bytes from pos lie inside the file and the header limit; return the end."""
        end = self.pos + n
        if n < 0 or end > self.size:
            self.fail(f"it ends at byte {self.size} but the header needs {end} bytes "
                      f"(truncated or a length field is corrupt)")
        if end > MAX_HEADER_BYTES:
            self.fail(f"its header would be larger than {MAX_HEADER_BYTES >> 20} MiB")
        return end

    def need(self, n: int) -> int:
        """Make sure `n` more bytes from pos are loaded; return pos as an offset into buf."""
        end = self.check_room(n)
        loaded = self.base + len(self.buf)
        if end > loaded:
            if self.pos >= loaded or self.pos - self.base >= len(self.buf) // 2:
                keep = max(0, loaded - self.pos)  # drop what lies behind pos
                self.buf = self.buf[len(self.buf) - keep:] if keep else bytearray()
                self.base = self.pos
                loaded = self.base + len(self.buf)
            grow = min(len(self.buf), 4 << 20)  # read ahead, but never more than 4 MiB at once
            want = min(self.size, max(end, loaded + grow, loaded + READ_CHUNK)) - loaded
            self.f.seek(loaded)
            self.buf += self.f.read(want)
            if self.base + len(self.buf) < end:
                self.fail("the file shrank while it was being read")
        return self.pos - self.base

    def skip(self, n: int) -> None:
        """Step over n bytes without reading them."""
        self.check_room(n)
        self.pos += n

    def u32(self) -> int:
        p = self.need(4)
        self.pos += 4
        return _U32.unpack_from(self.buf, p)[0]

    def u64(self) -> int:
        p = self.need(8)
        self.pos += 8
        return _U64.unpack_from(self.buf, p)[0]

    def string(self, what: str, limit: int = MAX_STRING_BYTES) -> str:
        n = self.u64()
        if n > limit:
            self.fail(f"{what} claims a length of {n} bytes")
        self.kept_string_bytes += n
        if self.kept_string_bytes > MAX_KEPT_STRING_BYTES:
            self.fail(f"its strings add up to more than {MAX_KEPT_STRING_BYTES >> 20} MiB")
        p = self.need(n)
        self.pos += n
        return bytes(self.buf[p:p + n]).decode("utf-8", errors="replace")

    def value(self, vtype: int, key: str, depth: int = 0):
        if vtype in _FIXED:
            code, size = _FIXED[vtype]
            p = self.need(size)
            self.pos += size
            return struct.unpack_from("<" + code, self.buf, p)[0]
        if vtype == _T.STRING:
            return self.string(f"the value of {key}")
        if vtype == _T.ARRAY:
            return self.array(key, depth)
        self.fail(f"{key} has unknown value type {vtype}")

    def array(self, key: str, depth: int):
        if depth >= MAX_NESTING:
            self.fail(f"{key} nests arrays more than {MAX_NESTING} deep")
        item_type = self.u32()
        n = self.u64()
        remaining = self.size - self.pos
        skipped = n > KEEP_ARRAY_MAX or key.startswith(SKIP_ALWAYS)
        if item_type in _FIXED:
            code, size = _FIXED[item_type]
            if n * size > remaining:
                self.fail(f"array {key} claims {n} items, more than the file holds")
            if skipped:
                self.skip(n * size)
                return SkippedArray(int(item_type), n)
            self._keep_items(n, key)
            p = self.need(n * size)
            self.pos += n * size
            return tuple(struct.unpack_from(f"<{n}{code}", self.buf, p))
        if item_type not in (_T.STRING, _T.ARRAY):
            self.fail(f"array {key} has unknown item type {item_type}")
        if n * 8 > remaining:  # every string or array item takes at least 8 bytes
            self.fail(f"array {key} claims {n} items, more than the file holds")
        if n > MAX_STRING_ARRAY:
            self.fail(f"array {key} claims {n} items, far more than any real vocabulary")
        if item_type == _T.ARRAY:
            self.nested_arrays += n
            if self.nested_arrays > MAX_NESTED_ARRAYS:
                self.fail(f"array {key} holds more than {MAX_NESTED_ARRAYS} arrays")
            items = [self.array(key, depth + 1) for _ in range(n)]
            if skipped:
                return SkippedArray(int(item_type), n)
            return tuple(items)
        if not skipped:
            self._keep_items(n, key)
            return tuple(self.string(f"an item of {key}") for _ in range(n))
        self.skip_strings(n, key)
        return SkippedArray(int(item_type), n)

    def _keep_items(self, n: int, key: str) -> None:
        self.kept_items += n
        if self.kept_items > MAX_KEPT_ITEMS:
            self.fail(f"its arrays (up to {key}) hold more than {MAX_KEPT_ITEMS} items")

    def skip_strings(self, n: int, key: str) -> None:
        """Step over n length-prefixed strings without decoding them.

        The vectorised pass handles real vocabularies in milliseconds; whatever it cannot
        prove (hostile or unusual lengths) is walked one string at a time from where it
        stopped. Both are bounded: n is at most MAX_STRING_ARRAY and every pass looks at one
        window of VECTOR_WINDOW bytes.
        """
        sample = min(n, 256)  # walk a few to learn the typical size, then vectorise
        first = self.pos
        self._walk_strings(sample, key)
        rest = n - sample
        if rest:
            rest = self._skip_strings_vectorised(rest, (self.pos - first) / sample)
        if rest:
            self._walk_strings(rest, key)

    def _walk_strings(self, n: int, key: str) -> None:
        """Step over n strings one by one, checking each length against the bytes left."""
        u64 = _U64.unpack_from
        while n:
            p = self.need(8)
            buf, end, start = self.buf, len(self.buf), p
            while n and p + 8 <= end:  # strings wholly inside the window: no call per string
                length = u64(buf, p)[0]
                if length > MAX_STRING_BYTES:
                    self.pos += p - start
                    self.fail(f"an item of {key} claims a length of {length} bytes")
                q = p + 8 + length
                if q > end:
                    break
                p, n = q, n - 1
            self.pos += p - start
            if not n:
                return
            # this string (or its length field) runs past the window: one checked step
            p = self.need(8)
            length = u64(self.buf, p)[0]
            if length > MAX_STRING_BYTES:
                self.fail(f"an item of {key} claims a length of {length} bytes")
            self.pos += 8
            self.skip(length)
            n -= 1

    def _skip_strings_vectorised(self, n: int, typical: float) -> int:
        """Step over as many of the n strings at pos as the fast path can prove; return how
        many are left for the walk.

        Hypothesis: every string is shorter than 256 bytes (then 64 KiB), so its length
        field has seven (six) zero high bytes. Candidate length fields are found with numpy;
        candidates nothing points to are dropped; then the chain is followed from the first
        string, jumping over runs whose links check out and stepping one link at a time
        where they don't. Every step follows a real length field, so what it steps over is
        exact; it stops (and leaves the rest to the walk) where it cannot prove more.
        """
        limit = min(self.size, MAX_HEADER_BYTES)
        while n:
            span = min(limit - self.pos, int(n * typical * 1.03) + 4096, VECTOR_WINDOW)
            if span < 16:
                return n
            p = self.need(span)
            region = np.frombuffer(self.buf, dtype=np.uint8, count=span, offset=p)
            # first assume strings under 256 bytes (few false candidates), then under 64 KiB
            got = _chain_end(region, n, 7)
            if got is None or got[0] == 0:
                got = _chain_end(region, n, 6)
            del region  # the window may move on the next pass
            if got is None or got[0] == 0:
                return n  # no progress: the walk takes over from here
            done, offset = got
            typical = max(typical, offset / done)
            n -= done
            self.pos += offset
            if n and offset < span // 2:
                return n  # stuck on dense noise (zeros, say): the walk is faster from here
        return 0


def _chain_end(region: np.ndarray, n: int, zero_high: int) -> tuple[int, int] | None:
    """(strings stepped over, offset of the next one) for up to n strings at region[0:].

    None when the strings don't fit the fast path's hypothesis (the caller then walks).
    Memory: a few int32/bool arrays of the region's length (VECTOR_WINDOW at most).
    """
    span = len(region)
    if span < 16:
        return (0, 0)
    zero = region == 0
    first = 8 - zero_high  # length fields have their top `zero_high` bytes zero
    ok = zero[first:span - 8 + first].copy()
    for k in range(first + 1, 8):
        ok &= zero[k:span - 8 + k]
    del zero
    cand = np.flatnonzero(ok).astype(np.int32)
    del ok
    if not len(cand) or cand[0] != 0:
        return None
    nxt = cand + 8 + region[cand].astype(np.int32)
    if zero_high < 7:
        nxt += region[cand + 1].astype(np.int32) << 8
    index = np.zeros(span + (1 << 17), dtype=np.int32)  # position -> candidate number
    index[cand] = np.arange(len(cand), dtype=np.int32)
    succ = index[np.minimum(nxt, len(index) - 1)]
    del index
    linked = cand[succ] == nxt
    keep = np.ones(len(cand), dtype=bool)
    alive = len(cand)
    for _ in range(12):  # noise inside strings is rarely pointed to; each round drops most
        pointed = np.zeros(len(cand), dtype=bool)
        pointed[succ[keep & linked]] = True
        pointed[0] = True
        keep &= pointed
        now = int(np.count_nonzero(keep))
        if alive - now < 64:
            break
        alive = now
    # The chain from the first string ends within n links plus the noise that survived;
    # what lies beyond is another array's bytes and only costs time.
    K = cand[keep][: n + 4096]
    L = nxt[keep][: n + 4096]
    m = len(K)
    bad = np.flatnonzero(L[:-1] != K[1:]).tolist() + [m - 1]
    i, remaining, bi = 0, n, 0  # invariant: K[i] is the true start of a string
    for _ in range(4096):  # each pass crosses one gap between good runs; many gaps: give up
        while bad[bi] < i:
            bi += 1
        b = bad[bi]
        if b - i >= remaining:
            return n, int(K[i + remaining])
        if b == m - 1:  # the last candidate: its link may leave the region
            return n - remaining + (b - i), int(K[b])
        remaining -= b - i + 1
        p = int(L[b])
        if remaining == 0 or p >= span - 8:
            return n - remaining, p
        j = int(np.searchsorted(K, p))
        if j >= m or int(K[j]) != p:
            return (n - remaining, p) if n - remaining else None  # a longer string than assumed
        i = j
    return (n - remaining, int(K[i])) if n - remaining else None


def _read_one(path: Path, first_part: bool = True) -> GGUFHeader:
    try:
        size = path.stat().st_size
        f = open(path, "rb")  # noqa: SIM115 - its errors are mapped below; the `with f:` closes it
    except FileNotFoundError:
        raise GGUFError(f"{path} does not exist.") from None
    except OSError as exc:
        raise GGUFError(f"{path} cannot be opened: {exc.strerror or exc}.") from None
    with f:
        return read_header_stream(f, size, str(path), first_part)


def read_header_stream(f, size: int, source: str, first_part: bool = True) -> GGUFHeader:
    """The header of a GGUF whose bytes `f` (seek/read) gives and whose full size is `size`.

    A local file, or a remote one read by HTTP range requests (stoker/library/hf_hub.py): only the
    header's bytes are read, however large the file.
    """
    h = _Header(f, size, source)
    if size < 24:
        h.fail(f"it is only {size} bytes long")
    h.need(4)
    if bytes(h.buf[:4]) != GGUF_MAGIC:
        h.fail(f"it starts with {bytes(h.buf[:4])!r}, not the GGUF magic")
    h.pos = 4
    version = h.u32()
    if version not in SUPPORTED_VERSIONS:
        if version & 0xFFFF == 0 and (version >> 16) in (2, 3, 0x300, 0x200):
            h.fail("it is a big-endian GGUF, which Stoker does not read")
        h.fail(f"it is GGUF version {version}; Stoker reads versions 2 and 3")
    n_tensors = h.u64()
    n_kv = h.u64()
    if n_kv > MAX_KV_COUNT:
        h.fail(f"it claims {n_kv} metadata entries")
    if n_tensors > MAX_TENSOR_COUNT:
        h.fail(f"it claims {n_tensors} tensors")
    meta: dict[str, MetaValue] = {}
    for _ in range(n_kv):
        key = h.string("a metadata key", limit=65536)
        vtype = h.u32()
        meta[key] = h.value(vtype, key)
    infos = []
    for _ in range(n_tensors):
        name = h.string("a tensor name", limit=65536)
        n_dims = h.u32()
        if n_dims > MAX_DIMS:
            h.fail(f"tensor {name} claims {n_dims} dimensions")
        p = h.need(8 * n_dims + 12)
        dims = struct.unpack_from(f"<{n_dims}Q", h.buf, p)
        ggml_type, offset = struct.unpack_from("<IQ", h.buf, p + 8 * n_dims)
        h.pos += 8 * n_dims + 12
        infos.append((name, dims, ggml_type, offset))
    if first_part and not isinstance(meta.get("general.architecture"), str):
        h.fail("it has no general.architecture, so it is not a model llama.cpp can load")
    if first_part:
        arch = meta["general.architecture"]
        for key in (f"{arch}.block_count", f"{arch}.nextn_predict_layers"):
            layers = meta.get(key)
            if isinstance(layers, int) and not 0 <= layers <= MAX_LAYERS:
                h.fail(f"{key} is {layers}, not a layer count")
    alignment = meta.get("general.alignment", 32)
    if not isinstance(alignment, int) or isinstance(alignment, bool) \
            or alignment <= 0 or alignment & (alignment - 1) or alignment > 1 << 20:
        h.fail(f"general.alignment is {alignment!r}, not a power of two")
    data_start = -(-h.pos // alignment) * alignment
    data_bytes = size - data_start
    tensors = []
    for name, dims, ggml_type, offset in infos:
        try:
            qtype = gguf.GGMLQuantizationType(ggml_type)
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            h.fail(f"tensor {name} has unknown ggml type {ggml_type}")
        elements = 1
        for d in dims:
            elements *= d
        if any(d == 0 for d in dims) and elements == 0 and dims:
            h.fail(f"tensor {name} has a zero dimension {list(dims)}")
        if elements > MAX_ELEMENTS:
            h.fail(f"tensor {name} claims {elements} elements")
        if dims and dims[0] % block:
            h.fail(f"tensor {name} has a first dimension of {dims[0]}, "
                   f"not a multiple of the {qtype.name} block of {block}")
        nbytes = elements // block * type_size
        if offset % alignment or offset + nbytes > data_bytes:
            h.fail(f"tensor {name} lies outside the file's data section "
                   f"(offset {offset}, {nbytes} bytes)")
        tensors.append(TensorInfo(name, int(ggml_type), qtype.name, tuple(dims), offset, nbytes))
    file_type = meta.get("general.file_type")
    file_type_name = None
    if isinstance(file_type, int) and not isinstance(file_type, bool):
        try:
            file_type_name = gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
        except ValueError:
            file_type_name = None
    return GGUFHeader(source, version, meta, tuple(tensors), size,
                      file_type_name=file_type_name)


def split_paths_of(path: Path) -> tuple[Path, ...]:
    """All files of the split set `path` belongs to (first first), or () when not split."""
    m = SPLIT_RE.match(path.name)
    if not m:
        return ()
    count = int(m.group("count"))
    if count < 1 or int(m.group("no")) > count:
        raise GGUFError(f"{path} has a split number beyond its split count.")
    prefix = m.group("prefix")
    return tuple(path.with_name(f"{prefix}-{i:05d}-of-{count:05d}.gguf")
                 for i in range(1, count + 1))


def read_gguf_header(path) -> GGUFHeader:
    """The header of one GGUF file, or of a whole split set given any of its files."""
    path = Path(path)
    parts = split_paths_of(path)
    if len(parts) <= 1:
        header = _read_one(path)
        count = header.metadata.get("split.count")
        if isinstance(count, int) and count > 1:
            raise GGUFError(f"{path} is split {count} of a set but its name does not say "
                            f"which part it is (-00001-of-{count:05d}.gguf), so the other "
                            f"parts cannot be found.")
        return header
    missing = [p for p in parts if not p.is_file()]
    if missing:
        raise GGUFError(f"{missing[0]} is missing; {path.name} is one part of a "
                        f"{len(parts)}-part split model and needs every part.")
    headers = [_read_one(p, first_part=i == 0) for i, p in enumerate(parts)]
    return join_split_headers(headers, tuple(map(str, parts)))


def join_split_headers(headers: list[GGUFHeader], names: tuple[str, ...]) -> GGUFHeader:
    """One header for a split set from its parts' headers (first part first)."""
    parts = names
    first = headers[0]
    tensors = tuple(t for h in headers for t in h.tensors)
    declared = first.metadata.get("split.tensors.count")
    if isinstance(declared, int) and declared != len(tensors):
        raise GGUFError(f"{parts[0]} declares {declared} tensors across its split set but "
                        f"the parts hold {len(tensors)}; a part is from another model.")
    return GGUFHeader(str(parts[0]), first.version, first.metadata, tensors,
                      sum(h.file_bytes for h in headers), split_paths=tuple(map(str, parts)),
                      file_type_name=first.file_type_name)


# ---- summary cache: in memory and on disk, keyed by (resolved path, size, mtime_ns) ----

CACHE_FORMAT = 3  # 2: ModelSummary.image_part; 3: template_tools, has_fim
_memory_cache: dict[tuple, ModelSummary] = {}
_lock = threading.Lock()


def _cache_key(path: Path) -> tuple:
    parts = split_paths_of(path) or (path,)
    key = []
    for p in parts:
        try:
            st = p.stat()
        except OSError:
            return ()  # let the reader say what is wrong
        key.append((str(p.resolve()), st.st_size, st.st_mtime_ns))
    return tuple(key)


def _disk_cache_file(key: tuple) -> Path:

    digest = hashlib.sha256(repr((CACHE_FORMAT, key)).encode()).hexdigest()[:32]
    return stoker_paths().cache / "gguf" / f"{digest}.json"


def clear_memory_cache() -> None:
    with _lock:
        _memory_cache.clear()


def load_summary(path, *, use_disk_cache: bool = True) -> ModelSummary:
    """The model summary of `path`, from cache when the file is unchanged."""
    path = Path(path)
    key = _cache_key(path)
    if key:
        with _lock:
            hit = _memory_cache.get(key)
        if hit is not None:
            return hit
    cache_file = _disk_cache_file(key) if key and use_disk_cache else None
    if cache_file is not None and cache_file.is_file():
        try:
            data = json.loads(cache_file.read_text(encoding="utf-8"))
            if data.get("format") == CACHE_FORMAT and data.get("key") == json.loads(json.dumps(key)):
                summary = summary_from_dict(data["summary"])
                with _lock:
                    _memory_cache[key] = summary
                return summary
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # corrupt or foreign entry: recompute and overwrite it below
    summary = summarise(read_gguf_header(path))
    if key:
        with _lock:
            _memory_cache[key] = summary
    if cache_file is not None:
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"format": CACHE_FORMAT, "key": key,
                                       "summary": summary_to_dict(summary)}), encoding="utf-8")
            os.replace(tmp, cache_file)
        except OSError:
            pass  # a read-only cache only costs speed
    return summary
