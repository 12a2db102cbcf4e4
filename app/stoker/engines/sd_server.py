"""sd-server (stable-diffusion.cpp's examples/server) as an engine kind: how a model's files
become its argv, what its log says about progress and failure, and how an OpenAI
`/v1/images/generations` request maps onto its A1111 `/sdapi/v1/txt2img` route and back.

The flags are the server's own (examples/server/runtime.cpp: `--listen-ip`, `--listen-port`;
examples/common/common.cpp: `--model`, `--diffusion-model`, `--vae`, `--clip_l`, `--clip_g`,
`--t5xxl`, `--llm`, `--steps`, `--cfg-scale`, `--vae-tiling`), as stable-diffusion-cpp-python
0.4.7 vendors them. The launch rules are the seed's (gezel-behaviours.md §1 "sd-server
launch"): a checkpoint goes in `--model`, a diffusion-only file in `--diffusion-model` with
its auxiliary files; distilled models get their few steps; `--vae-tiling` except Krea 2;
loopback only; one model per process.

sd-server renders under one mutex and cannot abort a render it started, so the engine kind
says `cancellable_in_engine=False`: a cancelled render is ended by stopping the engine.

Pure: no files, no processes, no HTTP.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stoker.engines.launch_spec import LaunchSpec
from stoker.library.image_parts import ImageModel, ImagePart, image_part_of  # noqa: F401  (re-exported)
from stoker.planning.plan import Decision, DeviceMemory

AUX_FLAGS = (("vae", "--vae"), ("clip_l", "--clip_l"), ("clip_g", "--clip_g"), ("t5xxl", "--t5xxl"),
             ("llm", "--llm"))
MAX_IMAGES = 8  # OpenAI's `n` range is 1-10; sd-server renders them one after another
MAX_SIDE = 4096


# --- which files make an image model ------------------------------------------------------------


@dataclass(frozen=True)
class ImagePlan:
    model: ImageModel
    steps: int | None  # --steps; None: the server's default (20)
    cfg_scale: float | None  # --cfg-scale; 1 for distilled and Flux models
    vae_tiling: bool
    threads: int | None
    why: tuple[str, ...]
    # What the launch holds, for admission beside the other resident models; () when the
    # files' sizes were not given (a plan made for its argv alone).
    devices: tuple[DeviceMemory, ...] = ()

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return tuple(Decision(w.split(":", 1)[0], w.split(":", 1)[1].strip() if ":" in w else w)
                     for w in self.why)

    def summary_line(self, backend: str | None) -> str:
        parts = ["sd-server", f"{self.steps} steps" if self.steps else "20 steps (the server's default)"]
        if self.cfg_scale is not None:
            parts.append(f"CFG {self.cfg_scale:g}")
        parts.append("VAE tiling" if self.vae_tiling else "no VAE tiling")
        if backend:
            parts.append(backend)
        return ", ".join(parts)


# sd.cpp holds every weight in the backend's memory and adds its compute buffers, which grow
# with the image: a quarter of the weights, at least 512 MiB, covers a 1024x1024 SDXL render.
COMPUTE_FLOOR_BYTES = 512 * 1024 ** 2


def image_memory(weights_bytes: int, budget_bytes: int, device: str = "CPU") -> DeviceMemory:
    """An estimate of what an sd-server launch holds: its files plus its compute buffers."""
    return DeviceMemory(name=device, budget_bytes=budget_bytes, weights_bytes=weights_bytes, kv_bytes=0,
                        compute_bytes=max(COMPUTE_FLOOR_BYTES, weights_bytes // 4))


_DISTILLED = ((re.compile(r"krea[-_ ]?2", re.I), 8),
              (re.compile(r"schnell|sd[-_]?turbo|sdxl[-_]?turbo|lightning", re.I), 4))
_FLUX = re.compile(r"flux|chroma|z[-_]?image|qwen[-_]?image", re.I)


def distilled_steps(name: str) -> int | None:
    """The few steps a distilled model is made for (Krea 2 Turbo 8; Flux schnell, SD/SDXL
    turbo and Lightning 4), or None for a model that takes the usual schedule."""
    for pattern, steps in _DISTILLED:
        if pattern.search(name):
            return steps
    return None


def plan_image_launch(model: ImageModel, *, threads: int | None = None,
                      memory: DeviceMemory | None = None) -> ImagePlan:
    """Steps, CFG and tiling for one image model, each with its reason; `memory` is what it
    will hold (image_memory), for residency."""
    if (model.checkpoint is None) == (model.diffusion_model is None):
        raise ValueError(f"image model {model.name!r} needs exactly one of a checkpoint file or a "
                         "diffusion-model file")
    why = []
    steps = distilled_steps(model.name)
    if steps:
        why.append(f"{steps} steps: {model.name} is a distilled model")
    cfg = 1.0 if steps or _FLUX.search(model.name) else None
    if cfg is not None:
        why.append("CFG scale 1: distilled and Flux-family models are made without classifier-free guidance")
    krea = bool(_DISTILLED[0][0].search(model.name))
    why.append("no VAE tiling: Krea 2 decodes whole" if krea
               else "VAE tiling on: decoding in tiles keeps the VAE's memory flat at large sizes")
    devices = (memory,) if memory is not None else ()
    return ImagePlan(model, steps, cfg, not krea, threads, tuple(why), devices)


def sd_launch_spec(plan: ImagePlan, *, binary: str, port: int, log_file: str | None = None) -> LaunchSpec:
    """The sd-server command for a plan: its files, steps, tiling, loopback listen address."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    m = plan.model
    argv = [binary]
    if m.checkpoint:
        argv += ["--model", m.checkpoint]
    elif m.diffusion_model is not None:
        argv += ["--diffusion-model", m.diffusion_model]
    for field, flag in AUX_FLAGS:
        value = getattr(m, field)
        if value:
            argv += [flag, value]
    if plan.steps:
        argv += ["--steps", str(plan.steps)]
    if plan.cfg_scale is not None:
        argv += ["--cfg-scale", f"{plan.cfg_scale:g}"]
    if plan.vae_tiling:
        argv.append("--vae-tiling")
    if plan.threads:
        argv += ["--threads", str(plan.threads)]
    argv += ["--listen-ip", "127.0.0.1", "--listen-port", str(port)]
    return LaunchSpec(binary=binary, argv=tuple(argv), env=(), drop_env_prefixes=("SD_",), secret_env=(),
                      host="127.0.0.1", port=port, log_file=log_file)


