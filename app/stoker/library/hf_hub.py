"""Talk to the Hugging Face hub through `huggingface_hub`: list a repository, read a remote
header by range requests, and download into the standard hub cache, resumable and checked.

The cache layout is the hub's own (`models--org--repo/blobs/<sha256>` with
`snapshots/<commit>/<file>` links and `refs/<revision>`), so every other tool sees the file.
A download goes to `blobs/<sha256>.incomplete` and is resumed from there after an
interruption (in this process by huggingface_hub's own retry, or by running the pull
again); the finished file's sha256 must equal the LFS oid the hub states before it is
moved into place, so a corrupted file is never added. The endpoint (`HF_ENDPOINT`), the
cache (`HF_HUB_CACHE`, `HF_HOME`) and the token (`HF_TOKEN`, the saved login) are read
where huggingface_hub reads them, at call time. It decides nothing: which file is
stoker/planning/quant_choice.py's business, the plan stoker/planning/planner.py's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub import HfApi, constants, get_token, hf_hub_url
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.file_download import get_hf_file_metadata, http_get
from huggingface_hub.utils import build_hf_headers, disable_progress_bars, get_session

from stoker.errors import UserError
from stoker.library.gguf_io import GGUFError, join_split_headers, read_header_stream
from stoker.library.gguf_summary import ModelSummary, summarise
from stoker.library.pull_record import PulledFile, PullRecord
from stoker.library.quant_options import QuantOption, RemoteFile
from stoker.library.store_layouts import ModelOrigin, hf_folder_of_repo, hub_file_problem
from stoker.library.stores import roots_here

DISK_MARGIN_BYTES = 256 << 20  # left free after the download: a full disk breaks more than Stoker

disable_progress_bars()  # Stoker draws its own (a bar on a terminal, lines otherwise, the tray's line)

Progress = Callable[[str, int, int | None], None]  # (file name, bytes done, bytes in all)


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def hub_cache() -> Path:
    """The hub cache huggingface_hub itself would use now (the first HF store root)."""
    for root in roots_here():
        if root.origin is ModelOrigin.HF:
            return Path(root.path).expanduser()
    return Path(constants.HF_HUB_CACHE)


def _token() -> str | None:
    return os.environ.get("HF_TOKEN") or get_token()


def _hub_error(exc: Exception, repo: str) -> UserError:
    if isinstance(exc, GatedRepoError):
        return UserError(f"{repo} is gated: accept its terms on the hub, then log in with `hf auth login` "
                         "or set HF_TOKEN.")
    if isinstance(exc, RepositoryNotFoundError):
        return UserError(f"{repo} was not found on {endpoint()} (or it is private: log in with "
                         "`hf auth login` or set HF_TOKEN).")
    if isinstance(exc, RevisionNotFoundError):
        return UserError(f"{repo} has no such revision; leave the revision out to use main.")
    if isinstance(exc, HfHubHTTPError):
        return UserError(f"the hub answered {exc.response.status_code} for {repo}; try again later.")
    return UserError(f"cannot reach {endpoint()} ({type(exc).__name__}: {exc}); check the network or HF_ENDPOINT.")


@dataclass(frozen=True)
class RepoListing:
    repo: str
    commit: str
    files: tuple[RemoteFile, ...]
    revision: str = "main"  # what was asked for; `refs/<revision>` records the commit it meant


def list_repo(repo: str, revision: str = "main") -> RepoListing:
    try:
        info = HfApi(endpoint=endpoint()).model_info(repo, revision=revision, files_metadata=True,
                                                      token=_token())
    except (HfHubHTTPError, httpx2.HTTPError, OSError) as exc:
        raise _hub_error(exc, repo) from None
    files = tuple(RemoteFile(s.rfilename, s.lfs.size if s.lfs else s.size, s.lfs.sha256 if s.lfs else None)
                  for s in (info.siblings or ()))
    return RepoListing(repo, info.sha or revision, files, revision)


class RangeReader:
    """A read-only file over HTTP range requests: what gguf_io's header walk reads from."""

    def __init__(self, url: str, size: int, headers: dict[str, str]):
        self.url, self.size, self.headers = url, size, headers
        self.pos = 0
        self.requests = 0

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else self.pos + pos if whence == 1 else self.size + pos
        return self.pos

    def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes from the position (to the end when n < 0), in one range request."""
        end = self.size if n < 0 else min(self.size, self.pos + n)
        if self.pos >= end:
            return b""
        headers = dict(self.headers, Range=f"bytes={self.pos}-{end - 1}")
        r = get_session().get(self.url, headers=headers, follow_redirects=True)
        self.requests += 1
        if r.status_code == 206:
            data = r.content[: end - self.pos]
        elif r.status_code == 200:  # a server that ignores Range sends it all: keep the part asked for
            data = r.content[self.pos:end]
        else:
            raise OSError(f"the hub answered {r.status_code} to a range request")
        self.pos += len(data)
        return data


def remote_summary(repo: str, commit: str, option: QuantOption) -> ModelSummary:
    """The option's header summary from the hub, reading only the header bytes of each part."""
    headers = build_hf_headers(token=_token())
    headers["Accept-Encoding"] = "identity"
    parts = []
    for i, f in enumerate(option.files):
        if f.size_bytes is None:
            raise GGUFError(f"the hub does not state the size of {f.name}")
        url = hf_hub_url(repo, f.name, revision=commit, endpoint=endpoint())
        try:
            parts.append(read_header_stream(RangeReader(url, f.size_bytes, headers), f.size_bytes,
                                            f"{repo}/{f.name}", first_part=i == 0))
        except (httpx2.HTTPError, OSError) as exc:
            raise GGUFError(f"the header of {f.name} could not be fetched ({exc})") from None
    header = parts[0] if len(parts) == 1 else join_split_headers(parts, tuple(f.name for f in option.files))
    return summarise(header)


