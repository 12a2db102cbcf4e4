"""The supervisor's RPC worker part: this machine's shared worker, and dropped workers coming back.

This machine's own worker (ShareWorker / StartWorker / StopWorker) is an
engines.rpc_worker.SharedWorker on a thread of its own; its view is part of every snapshot
and its changes wake the supervisor (`changed`), which publishes. While the preparer has
dropped a worker of some launch (`watching_workers`), `check_due` says every WORKER_CHECK_S
that it is time to ask the preparer's engine health whether it is back. It decides no
launch and restarts nothing (UseWorkerAgain goes through the preparer and the lifecycle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from stoker.fleet.commands import ShareWorker
from stoker.fleet.snapshot import WorkerView

if TYPE_CHECKING:  # rpc_worker pulls in engines.setup, and most Stokers never share a worker
    from stoker.fleet.rpc_worker import SharedWorker

WORKER_CHECK_S = 5.0  # a dropped RPC worker is looked for this often (the preparer's hook)


class WorkerTray:
    def __init__(self, changed: Callable[[], None], watching: Callable[[], bool],
                 clock: Callable[[], float]) -> None:
        self._changed = changed
        self._watching = watching
        self._clock = clock
        self._shared: SharedWorker | None = None  # made by the first ShareWorker
        self._next_check = 0.0

    def share(self, command: ShareWorker) -> None:
        if self._shared is None:
            # Lazy, for start-up time: rpc_worker pulls in engines.setup, and most Stokers never share.
            from stoker.fleet.rpc_worker import SharedWorker

            self._shared = SharedWorker(self._changed, clock=self._clock)
        self._shared.start(command.host, command.port, command.cache, allow_remote=command.allow_remote)

    def start_again(self) -> None:
        if self._shared is not None:
            self._shared.start_again()

    def stop(self) -> bool:
        """Stop this machine's worker; whether there was one (the snapshot changes then)."""
        if self._shared is None:
            return False
        self._shared.stop()
        return True

    def close(self, timeout_s: float = 15) -> None:
        if self._shared is not None:
            self._shared.stop()
            self._shared.join(timeout_s)

    def view(self) -> WorkerView | None:
        return self._shared.view() if self._shared is not None else None

    def next_check(self) -> float | None:
        """When the next look for a dropped worker is due (None: no worker is dropped)."""
        return self._next_check if self._watching() else None

    def check_due(self, now: float) -> bool:
        if now < self._next_check or not self._watching():
            return False
        self._next_check = now + WORKER_CHECK_S
        return True
