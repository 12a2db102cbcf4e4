"""`stoker pull hf.co/ORG/REPO[:QUANT]` or `stoker pull ORG/REPO --file NAME`: get a model.

Lists the repository, plans every quantisation for this machine from its remote header and
prints the verdicts, picks one (the asked one, else the best quality that runs with the
default context), checks the free disk space, then downloads it with its split parts and
the repository's mmproj into the standard Hugging Face cache, where `stoker models` and
every other tool find it. Progress is a bar on a terminal and a line per 10 % otherwise.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from stoker.base.paths import private_folder, stoker_paths
from stoker.engines.probe import this_machine
from stoker.errors import UserError
from stoker.fleet.pipeline import load_settings, remote_planner
from stoker.library.store_layouts import parse_hf_reference
from stoker.planning import pull as model_pull


def add_arguments(parser) -> None:
    parser.add_argument("reference", metavar="hf.co/ORG/REPO[:QUANT]",
                        help="a Hugging Face repository, with a quantisation to skip the choice")
    parser.add_argument("--file", metavar="NAME", help="exactly this file of the repository")
    parser.add_argument("--revision", metavar="REV", default=None, help="a branch, tag or commit (main)")
    parser.add_argument("--dry-run", action="store_true", help="print the verdicts and the pick, download nothing")
    parser.add_argument("--all", action="store_true",
                        help="judge every quantisation even when one is named (slower: a header read each)")


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


class ProgressPrinter:
    """A bar on a terminal, else one line per tenth of each file."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.last: dict[str, int] = {}
        self.shown = 0.0

    def __call__(self, name: str, done: int, total: int | None) -> None:
        if total:
            tenth = done * 10 // total
            if self.tty:
                now = time.monotonic()
                if now - self.shown < 0.1 and done < total:
                    return
                self.shown = now
                filled = done * 30 // total
                self.stream.write(f"\r  {name} [{'#' * filled}{'-' * (30 - filled)}] "
                                  f"{_size(done)} of {_size(total)}")
                if done >= total:
                    self.stream.write("\n")
                self.stream.flush()
            elif self.last.get(name) != tenth:
                self.last[name] = tenth
                print(f"downloading {name}: {_size(done)} of {_size(total)} ({tenth * 10}%)",
                      file=self.stream, flush=True)


# After Ctrl-C a pull has this long to stop by itself (its download ends, the partial file is
# kept for the next pull to resume) before it is ended at once.
STOP_GRACE_S = 10.0
STUCK_FILE = "pull-interrupted.txt"


def _end_stuck_pull() -> None:
    """Ctrl-C did not stop the pull within STOP_GRACE_S: keep every thread's stack in the log
    folder (beside a CPU load a pull twice ignored SIGINT for a minute, issue 24, and its
    cause is not known), say so in one sentence, and end the process."""
    where: Path | None = None
    try:
        where = private_folder(stoker_paths().logs) / STUCK_FILE
        with open(where, "w", encoding="utf-8") as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
    except OSError:
        where = None
    kept = f" (what it was doing is in {where})" if where else ""
    print(f"stoker: the pull did not stop within {STOP_GRACE_S:g} s of Ctrl-C, so it was ended{kept}; "
          "run the same pull again to resume it.", file=sys.stderr, flush=True)
    os._exit(130)


@contextlib.contextmanager
def _ended_by_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt, as Python's own handler does, and arms a daemon
    timer that ends the process if it has not stopped STOP_GRACE_S later."""
    def interrupted(signum, frame) -> None:
        timer = threading.Timer(STOP_GRACE_S, _end_stuck_pull)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run(args) -> int:

    ref = parse_hf_reference(args.reference, args.file)
    if isinstance(ref, str):
        raise UserError(ref)
    if args.revision:
        ref = replace(ref, revision=args.revision)
    machine = this_machine()
    only = None if args.all else (ref.quant or None)
    policy, plan = remote_planner(machine, load_settings()[0])  # Settings' reserve, as a launch plans
    judged = model_pull.judge_repo(ref, machine, policy, plan, only=only)
    print(f"{ref.repo} at {judged.listing.commit[:12]}:")
    width = max(len(o.label) for o, _ in judged.judged)
    for option, verdict in judged.judged:
        parts = f" ({len(option.files)} parts)" if len(option.files) > 1 else ""
        print(f"  {option.label:<{width}}  {_size(option.size_bytes):>9}{parts}  {verdict.text}")
    pick = model_pull.choose(judged, ref)
    source = "planned from its header" if pick.verdict.source == "header" else "estimated from its size"
    print(f"picked {pick.reason} ({source}: {pick.verdict.text})")
    if pick.option.mmproj:
        print(f"with the vision projector {pick.option.mmproj.name} ({_size(pick.option.mmproj.size_bytes)})")
    if args.dry_run:
        return 0
    with _ended_by_ctrl_c():
        path = model_pull.download(judged, pick.option, ProgressPrinter())
    print(f"ready: {path}")
    name = f"{ref.repo}:{pick.option.label}"
    print(f"run it with: stoker run {name}")
    return 0