# ---- download ----

def _free_bytes(folder: Path) -> int:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def _storage(repo: str) -> Path:
    return hub_cache() / hf_folder_of_repo(repo)


def _blob_done(repo: str, f: RemoteFile) -> bool:
    return f.sha256 is not None and (_storage(repo) / "blobs" / f.sha256).is_file()


def bytes_to_fetch(repo: str, option: QuantOption) -> int | None:
    """What is still to come for this option: files not in the cache, less their partial bytes."""
    total = 0
    files = option.files + ((option.mmproj,) if option.mmproj else ())
    for f in files:
        if f.size_bytes is None:
            return None
        if _blob_done(repo, f):
            continue
        partial = _storage(repo) / "blobs" / f"{f.sha256}.incomplete"
        total += f.size_bytes - (partial.stat().st_size if partial.is_file() else 0)
    return total


def check_disk_space(repo: str, option: QuantOption) -> None:
    need = bytes_to_fetch(repo, option)
    if need is None:
        return
    where = _storage(repo)
    free = _free_bytes(where)
    if need + DISK_MARGIN_BYTES > free:
        raise UserError(f"not enough disk space for {option.label}: it needs {need / (1 << 30):.2f} GiB "
                        f"(and {DISK_MARGIN_BYTES >> 20} MiB to spare) but {where} has "
                        f"{free / (1 << 30):.2f} GiB free; free some space or set HF_HUB_CACHE to a "
                        "larger disk.")


