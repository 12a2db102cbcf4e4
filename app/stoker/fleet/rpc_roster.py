"""Which RPC workers (other machines' rpc-servers) the next plan may use, and which went away.

RealPreparer (stoker/fleet/launcher.py) plans with the workers `stoker run --rpc` named, else
Settings' rpc_workers. A worker that stops answering (found so by the probe before a plan,
or after a launch that used it ended) is dropped from the next attempts until a person
starts the model again, or says "Use HOST:PORT again" in the tray (`readmit`); while it is
dropped and reachable, the snapshot says it is back (`back`). This roster remembers which
models were planned without each dropped worker, so that "Use it again" can name the ones
to restart.

It decides nothing about a plan (the drivers and the planner do) and restarts nothing (the
supervisor does); this machine's own shared worker is stoker/fleet/rpc_worker.py's.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable

from stoker.base.rpc_address import RpcWorker, parse_worker, parse_workers
from stoker.base.store import AppSettings
from stoker.engines.launch import PreparedLaunch
from stoker.engines.probe import probe_workers, reachable
from stoker.engines.rpc import remaining_workers
from stoker.planning.machine import Machine
from stoker.planning.plan import LaunchPlan

log = logging.getLogger(__name__)


class RpcRoster:
    """`configured`: the command line's workers (empty: Settings' are read at each plan)."""

    def __init__(self, configured: Iterable[RpcWorker] = ()) -> None:
        self.configured = tuple(configured)
        self._lock = threading.Lock()  # after_exit's drop and a plan's probe may meet
        self._dropped: tuple[RpcWorker, ...] = ()
        self._planned_without: dict[RpcWorker, set[str]] = {}  # dropped worker -> model paths planned without it

    def workers(self, settings: Callable[[], AppSettings]) -> tuple[RpcWorker, ...]:
        """The workers this attempt may use: the command line's, else Settings', less those gone."""
        configured = self.configured
        if not configured:
            try:
                configured = parse_workers(settings().rpc_workers or ())
            except ValueError as exc:
                log.warning("Settings' rpc_workers: %s", exc)
                configured = ()
        return remaining_workers(configured, self._dropped)

    def start_afresh(self) -> None:
        """A person's start tries every worker again."""
        self._dropped = ()
        self._planned_without = {}

    def planning_without(self, model_path: str) -> None:
        """This model is planned while workers are dropped: what "Use it again" has to restart."""
        for w in self._dropped:
            self._planned_without.setdefault(w, set()).add(model_path)

    def lend_devices(self, machine: Machine, binary: str, workers: tuple[RpcWorker, ...]) -> Machine:
        """This machine plus the devices the reachable workers lend; the others are dropped,
        with a note on the machine (and in the log)."""
        devices, gone, notes = probe_workers(binary, workers)
        for note in notes:
            log.warning("%s", note)
        if gone:
            self._drop(tuple(gone))
        return dataclasses.replace(machine, devices=tuple(d for d in machine.devices if d.backend != "rpc")
                                   + devices, notes=machine.notes + notes)

    def drop_lost(self, launch: PreparedLaunch) -> tuple[RpcWorker, ...]:
        """The workers of this ended launch that no longer accept a connection, dropped."""
        plan = launch.plan
        used = parse_workers(list(plan.rpc_endpoints)) if isinstance(plan, LaunchPlan) else ()
        lost = tuple(w for w in used if not reachable(w))
        if lost:
            self._drop(lost)
        return lost

    def _drop(self, gone: tuple[RpcWorker, ...]) -> None:
        with self._lock:
            self._dropped = tuple(dict.fromkeys(self._dropped + gone))

    def watching(self) -> bool:
        """Whether a worker was dropped, so the supervisor should look for it coming back."""
        return bool(self._dropped)

    def back(self) -> tuple[RpcWorker, ...]:
        """Dropped workers that accept a connection again (the tray offers to use them)."""
        return tuple(w for w in self._dropped if reachable(w, timeout_s=0.3))

    def readmit(self, endpoint: str) -> tuple[str, ...]:
        """Let a dropped worker back in (the tray's "Use HOST:PORT again"); the model paths
        that were planned without it, for the supervisor to restart. Its devices are asked
        afresh at the next plan (probe_workers forgot them when it went away)."""
        try:
            worker = parse_worker(endpoint)
        except ValueError as exc:
            log.warning("Use the RPC worker again: %s", exc)
            return ()
        self._dropped = tuple(w for w in self._dropped if w != worker)
        return tuple(sorted(self._planned_without.pop(worker, ())))
