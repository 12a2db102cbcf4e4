"""The seam between the fleet and a kind's launch preparation: what the supervisor tells a
preparer about an attempt (`AttemptContext`), what a preparer hands back (`PreparedLaunch`)
or why it refuses (`PreparationRefused`), and what it makes of an exit (`ExitDecision`) and
of the builds (`EngineHealth`). They live in engines, below the fleet, so the
per-kind file preparers (ds4_files, sd_files) build them without importing the supervisor.
Values only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stoker.base.overrides import ModelOverrides
from stoker.diagnosis.views import BlockerView
from stoker.engines.ds4_launch import Ds4Plan
from stoker.engines.engine_exit import EngineExit
from stoker.engines.kind import EngineKind
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.sd_server import ImagePlan
from stoker.planning.plan import LaunchPlan
from stoker.planning.planner import PlanPolicy


@dataclass(frozen=True)
class AttemptContext:
    """What the preparer may need to know about this attempt."""

    attempt: int  # 0 for a user start, n for the n-th automatic restart
    port: int  # a free loopback port picked for this attempt
    log_dir: Path
    overrides: ModelOverrides | None  # overrides sent with ApplyOverrides; None: use the store
    last_exit: EngineExit | None  # how the previous attempt ended, for recovery decisions
    # True when this attempt is an automatic retry after a failure; False when a person (or a
    # command) asked for it, which ends any recovery the preparer was walking through.
    after_failure: bool = False
    # What Stoker's other resident engines hold, per device name ("CPU" is host RAM): the
    # preparer plans this model as if they were not running (their memory added back to
    # what is free) so admission can then add its bytes to theirs.
    held_bytes: tuple[tuple[str, int], ...] = ()
    # The model's gateway id: the engine answers under this name (`--alias`), never its path.
    model_id: str | None = None
    # A request asked for at least this many tokens per slot (WidenContext): plan with it.
    ctx_per_slot_at_least: int | None = None


@dataclass(frozen=True)
class LaunchContext:
    """How a planned llama-server launch was made, for the decisions after it ends (the
    preparer's after_exit and after_ready): it travels inside its PreparedLaunch, so each
    resident model's failure is judged by its own launch, never by the latest one prepared."""

    binary: str
    identity: str | None  # the binary's identity (stoker/engines/identity.py binary_identity)
    user_overrides: ModelOverrides  # what the user pinned: the recovery ladder never changes these
    overrides: ModelOverrides  # what this launch used (the user's + recovery steps)
    policy: PlanPolicy
    n_layers: int | None
    is_moe: bool


@dataclass(frozen=True)
class PreparedLaunch:
    spec: LaunchSpec
    model_path: str
    # The kind's own plan (core/planner, core/ds4_launch, core/sd_server); None for a hand-made launch.
    plan: LaunchPlan | Ds4Plan | ImagePlan | None = None
    build_id: str | None = None  # e.g. "b11434-cpu"
    backend: str | None = None  # cpu | cuda | rocm | vulkan | metal
    secrets: tuple[tuple[str, str], ...] = ()  # env name -> value, read at spawn time, never logged
    startup_deadline_s: float = 180.0
    idle_timeout_s: float | None = None  # unload after this long without requests; None: never
    # The key the gateway sends the engine (it also reaches the engine as LLAMA_API_KEY).
    engine_key: str | None = None
    # Which engine this is: where readiness is asked, which lines are progress and failure,
    # whether a request can be cancelled inside it (stoker/engines/kind.py).
    kind: EngineKind = EngineKind.LLAMA_SERVER
    # How the preparer made it (RealPreparer's llama-server launches); None for a hand-made
    # launch or another kind, whose exits and READY teach the preparer nothing.
    context: LaunchContext | None = None
    # Save its used slots before it stops and restore them at its next start, so the next
    # turn of a conversation finds its prefix cached (stoker/fleet/kv_keeper.py).
    keeps_conversations: bool = False


@dataclass(frozen=True)
class PreparationRefused:
    model_path: str | None
    reason: str  # one sentence: what is wrong and what to do


@dataclass(frozen=True)
class ExitDecision:
    """What the preparer made of a failed attempt (its `after_exit` hook)."""

    action: str | None = None  # what Stoker did about it, e.g. "retrying with context 16,384: …"
    # True: the next attempt differs or counts toward quarantine, so retry even a failure
    # that would repeat as it is; False: trying again cannot help; None: the restart policy.
    retry: bool | None = None


@dataclass(frozen=True)
class EngineHealth:
    """Facts about the engine builds for the snapshot (the preparer's `engine_health`)."""

    blockers: tuple[BlockerView, ...] = ()
    quarantined: tuple[tuple[str, str], ...] = ()  # (build id, why)
    problems: tuple[str, ...] = ()  # settings files moved aside, bad hand-written values
    workers_back: tuple[str, ...] = ()  # dropped RPC workers (HOST:PORT) reachable again
