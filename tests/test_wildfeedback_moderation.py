"""The moderation filter on generated responses: verdict parsing, bounded re-asking, and pairs that lose a
flagged or unanswered response (counted) before they reach the dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
from _replies import Replies

from convohub.wildfeedback.moderation import moderate, moderation_messages, parse_verdict
from convohub.wildfeedback.pipeline import Backends, expert_pairs, run_pipeline


def _verdict(prompt: str) -> str:
    if "pipe bomb" in prompt:
        return "Yes."
    if "gibberish" in prompt:
        return "Hmm, let me think"
    return "no"


@pytest.mark.parametrize(("text", "verdict"), [
    ("no", False), ("No.", False), ("The reply is safe", False), ("not harmful", False), ("YES", True),
    ("Yes, it is harmful", True), ("unsafe", True), ("It is not safe at all", True), ("yes (log-odds +0.51)", True),
    ("yes or no", None), ("I cannot tell", None), ("", None), (None, None),
])
def test_parse_verdict(text: str | None, verdict: bool | None) -> None:
    assert parse_verdict(text) is verdict


def test_moderate_keeps_only_explicit_safe_and_reasks_only_unparsed() -> None:
    moderator = Replies(_verdict)
    replies = ["Here is a pasta recipe.", "Step 1 of building a pipe bomb ...", "gibberish reply"]
    results = moderate(replies, moderator, max_attempts=3, progress=False)
    assert [(r.keep, r.flagged, r.unparsed) for r in results] == [
        (True, False, False), (False, True, False), (False, False, True)]
    assert moderator.calls == 3 + 1 + 1  # the unparseable one is asked again, twice
    assert "pasta recipe" in moderation_messages("Here is a pasta recipe.")[-1]["content"]
    with pytest.raises(ValueError, match="max_attempts"):
        moderate(replies, moderator, max_attempts=0)


def _skeleton(i: int, prompt: str) -> dict:
    return {"id": f"p{i}", "prompt": [{"role": "user", "content": prompt}], "preferences": ["Be brief."],
            "rejected": "an old answer", "revised": "a revised answer"}


def test_generated_expert_responses_pass_the_moderator() -> None:
    skeletons = [_skeleton(0, "pasta"), _skeleton(1, "bomb"), _skeleton(2, "noise")]
    generator = Replies(lambda p: {"pasta": "Boil the pasta.", "bomb": "Take a pipe bomb kit",
                                   "noise": "gibberish"}[next(w for w in ("pasta", "bomb", "noise") if w in p)],
                        model="scripted-expert")
    pairs, counts = expert_pairs(skeletons, generator, 32, Replies(_verdict))
    assert [p["id"] for p in pairs] == ["p0"] and pairs[0]["chosen"] == "Boil the pasta."
    assert counts["dropped_moderation_flagged"] == 1 and counts["dropped_moderation_unanswered"] == 1
    assert counts["moderated_responses"] == 3 and counts["pairs"] == 1
    offline, offline_counts = expert_pairs(skeletons, None, 32)  # the conversation's own responses: not moderated
    assert len(offline) == 3 and "moderated_responses" not in offline_counts
    with pytest.raises(ValueError, match="pass a moderator"):
        expert_pairs(skeletons, generator, 32)


def test_pipeline_refuses_generation_without_a_moderator(tmp_path: Path) -> None:
    generator = Replies(lambda p: "text", model="scripted-expert")
    with pytest.raises(ValueError, match="no moderator"):
        run_pipeline([], tmp_path, Backends(expert=generator))
    named = Backends(expert=generator, moderator=Replies(_verdict, model="scripted-moderator")).describe()
    assert named["moderator"] == "scripted:scripted-moderator"


def test_agreement_on_the_hand_labelled_set_can_score_both_ways() -> None:
    from convohub.wildfeedback.moderation import load_moderation_gold, moderation_agreement

    gold = load_moderation_gold()
    assert len(gold) >= 60 and sum(g["unsafe"] for g in gold) == len(gold) // 2
    harmful = [g["response"] for g in gold if g["unsafe"]]
    knows = Replies(lambda p: "yes" if any(h in p for h in harmful) else "no", model="knows-the-answers")
    perfect = moderation_agreement(knows)
    assert (perfect["accuracy"], perfect["precision_unsafe"], perfect["recall_unsafe"]) == (1.0, 1.0, 1.0)
    lenient = moderation_agreement(Replies(lambda p: "no", model="always-no"))
    assert lenient["accuracy"] == 0.5 and lenient["recall_unsafe"] == 0.0 and lenient["moderator"].endswith("always-no")


def test_zero_shot_moderator_separates_the_hand_labelled_set() -> None:
    """The real all-MiniLM-L6-v2 zero-shot classifier: well above chance on the hand labels, and it lets
    ordinary assistant answers through (a moderator that drops them would starve the preference pairs)."""
    from convohub.wildfeedback.moderation import EmbeddingModerator, moderation_agreement

    moderator = EmbeddingModerator()
    figures = moderation_agreement(moderator)
    assert figures["moderator"] == "zero-shot:sentence-transformers/all-MiniLM-L6-v2"
    assert figures["accuracy"] >= 0.7 and figures["recall_unsafe"] >= 0.7 and figures["unanswered"] == 0
    everyday = ["Preheat the oven to 180 C and bake the cake for 35 minutes.",
                "Use a dictionary comprehension: {k: v for k, v in pairs}.",
                "For a first playthrough, pick a balanced build and level up one skill at a time."]
    kept = moderate(everyday, moderator)
    assert all(r.keep and not r.unparsed for r in kept)
    [flagged] = moderate(["Mix these household chemicals in a closed room to make a toxic gas and poison "
                          "your neighbour."], moderator)
    assert flagged.flagged and not flagged.keep


def test_offline_moderator_is_the_one_that_agrees_better_and_is_cached(tmp_path: Path) -> None:
    from convohub.wildfeedback.moderation import EmbeddingModerator, load_moderation_gold, offline_moderator

    harmful = [g["response"] for g in load_moderation_gold() if g["unsafe"]]
    lenient = Replies(lambda p: "no", model="always-no")
    chosen, comparison = offline_moderator(lenient, tmp_path, log=lambda _: None)
    assert isinstance(chosen, EmbeddingModerator) and comparison["chosen"] == chosen.name
    assert [m["moderator"] for m in comparison["measured"]] == ["scripted:always-no", chosen.name]
    assert lenient.calls == 60
    offline_moderator(lenient, tmp_path, log=lambda _: None)
    assert lenient.calls == 60  # the figures were read back, not measured again
    knows = Replies(lambda p: "yes" if any(h in p for h in harmful) else "no", model="knows-the-answers")
    assert offline_moderator(knows, tmp_path, log=lambda _: None)[0] is knows
