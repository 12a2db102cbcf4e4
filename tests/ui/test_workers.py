"""run_in_background under many calls at once: every result comes back, on the GUI thread.

Each call used to make a QObject that was freed inside its own queued slot or on a pool
thread; a burst of calls, with the pool threads racing the GUI thread, crashed the process
now and then (stoker/desktop/workers.py says how). This burst must deliver every result.
"""

from __future__ import annotations

import threading

from stoker.desktop.workers import run_in_background

CALLS = 400


def test_a_burst_of_background_calls_all_come_back_on_the_gui_thread(qtbot):
    gui = threading.get_ident()
    got: list[tuple] = []
    for n in range(CALLS):
        run_in_background(lambda n=n: n * 2, lambda result, error: got.append((result, error, threading.get_ident())))
    run_in_background(lambda: 1 / 0, lambda result, error: got.append((result, type(error), threading.get_ident())))
    qtbot.waitUntil(lambda: len(got) == CALLS + 1, timeout=120_000)
    assert sorted(r for r, e, _ in got if e is None) == [2 * n for n in range(CALLS)]
    assert (None, ZeroDivisionError, gui) in got  # an exception is handed over, not swallowed
    assert {t for *_, t in got} == {gui}
