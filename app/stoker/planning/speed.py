"""How fast a plan will decode, predicted from the bytes each token reads and memory bandwidth.

Decoding one token reads every weight the token passes through once (for a MoE, only the
experts it is routed to) and the KV cache it attends over. On every machine llama.cpp runs
on, that read is the bottleneck for batch-1 decoding, so time per token is, device by
device, bytes read there over that device's memory bandwidth; a layer split across a GPU
and the CPU runs the devices one after the other, so their times add. This is why a plan
that keeps every layer on a card beats one that leaves a gigabyte in system RAM: the
gigabyte is read at a tenth of the card's speed on every token.

Bandwidths come from `GPU_BANDWIDTH_GB_S`, a table of common GPUs and Apple chips by name
(vendor spec sheets: peak figures, so a GPU prediction is a ceiling), and for the host
CPU from a figure the shell measured on this machine (`Machine.ram_bandwidth_bytes_per_s`).
A device whose bandwidth is unknown makes the prediction unknown (None), never 0.

Pure: values in, values out. It must not plan; the planner asks it to compare plans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stoker.library.gguf_summary import ModelSummary
from stoker.planning import memory as mem
from stoker.planning.machine import Device, Machine

GB = 1_000_000_000

# Peak memory bandwidth in GB/s (10^9 bytes), from the vendors' spec sheets. Keys are matched
# against a device description as whole words, longest first, so "RTX 4070 Ti SUPER" is not
# read as "RTX 4070". Apple chips: the unified memory's bandwidth (shared with the CPU).
GPU_BANDWIDTH_GB_S: dict[str, float] = {
    # NVIDIA GeForce
    "RTX 5090": 1792, "RTX 5080": 960, "RTX 5070 Ti": 896, "RTX 5070": 672, "RTX 5060 Ti": 448,
    "RTX 5060": 448,
    "RTX 4090": 1008, "RTX 4080 SUPER": 736, "RTX 4080": 717, "RTX 4070 Ti SUPER": 672,
    "RTX 4070 Ti": 504, "RTX 4070 SUPER": 504, "RTX 4070": 504, "RTX 4060 Ti": 288, "RTX 4060": 272,
    "RTX 3090 Ti": 1008, "RTX 3090": 936, "RTX 3080 Ti": 912, "RTX 3080": 760, "RTX 3070 Ti": 608,
    "RTX 3070": 448, "RTX 3060 Ti": 448, "RTX 3060": 360, "RTX 3050": 224,
    "RTX 2080 Ti": 616, "RTX 2080 SUPER": 496, "RTX 2080": 448, "RTX 2070 SUPER": 448,
    "RTX 2070": 448, "RTX 2060 SUPER": 448, "RTX 2060": 336,
    "GTX 1080 Ti": 484, "GTX 1080": 320, "GTX 1070": 256, "GTX 1660 Ti": 288, "GTX 1660": 192,
    # NVIDIA workstation and data centre
    "RTX 6000 Ada": 960, "RTX A6000": 768, "RTX A5000": 768, "RTX A4000": 448,
    "RTX PRO 6000": 1792, "A100-SXM4-80GB": 2039, "A100 80GB": 1935, "A100": 1555,
    "H100 SXM": 3350, "H100 PCIe": 2000, "H100": 3350, "H200": 4800, "L40S": 864, "L40": 864,
    "L4": 300, "A10G": 600, "A10": 600, "T4": 320, "V100": 900, "GB10": 273,
    # AMD Radeon and Instinct
    "RX 9070 XT": 640, "RX 9070": 640, "RX 7900 XTX": 960, "RX 7900 XT": 800, "RX 7900 GRE": 576,
    "RX 7800 XT": 624, "RX 7700 XT": 432, "RX 7600": 288, "RX 6950 XT": 576, "RX 6900 XT": 512,
    "RX 6800 XT": 512, "RX 6800": 512, "RX 6700 XT": 384, "RX 6600 XT": 256, "RX 6600": 224,
    "Radeon VII": 1024, "MI300X": 5300, "MI250X": 3277, "MI210": 1638, "MI100": 1229,
    # Intel Arc
    "Arc B580": 456, "Arc A770": 560, "Arc A750": 512, "Arc A380": 186,
    # Apple silicon (unified memory)
    "M4 Max": 546, "M4 Pro": 273, "M4": 120, "M3 Ultra": 819, "M3 Max": 400, "M3 Pro": 150,
    "M3": 100, "M2 Ultra": 800, "M2 Max": 400, "M2 Pro": 200, "M2": 100, "M1 Ultra": 800,
    "M1 Max": 400, "M1 Pro": 200, "M1": 68,
}
_TABLE_ORDER = sorted(GPU_BANDWIDTH_GB_S, key=len, reverse=True)


def _normal(text: str) -> str:
    """Vendor marks and dashes out, spaces collapsed: "Intel(R) Arc(TM) A770" -> "Intel Arc A770"."""
    text = re.sub(r"\((?:R|TM|tm|r)\)", " ", text).replace("-", " ")
    return " ".join(text.split())


def gpu_bandwidth_bytes_per_s(description: str | None) -> int | None:
    """The table's bandwidth for a device described as `description`, or None when unknown."""
    if not description:
        return None
    text = _normal(description)
    for key in _TABLE_ORDER:
        k = _normal(key)
        if re.search(r"(?<![A-Za-z0-9])" + re.escape(k) + r"(?![A-Za-z0-9])", text, re.IGNORECASE):
            return int(GPU_BANDWIDTH_GB_S[key] * GB)
    return None


