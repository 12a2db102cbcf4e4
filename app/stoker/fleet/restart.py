"""When to try the engine again after it died: capped exponential backoff and a crash-loop budget.

The supervisor asks `next_retry` each time the engine exits without being asked to. The
answer is a value: retry at a given time, or give up with one sentence a person can act on.
A run that stayed READY long enough proves the launch works, so it starts a new streak, and
the first failure of a new streak is retried at once: a crash after an hour of serving is
news about that run, not about the launch, and the user is waiting. The backoff (1 s, 2 s,
4 s …) goes on from the second failure by its place in the streak (0 s, 2 s, 4 s …).
Pure: the clock is passed in, nothing here sleeps or schedules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    first_delay_s: float = 1.0
    factor: float = 2.0
    cap_s: float = 30.0
    # More than this many failures inside the window is a crash loop: stop retrying.
    budget_failures: int = 5
    budget_window_s: float = 120.0
    # A run that stayed READY this long resets the failure streak.
    stable_after_s: float = 60.0


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    at: float | None  # unix time of the next attempt; None when giving up
    delay_s: float | None
    history: tuple[float, ...]  # failure times of the current streak, this one included
    reason: str  # a sentence for the snapshot and the log


def next_retry(history: tuple[float, ...], now: float, policy: RestartPolicy = RestartPolicy(),
               *, ready_for_s: float | None = None) -> RetryDecision:
    """Decide what follows a failure at `now`, given the earlier failures of this streak.

    `ready_for_s` is how long the run that just ended was READY (None: it never was).
    """
    if ready_for_s is not None and ready_for_s >= policy.stable_after_s:
        history = ()
    # Failures older than the window no longer count toward the budget or the delay.
    recent = tuple(t for t in history if now - t < policy.budget_window_s) + (now,)
    failures = len(recent)
    if failures >= policy.budget_failures:
        return RetryDecision(
            retry=False, at=None, delay_s=None, history=recent,
            reason=(f"the engine failed {failures} times within {policy.budget_window_s:g} s, "
                    "so Stoker stopped restarting it; fix the cause in the last incident "
                    "and start it again"))
    healthy_run = ready_for_s is not None and ready_for_s >= policy.stable_after_s
    if healthy_run and failures == 1:
        return RetryDecision(
            retry=True, at=now, delay_s=0.0, history=recent,
            reason=f"restarting now: it had served for {ready_for_s:.0f} s (failure 1 of "
                   f"{policy.budget_failures} allowed within {policy.budget_window_s:g} s)")
    delay = min(policy.cap_s, policy.first_delay_s * policy.factor ** (failures - 1))
    return RetryDecision(
        retry=True, at=now + delay, delay_s=delay, history=recent,
        reason=f"restarting in {delay:g} s (failure {failures} of {policy.budget_failures} allowed "
               f"within {policy.budget_window_s:g} s)")