class _CountingFile:
    """The partial file as http_get sees it: writes go through, progress is counted."""

    def __init__(self, f, done: int, on_bytes: Callable[[int], None]):
        self.f, self.done, self.on_bytes = f, done, on_bytes

    def write(self, data: bytes) -> int:
        n = self.f.write(data)
        self.done += len(data)
        self.on_bytes(self.done)
        return n

    def seek(self, *a):
        return self.f.seek(*a)

    def tell(self):
        return self.f.tell()

    def truncate(self, *a):
        return self.f.truncate(*a)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _link(blob: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    try:
        link.symlink_to(os.path.relpath(blob, link.parent))
    except OSError:  # no symlinks (Windows without developer mode): the hub client copies too
        shutil.copyfile(blob, link)


def _refuse_hostile(repo: str, commit: str, name: str, sha256: str | None) -> None:
    problem = hub_file_problem(commit, name, sha256)
    if problem is not None:
        raise UserError(f"{problem}; Stoker refused the answer from {endpoint()} for {repo} and wrote "
                        "nothing (check HF_ENDPOINT).")


def _inside(path: Path, folder: Path) -> Path:
    """`path`, once it is certain to lie inside `folder`: its parent folders with any links
    among them followed (the path itself may be a snapshot's link to its blob; it is
    replaced, never followed)."""
    resolved, root = path.parent.resolve() / path.name, folder.resolve()
    if root not in resolved.parents:
        raise UserError(f"{path} would lie outside the hub cache's folder {root}; Stoker wrote nothing there.")
    return path


def download_file(repo: str, commit: str, revision: str, f: RemoteFile,
                  progress: Progress | None = None) -> Path:
    """One file into the hub cache; returns its snapshot path. Resumes a partial download."""
    _refuse_hostile(repo, commit, f.name, f.sha256)
    storage = _storage(repo)
    link = _inside(storage / "snapshots" / commit / f.name, storage / "snapshots" / commit)
    url = hf_hub_url(repo, f.name, revision=commit, endpoint=endpoint())
    token = _token()
    try:
        meta = get_hf_file_metadata(url, token=token, endpoint=endpoint())
    except (HfHubHTTPError, httpx2.HTTPError, OSError) as exc:
        raise _hub_error(exc, repo) from None
    expected = f.sha256 or (meta.etag if meta.etag and len(meta.etag) == 64 else None)
    if expected is None:
        raise UserError(f"the hub states no sha256 for {f.name}, so Stoker cannot check it; it was not "
                        "downloaded.")
    _refuse_hostile(repo, commit, f.name, expected)
    size = meta.size if meta.size is not None else f.size_bytes
    blob = _inside(storage / "blobs" / expected, storage / "blobs")
    blob.parent.mkdir(parents=True, exist_ok=True)
    if not blob.is_file():
        partial = blob.with_name(blob.name + ".incomplete")
        have = partial.stat().st_size if partial.is_file() else 0
        if size is not None and have > size:
            partial.unlink()
            have = 0
        report = (lambda n: progress(f.name, n, size)) if progress else (lambda n: None)
        report(have)
        headers = build_hf_headers(token=token)
        with open(partial, "ab") as out:
            try:
                # huggingface_hub types this BinaryIO, but http_get only writes, seeks and tells: a file-like suffices.
                http_get(meta.location or url, _CountingFile(out, have, report),  # type: ignore[arg-type]
                         resume_size=have,
                         headers=headers, expected_size=size)
            except (HfHubHTTPError, httpx2.HTTPError) as exc:
                raise UserError(f"the download of {f.name} stopped ({exc}); run the same pull again to "
                                "resume it.") from None
            except OSError as exc:
                raise UserError(f"the download of {f.name} failed ({exc}); run the same pull again to "
                                "resume it.") from None
        got = _sha256(partial)
        if got != expected:
            partial.unlink()
            raise UserError(f"{f.name} arrived corrupted: its sha256 is {got[:12]}… but the hub states "
                            f"{expected[:12]}…; it was not added. Run the pull again to download it afresh.")
        os.replace(partial, blob)
        PullRecord().add(PulledFile(repo, f.name, str(blob), str(link), expected, blob.stat().st_size))
    _link(blob, link)
    if revision != commit:
        refs = _inside(storage / "refs" / revision, storage / "refs")
        refs.parent.mkdir(parents=True, exist_ok=True)
        refs.write_text(commit, encoding="utf-8")
    return link


def download_option(listing: RepoListing, option: QuantOption, progress: Progress | None = None) -> Path:
    """Every part of the option and the repository's mmproj; returns the first part's path."""
    for f in option.files + ((option.mmproj,) if option.mmproj else ()):
        _refuse_hostile(listing.repo, listing.commit, f.name, f.sha256)  # before any file is written
    check_disk_space(listing.repo, option)
    paths = [download_file(listing.repo, listing.commit, listing.revision, f, progress) for f in option.files]
    if option.mmproj is not None:
        download_file(listing.repo, listing.commit, listing.revision, option.mmproj, progress)
    return paths[0]
