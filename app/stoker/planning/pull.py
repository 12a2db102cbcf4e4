"""Getting a model from the hub: list a repository, judge each quantisation for this machine,
pick one, download it. The one sequence both `stoker pull` and the "Get a model…" dialog use.

Each option is planned from its own remote header (a few range requests) by the same
planner a launch uses; when a header cannot be read the verdict comes from the file's size
and says so. Wiring only: the verdicts and the pick are stoker/planning/quant_choice.py's, the hub
calls stoker/library/hf_hub.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stoker.errors import UserError
from stoker.library import hf_hub
from stoker.library.gguf_io import GGUFError
from stoker.library.gguf_summary import ModelSummary
from stoker.library.quant_options import QuantOption, quant_options
from stoker.library.store_layouts import HFReference
from stoker.planning.machine import Machine
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.planner import PlanPolicy
from stoker.planning.quant_choice import FitVerdict, QuantPick, pick_quant, verdict_from_size, verdict_of_plan

# How a verdict plans one option from its remote header: the caller's engine driver with the
# inputs a launch would gather (fleet/pipeline.remote_planner), with the reserve it planned by.
# A plan of another engine's shape than llama-server's (ds4, sd-server) yields a size verdict.
OptionPlanner = Callable[[ModelSummary, str], object]


@dataclass(frozen=True)
class JudgedRepo:
    listing: hf_hub.RepoListing
    judged: tuple[tuple[QuantOption, FitVerdict], ...]


def judge_option(listing: hf_hub.RepoListing, option: QuantOption, machine: Machine,
                 policy: PlanPolicy, plan: OptionPlanner) -> FitVerdict:
    try:
        summary = hf_hub.remote_summary(listing.repo, listing.commit, option)
    except (GGUFError, OSError, ValueError):
        return verdict_from_size(option.size_bytes, machine, policy)
    result = plan(summary, f"hf://{listing.repo}/{option.label}")
    if not isinstance(result, (LaunchPlan, PlanRefusal)):
        return verdict_from_size(option.size_bytes, machine, policy)
    return verdict_of_plan(result, summary.n_layer_all, summary.n_ctx_train, machine, policy)


def judge_repo(ref: HFReference, machine: Machine, policy: PlanPolicy, plan: OptionPlanner,
               only: str | None = None) -> JudgedRepo:
    """The repository's options with a verdict each; `only` judges just that quant or file."""
    listing = hf_hub.list_repo(ref.repo, ref.revision)
    options = quant_options(listing.files)
    if ref.filename:
        options = tuple(o for o in options if any(f.name == ref.filename for f in o.files))
        if not options:
            raise UserError(f"{ref.repo} has no GGUF model file named {ref.filename}; see its file list "
                            "on the hub.")
    if not options:
        raise UserError(f"{ref.repo} has no GGUF model files; Stoker runs GGUF models only.")
    if only:
        chosen = [o for o in options if only.upper() in ((o.quant or "").upper(), o.label.upper())]
        options = tuple(chosen) or options
    return JudgedRepo(listing, tuple((o, judge_option(listing, o, machine, policy, plan)) for o in options))


def choose(judged: JudgedRepo, ref: HFReference) -> QuantPick:
    asked = ref.quant if not ref.filename else judged.judged[0][0].label
    pick = pick_quant(judged.judged, asked, ref.repo)
    if isinstance(pick, str):
        raise UserError(pick)
    return pick


def download(judged: JudgedRepo, option: QuantOption, progress: hf_hub.Progress | None = None) -> Path:
    return hf_hub.download_option(judged.listing, option, progress)
