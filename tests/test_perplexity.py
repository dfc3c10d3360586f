"""Held-out perplexity (convohub.training.perplexity): the same number whichever side the tokenizer pads, and
the same as scoring each text alone, so a generation backend's left-padding tokenizer can measure it. A random
tiny model hardly depends on positions, so the real SmolLM2 is checked as well."""

from __future__ import annotations

import math

import pytest


@pytest.fixture(scope="module")
def tiny() -> tuple:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from convohub.training.models import resolve_model

    path = resolve_model("convohub-tiny:causal")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_padding_side_and_batching_do_not_change_perplexity(tiny: tuple) -> None:
    from convohub.training.perplexity import perplexity

    model, tokenizer = tiny
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = ["user: hello there\nassistant: hi", "user: a much longer question about the weather in spring time"]
    scores = {}
    for side in ("left", "right"):
        tokenizer.padding_side = side
        scores[side] = perplexity(model, tokenizer, texts, batch_size=2)
    alone = [perplexity(model, tokenizer, [t], batch_size=1) for t in texts]
    assert math.isfinite(scores["left"]) and scores["left"] > 1
    assert scores["left"] == pytest.approx(scores["right"], rel=2e-3)  # float noise of masked attention only
    assert min(alone) <= scores["left"] <= max(alone)  # a token-weighted mean of the two


def test_a_left_padding_tokenizer_scores_like_each_text_alone_on_smollm2() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from convohub.models import smollm2_path
    from convohub.training.perplexity import perplexity

    model = AutoModelForCausalLM.from_pretrained(smollm2_path())
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    texts = ["Paris is the capital of France.", "You can reverse a list in Python with my_list[::-1] or, in place, "
             "with my_list.reverse(), which changes the list itself and returns None."]
    alone = [perplexity(model, tokenizer, [t], batch_size=1) for t in texts]
    tokenizer.padding_side = "left"  # as the local LLM backend's tokenizer
    batched = perplexity(model, tokenizer, texts, batch_size=2)
    assert min(alone) <= batched <= max(alone)  # a token-weighted mean of the two, not inflated by the padding
    assert tokenizer.padding_side == "left"  # the caller's tokenizer is left as it was


def test_negative_log_likelihood_counts_only_the_tokens_it_scored(tiny: tuple) -> None:
    """Per-byte measures divide these sums: the token count must follow the truncation, not the raw text."""
    from convohub.training.perplexity import negative_log_likelihood, perplexity

    model, tokenizer = tiny
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = ["user: hello there\nassistant: hi", "user: " + "a rather long question " * 20]
    full = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    nll, tokens = negative_log_likelihood(model, tokenizer, texts)
    assert tokens == sum(n - 1 for n in full) and nll > 0
    assert math.exp(nll / tokens) == pytest.approx(perplexity(model, tokenizer, texts))
    _, truncated = negative_log_likelihood(model, tokenizer, texts, max_length=8)
    assert truncated == sum(min(n, 8) - 1 for n in full) < tokens
