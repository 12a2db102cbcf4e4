"""Make a real second quantisation of a model with gguf-py: every quantised tensor is
dequantised and quantised again as Q8_0, all metadata copied (file type set to Q8_0).

It gives the hub tests a repository with two quantisations of one model that llama-server
really loads, so `stoker pull` has a real choice to make. Slow-ish (seconds for 135M
parameters): build it once per session.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import quants

Q = gguf.GGMLQuantizationType
T = gguf.GGUFValueType


def requantize_q8_0(src: Path, dst: Path, split_max_tensors: int = 0) -> Path:
    """`dst`, or with split_max_tensors a split set `<stem>-0000N-of-0000M.gguf` (returns the first)."""
    reader = gguf.GGUFReader(src)
    arch = str(reader.fields["general.architecture"].contents())
    writer = gguf.GGUFWriter(dst, arch, split_max_tensors=split_max_tensors)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            writer.add_key_value(name, int(gguf.LlamaFileType.MOSTLY_Q8_0), T.UINT32)
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == T.ARRAY else None
        if vtype == T.ARRAY and sub == T.ARRAY:
            continue  # nested arrays do not occur in llama models' metadata
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape)]  # numpy order, slowest first
        if t.tensor_type in (Q.F32, Q.F16):
            writer.add_tensor(t.name, np.asarray(t.data).reshape(shape))
            continue
        floats = quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        if shape[-1] % 32:
            writer.add_tensor(t.name, floats.astype(np.float16))
            continue
        writer.add_tensor(t.name, quants.quantize(floats, Q.Q8_0), raw_dtype=Q.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if split_max_tensors:
        return sorted(dst.parent.glob(dst.stem + "-0*-of-*.gguf"))[0]
    return dst
