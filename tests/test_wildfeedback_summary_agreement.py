"""Preference summaries (WildFeedback step 2a) against the hand-written set: the set is valid, the figures
reward the reference answers and punish garbage, the offline default is the summariser that agrees better,
and its figures are cached."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _replies import Replies

from convohub.wildfeedback.agreement import reference_kind
from convohub.wildfeedback.labels import FeedbackResult
from convohub.wildfeedback.preferences import (
    RULES_NAME,
    episode_messages,
    parse_preference_sentence,
    rule_summary,
    summarise_many,
    summary_prompt,
)
from convohub.wildfeedback.summary_agreement import (
    SummaryGoldError,
    load_summary_gold,
    offline_summariser,
    parse_summary_gold,
    score_summaries,
    summary_agreement,
    summary_choice_line,
    summary_gold_path,
)


def _knows_the_answers(field: str = "preferences", model: str = "knows-the-answers") -> Replies:
    """A summariser that answers the paper's prompt with the reference summary of that conversation (or,
    with ``field="misreading"``, the right query turns with the hand-written misreadings)."""
    def sentences(episode: dict) -> list[str]:
        return episode[field] if isinstance(episode[field], list) else [episode[field]]

    answers = {summary_prompt(g.turns): json.dumps([{"query": e["query"], "preferences": sentences(e)}
                                                    for e in g.reference]) for g in load_summary_gold()}
    return Replies(lambda prompt: answers[prompt], model=model)


def _raw_items() -> list[dict]:
    return [json.loads(line) for line in summary_gold_path().read_text(encoding="utf-8").splitlines() if line.strip()]


def test_gold_set_is_valid_and_hand_written() -> None:
    gold = load_summary_gold()
    assert len(gold) >= 60 and len({g.id for g in gold}) == len(gold)
    assert len({g.language for g in gold} - {"en"}) >= 5
    assert sum("look-alike" in g.tags for g in gold) >= 8 and sum(len(g.reference) > 1 for g in gold) >= 3
    for g, raw in zip(gold, _raw_items(), strict=True):
        users = [t["content"] for t in g.turns if t["role"] == "user"]
        assert 2 <= len(users) <= 4 and len(g.result.turns) == len(users)
        assert FeedbackResult.from_dict(raw["labels"]).to_dict() == raw["labels"] == g.result.to_dict()
        for episode in g.reference:
            assert 1 <= episode["query"] < min(episode["feedback_turns"]) <= max(episode["feedback_turns"]) <= len(users)
            assert 1 <= len(episode["preferences"]) <= 3 and all(p.endswith(".") for p in episode["preferences"])
            assert episode["misreading"].endswith(".") and episode["misreading"] not in episode["preferences"]
        # not produced by the sample generator: no user turn comes from its phrase pools
        assert not any(reference_kind(u) for u in users[1:]), g.id


@pytest.mark.parametrize(("field", "value", "message"), [
    ("reference", [{"query": 5, "feedback_turns": [2], "preferences": ["x."], "misreading": "y."}],
     r"query 5 must be a turn id"),
    ("reference", [{"query": 1, "feedback_turns": [2], "preferences": [], "misreading": "y."}],
     r"1-3 non-empty sentences"),
    ("reference", [{"query": 1, "feedback_turns": [2], "preferences": ["x."]}], r"'misreading'"),
    ("reference", [{"query": 1, "feedback_turns": [2], "preferences": ["x."], "misreading": "x."}],
     r"not one of the preferences"),
    ("labels", {"turns": [], "sat": False, "dsat": False, "labeller": "x"}, r"0 turn labels for 2 user turns"),
])
def test_malformed_gold_items_are_named(field: str, value: object, message: str) -> None:
    items = _raw_items()
    broken = next(i for i in items if i["id"] == "ps01")
    broken[field] = value
    with pytest.raises(SummaryGoldError, match=rf"item ps01.*{message}"):
        parse_summary_gold(items)
    bad_label = _raw_items()
    bad_label[0]["labels"]["turns"][1]["dissatisfaction"] = ["Rude"]
    with pytest.raises(SummaryGoldError, match=r"item ps01 labels: T-2"):
        parse_summary_gold(bad_label)


def test_the_reference_answers_score_one_and_garbage_scores_zero() -> None:
    perfect = summary_agreement(_knows_the_answers(), prompt_style="full")
    assert (perfect["query_accuracy"], perfect["preference_similarity"], perfect["faithful_similarity"],
            perfect["misread_rate"], perfect["parse_failures"]) == (1.0, 1.0, 1.0, 0.0, 0)
    assert perfect["summariser"] == "scripted:knows-the-answers" and perfect["unmatched_predictions"] == 0
    garbage = Replies(lambda _: "Sure! Here is what I think about this conversation.", model="garbage")
    figures = summary_agreement(garbage, prompt_style="full", max_attempts=2)
    assert figures["parse_failures"] == len(load_summary_gold()) and garbage.calls == 2 * len(load_summary_gold())
    assert (figures["query_accuracy"], figures["preference_similarity"], figures["faithful_similarity"]) == (0, 0, 0)


def test_misreadings_score_on_topic_but_not_as_faithful() -> None:
    """Stating what the user rejected as their wish is on topic (plain cosine rewards it) but wrong: the
    faithful figure drops every such sentence."""
    figures = summary_agreement(_knows_the_answers("misreading", "misreads"), prompt_style="full")
    assert figures["query_accuracy"] == 1.0 and figures["misread_rate"] == 1.0
    assert figures["faithful_similarity"] == 0.0 < 0.4 < figures["preference_similarity"]


def test_pairing_is_by_query_then_similarity_and_extra_episodes_count() -> None:
    gold = [g for g in load_summary_gold() if len(g.reference) == 2][:1]
    ref = gold[0].reference
    swapped = [{"query": e["query"], "preferences": e["preferences"]} for e in reversed(ref)]
    extra = swapped + [{"query": 1, "preferences": ["The user likes turtles."]}]
    figures = score_summaries(gold, [extra])
    assert figures["query_accuracy"] == 1.0 and figures["faithful_similarity"] == 1.0
    assert figures["predicted_episodes"] == 3 and figures["unmatched_predictions"] == 1
    wrong_query = [{"query": e["query"] + 1, "preferences": e["preferences"]} for e in ref]
    assert score_summaries(gold, [wrong_query])["query_accuracy"] < 1.0


def test_rules_are_chosen_over_garbage_and_the_figures_are_cached(tmp_path: Path) -> None:
    garbage = Replies(lambda _: "I don't know.", model="garbage")
    chosen, comparison = offline_summariser(garbage, tmp_path, log=lambda _: None, prompt_styles=("full", "episode"))
    assert chosen is None and comparison["chosen"] == RULES_NAME and comparison["prompt_style"] is None
    assert [f["summariser"] for f in comparison["measured"]] == [
        RULES_NAME, "scripted:garbage", f"scripted:garbage (episode prompts; episodes and query turns {RULES_NAME})"]
    rules = comparison["measured"][0]
    assert rules["query_accuracy"] > 0.9 and rules["parse_failures"] == 0
    assert all(f["parse_failures"] == comparison["gold"]["items"] for f in comparison["measured"][1:])
    calls = garbage.calls
    assert calls > 0
    again = offline_summariser(garbage, tmp_path, log=lambda _: None, prompt_styles=("full", "episode"))
    assert garbage.calls == calls and again[1] == comparison  # read back, not measured again
    line = summary_choice_line(comparison)
    assert line.startswith(f"Preference summaries were written by `{RULES_NAME}`, chosen on 72 ")
    assert f"| `{RULES_NAME}` (chosen) | {rules['query_accuracy']:.3f} |" in line
    assert "| `scripted:garbage` | 0.000 | 0.000 | 0.000 | n/a | 72/72 |" in line


def test_a_summariser_that_agrees_better_is_chosen(tmp_path: Path) -> None:
    knows = _knows_the_answers()
    chosen, comparison = offline_summariser(knows, tmp_path, log=lambda _: None, prompt_styles=("full",))
    assert chosen is knows and comparison["chosen"] == "scripted:knows-the-answers"
    assert comparison["prompt_style"] == "full" and "(chosen)" in summary_choice_line(comparison)


def test_a_summariser_that_misreads_more_than_the_rules_is_not_chosen(tmp_path: Path) -> None:
    """The reference sentences plus the misreading in every episode: more similar than the rules on every
    figure, but a wrong preference in every episode, which the choice rule does not accept."""
    answers = {summary_prompt(g.turns): json.dumps([{"query": e["query"], "preferences": [*e["preferences"],
                                                                                          e["misreading"]]}
                                                    for e in g.reference]) for g in load_summary_gold()}
    mixed = Replies(lambda prompt: answers[prompt], model="right-and-wrong")
    chosen, comparison = offline_summariser(mixed, tmp_path, log=lambda _: None, prompt_styles=("full",))
    rules, llm = comparison["measured"]
    assert llm["faithful_similarity"] > rules["faithful_similarity"] and llm["query_accuracy"] == 1.0
    assert llm["misread_rate"] > rules["misread_rate"]
    assert chosen is None and comparison["chosen"] == RULES_NAME


def test_episode_prompts_take_episodes_from_the_labels() -> None:
    g = next(g for g in load_summary_gold() if len(g.reference) == 2)
    backend = Replies(lambda text: "- The user wants the answer fixed", model="one-sentence")
    [(summary, errors)] = summarise_many([(g.turns, g.result)], backend, prompt_style="episode", progress=False)
    assert errors == [] and [e["query"] for e in summary] == [e["query"] for e in rule_summary(g.turns, g.result)]
    assert summary[0]["preferences"] == ["The user wants the answer fixed."]
    assert backend.calls == sum(len(e["feedback_turns"]) for e in g.reference)
    [(failed, errors)] = summarise_many([(g.turns, g.result)], Replies(lambda _: "ok"), prompt_style="episode",
                                        max_attempts=2, progress=False)
    assert failed is None and len(errors) == 2 * backend.calls and re.match(r"T-\d+: expected one sentence", errors[0])
    messages = episode_messages("Plan a trip.", "Too far, somewhere in Europe.")
    assert messages[0]["role"] == "system" and "Too far, somewhere in Europe." in messages[-1]["content"]
    assert "Plan a trip." in messages[-1]["content"] and len(messages) == 6  # system, two worked examples, the turn
    assert parse_preference_sentence('What the user wants: "The user wants a shorter answer."\nmore') == \
        "The user wants a shorter answer."
    with pytest.raises(ValueError, match="prompt_style"):
        summarise_many([(g.turns, g.result)], backend, prompt_style="split")


def test_pipeline_summarises_with_the_chosen_style_and_names_it(tmp_path: Path) -> None:
    """The pipeline asks the summariser in the style it was given and every user_preference row names it."""
    from convohub.wildfeedback.dataset import preference_rows, sample_conversations
    from convohub.wildfeedback.pipeline import Backends, run_pipeline

    summariser = Replies(lambda _: "The user wants a clearer answer.", model="episode-writer")
    result = run_pipeline(sample_conversations(8, 0), tmp_path,
                          Backends(summariser=summariser, summariser_style="episode"), log=lambda _: None)
    rows = preference_rows(result)
    assert rows and summariser.calls >= len(rows)
    name = f"scripted:episode-writer (episode prompts; episodes and query turns {RULES_NAME})"
    assert result.backends["summariser"] == name and {r["labeller"] for r in rows} == {name}
    assert all(r["preferences"] == ["The user wants a clearer answer."] for r in rows)
    assert run_pipeline(sample_conversations(8, 0), tmp_path / "rules", log=lambda _: None).backends[
        "summariser"] == RULES_NAME


@pytest.mark.slow
def test_smollm2_writes_episode_sentences_for_a_few_gold_items() -> None:
    """The real local model on four hand-written conversations (about 10-20 s on a CPU core)."""
    from convohub.llm import make_backend

    gold = list(load_summary_gold()[:4])
    figures = summary_agreement(make_backend("smollm2"), prompt_style="episode", gold=gold)
    assert figures["parse_failures"] <= 1 and figures["query_accuracy"] >= 0.75
    assert figures["preference_similarity"] > 0.3 and 0.0 <= figures["misread_rate"] <= 1.0
