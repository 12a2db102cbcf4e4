"""The per-model dialog's alias check: build_catalog's rules, said before anything is saved."""

from __future__ import annotations

from stoker.library.model_ids import ModelKind, alias_problems, build_catalog

MODELS = [("/m/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf", ModelKind.CHAT, "library"),
          ("/m/gemma-3-270m-it-Q8_0.gguf", "gemma-3-270m-it-Q8_0.gguf", ModelKind.CHAT, "library")]


def test_an_alias_taken_by_another_model_or_not_one_word_is_named():
    catalog, problems = build_catalog(MODELS, {"/m/gemma-3-270m-it-Q8_0.gguf": ("gemma",)})
    assert problems == ()
    smol = "/m/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert alias_problems(catalog, smol, ("gpt-4o-mini", "Chat")) == ()
    # Its own id (any case) is no clash; another model's id or alias is, and so are spaces.
    assert alias_problems(catalog, smol, ("SmolLM2-135M-Instruct:Q4_1",)) == ()
    assert alias_problems(catalog, smol, ("Gemma",)) == (
        "The alias 'gemma' is already the name of gemma-3-270m-it:q8_0; pick another alias.",)
    assert alias_problems(catalog, smol, ("gemma-3-270m-it:q8_0",))[0].endswith("pick another alias.")
    assert "one word" in alias_problems(catalog, smol, ("two words",))[0]
    # The gemma model keeps its own alias when its dialog saves it again.
    assert alias_problems(catalog, "/m/gemma-3-270m-it-Q8_0.gguf", ("gemma",)) == ()
    # What the check lets through, build_catalog then gives to the model.
    after, problems = build_catalog(MODELS, {"/m/gemma-3-270m-it-Q8_0.gguf": ("gemma",),
                                             smol: ("gpt-4o-mini", "chat")})
    assert problems == () and after.resolve("chat").path == smol
