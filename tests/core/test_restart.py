"""Restart policy: capped exponential backoff, the crash-loop budget, and the streak reset."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.fleet.restart import RestartPolicy, next_retry

P = RestartPolicy(first_delay_s=1, factor=2, cap_s=30, budget_failures=5, budget_window_s=120,
                  stable_after_s=60)


def test_delays_double_from_one_second():
    history, delays = (), []
    for i in range(4):
        d = next_retry(history, 100.0 + i, P)
        delays.append(d.delay_s)
        history = d.history
    assert delays == [1, 2, 4, 8]


def test_fifth_failure_inside_the_window_gives_up_with_a_sentence():
    d = next_retry((1.0, 2.0, 3.0, 4.0), 5.0, P)
    assert not d.retry and d.at is None
    assert d.reason.startswith("the engine failed 5 times within 120 s")


def test_failures_older_than_the_window_are_forgotten():
    d = next_retry((1.0, 2.0, 3.0, 4.0), 200.0, P)
    assert d.retry and d.delay_s == 1 and d.history == (200.0,)


def test_delay_is_capped():
    policy = RestartPolicy(budget_failures=100, cap_s=30)
    d = next_retry(tuple(float(i) for i in range(10)), 11.0, policy)
    assert d.delay_s == 30


def test_a_stable_run_resets_the_streak():
    d = next_retry((1.0, 2.0, 3.0, 4.0), 70.0, P, ready_for_s=60.0)
    assert d.retry and d.history == (70.0,)
    d = next_retry((11.0, 12.0, 13.0, 14.0), 70.0, P, ready_for_s=59.0)
    assert not d.retry


@given(st.lists(st.floats(0, 1000), max_size=20), st.floats(0, 2000))
def test_delay_never_exceeds_the_cap_and_retry_is_in_the_future(times, now):
    history = tuple(sorted(t for t in times if t <= now))
    d = next_retry(history, now, P)
    if d.retry:
        assert 0 < d.delay_s <= P.cap_s and d.at == now + d.delay_s
    assert d.history[-1] == now and len(d.history) <= len(history) + 1


def test_the_first_failure_after_a_healthy_run_restarts_at_once_then_backs_off():
    d = next_retry((1.0, 2.0), 500.0, P, ready_for_s=3600.0)
    assert d.retry and d.delay_s == 0 and d.at == 500.0 and "restarting now" in d.reason
    # the immediate restart dies while starting: now the backoff applies
    d2 = next_retry(d.history, 501.0, P)
    assert d2.retry and d2.delay_s == 2 and d2.at == 503.0
    d3 = next_retry(d2.history, 504.0, P)
    assert d3.delay_s == 4


def test_a_run_just_short_of_healthy_still_waits():
    d = next_retry((), 500.0, P, ready_for_s=59.9)
    assert d.delay_s == 1 and d.at == 501.0
