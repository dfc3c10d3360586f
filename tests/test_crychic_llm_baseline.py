"""The paper's LLM baseline (``convohub.crychic.llm_baseline``) driven by scripted backends: the label rules,
the 0-5 scores over the 10 most recent turns with the >= 4 threshold and its tie rules, answers that parse to
nothing (counted, never silent), both ways of reading answers, and ``convohub crychic evaluate --baseline llm``
end to end (in test_crychic_reconstruct.py, beside the other baselines' CLI tests). The closed-choice reader of a local model (``convohub.llm.choices``) is checked against a
brute-force sequence likelihood on convohub's tiny random causal LM."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _replies import Replies

from convohub.crychic.llm_baseline import (
    DIGITS,
    LABELS,
    LLM_THRESHOLD,
    LLMBaseline,
    distribution,
    expected_score,
    llm_baseline_factory,
    parse_label,
    parse_score,
)
from convohub.crychic.reconstruct import RULES, reconstruct
from convohub.llm import ChatRequest

TOPIC = re.compile(r"topic(\d+)")


def _new_message(text: str) -> str:
    return text.rsplit("Message: ", 1)[1].split("\nKind:")[0] if "Kind:" in text else \
        text.split("New message: ", 1)[1].split("\n")[0]


def scripted(label: Callable[[str], str] = lambda p: "instruction",
             score: Callable[[str, str], str] = lambda earlier, new: "0") -> Replies:
    """Labels from the new message; scores from (earlier prompt, new message)."""
    def reply(text: str) -> str:
        if text.rstrip().endswith("Kind:"):
            return label(_new_message(text))
        earlier = text.split("User: ", 1)[1].split("\n")[0]
        return score(earlier, _new_message(text))
    return Replies(reply, "scripted-llm")


def _build(llm: Replies, prompts: list[str], **kwargs: Any) -> LLMBaseline:
    return reconstruct([(p, f"answer to {p}") for p in prompts], lambda: LLMBaseline(llm, **kwargs))


def test_labels_decide_information_and_polite_without_scoring() -> None:
    llm = scripted(label=lambda p: {"thanks": "Polite.", "i am 35": "Kind: information"}.get(p, "instruction"))
    builder = _build(llm, ["write a poem", "thanks", "i am 35"])
    assert builder.parents == [-1, -1, 1]
    assert [d.rule for d in builder.decisions] == ["first-turn", "llm-polite", "llm-information"]
    assert llm.calls == 2  # first turn asks nothing; labels only: no scoring requests
    assert {RULES[d.rule] for d in builder.decisions[1:]} == {"llm"}


def test_instruction_takes_the_best_score_of_at_least_four_and_ties_go_to_the_most_recent() -> None:
    def score(earlier: str, new: str) -> str:
        a, b = TOPIC.search(earlier), TOPIC.search(new)
        return "Score: 5" if a and b and a.group(1) == b.group(1) else ("4" if "near" in earlier else "1")
    builder = _build(scripted(score=score), ["topic1 a", "topic2 b", "topic1 c", "near d", "topic1 e", "unrelated"])
    assert builder.parents[2] == 0 and builder.decisions[2].score == 5.0
    assert builder.parents[4] == 2  # turns 0 and 2 both score 5: the more recent wins
    assert builder.parents[3] == -1  # every candidate scored 1 (below 4): a root
    assert builder.parents[5] == 3 and builder.decisions[5].rule == "llm-parent"  # 4 is enough ("near" turn)


def test_only_the_ten_most_recent_turns_are_scored() -> None:
    seen: list[str] = []

    def score(earlier: str, new: str) -> str:
        if new == "last":
            seen.append(earlier)
        return "0"
    builder = _build(scripted(score=score), [f"p{i}" for i in range(12)] + ["last"])
    assert seen == [f"p{i}" for i in range(2, 12)] and builder.parents[-1] == -1


def test_answers_that_parse_to_nothing_are_counted() -> None:
    llm = scripted(label=lambda p: "I am not sure", score=lambda e, n: "maybe 7?")
    make = llm_baseline_factory(llm, "generate")
    builder = reconstruct([("a", "x"), ("b", "y"), ("c", "z")], make)
    assert builder.parents == [-1, -1, -1]  # unlabelled -> instruction; unscored -> 0: roots
    assert make.unparsed == {"label": 2, "score": 3}


def _likelihood_text(values: dict[str, float]) -> str:
    """An answer as convohub.llm.choices.ChoiceBackend writes it."""
    best = max(values, key=values.__getitem__)
    return f"{best} (log-likelihood " + ", ".join(f"{o} {v:+.4f}" for o, v in values.items()) + ")"


def test_parsers_read_the_first_allowed_answer() -> None:
    assert parse_label("The kind is Information, not instruction.") == "information"
    assert parse_label("instructions") is None and parse_label("") is None
    assert [parse_score(t) for t in ("4", "Score: 5/5", "3.5", "10", "none")] == [4, 5, None, None, None]
    values = dict(zip(DIGITS, [-9.0, -9.0, -9.0, -9.0, -0.1, -1.0], strict=True))
    probabilities = distribution(_likelihood_text(values), DIGITS)
    total = sum(math.exp(v) for v in values.values())
    assert probabilities == pytest.approx({d: math.exp(v) / total for d, v in values.items()})
    # digits 0-3 share e^-9 each, 4 gets e^-0.1, 5 gets e^-1: the expectation is about 4.29
    expected = (6 * math.exp(-9.0) + 4 * math.exp(-0.1) + 5 * math.exp(-1.0)) / total
    assert expected_score(probabilities) == pytest.approx(expected) and 4.28 < expected < 4.30
    assert distribution("4", DIGITS) is None  # a generated answer carries no distribution


def test_likelihood_answers_are_calibrated_against_the_content_free_answer() -> None:
    """SmolLM2 favours one label whatever the message: subtracting what it answers for "N/A" undoes that."""
    def reply(text: str) -> str:
        if text.rstrip().endswith("Kind:"):
            if "Message: N/A" in text:
                return _likelihood_text({"polite": -0.05, "information": -4.0, "instruction": -4.0})
            return _likelihood_text({"polite": -0.1, "information": -3.0, "instruction": -2.5})
        if "New message: N/A" in text:
            return _likelihood_text(dict(zip(DIGITS, [-0.1, -3, -3, -3, -3, -3], strict=True)))
        return _likelihood_text(dict(zip(DIGITS, [-0.2, -3, -3, -3, -1.5, -3], strict=True)))
    llm = Replies(reply, "scripted-likelihood")
    plain = _build(llm, ["a", "b"], calibration=None)
    assert plain.decisions[1].rule == "llm-polite"
    calibrated = _build(llm, ["a", "b"], calibration={})
    decision = calibrated.decisions[1]
    assert decision.label == "instruction" and decision.rule == "llm-parent" and decision.score == 4.0
    assert decision.parent == 0


def test_likelihood_scoring_needs_a_local_model() -> None:
    with pytest.raises(ValueError, match="not a local transformers model: use scoring='generate'"):
        llm_baseline_factory(scripted(), "likelihood")


# ------------------------------------------------------------------------------------------------ choices
@pytest.fixture(scope="module")
def local() -> Any:
    from convohub.llm import TransformersBackend
    from convohub.tiny import tiny_model

    return TransformersBackend(tiny_model("causal"), device="cpu", batch_size=4)


def _brute_force(local: Any, request: ChatRequest, answer: str) -> float:
    """log p(answer | prompt) of one unpadded sequence, token by token."""
    import torch

    tok = local.tokenizer
    prompt = tok(tok.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True),
                 add_special_tokens=False)["input_ids"]
    ids = tok(answer, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logp = local.model(torch.tensor([prompt + ids])).logits[0].float().log_softmax(-1)
    return float(sum(logp[len(prompt) - 1 + i, t] for i, t in enumerate(ids)))


def test_choice_backend_scores_options_exactly_and_answers_with_the_best(local: Any, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.llm import CachedBackend
    from convohub.llm.choices import ChoiceBackend, as_choice_backend, choice_logprobs

    shared = "Read the message and pick one kind for it, thinking about what it asks for. " * 3
    requests = [ChatRequest.from_prompt(shared + p) for p in ("Thanks a lot!", "a much longer prompt, padded")]
    chooser = ChoiceBackend(local, LABELS, case_variants=False)
    assert any(len(ids) > 1 for spellings in chooser._ids for ids in spellings)  # multi-token options here
    prefix_tokens = []  # tokens of each run that keeps its keys and values for the rows after it
    forward = local.model.forward

    def spy(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("use_cache"):
            prefix_tokens.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    monkeypatch.setattr(local.model, "forward", spy)
    scores = chooser.option_logprobs(requests)
    monkeypatch.undo()
    tok = local.tokenizer
    prompts = [tok(tok.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True),
                   add_special_tokens=False)["input_ids"] for r in requests]
    common = next(k for k in range(len(prompts[0])) if prompts[0][k] != prompts[1][k])
    # the shared instructions ran once for both requests, then each prompt's own tokens (all but the last, whose
    # logits are read) once for all of its option rows
    assert prefix_tokens[0] == common and sorted(prefix_tokens[1:]) == sorted(len(p) - 1 - common for p in prompts)
    for request, row in zip(requests, scores, strict=True):
        for label, value in zip(LABELS, row, strict=True):
            assert value == pytest.approx(_brute_force(local, request, label), abs=1e-4)
    # batches one row short of a request: each request's last row is a batch of its own, and continues the
    # shared instructions' cache too instead of running its whole prompt again
    rows = 1 + sum(len(ids) > 1 for spellings in chooser._ids for ids in spellings)
    assert rows > 2
    small = ChoiceBackend(local, LABELS, case_variants=False, batch_size=rows - 1)
    prefix_tokens.clear()
    monkeypatch.setattr(local.model, "forward", spy)
    for got, want in zip(small.option_logprobs(requests), scores, strict=True):
        assert got == pytest.approx(want, abs=1e-4)
    monkeypatch.undo()
    assert prefix_tokens[0] == common and sorted(prefix_tokens[1:]) == sorted(
        len(p) - 1 - common for p in prompts for _ in range(2))
    answers = chooser.chat(requests)
    for answer, row in zip(answers, scores, strict=True):
        assert parse_label(answer.text) == LABELS[max(range(3), key=row.__getitem__)]
        assert choice_logprobs(answer.text) == pytest.approx(dict(zip(LABELS, row, strict=True)), abs=1e-4)
    cached = as_choice_backend(CachedBackend(local, tmp_path), DIGITS)
    first = cached.chat(requests)
    assert parse_score(first[0].text) is not None and cached.chat(requests)[0].cached
    assert cached.identity()["options"] == list(DIGITS)


def test_likelihood_baseline_runs_on_a_local_model(local: Any) -> None:
    make = llm_baseline_factory(local, "likelihood")
    builder = reconstruct([("Write a poem.", "A poem."), ("Make it shorter.", "Short."), ("Thanks!", "")], make)
    assert builder.parents[0] == -1 and all(p == -1 or 0 <= p < t for t, p in enumerate(builder.parents))
    assert make.unparsed == {}  # every likelihood answer is an allowed one
    assert all(d.module == "llm" for d in builder.decisions[1:])
    for d in builder.decisions[1:]:  # each parent follows from the label and score the model gave, as the paper's rules say
        assert d.label in LABELS and d.score is not None and d.parent == builder.parents[d.turn_index]
        expected = {"llm-information": d.turn_index - 1, "llm-polite": -1, "llm-root": -1}.get(d.rule, d.parent)
        assert d.parent == expected and (d.rule != "llm-parent" or (d.parent >= 0 and d.score >= LLM_THRESHOLD))
        assert d.rule != "llm-root" or d.score < LLM_THRESHOLD
