"""The seam between the fleet and a kind's launch preparation: what the supervisor tells a
preparer about an attempt (`AttemptContext`), what a preparer hands back (`PreparedLaunch`)
or why it refuses (`PreparationRefused`). They live in engines, below the fleet, so the
per-kind file preparers (ds4_files, sd_files) build them without importing the supervisor.
Values only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stoker.base.overrides import ModelOverrides
from stoker.engines.ds4_launch import Ds4Plan
from stoker.engines.engine_exit import EngineExit
from stoker.engines.kind import EngineKind
from stoker.engines.launch_spec import LaunchSpec
from stoker.engines.sd_server import ImagePlan
from stoker.planning.plan import LaunchPlan


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


@dataclass(frozen=True)
class PreparationRefused:
    model_path: str | None
    reason: str  # one sentence: what is wrong and what to do
