"""What a hub repository offers, as values: its GGUF files grouped into quantisation options
(the parts of a split file, the projector beside them). Library knowledge, so the hub client
(stoker/library/hf_hub.py) lists options without importing the planner; judging each option
for this machine is stoker/planning/quant_choice.py. Pure: it is given names and sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stoker.library.store_layouts import is_projector_name, quant_of, quant_rank, split_of


@dataclass(frozen=True)
class RemoteFile:
    name: str  # path inside the repository
    size_bytes: int | None
    sha256: str | None  # the LFS oid the hub states


@dataclass(frozen=True)
class QuantOption:
    """One downloadable model in a repository: a file or a whole split set."""

    quant: str | None  # Q4_K_M …; None when the name states none
    label: str  # the quant, or the file stem where the name states none (or two files share one)
    files: tuple[RemoteFile, ...]  # the parts, in order
    mmproj: RemoteFile | None = None  # the repository's vision projector, fetched with it

    @property
    def size_bytes(self) -> int | None:
        sizes = [f.size_bytes for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    @property
    def download_bytes(self) -> int | None:
        extra = 0 if self.mmproj is None else self.mmproj.size_bytes
        return None if self.size_bytes is None or extra is None else self.size_bytes + extra


def quant_options(files: Sequence[RemoteFile]) -> tuple[QuantOption, ...]:
    """The repository's models, best quality first; projectors go with them, not in the list."""
    ggufs = [f for f in files if f.name.lower().endswith(".gguf")]
    projectors = [f for f in ggufs if is_projector_name(f.name.rsplit("/", 1)[-1])]
    mmproj = min(projectors, key=lambda f: (quant_rank(quant_of(f.name)), f.name)) if projectors else None
    groups: dict[tuple[str, str], list[RemoteFile]] = {}
    for f in ggufs:
        if f in projectors:
            continue
        base = f.name.rsplit("/", 1)[-1]
        folder = f.name.rsplit("/", 1)[0] if "/" in f.name else ""
        s = split_of(base)
        key = (folder, s[0] if s else base.removesuffix(".gguf"))
        groups.setdefault(key, []).append(f)
    quants: dict[str | None, int] = {}
    for parts in groups.values():
        q = quant_of(parts[0].name)
        quants[q] = quants.get(q, 0) + 1
    out = []
    for (_folder, stem), parts in groups.items():
        parts.sort(key=lambda f: f.name)
        s = split_of(parts[0].name.rsplit("/", 1)[-1])
        if s and (len(parts) != s[2] or s[1] != 1):
            continue  # an incomplete split set cannot be run; it is not offered
        q = quant_of(parts[0].name)
        label = q if q and quants[q] == 1 else stem
        out.append(QuantOption(q, label, tuple(parts), mmproj))
    return tuple(sorted(out, key=lambda o: (quant_rank(o.quant), o.label)))
