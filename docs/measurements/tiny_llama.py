"""A tiny llama GGUF (2 layers, 64 wide, random F16 weights, 8 MB) with the demo model's
tokenizer and chat template: `python tiny_llama.py DEMO.gguf OUT.gguf`.

For timing the gateway on a machine the demo model (98 MB) cannot be carried to
(gateway_on_device.sh). What the gateway adds does not depend on the weights; its answers
are nonsense words, and the engine streams them about ten times faster than the demo model,
which makes the streaming ratios a harsher test than on a real model."""
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType

src, dst = sys.argv[1], sys.argv[2]
r = GGUFReader(src)
w = GGUFWriter(dst, "llama")
n_embd, n_head, n_layer, n_ff, n_vocab = 64, 4, 2, 128, 49152
skip = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture",
        "general.file_type", "general.name", "general.size_label", "llama.context_length"}
for key, f in r.fields.items():
    if key in skip or key.startswith("llama."):
        continue
    vt = f.types[0]
    if vt == GGUFValueType.ARRAY:
        w.add_key_value(key, f.contents(), vt, sub_type=f.types[-1])
    else:
        w.add_key_value(key, f.contents(), vt)
w.add_name("tiny random llama (demo tokenizer)")
w.add_file_type(LlamaFileType.MOSTLY_F16)
w.add_context_length(8192)
w.add_block_count(n_layer)
w.add_embedding_length(n_embd)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_rope_freq_base(100000.0)
w.add_layer_norm_rms_eps(1e-5)
w.add_vocab_size(n_vocab)
w.add_rope_dimension_count(n_embd // n_head)
rng = np.random.default_rng(0)
def mat(rows, cols):  # gguf shape [cols, rows] = numpy (rows, cols)
    return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)
w.add_tensor("token_embd.weight", mat(n_vocab, n_embd))
w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
for i in range(n_layer):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
    w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
    for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(p + n + ".weight", mat(n_embd, n_embd))
    w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
    w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
    w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
