"""`stoker bench diagnose`'s core over the real-failure corpus: the targets hold on the part
the patterns were written against, and the corpus itself is well formed."""

from __future__ import annotations

import json

from stoker.bench.diagnose import (
    CORPUS,
    HEADLINE_MIN_LOGS,
    TARGET_OVERALL,
    TARGET_PER_KIND,
    TARGET_PRECISION,
    UNSPENT_BATCHES,
    headline_batches,
    is_held_out,
    load_corpus,
    parse_batches,
    parse_exit,
    run_bench,
)
from stoker.cli import main
from stoker.diagnosis.classify import KINDS


def test_training_accuracy_and_per_kind_floor_meet_the_targets():
    res = run_bench()
    # the unspent fresh batch is the headline, not training: tuning on it would spend it
    train = res.score(held_out=False, exclude_batches=UNSPENT_BATCHES)
    assert train.n >= 100
    # Overall as per kind: an unknown that leaves the right kind open is not a wrong way sent.
    # Since batch 15 a sign that follows many causes (llama.cpp's closing `failed to load model`,
    # the CLR's TypeLoadException) is left open on purpose, where it was named before
    # (llama.cpp#3183, LLamaSharp#1119); precision, what a named kind is worth, is held too.
    trained = [r for r in res.results if not r.case.held_out and r.case.batch not in UNSPENT_BATCHES]
    not_misled = sum(1 for r in trained if r.correct or r.left_open_rightly)
    assert not_misled / len(trained) >= TARGET_OVERALL, [(r.case.file, r.predicted) for r in res.misses(held_out=False)]
    assert train.precision is not None and train.precision >= TARGET_PRECISION, train
    for kind in res.kinds():
        score = res.score(kind=kind, held_out=False, exclude_batches=UNSPENT_BATCHES)
        if score.n:
            # A log whose only line follows two causes is left open on purpose (unknown with
            # both candidates, the right one among them): the floor does not ask for a guess.
            # The nameless `unable to allocate backend buffer` on a GPU build is the GPU's in
            # some threads and the host's in others (ollama#5941, ollama#6606): no line tells.
            rows = [r for r in res.results if r.case.kind == kind and not r.case.held_out
                    and r.case.batch not in UNSPENT_BATCHES]
            not_misled = sum(1 for r in rows if r.correct or r.left_open_rightly)
            assert not_misled / len(rows) >= TARGET_PER_KIND, (kind, score)


def test_the_corpus_covers_every_kind_os_and_the_wrappers():
    cases = load_corpus()
    assert len(cases) >= 120
    assert {c.kind for c in cases} == set(KINDS)
    assert {c.os for c in cases} == {"linux", "darwin", "windows"}
    wrappers = " ".join(c.wrapper for c in cases)
    for w in ("ollama", "llama-swap", "lmstudio", "systemd", "docker"):
        assert w in wrappers, w
    assert all(c.source and c.lines for c in cases)


def test_every_label_row_has_the_headers_eleven_columns():
    # A short row reads its missing cells as empty, silently: a gatherer's row that lost its
    # batch or backend would be scored as something else without a word.
    rows = (CORPUS / "labels.tsv").read_text(encoding="utf-8").splitlines()
    width = rows[0].count("\t") + 1
    assert width == 11
    assert [r.split("\t", 1)[0] for r in rows[1:] if r.count("\t") + 1 != width] == []


def test_the_hold_out_rule_is_a_fixed_fifth_of_the_file_names():
    cases = load_corpus()
    held = [c for c in cases if c.held_out]
    assert 0.1 < len(held) / len(cases) < 0.3
    assert is_held_out("llama.cpp-12395.log") and not is_held_out("llama.cpp-23163.log")


def test_exit_cells_parse():
    assert parse_exit("null") == (None, None)
    assert parse_exit("0xc0000135") == (0xC0000135, None)
    assert parse_exit("SIGKILL") == (None, "SIGKILL")
    assert parse_exit("18446744072635812000") == (18446744072635812000, None)


