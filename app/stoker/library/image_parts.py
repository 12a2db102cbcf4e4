"""Which part of an image model a GGUF file is (a checkpoint, a diffusion model, a VAE, a text
encoder), read from its tensor names, so the model list can tell an image model from a chat
model and put its auxiliary files beside it instead of listing them as models.

It lives apart from stoker/engines/sd_server.py because the GGUF summary (stoker/library/gguf_summary.py) asks it
for every file it reads, and must not pull in the planning modules sd_server needs.

Pure: it is given names, never files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ImagePart(StrEnum):
    """What one GGUF file is to stable-diffusion.cpp, read from its tensor names."""

    CHECKPOINT = "checkpoint"  # a whole SD/SDXL model: UNet, VAE and text encoders in one file
    DIFFUSION = "diffusion"  # a diffusion model alone (Flux, SD3, Wan, Qwen-Image …)
    VAE = "vae"
    CLIP_L = "clip_l"
    CLIP_G = "clip_g"
    T5XXL = "t5xxl"
    LLM = "llm"  # an LLM text encoder in Hugging Face naming (Qwen3 for FLUX.2 klein, Z-Image)


# GGUF architectures ComfyUI-GGUF (city96) writes for diffusion models; a file with one of
# these and no other tell is a diffusion model.
DIFFUSION_ARCHITECTURES = frozenset({"flux", "sd1", "sdxl", "sd3", "aura", "hidream", "cosmos", "ltxv",
                                     "hyvid", "wan", "lumina2", "qwen_image", "chroma", "z_image"})
# Block names of the diffusion models stable-diffusion.cpp loads (flux.hpp, mmdit.hpp, unet.hpp,
# wan.hpp, qwen_image.hpp, z_image.hpp), after its `model.diffusion_model.` prefix.
_DIFFUSION_BLOCKS = ("double_blocks.", "single_blocks.", "joint_blocks.", "input_blocks.", "middle_block.",
                     "transformer_blocks.", "noise_refiner.", "patch_embedding.")
_DM_PREFIX = "model.diffusion_model."
_CLIP_LAYER = re.compile(r"text_model\.encoder\.layers\.(\d+)\.")


def image_part_of(architecture: str | None, tensor_names: Iterable[str]) -> ImagePart | None:
    """The image-model part a file is, or None for a file that is none (a llama.cpp model).

    Tensor names decide before the architecture: ComfyUI-GGUF writes `flux` into a Flux
    model's VAE and text encoder as well as into the model itself.
    """
    raw = tuple(tensor_names)
    names = [n.removeprefix(_DM_PREFIX) for n in raw]
    has_dm = any(n.startswith(_DM_PREFIX) for n in raw)
    if has_dm and any(n.startswith("first_stage_model.") for n in raw):
        return ImagePart.CHECKPOINT
    if any(n.startswith(_DIFFUSION_BLOCKS) for n in names) and not any(n.startswith("blk.") for n in names):
        return ImagePart.DIFFUSION
    if any(n.startswith(("decoder.conv_in.", "first_stage_model.decoder.conv_in.")) for n in names):
        return ImagePart.VAE
    if any(n.startswith("encoder.block.") for n in names) and any(n == "shared.weight" or
                                                                 n.startswith("encoder.final_layer_norm")
                                                                 for n in names):
        return ImagePart.T5XXL
    layers = {int(m.group(1)) for n in names if (m := _CLIP_LAYER.search(n))}
    if layers:
        return ImagePart.CLIP_G if max(layers) + 1 >= 24 else ImagePart.CLIP_L
    if any(n.startswith("model.embed_tokens.") for n in names) and any(n.startswith("model.layers.") for n in names):
        return ImagePart.LLM
    if architecture in DIFFUSION_ARCHITECTURES and not any(n.startswith("blk.") for n in names):
        return ImagePart.DIFFUSION
    return None


@dataclass(frozen=True)
class ImageModel:
    """The files of one image model. Exactly one of `checkpoint` (a whole SD/SDXL file) and
    `diffusion_model` (a diffusion-only file, with its encoders and VAE beside it)."""

    name: str  # what the gateway's model id is, and what the distilled rules read
    checkpoint: str | None = None
    diffusion_model: str | None = None
    vae: str | None = None
    clip_l: str | None = None
    clip_g: str | None = None
    t5xxl: str | None = None
    llm: str | None = None


    @property
    def files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.checkpoint, self.diffusion_model, self.vae, self.clip_l, self.clip_g,
                                 self.t5xxl, self.llm) if f)


@dataclass(frozen=True)
class ImageFile:
    path: str
    part: ImagePart


_MODEL_PARTS = (ImagePart.CHECKPOINT, ImagePart.DIFFUSION)


_AUX_FIELDS = {ImagePart.VAE: "vae", ImagePart.CLIP_L: "clip_l", ImagePart.CLIP_G: "clip_g",
               ImagePart.T5XXL: "t5xxl", ImagePart.LLM: "llm"}


def _stem(path: str) -> str:
    name = os.path.basename(path)
    return name[:-5] if name.lower().endswith(".gguf") else name


def image_models_from(files: Iterable[ImageFile]) -> tuple[ImageModel, ...]:
    """The image models among some files: each checkpoint or diffusion model, with the
    VAE and text encoders in its own folder (of several of one part, the one whose name
    shares the longest start with the model's). Files are never shared across folders:
    a folder is one model's set, as the model pages ship them."""
    files = list(files)
    out = []
    for f in sorted((f for f in files if f.part in _MODEL_PARTS), key=lambda f: f.path):
        folder, stem = os.path.dirname(f.path), _stem(f.path).lower()
        fields: dict[str, Any] = {}
        if f.part is not ImagePart.CHECKPOINT:
            for part, field in _AUX_FIELDS.items():
                here = [a.path for a in files if a.part is part and os.path.dirname(a.path) == folder]
                if here:
                    fields[field] = max(sorted(here), key=lambda p: len(os.path.commonprefix(
                        [stem, _stem(p).lower()])))
        key = "checkpoint" if f.part is ImagePart.CHECKPOINT else "diffusion_model"
        out.append(ImageModel(name=_stem(f.path), **{key: f.path}, **fields))
    return tuple(out)
