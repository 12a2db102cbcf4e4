"""A tiny FLUX.2 [klein] image model that the real sd-server loads and renders with.

No diffusion model small enough for CI ships in a package here, so this writes one: the
three files of a real architecture (stable-diffusion.cpp's VERSION_FLUX2_KLEIN: a Flux 2
diffusion model, its Qwen3 text encoder and the Flux 2 VAE), with the tensor names and
shape rules stable-diffusion.cpp 0.4.7 loads (src/flux.hpp, src/llm.hpp,
src/auto_encoder_kl.hpp), at the smallest sizes it infers from the tensors:

- the DiT's width, depth and text width are read from `txt_in`, the block indices and the
  q/k norm (flux.hpp FluxRunner), so one double and one single block of width 128 (one
  128-wide head: the rope axes are fixed at 4 x 32) load;
- the Qwen3 encoder's width, vocabulary, FFN width and layer count are read from its
  tensors (llm.hpp LLMRunner); Klein takes the hidden states of layers 9, 18 and 27, so it
  has 28 layers, here 64 wide, with the Qwen2 vocabulary (151,936) the built-in tokenizer uses;
- the VAE decoder's width is read from `decoder.conv_in` (32 here; the encoder's is fixed
  at 128 and its 32-channel latent is Flux 2's).

Chroma Radiance (a DiT with no VAE and no text encoder) also loads, but its 5120-wide
modulation approximator is fixed and took 29 s per 64x64 step here; this model renders one
in about a second. Every weight is zero (the files' data sections are sparse holes: a
~55 MB model uses a few KiB of disk), so the picture is flat grey; the engine still runs
every layer to make it.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from stoker.library.gguf_write import write_header_only_gguf
from stoker.library.image_parts import ImageModel

Q = gguf.GGMLQuantizationType
NAME = "tiny-flux2-klein"


def _qtype(shape) -> Q:
    return Q.F16 if len(shape) >= 2 else Q.F32


def flux2_klein_dit(hidden: int = 128, text_width: int = 3 * 64, mlp_ratio: int = 3) -> list:
    """The diffusion model (one double, one single block; no biases: Flux 2 has none)."""
    h, m = hidden, hidden * mlp_ratio
    t = [("img_in.weight", (128, h)), ("txt_in.weight", (text_width, h)),
         ("time_in.in_layer.weight", (256, h)), ("time_in.out_layer.weight", (h, h)),
         ("double_stream_modulation_img.lin.weight", (h, 6 * h)),
         ("double_stream_modulation_txt.lin.weight", (h, 6 * h)),
         ("single_stream_modulation.lin.weight", (h, 3 * h)),
         ("final_layer.adaLN_modulation.1.weight", (h, 2 * h)), ("final_layer.linear.weight", (h, 128))]
    for stream in ("img", "txt"):
        p = f"double_blocks.0.{stream}"
        t += [(f"{p}_attn.qkv.weight", (h, 3 * h)), (f"{p}_attn.proj.weight", (h, h)),
              (f"{p}_attn.norm.query_norm.scale", (128,)), (f"{p}_attn.norm.key_norm.scale", (128,)),
              (f"{p}_mlp.0.weight", (h, 2 * m)), (f"{p}_mlp.2.weight", (m, h))]
    t += [("single_blocks.0.linear1.weight", (h, 3 * h + 2 * m)), ("single_blocks.0.linear2.weight", (h + m, h)),
          ("single_blocks.0.norm.query_norm.scale", (128,)), ("single_blocks.0.norm.key_norm.scale", (128,))]
    return t


def qwen3_encoder(width: int = 64, ffn: int = 128, layers: int = 28, vocab: int = 151_936) -> list:
    """The text encoder. With 28 layers sd.cpp uses 16 query heads and 8 KV heads of 128."""
    t = [("model.embed_tokens.weight", (width, vocab)), ("model.norm.weight", (width,))]
    for i in range(layers):
        p = f"model.layers.{i}."
        t += [(p + "input_layernorm.weight", (width,)), (p + "post_attention_layernorm.weight", (width,)),
              (p + "self_attn.q_proj.weight", (width, 16 * 128)), (p + "self_attn.k_proj.weight", (width, 8 * 128)),
              (p + "self_attn.v_proj.weight", (width, 8 * 128)), (p + "self_attn.o_proj.weight", (16 * 128, width)),
              (p + "self_attn.q_norm.weight", (128,)), (p + "self_attn.k_norm.weight", (128,)),
              (p + "mlp.gate_proj.weight", (width, ffn)), (p + "mlp.up_proj.weight", (width, ffn)),
              (p + "mlp.down_proj.weight", (ffn, width))]
    return t


def _resblock(p: str, cin: int, cout: int) -> list:
    t = [(p + "norm1.weight", (cin,)), (p + "norm1.bias", (cin,)),
         (p + "conv1.weight", (3, 3, cin, cout)), (p + "conv1.bias", (cout,)),
         (p + "norm2.weight", (cout,)), (p + "norm2.bias", (cout,)),
         (p + "conv2.weight", (3, 3, cout, cout)), (p + "conv2.bias", (cout,))]
    if cin != cout:
        t += [(p + "nin_shortcut.weight", (1, 1, cin, cout)), (p + "nin_shortcut.bias", (cout,))]
    return t


def _attn(p: str, c: int) -> list:
    t = [(p + "norm.weight", (c,)), (p + "norm.bias", (c,))]
    for x in ("q", "k", "v", "proj_out"):
        t += [(f"{p}{x}.weight", (1, 1, c, c)), (f"{p}{x}.bias", (c,))]
    return t


def flux2_vae(decoder_ch: int = 32, encoder_ch: int = 128, z: int = 32, ch_mult=(1, 2, 4, 4),
              res_blocks: int = 2) -> list:
    """The LDM AutoencoderKL with Flux 2's 32-channel latent (sd-server also loads the encoder,
    for img2img)."""
    t = []
    c = decoder_ch * ch_mult[-1]
    t += [("decoder.conv_in.weight", (3, 3, z, c)), ("decoder.conv_in.bias", (c,))]
    t += (_resblock("decoder.mid.block_1.", c, c) + _attn("decoder.mid.attn_1.", c)
          + _resblock("decoder.mid.block_2.", c, c))
    for i in reversed(range(len(ch_mult))):
        out = decoder_ch * ch_mult[i]
        for j in range(res_blocks + 1):
            t += _resblock(f"decoder.up.{i}.block.{j}.", c, out)
            c = out
        if i != 0:
            t += [(f"decoder.up.{i}.upsample.conv.weight", (3, 3, c, c)), (f"decoder.up.{i}.upsample.conv.bias", (c,))]
    t += [("decoder.norm_out.weight", (c,)), ("decoder.norm_out.bias", (c,)),
          ("decoder.conv_out.weight", (3, 3, c, 3)), ("decoder.conv_out.bias", (3,))]
    c = encoder_ch
    t += [("encoder.conv_in.weight", (3, 3, 3, c)), ("encoder.conv_in.bias", (c,))]
    for i, mult in enumerate(ch_mult):
        out = encoder_ch * mult
        for j in range(res_blocks):
            t += _resblock(f"encoder.down.{i}.block.{j}.", c, out)
            c = out
        if i != len(ch_mult) - 1:
            t += [(f"encoder.down.{i}.downsample.conv.weight", (3, 3, c, c)),
                  (f"encoder.down.{i}.downsample.conv.bias", (c,))]
    t += (_resblock("encoder.mid.block_1.", c, c) + _attn("encoder.mid.attn_1.", c)
          + _resblock("encoder.mid.block_2.", c, c))
    t += [("encoder.norm_out.weight", (c,)), ("encoder.norm_out.bias", (c,)),
          ("encoder.conv_out.weight", (3, 3, c, 2 * z)), ("encoder.conv_out.bias", (2 * z,)),
          ("quant_conv.weight", (1, 1, 2 * z, 2 * z)), ("quant_conv.bias", (2 * z,)),
          ("post_quant_conv.weight", (1, 1, z, z)), ("post_quant_conv.bias", (z,))]
    return t


def _write(path: Path, tensors: list) -> Path:
    return write_header_only_gguf(path, "flux", {}, [(n, shape, _qtype(shape)) for n, shape in tensors])


def write_tiny_flux2_klein(folder: Path) -> ImageModel:
    """Write the three files into `folder`; the ImageModel that launches them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return ImageModel(
        name=NAME,
        diffusion_model=str(_write(folder / f"{NAME}-dit.gguf", flux2_klein_dit())),
        llm=str(_write(folder / f"{NAME}-qwen3.gguf", qwen3_encoder())),
        vae=str(_write(folder / f"{NAME}-vae.gguf", flux2_vae())),
    )