def test_the_command_prints_json_with_the_held_out_figure(capsys):
    assert main(["bench", "diagnose", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == 3 and out["hold_out_rule"] == "sha256(file name)[0] % 5 == 0"
    assert out["overall"]["n"] == len(load_corpus(CORPUS))
    assert out["held_out"]["n"] > 0 and "stale-library" in out["per_kind"]
    assert {"accuracy", "precision", "coverage"} <= set(out["overall"])
    sizes = {int(b): score["n"] for b, score in out["batches"].items()}
    assert out["headline"]["batches"] == list(headline_batches(tuple(sizes), sizes))
    # the newest pool, or the one before it while every batch after it is unspent and, together,
    # under 15 logs (a small pool waiting for the next batch of its freeze)
    later = [b for b in sizes if b > out["headline"]["batches"][-1]]
    assert all(b in UNSPENT_BATCHES for b in later)
    assert sum(sizes[b] for b in later) < HEADLINE_MIN_LOGS


def test_the_headline_pools_the_unspent_batches_of_the_newest_freeze(monkeypatch):
    from stoker.bench import diagnose

    monkeypatch.setattr(diagnose, "FRESH_BATCHES", {5: "aaa", 6: "bbb", 7: "bbb", 8: "bbb"})
    monkeypatch.setattr(diagnose, "UNSPENT_BATCHES", frozenset({5, 7, 8}))
    assert headline_batches((1, 5, 6, 7, 8)) == (7, 8)  # 6 spent, 5 of another freeze
    monkeypatch.setattr(diagnose, "UNSPENT_BATCHES", frozenset({5, 7}))
    # the newest is spent: the pool of its freeze, the one its first score was taken on, marked so
    assert headline_batches((1, 5, 6, 7, 8)) == (6, 7, 8)
    monkeypatch.setattr(diagnose, "FRESH_BATCHES", {5: "aaa", 6: "bbb", 7: "ccc", 8: "ccc"})
    assert headline_batches((1, 5, 6, 7, 8)) == (7, 8)  # 6 of another freeze stays out
    assert headline_batches((1, 2)) == (2,)  # not gathered against a freeze
    assert headline_batches(()) == ()


def test_a_small_unspent_pool_waits_and_the_headline_is_the_pool_before_it(monkeypatch):
    from stoker.bench import diagnose

    monkeypatch.setattr(diagnose, "FRESH_BATCHES", {6: "aaa", 7: "aaa", 8: "bbb", 9: "ccc"})
    monkeypatch.setattr(diagnose, "UNSPENT_BATCHES", frozenset({6, 7, 9}))
    sizes = {6: 10, 7: 12, 8: 30, 9: 9}
    assert headline_batches((6, 7, 8, 9), sizes) == (8,)  # 9 alone is under 15: 8 (spent) before it
    assert headline_batches((6, 7, 8, 9), {**sizes, 9: 15}) == (9,)  # 15 logs stand alone
    assert headline_batches((6, 7), sizes) == (6, 7)  # pooled at one freeze: 22 logs
    assert headline_batches((6,), sizes) == (6,)  # nothing before a small pool: it is all there is
    assert headline_batches((6, 7, 8, 9)) == (9,)  # without sizes, the newest pool as before


def test_batch_choices_parse_or_say_what_is_wrong(capsys):
    assert parse_batches("24") == (24,)
    assert parse_batches("24,22, 23") == (22, 23, 24)
    assert parse_batches("22-24") == (22, 23, 24)
    for bad in ("x", "24-22", "22-", ""):
        try:
            parse_batches(bad)
        except ValueError as exc:
            assert "--batch" in str(exc)
        else:
            raise AssertionError(bad)
    assert main(["bench", "diagnose", "--batch", "24-22"]) != 0
    err = capsys.readouterr().err
    assert "backwards" in err and "Traceback" not in err
    assert main(["bench", "diagnose", "--batch", "22-24"]) == 0
    assert "batches 22, 23 and 24 pooled" in capsys.readouterr().out


def test_precision_and_coverage_count_what_was_named():
    from stoker.bench.diagnose import BenchResult, CaseResult, WildCase

    def case(label, predicted):
        c = WildCase(file=f"{label}-{predicted}.log", kind=label, source="x", exit_code=None, signal=None,
                     os="linux", wrapper="none", note="", batch=1, drafter=False, backend=None, lines=("x",))
        return CaseResult(c, predicted, predicted, "", "", "")

    res = BenchResult((case("cuda-oom", "cuda-oom"), case("cuda-oom", "unknown"),
                       case("bad-model", "cuda-oom"), case("unknown", "unknown")))
    sc = res.score()
    assert (sc.n, sc.correct, sc.named, sc.named_right) == (4, 2, 2, 1)
    assert sc.precision == 0.5 and sc.coverage == 0.5 and sc.accuracy == 0.5
    k = res.score(kind="cuda-oom")
    assert k.accuracy == 0.5 and k.coverage == 0.5 and k.precision == 0.5  # said twice, once right
    # a kind never said has no precision: its one log named as another kind is a miss, not 0 %
    b = res.score(kind="bad-model")
    assert b.coverage == 1.0 and b.accuracy == 0.0 and b.precision is None


def test_a_missing_corpus_is_one_sentence(tmp_path, capsys):
    assert main(["bench", "diagnose", "--corpus", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "labels.tsv" in err and "Traceback" not in err