def device_bandwidths(machine: Machine) -> dict[str, int | None]:
    """Bandwidth per engine device name ("CPU" included); None where unknown.

    On unified memory the CPU reads the same memory as the GPU, at the chip's figure when the
    table knows it, else at the measured host figure.
    """
    out: dict[str, int | None] = {"CPU": machine.ram_bandwidth_bytes_per_s}
    for d in machine.gpus:
        out[d.name] = _device_bandwidth(d)
    if machine.unified_memory and machine.gpus:
        chip = out.get(machine.gpus[0].name)
        if chip is None:
            out[machine.gpus[0].name] = machine.ram_bandwidth_bytes_per_s
        else:
            out["CPU"] = chip
    return out


def _device_bandwidth(d: Device) -> int | None:
    return d.bandwidth_bytes_per_s or gpu_bandwidth_bytes_per_s(d.description)


@dataclass(frozen=True)
class DeviceRead:
    """What one device reads per decoded token, and how fast it can read it."""

    name: str
    bytes_per_token: int
    bandwidth_bytes_per_s: int | None

    @property
    def seconds_per_token(self) -> float | None:
        if self.bytes_per_token == 0:
            return 0.0
        if not self.bandwidth_bytes_per_s:
            return None
        return self.bytes_per_token / self.bandwidth_bytes_per_s


@dataclass(frozen=True)
class DecodeSpeed:
    """A predicted batch-1 decode speed and the per-device reads it comes from."""

    tokens_per_s: float | None  # None when some device that reads has no known bandwidth
    reads: tuple[DeviceRead, ...]
    context_tokens: int  # cells already in the cache the prediction attends over

    @property
    def limited_by(self) -> str | None:
        """The device whose reads take the longest (None when nothing is known)."""
        timed = [(r.seconds_per_token, r.name) for r in self.reads if r.seconds_per_token]
        return max(timed)[1] if timed else None


