"""Header-only GGUF files with the real shapes of real models, for planning tests.

The builders live in app/stoker/library/real_shapes.py (the memory benchmark uses them too) and are
re-exported here; this module adds small builders of malformed files for the
hostile-input tests.
"""

from __future__ import annotations

import struct

from stoker.library.gguf_write import (  # noqa: F401  (re-exported for tests)
    Typed,
    _string,
    encode_value,
    spm_vocab,
    write_header_only_gguf,
    write_vocab_heavy_gguf,
)
from stoker.library.real_shapes import (  # noqa: F401  (re-exported for tests)
    LFM2_ATTENTION_LAYERS,
    REAL_SHAPE_BUILDERS,
    deepseek2_lite_q4_k_m,
    gemma3_12b_q4_k_m,
    gpt_oss_20b_mxfp4,
    header_only_150k_vocab,
    lfm2_1_2b_q4_k_m,
    llama_8b_q4_k_m,
    llama_70b_q4_k_m,
    mamba2_2_7b,
    qwen3moe_30b_a3b_q4_k_m,
)

# ---- malformed files --------------------------------------------------------------------

def raw_gguf(kv: list[tuple[bytes, int, bytes]] = (), tensor_bytes: bytes = b"", *,
             n_tensors: int = 0, n_kv: int | None = None, version: int = 3,
             magic: bytes = b"GGUF") -> bytes:
    """Hand-assembled header bytes, so tests can lie in any field.

    kv: (key bytes, value type, encoded payload) triples; n_kv defaults to len(kv).
    """
    out = magic + struct.pack("<IQQ", version, n_tensors, len(kv) if n_kv is None else n_kv)
    for key, vtype, payload in kv:
        out += _string(key) + struct.pack("<I", vtype) + payload
    return out + tensor_bytes
