"""Verdicts on a repository's quantisations for a machine, and the pick: planner answers in, words out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from stoker.library.gguf_summary import LayerBytes
from stoker.library.quant_options import QuantOption, RemoteFile, quant_options
from stoker.planning.machine import machine_from_json
from stoker.planning.planner import plan_launch
from stoker.planning.quant_choice import Fit, pick_quant, verdict_from_size, verdict_of_plan
from tests.core.summaries import MIB, llama_8b

MACHINES = Path(__file__).resolve().parents[1] / "data" / "machines"


def machine(name: str):
    return machine_from_json((MACHINES / f"{name}.json").read_text(), name)


def scaled(model, factor: float):
    """The same shapes at another bit width: a Q8_0 or F16 of the same model."""
    return replace(model, layer_bytes=tuple(LayerBytes(attention=int(lb.attention * factor),
                                                       ffn_dense=int(lb.ffn_dense * factor), other=lb.other)
                                            for lb in model.layer_bytes),
                   embedding_bytes=int(model.embedding_bytes * factor), output_bytes=int(model.output_bytes * factor))


def verdict(model, m):
    return verdict_of_plan(plan_launch(model, m), model.n_layer_all, model.n_ctx_train, m)


def test_verdicts_in_words_for_a_gpu_machine():
    gpu = machine("rtx4070-12g-ram32g")
    small = verdict(scaled(llama_8b(), 0.3), gpu)  # an 8B at about 2.5 bits a weight
    assert small.fit is Fit.RUNS and small.text == "runs: 64k context, all layers on the GPU"
    q4 = verdict(llama_8b(), gpu)  # speed first: every layer on the card, a q8_0 cache for 64k
    assert q4.fit is Fit.RUNS and q4.text == "runs: 64k context, all layers on the GPU"
    f16 = verdict(scaled(llama_8b(), 3.6), gpu)
    assert f16.fit is Fit.RUNS_SLOWLY and f16.text.startswith("runs slowly: ") and " of 33 layers fit" in f16.text
    huge = verdict(scaled(llama_8b(), 40), gpu)
    assert huge.fit is Fit.DOES_NOT_FIT and huge.text.startswith("does not fit: ")


def test_cpu_machine_says_on_the_cpu():
    v = verdict(llama_8b(), machine("cpu-only-ram24g"))
    assert v.fit in (Fit.RUNS, Fit.RUNS_SHORT) and v.text.endswith("on the CPU")


def test_options_group_split_sets_and_keep_the_projector_apart():
    files = [RemoteFile("M-Q8_0-00001-of-00002.gguf", 5, "a"), RemoteFile("M-Q8_0-00002-of-00002.gguf", 5, "b"),
             RemoteFile("M-Q4_K_M.gguf", 4, "c"), RemoteFile("mmproj-M-f16.gguf", 1, "d"),
             RemoteFile("M-Q2_K-00001-of-00003.gguf", 1, "e"), RemoteFile("README.md", 1, None)]
    opts = quant_options(files)
    assert [o.label for o in opts] == ["Q8_0", "Q4_K_M"]  # best first; the incomplete Q2_K set is not offered
    assert opts[0].size_bytes == 10 and len(opts[0].files) == 2 and opts[0].mmproj.name == "mmproj-M-f16.gguf"
    assert opts[1].download_bytes == 5


def _opt(q):
    return QuantOption(q, q, (RemoteFile(f"m-{q}.gguf", 1, None),))


def test_the_pick_is_the_best_quality_that_runs_with_the_default_context():
    from stoker.planning.quant_choice import FitVerdict

    judged = [(_opt("Q8_0"), FitVerdict(Fit.RUNS_SLOWLY, "runs slowly: 20 of 33 layers fit")),
              (_opt("Q6_K"), FitVerdict(Fit.RUNS_SHORT, "runs with less context")),
              (_opt("Q4_K_M"), FitVerdict(Fit.RUNS, "runs: 64k context, all layers on the GPU")),
              (_opt("Q2_K"), FitVerdict(Fit.RUNS, "runs: 64k context, all layers on the GPU"))]
    pick = pick_quant(judged)
    assert pick.option.quant == "Q4_K_M"
    assert pick.reason == ("Q4_K_M: the best quality that runs with the default context here "
                           "(Q8_0, Q6_K do not)")
    assert pick_quant(judged[:2]).option.quant == "Q6_K"  # less context beats layers in RAM
    assert pick_quant(judged[:1]).option.quant == "Q8_0"
    assert pick_quant(judged, "q8_0").reason == "Q8_0 as asked"
    assert pick_quant(judged, "IQ1_S", "org/repo") == "org/repo has no IQ1_S file; it has Q8_0, Q6_K, Q4_K_M, Q2_K."
    none = pick_quant([(_opt("Q8_0"), FitVerdict(Fit.DOES_NOT_FIT, "does not fit: needs 9 GiB, 4 GiB is free"))],
                      repo="org/repo")
    assert none == "no quantisation of org/repo fits this machine; even the smallest, Q8_0, needs 9 GiB, 4 GiB is free."


def test_size_estimate_says_it_is_an_estimate():
    cpu = machine("cpu-only-ram24g")
    assert "estimated from its" in verdict_from_size(500 * MIB, cpu).text
    assert verdict_from_size(500 * MIB, cpu).source == "size"
    assert verdict_from_size(200 << 30, cpu).fit is Fit.DOES_NOT_FIT
    assert verdict_from_size(None, cpu).fit is Fit.UNKNOWN