def bytes_read_per_token(model: ModelSummary, placement: mem.Placement, kv: mem.KVBreakdown | None,
                         context_tokens: int = 0) -> dict[str, int]:
    """Bytes one decoded token reads on each device.

    Every block's weights are read once; a MoE block reads its shared part plus the routed
    experts in the share n_expert_used / n_expert. The output matrix is read in full (for a
    tied output that is token_embd, on the output device); token_embd otherwise gives one row,
    which is nothing beside the rest. The KV cache is read for `context_tokens` cells (a
    sliding-window layer for at most its window), on the device of its layer.
    """
    share = 1.0
    if model.is_moe and model.n_expert_used and model.n_expert:
        share = model.n_expert_used / model.n_expert
    n_layer = model.n_layer or 0
    out: dict[str, int] = {}

    def add(dev: str, n: int | float) -> None:
        out[dev] = out.get(dev, 0) + int(n)

    for il, lb in enumerate(model.layer_bytes[:n_layer]):  # nextn blocks are not run per token
        dev = placement.device_of_layer(il)
        experts_dev = "CPU" if placement.experts_on_cpu[il:il + 1] == (True,) else dev
        add(dev, lb.total - lb.ffn_experts)
        add(experts_dev, lb.ffn_experts * share)
    add(placement.output_device, model.output_bytes)
    if mem.output_is_tied(model):
        add(placement.output_device, model.embedding_bytes)
    if kv is not None and context_tokens > 0 and kv.n_ctx_seq:
        streams_cells = kv.n_ctx_seq * kv.streams
        swa_cells = (kv.cells_swa or 0) * kv.streams
        for il, b in enumerate(kv.per_layer):
            if not b:
                continue
            is_swa = il < len(model.swa_layers) and model.swa_layers[il] and kv.cells_swa is not None
            cells = swa_cells if is_swa else streams_cells
            if not cells:
                continue
            used = min(context_tokens, model.n_swa or context_tokens) if is_swa else context_tokens
            add(placement.device_of_layer(il), b * min(used, cells) / cells)
    return {k: v for k, v in out.items() if v}


def predict_decode(model: ModelSummary, placement: mem.Placement, kv: mem.KVBreakdown | None,
                   bandwidths: dict[str, int | None], context_tokens: int = 0) -> DecodeSpeed:
    """Tokens per second for one sequence, from bytes read per device over its bandwidth."""
    reads = tuple(DeviceRead(dev, n, bandwidths.get(dev))
                  for dev, n in sorted(bytes_read_per_token(model, placement, kv, context_tokens).items()))
    seconds = [r.seconds_per_token for r in reads]
    if not reads or any(s is None for s in seconds):
        return DecodeSpeed(None, reads, context_tokens)
    total = sum(s for s in seconds if s is not None)
    return DecodeSpeed(1.0 / total if total > 0 else None, reads, context_tokens)


def speed_text(speed: DecodeSpeed | None) -> str:
    """`~42 tok/s decode` or `decode speed unknown (no bandwidth for CPU)`."""
    if speed is None:
        return "decode speed unknown"
    if speed.tokens_per_s is None:
        missing = [r.name for r in speed.reads if r.seconds_per_token is None]
        return f"decode speed unknown (no memory bandwidth known for {', '.join(missing) or 'a device'})"
    n = speed.tokens_per_s
    return f"~{n:.0f} tok/s decode" if n >= 10 else f"~{n:.1f} tok/s decode"


def reads_text(speed: DecodeSpeed | None) -> str:
    """`bytes read per token over memory bandwidth: CUDA0 4.6 GiB at 504 GB/s, CPU 0.1 GiB at 50 GB/s`."""
    if speed is None or not speed.reads:
        return "nothing to read: no weights are placed"
    parts = []
    for r in speed.reads:
        size = (f"{r.bytes_per_token / 2**30:.2f} GiB" if r.bytes_per_token >= 2**30
                else f"{r.bytes_per_token / 2**20:.0f} MiB")
        bw = (f"{r.bandwidth_bytes_per_s / GB:.0f} GB/s" if r.bandwidth_bytes_per_s
              else "unknown bandwidth")
        parts.append(f"{r.name} {size} at {bw}")
    return "bytes read per token over memory bandwidth: " + ", ".join(parts)
