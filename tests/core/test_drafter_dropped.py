"""A READY engine that dropped its drafter is told apart from one that uses it.

The line is b11434's own (server load_model), seen when the draft model's vocabulary type
differs from the target's: the start succeeds and speculation is silently off.
"""

from stoker.diagnosis.silent_fallbacks import drafter_dropped_from_log

REAL = ("0.00.412.118 E srv    load_model: failed to initialize speculative decoding context: "
        "draft model vocab type must match target model to use speculation")


def test_the_engines_own_line_names_the_reason():
    lines = ("0.00.300.000 I srv    load_model: loading model 'x'", REAL,
             "0.00.500.000 I srv  llama_server: model loaded")
    assert drafter_dropped_from_log(lines) == "draft model vocab type must match target model to use speculation"


def test_a_clean_start_drops_nothing():
    assert drafter_dropped_from_log(("0.00.500.000 I srv  llama_server: model loaded",)) is None
