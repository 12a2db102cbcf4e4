"""Pull and delete asked over the gateway's Ollama routes, carried out in Stoker's own process.

The gateway process must not touch the disk, so `POST /api/pull` and `DELETE /api/delete`
travel over the link (LibraryWanted) and are done here with the same sequence `stoker pull`
and `stoker rm` use: stoker/library/pull.py judges every quantisation for this machine and
picks one (the asked one, else the best that runs), hf_hub downloads it into the standard
cache and records it as pulled; stoker/library/removal.py deletes exactly the files a pull
recorded. A model Stoker did not pull is never deleted here: the answer says so. Progress
is reported as the (file, bytes done, bytes in all) the download gives, at most every
PROGRESS_EVERY_S. Decides nothing itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from stoker.engines.probe import this_machine
from stoker.errors import UserError
from stoker.fleet.pipeline import load_settings, remote_planner
from stoker.library.models import list_models
from stoker.library.removal import carry_out, plan_removal
from stoker.library.store_layouts import ModelOrigin, parse_hf_reference
from stoker.planning import pull as model_pull

PROGRESS_EVERY_S = 0.25
Report = Callable[[str, int | None, int | None], None]  # (status words, bytes done, bytes in all)


def pull_model(reference: str, report: Report) -> str:
    """Pull `hf.co/OWNER/REPO[:QUANT]`; returns the model's store name (`OWNER/REPO:QUANT`).
    Raises UserError with one sentence when it cannot."""
    ref = parse_hf_reference(reference, None)
    if isinstance(ref, str):
        raise UserError(ref)
    report("pulling manifest", None, None)
    machine = this_machine()
    policy, plan = remote_planner(machine, load_settings()[0])  # Settings' reserve, as a launch plans
    judged = model_pull.judge_repo(ref, machine, policy, plan, only=ref.quant or None)
    pick = model_pull.choose(judged, ref)
    shown = [0.0]

    def progress(name: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - shown[0] >= PROGRESS_EVERY_S or (total is not None and done >= total):
            shown[0] = now
            report(f"pulling {name}", done, total)

    try:
        model_pull.download(judged, pick.option, progress)
    except OSError as exc:
        raise UserError(f"the download of {ref.repo} stopped: {exc.strerror or exc}; ask again to resume it.") \
            from None
    report("verifying sha256 digest", None, None)
    return f"{ref.repo}:{pick.option.label}"


def delete_model(model_path: str) -> str:
    """Delete a pulled model's files; returns what was removed, in words. Raises UserError
    when the model is not one Stoker pulled (it is then left as it is)."""
    real = os.path.realpath(model_path)
    found = next((m for m in list_models(with_summary=False, include_hidden=True)
                  if os.path.realpath(m.path) == real), None)
    if found is None:  # a file named on the command line: not in any store, never Stoker's to delete
        raise UserError(f"{os.path.basename(model_path)} was not pulled by Stoker, so it is not deleted; "
                        "remove the file yourself if you want it gone.")
    if found.origin is not ModelOrigin.PULLED:
        raise UserError(f"{found.label} was not pulled by Stoker (it comes from {found.origin.value}), so it is "
                        "not deleted; remove it with the tool that put it there, or hide it in Stoker's model list.")
    removal = plan_removal(found)
    carry_out(removal)
    return f"deleted {found.label} ({removal.size_bytes / (1 << 20):.0f} MiB)"
