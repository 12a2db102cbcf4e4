"""Which llama-server build a launch runs, and why the others were passed over.

RealPreparer (stoker/fleet/launcher.py) asks this before every llama-server launch: the
build the user named (`--engine`, or the engine path in Settings), else the best usable
one that is neither quarantined (the ledger, stoker/fleet/launch_lessons.py) nor blocked
for this machine's GPUs (a CUDA build newer than the driver, a ROCm build with no kernels
for any AMD GPU here). It keeps what that choice found for the snapshot (the blockers of
the builds passed over, builds missing a runtime library) and for the launch (the
environment that hides AMD GPUs without kernels). The ranking and the quarantine rules are
stoker/fleet/quarantine.py's (pure); this module gathers their inputs from the disk, the
binaries and the probe.

It must not write the ledger (the lessons do) nor plan anything; a build it cannot give is
a UserError with one sentence, never a silent fallback from a build the user named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stoker.diagnosis.blockers import cuda_blocker, missing_runtime_from_ldd, rocm_visibility_env, rocm_visible_devices
from stoker.diagnosis.views import BlockerView
from stoker.engines.builds import EngineBuild
from stoker.engines.find import discover_engines
from stoker.engines.identity import binary_identity
from stoker.engines.probe import probe_machine
from stoker.errors import UserError
from stoker.fleet.quarantine import Ledger, choose_build
from stoker.planning.machine import Machine


class BuildChooser:
    """`engine` is the build the user named on the command line (None: Settings' or Stoker's
    choice); `machine` the preparer's test knob (None: this machine, probed)."""

    def __init__(self, engine: str | None, machine: Machine | None,
                 load_ledger: Callable[[], Ledger]) -> None:
        self._engine = engine
        self._machine = machine
        self._load_ledger = load_ledger
        self.engine_choice: str | None = None  # which build runs and why (choose_engine)
        self._passed_over: tuple[tuple[str, str], ...] = ()
        self._missing_runtime: tuple[EngineBuild, ...] = ()
        self._build_blockers: tuple[BlockerView, ...] = ()  # cudaBlocker / rocmBlocker of builds passed over
        self._gpu_env: dict[str, tuple[tuple[str, str], ...]] = {}  # build id -> env (ROCm hiding)

    def choose_engine(self, ledger: Ledger | None = None) -> EngineBuild:
        """The build to run: the one the user named (`--engine`, or the engine path in
        Settings), else the best usable one that is not quarantined (the next in line:
        vendor GPU, then Vulkan, then CPU). A named build that cannot run is refused with
        its reason: falling back is only for builds Stoker chose itself. `engine_choice`
        says afterwards which build runs and why."""

        builds = discover_engines(self._engine) if self._engine else discover_engines()
        self._missing_runtime = tuple(b for b in builds if b.status == "missing-library")
        named = [b for b in builds if b.source == "configured"]
        if named:  # the user's own choice beats quarantine, and is never swapped silently
            build = named[0]
            where = "--engine" if self._engine else "the engine path in Settings"
            if not build.usable:
                raise UserError(f"the engine you named with {where}, {build.binary}, cannot run: "
                                f"{(build.status_reason or build.status).rstrip('.')}; fix it or "
                                f"name another build (no other build was started).")
            self._passed_over = ()
            self.engine_choice = f"{build.id}: the build you named with {where}"
            return build
        usable = [b for b in builds if b.usable]
        if not usable:
            why = f" ({builds[0].status_reason})" if builds and builds[0].status_reason else ""
            raise UserError(f"no usable llama-server build was found{why}; run `stoker setup` or "
                            "set the engine path in the settings.")
        ledger = ledger if ledger is not None else self._load_ledger()
        identities = {b.id: binary_identity(b.binary) for b in usable}
        blocked = self._gpu_blockers(usable)
        chosen, passed = choose_build(usable, ledger, identities, blocked=blocked)
        self._passed_over = tuple((b.id, why) for b, why in passed)
        if chosen is None:
            raise UserError("every llama-server build here is quarantined after start-up crashes ("
                            + "; ".join(why for _, why in self._passed_over)
                            + "); lift the quarantine in the tray or run `stoker setup --force`.")
        unusable = [b for b in builds if not b.usable]
        reasons = [f"{b.id} passed over: {why.rstrip('.')}" for b, why in passed]
        reasons += [f"{b.id} cannot run: {(b.status_reason or b.status).rstrip('.')}" for b in unusable]
        self.engine_choice = (f"{chosen.id}: chosen by Stoker, the best usable build here"
                              + (f" ({'; '.join(reasons)})" if reasons else ""))
        return chosen

    def not_chosen(self) -> None:
        """A launch of another kind (its driver finds its own build): no llama-server choice,
        so nothing about one is kept for the snapshot."""
        self.engine_choice = None
        self._passed_over, self._build_blockers = (), ()

    def gpu_env(self, build_id: str | None) -> tuple[tuple[str, str], ...]:
        """The environment this build's launch needs for this machine's GPUs (ROCm hiding)."""
        return self._gpu_env.get(build_id, ()) if build_id else ()

    def blockers(self) -> tuple[BlockerView, ...]:
        """For the snapshot: the GPU blockers of the builds passed over, then a missing
        runtime library of any build found (each view once)."""
        blockers = list(self._build_blockers)
        for b in self._missing_runtime:
            ldd = "\n".join(f"{lib} => not found" for lib in b.missing_libraries)
            view = missing_runtime_from_ldd(ldd)
            if view is not None and view not in blockers:
                blockers.append(view)
        return tuple(blockers)

    def _gpu_blockers(self, builds: Sequence[EngineBuild]) -> dict[str, str]:
        """Builds this machine's GPUs cannot run, found before launch: a CUDA build newer
        than the driver (cudaBlocker), a ROCm build with no kernels for any AMD GPU here
        (rocmBlocker). AMD GPUs without kernels are hidden from a ROCm launch instead."""

        gpu_builds = [b for b in builds if b.backend in ("cuda", "rocm")]
        views: list[BlockerView] = []
        blocked: dict[str, str] = {}
        self._gpu_env = {}
        if not gpu_builds:
            self._build_blockers = ()
            return blocked
        machine = self._machine or probe_machine(None)
        nvidia = [d for d in machine.devices if d.driver_cuda_version]
        amd = [d for d in machine.devices if d.backend in ("rocm", "amd") or d.gfx_target]
        for b in gpu_builds:
            view = None
            if b.backend == "cuda" and nvidia:
                view = cuda_blocker(b.cuda_runtime, nvidia[0].driver_cuda_version)
            elif b.backend == "rocm" and amd:
                visible, view = rocm_visible_devices(b.gfx_targets, [d.gfx_target for d in amd])
                self._gpu_env[b.id] = rocm_visibility_env(visible, len(amd))
            if view is not None:
                blocked[b.id] = f"{view.message} {view.advice}"
                views.append(view)
        self._build_blockers = tuple(views)
        return blocked