# --- output ----------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# util.cpp print_progress_line: "\r  |=====>    | 3/20 - 1.23s/it\033[K" (newline only at the end)
_PROGRESS = re.compile(r"\|[^|]*\|\s*(\d+)/(\d+) - ([\d.]+)(s/it|it/s|MB/s|GB/s)")
_LISTENING = re.compile(r"listening on: (\S+):(\d+)")


@dataclass(frozen=True)
class SdProgress:
    phase: str  # loading (tensors, in MB/s) | rendering (steps, in s/it) | ready
    done: int | None = None
    total: int | None = None
    seconds_per_step: float | None = None

    @property
    def fraction(self) -> float | None:
        return None if self.done is None or not self.total else min(1.0, self.done / self.total)


def split_sd_output(chunk: str) -> tuple[str, ...]:
    """sd-server repaints its progress bar with `\\r` and erases with `ESC[K`: one line per state."""
    return tuple(p for p in re.split(r"[\r\n]+", _ANSI.sub("", chunk)) if p.strip())


def parse_sd_line(line: str) -> SdProgress | None:
    if m := _PROGRESS.search(line):
        done, total, value, unit = int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4)
        if unit in ("MB/s", "GB/s"):
            return SdProgress("loading", done, total)
        spi = value if unit == "s/it" else (1.0 / value if value else None)
        return SdProgress("rendering", done, total, spi)
    if _LISTENING.search(line):
        return SdProgress("ready")
    return None


def parse_sd_output(lines: Iterable[str]) -> tuple[SdProgress, ...]:
    return tuple(p for raw in lines for line in split_sd_output(raw) if (p := parse_sd_line(line)) is not None)


# --- OpenAI images <-> sd-server ----------------------------------------------------------------


class ImageRequestError(ValueError):
    """One sentence for the client (HTTP 400)."""


@dataclass(frozen=True)
class Txt2ImgCall:
    path: str  # the sd-server route
    body: dict[str, Any]  # its JSON body
    response_format: str  # b64_json


def openai_to_txt2img(request: Mapping[str, Any], plan: ImagePlan) -> Txt2ImgCall:
    """Map an OpenAI `/v1/images/generations` body onto sd-server's `/sdapi/v1/txt2img`.

    prompt -> prompt; size "WxH" -> width/height (default 512x512 for SD-class models);
    n -> batch_size; the model's distilled steps and CFG 1 go with every request, since the
    A1111 route falls back to the server's defaults per field. Only `b64_json` responses:
    Stoker has nowhere to host a `url`. Stoker's extensions `negative_prompt`, `steps`,
    `seed`, `cfg_scale` pass through when given.
    """
    if not isinstance(request, Mapping):
        raise ImageRequestError("the request body must be a JSON object")
    prompt = request.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ImageRequestError("prompt is required: a non-empty string describing the image")
    fmt = request.get("response_format") or "b64_json"
    if fmt != "b64_json":
        raise ImageRequestError(f"response_format {fmt!r} is not served; ask for b64_json "
                                "(Stoker returns the image in the response, it hosts no URLs)")
    n = request.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_IMAGES:
        raise ImageRequestError(f"n must be a whole number from 1 to {MAX_IMAGES}, got {n!r}")
    size = request.get("size") or "512x512"
    m = re.fullmatch(r"\s*(\d+)\s*x\s*(\d+)\s*", str(size)) if size != "auto" else re.fullmatch("", "")
    if m is None:
        raise ImageRequestError(f"size must be WIDTHxHEIGHT such as 512x512, got {size!r}")
    width, height = (512, 512) if size == "auto" else (int(m.group(1)), int(m.group(2)))
    if not (64 <= width <= MAX_SIDE and 64 <= height <= MAX_SIDE) or width % 8 or height % 8:
        raise ImageRequestError(f"size {width}x{height} is not rendered: each side must be a multiple of 8 "
                                f"from 64 to {MAX_SIDE}")
    body: dict[str, Any] = {"prompt": prompt, "width": width, "height": height, "batch_size": n}
    steps = request.get("steps", plan.steps)
    if steps is not None:
        if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= 150:
            raise ImageRequestError(f"steps must be a whole number from 1 to 150, got {steps!r}")
        body["steps"] = steps
    cfg = request.get("cfg_scale", plan.cfg_scale)
    if cfg is not None:
        if not isinstance(cfg, (int, float)) or isinstance(cfg, bool) or not 0 <= cfg <= 30:
            raise ImageRequestError(f"cfg_scale must be a number from 0 to 30, got {cfg!r}")
        body["cfg_scale"] = float(cfg)
    if isinstance(request.get("negative_prompt"), str):
        body["negative_prompt"] = request["negative_prompt"]
    seed = request.get("seed")
    if seed is not None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ImageRequestError(f"seed must be a whole number, got {seed!r}")
        body["seed"] = seed
    return Txt2ImgCall("/sdapi/v1/txt2img", body, "b64_json")


def txt2img_to_openai(reply: Mapping[str, Any], *, created: int | None = None) -> dict[str, Any]:
    """sd-server's `{"images": [base64 PNG, …]}` as OpenAI's `{"created", "data": [{"b64_json"}]}`.

    Raises ImageRequestError when the engine answered without an image (it reports errors
    as `{"error": …}` with a 4xx/5xx status, which the caller passes on as is).
    """
    images = reply.get("images") if isinstance(reply, Mapping) else None
    if not isinstance(images, list) or not images or not all(isinstance(i, str) for i in images):
        raise ImageRequestError("the image engine answered without an image")
    return {"created": int(time.time()) if created is None else created,
            "data": [{"b64_json": i} for i in images], "output_format": "png"}


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def decode_png(b64: str) -> bytes:
    """The PNG bytes of a b64_json image; ValueError when it is not a PNG."""
    data = base64.b64decode(b64, validate=True)
    if not data.startswith(PNG_MAGIC):
        raise ValueError("the image is not a PNG")
    return data
