"""WildChat-AQA construction rules, each on data small enough to check by hand: MinHash de-duplication and the
corpus filters (datatrove), the keyword merge rules, the support / top-3 / round-robin rules over DuckDB
aggregates, the taxonomy quality scores, the quality-control rule, the stratified subset, the annotation and
wording validators, and the 73 combinations of Table 8."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _replies import Replies

from convohub.aqa import annotate, keywords, phrasing, proposal, quality, taxonomy
from convohub.aqa.combos import COMBINATIONS
from convohub.aqa.settings import PAPER, TINY, Z_090, settings_for


# ------------------------------------------------------------------------------------------ corpus
def _words(seed: int, n: int) -> str:
    """``n`` made-up words without digits (MinHash normalises digits away)."""
    import random

    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(n))


def _row(i: int, user: int, text: str, minute: int) -> dict[str, Any]:
    from datetime import datetime, timedelta, timezone

    at = datetime(2023, 5, 1, tzinfo=timezone.utc) + timedelta(days=minute)
    turn = {"content": text, "role": "user", "language": "English", "country": "France", "state": "Occitanie",
            "hashed_ip": f"ip{user}", "header": {"user-agent": "ua"}, "timestamp": at, "toxic": False,
            "redacted": False, "turn_identifier": i}
    reply = {**turn, "role": "assistant", "content": "Here is the answer: " + _words(1000 + i, 30),
             "hashed_ip": None, "header": None, "country": None, "state": None}
    return {"conversation_hash": f"c{i}", "model": "gpt-4", "timestamp": at, "conversation": [turn, reply],
            "turn": 1, "language": "English", "openai_moderation": [], "detoxify_moderation": [], "toxic": False,
            "redacted": False, "state": "Occitanie", "country": "France", "hashed_ip": f"ip{user}",
            "header": {"user-agent": "ua"}}


def test_datatrove_corpus_drops_near_duplicates_long_conversations_and_inactive_users(tmp_path: Path) -> None:
    from convohub.aqa.corpus import build_corpus

    base = ("Please plan a three day trip to Lisbon with museums, food markets, a day at the beach, and a "
            "sunset viewpoint, and keep the budget under five hundred euros for two people in total")
    rows = [_row(i, 0, _words(i, 25), i) for i in range(6)]
    rows.append(_row(6, 0, base, 6))
    near = _row(7, 0, base + " please", 7)
    near["conversation"][1]["content"] = rows[-1]["conversation"][1]["content"]
    rows.append(near)
    rows.append(_row(8, 0, _words(8, 300), 8))  # too long for a 400-token limit
    rows += [_row(9 + i, 1, _words(100 + i, 20), 9 + i) for i in range(2)]
    settings = replace(TINY, max_tokens=400, min_sessions=3)
    records, report = build_corpus(rows, settings, tmp_path / "dt")
    counts = report["counts"]
    assert counts["rows_read"] == 11 and counts["near_duplicates"] == 1 and counts["over_max_tokens"] == 1
    assert counts["inactive_users"] == 1 and counts["inactive_user_conversations"] == 2
    kept = {r["conversation_id"] for r in records}
    assert len(kept & {"c6", "c7"}) == 1 and "c8" not in kept and not kept & {"c9", "c10"}
    assert len(records) == counts["after_users"] == 7
    assert all(r["token_count"] <= 400 and r["user_name"].startswith("user-") and "user_id" not in r for r in records)
    again, report_again = build_corpus(rows, settings, tmp_path / "dt")  # finished datatrove stages are reused
    assert report_again == report and [r["hash"] for r in again] == [r["hash"] for r in records]


# ------------------------------------------------------------------------------------------ keyword merge rules
@pytest.mark.parametrize(("a", "b", "category", "rule"), [
    ("Pokémon", "pokemon", "Video Games", 1),
    ("The Lord of the Rings", "Lord of Rings", "Book", 2),
    ("The Legend of Zelda", "The Legend of Zelda: Tears of the Kingdom", "Video Games", 3),
    ("A Song of Ice and Fire", "Game of Thrones: A Song of Ice and Fire", "Book", 4),
    ("DDLC", "Doki Doki Literature Club", "Video Games", 5),
    ("Donald Trump", "donald  trump", "Public Figure", 1),
    ("The Weeknd", "Weeknd", "Public Figure", 2),
])
def test_each_merge_rule(a: str, b: str, category: str, rule: int, monkeypatch: pytest.MonkeyPatch) -> None:
    merged = keywords.merge_names({a: 1, b: 1, "Minecraft": 1}, category)
    assert merged[a] == merged[b] and merged["Minecraft"] == "Minecraft"
    if rule > 1:  # rule 1 (the same normalised name) always applies; any other is what joined a and b
        for name in ("RULES", "PUBLIC_FIGURE_RULES"):
            monkeypatch.setattr(keywords, name, tuple(r for r in getattr(keywords, name) if r != rule))
        apart = keywords.merge_names({a: 1, b: 1}, category)
        assert apart[a] != apart[b]


@pytest.mark.parametrize(("a", "b"), [
    ("John Ronald Reuel", "John Ronald Reuel Tolkien"),  # a prefix: rule 3 only outside Public Figure
    ("JFK", "John Fitzgerald Kennedy"),  # an acronym: rule 5 only outside Public Figure
])
def test_public_figure_uses_rules_one_and_two_only(a: str, b: str) -> None:
    figures = keywords.merge_names({a: 1, b: 1}, "Public Figure")
    books = keywords.merge_names({a: 1, b: 1}, "Book")
    assert figures[a] != figures[b] and books[a] == books[b]


def test_short_prefixes_and_different_names_stay_apart() -> None:
    apart = keywords.merge_names({"The Witcher": 1, "The Witcher 3: Wild Hunt": 1}, "Video Games")
    assert apart["The Witcher"] != apart["The Witcher 3: Wild Hunt"]  # a 2-word prefix is too short for rule 3
    merged = keywords.merge_names({"Pokémon": 5, "Pokemon": 2, "pokemon": 1, "Fortnite": 3, "DDLC": 1,
                                   "Doki Doki Literature Club": 4}, "Video Games")
    assert merged["Pokemon"] == merged["pokemon"] == "Pokémon" and merged["Fortnite"] == "Fortnite"
    assert merged["DDLC"] == "Doki Doki Literature Club"


def test_keyword_groups_from_an_llm_answer_keep_only_given_keywords() -> None:
    answer = ('{"results": [{"name": "Game of Thrones", "category": ["TV Show"], "keywords": ["Arya Stark", '
              '"invented"]}, {"name": "X", "category": ["Cooking"], "keywords": ["ramen"]}]}')
    assert keywords.parse_groups(answer, ["arya stark", "ramen"]) == {"arya stark": ("TV Show", "Game of Thrones")}


# ------------------------------------------------------------------------------------------ proposal rules
def _records() -> list[dict[str, Any]]:
    """12 conversations of 3 users: user A 6 (5 about Cooking), B 4, C 2."""
    spec = [("A", "Cooking", "Pasta"), ("A", "Cooking", "Pasta"), ("A", "Cooking", "Baking"), ("A", "Cooking", "Pasta"),
            ("A", "Cooking", "Baking"), ("A", "Travel", "Cities"), ("B", "Travel", "Cities"), ("B", "Travel", "Beaches"),
            ("B", "Cooking", "Pasta"), ("B", "Travel", "Cities"), ("C", "Music", "Concerts"), ("C", "Travel", "Cities")]
    out = []
    for i, (user, topic, sub) in enumerate(spec):
        out.append({"hash": f"h{i:02d}", "user_name": user, "time_week": f"2023-05-{1 + 7 * (i % 2):02d}",
                    "country": "France" if i % 3 else "Spain", "language": "English", "label_level_1": [topic],
                    "label_level_2": [sub], "subtopic_parents": {sub: topic},
                    "keywords_aggregated": [{"keyword_type": "Film", "value": f"Film {i % 4}"}]})
    return out


def test_support_threshold_and_target_counts_match_a_hand_count(tmp_path: Path) -> None:
    records = _records()
    db = proposal.Aggregates(proposal.write_attributes(records, tmp_path / "a.parquet"))
    combo = next(c for c in COMBINATIONS if c.name == "user -> topic")
    settings = replace(TINY, min_support_user=4)
    candidates = {c.values: c for c in db.candidates(combo, settings)}
    assert set(candidates) == {("A",), ("B",)}  # C has 2 conversations < 4
    assert candidates[("A",)].support == 6 and candidates[("A",)].counts == [("Cooking", 5), ("Travel", 1)]
    assert db.support_of(candidates[("B",)]) == ["h06", "h07", "h08", "h09"]
    assert proposal.support_hashes(records, ["user_name"], ["B"]) == db.support_of(candidates[("B",)])
    pair = next(c for c in COMBINATIONS if c.name == "user,user -> topic")  # several users: any of them
    sets = {c.values: c.support for c in db.candidates(pair, replace(TINY, min_support_user=1))}
    assert sets == {("A", "B"): 10, ("A", "C"): 8, ("B", "C"): 6}
    nested = next(c for c in COMBINATIONS if c.name == "topic,subtopic -> user")  # the subtopic of that topic
    pairs = {c.values for c in db.candidates(nested, replace(TINY, min_support=1))}
    assert ("Cooking", "Pasta") in pairs and ("Travel", "Pasta") not in pairs
    db.close()


def test_top3_share_entropy_and_round_robin() -> None:
    combo = COMBINATIONS[0]

    def cand(values: tuple[str, ...], counts: list[tuple[str, int]]) -> proposal.Candidate:
        return proposal.Candidate(combo, values, None, sum(n for _, n in counts), counts)

    flat = cand(("x",), [(f"v{i}", 1) for i in range(30)])
    assert flat.top3_share == pytest.approx(0.1) and flat.entropy == pytest.approx(1.0)
    peaked = cand(("y",), [("a", 8), ("b", 1), ("c", 1)])
    assert peaked.top3_share == 1.0 and peaked.entropy == pytest.approx(
        -(0.8 * math.log2(0.8) + 2 * 0.1 * math.log2(0.1)) / math.log2(3))
    pool = [cand((str(i),), [("a", 10 - i), ("b", 1)]) for i in range(5)] + [cand(("z",), [("b", 5), ("a", 1)])]
    chosen = proposal.round_robin(pool, max_per_value=2, cap=None)
    assert Counter(c.top1 for c in chosen) == {"a": 2, "b": 1}
    assert [c.values for c in chosen][:2] == [("0",), ("z",)]  # lowest entropy of each top-1 value first
    assert len(proposal.round_robin(pool, max_per_value=2, cap=1)) == 1


def test_options_are_ten_with_aggregate_weights_and_fillers(tmp_path: Path) -> None:
    counts = [("Cooking", 5), ("Travel", 1)]
    candidate = proposal.Candidate(COMBINATIONS[3], ("A",), None, 6, counts)
    vocabulary = {(f"T{i}", ""): i + 1 for i in range(12)} | {("Cooking", ""): 6, ("Travel", ""): 6}
    options, weights = proposal.options_for(candidate, vocabulary, 10, "seed")
    assert len(options) == len(set(options)) == 10 and len(weights) == 10
    by = dict(zip(options, weights, strict=True))
    assert by["Cooking"] == pytest.approx(5 / 6) and by["Travel"] == pytest.approx(1 / 6)
    assert sum(1 for w in weights if w == 0) == 8
    assert proposal.options_for(candidate, vocabulary, 10, "seed") == (options, weights)  # seeded


# ------------------------------------------------------------------------------------------ taxonomy quality
def test_coverage_certainty_and_quality() -> None:
    labels = [[(0, 10.0)], [(0, 5.0), (1, 5.0)], [], [(2, 8.0), (0, 2.0)]]
    assert taxonomy.coverage(labels) == 0.75
    h = -(0.8 * math.log2(0.8) + 0.2 * math.log2(0.2))  # log2(m) = 1 for two labels
    assert taxonomy.certainty(labels) == pytest.approx((1 + 0 + (1 - h)) / 3)
    assert taxonomy.quality(labels)["quality"] == pytest.approx(0.75 + (2 - h) / 3)
    assert taxonomy.normalised_entropy([3.0]) == 0.0 and taxonomy.certainty([[], []]) == 0.0


def test_silhouette_prefers_the_true_number_of_clusters() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(8)[:3]
    vectors = np.concatenate([c + 0.05 * rng.standard_normal((20, 8)) for c in centres]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = {k: taxonomy.silhouette(vectors, taxonomy.kmeans(vectors, k, 0)) for k in (2, 3, 4)}
    assert max(scores, key=scores.get) == 3 and scores[3] > 0.8
    batches = taxonomy.round_robin_batches(np.repeat([0, 1, 2], 20), 6, 0)
    assert [len(b) for b in batches] == [6] * 10 and len({i // 20 for i in batches[0]}) == 3


def test_taxonomy_rounds_stop_early_and_keep_the_taxonomy_on_a_bad_answer() -> None:
    answers = iter(['{"classes": [{"name": "Cooking", "description": "recipes"}, {"name": "Travel"}]}',
                    '{"score": 60, "classes": [{"name": "Cooking"}, {"name": "Travel"}, {"name": "Music"}]}',
                    "not json", "not json",
                    '{"score": 50, "classes": [{"name": "Cooking"}]}'])
    backend = Replies(lambda _: next(answers))
    settings = replace(TINY, topic_clusters=2, topic_batch=2, topic_rounds=10, topic_patience=2, max_attempts=1,
                       taxonomy_writer="llm")
    vectors = np.eye(12, 4, dtype=np.float32)
    result = taxonomy.generate_taxonomy([f"summary {i}" for i in range(12)], vectors, backend, settings)
    assert [r["action"] for r in result.rounds] == ["initial", "updated", "kept", "kept"]
    assert result.rounds[-1]["stopped"] and result.names() == ["Cooking", "Travel", "Music"]
    summaries = [f"The user asks for a {food} recipe with cheese." for food in ("pasta", "lasagna", "pizza")] + \
        [f"The user plans a trip to {city} by train." for city in ("Paris", "Rome", "Lisbon")] * 2
    refusing = Replies(lambda _: "sorry")
    fallback = taxonomy.generate_taxonomy(summaries, np.repeat(np.eye(2, 4, dtype=np.float32), [3, 6], axis=0),
                                          refusing,
                                          replace(settings, topic_rounds=10, taxonomy_attempts=1))
    assert fallback.made_by.startswith("cluster-terms (scripted:scripted wrote no usable taxonomy)")
    # unusable answers before any taxonomy stop after `patience` rounds, one call each, not after 10 rounds
    assert [r["action"] for r in fallback.rounds] == ["failed", "failed", "cluster-terms"] and refusing.calls == 2
    assert fallback.rounds[1]["stopped"] == "no usable taxonomy in 2 rounds"
    assert sorted(c.name for c in fallback.classes) == ["Cheese and Recipe", "Plans and Train"]
    # the tiny profile names the stand-in as the writer: the same classes, no LLM call, made_by says why
    named = taxonomy.generate_taxonomy(summaries, np.repeat(np.eye(2, 4, dtype=np.float32), [3, 6], axis=0),
                                       refusing, replace(settings, taxonomy_writer="cluster-terms"))
    assert refusing.calls == 2 and named.classes == fallback.classes
    assert named.made_by == "cluster-terms (the profile's taxonomy writer; no LLM asked)"
    assert [r["action"] for r in named.rounds] == ["cluster-terms"]
    assert taxonomy.generate_subtaxonomies([("Cooking", summaries[:3], 2)], refusing,
                                           replace(settings, taxonomy_writer="cluster-terms")) == [None]
    assert refusing.calls == 2 and TINY.taxonomy_writer == "cluster-terms" and PAPER.taxonomy_writer == "llm"
    with pytest.raises(ValueError, match="vague"):
        taxonomy.parse_taxonomy('{"classes": [{"name": "Other topics"}]}', 5, False)
    assert taxonomy.parse_labels('{"labels": [{"index": 2, "relevance": 8}, {"index": 0, "relevance": 3}]}', 3, 3) \
        == [(1, 8.0)]


def test_card_settings_say_the_llm_writers_rounds_are_unused_with_the_stand_in() -> None:
    from convohub.aqa.settings import describe

    rows = {row[0]: row for row in describe(TINY)}
    assert rows["taxonomy rounds at most"] == ["taxonomy rounds at most", "3 (not used: the writer is cluster-terms)",
                                               str(PAPER.topic_rounds), "3"]
    assert rows["k-means clusters (topics)"][1] == str(TINY.topic_clusters)  # the stand-in reads the clusters
    llm_rows = {row[0]: row for row in describe(replace(TINY, taxonomy_writer="llm"))}
    assert llm_rows["taxonomy rounds at most"][1] == "3" and all("not used" not in r[1] for r in llm_rows.values())
    assert sum("not used" in r[1] for r in rows.values()) == 4


# ------------------------------------------------------------------------------------------ quality control
def test_qc_rule_removes_only_when_context_neither_helps_nor_clears_the_threshold() -> None:
    s_random, s_std = np.array([0.6, 0.6, 0.6, 0.6]), np.array([0.1, 0.1, 0.1, 0.1])
    bar = 0.6 + Z_090 * 0.1
    s_context = np.array([0.5, 0.9, bar - 0.01, bar + 0.01])
    s_no_context = np.array([0.7, 0.95, 0.8, 0.95])
    keep = quality.qc_keep(s_context, s_no_context, s_random, s_std)
    assert keep.tolist() == [False, True, False, True]
    assert quality.qc_keep([0.2], [0.1], [0.9], [0.1]).tolist() == [True]  # context helped
    assert quality.threshold(np.array([0.95]), np.array([0.2]))[0] == 1.0  # clipped to [0, 1]
    with pytest.raises(ValueError, match="one score per question"):
        quality.qc_keep([0.1], [0.1, 0.2], [0.5], [0.1])


def test_random_scores_are_seeded_monte_carlo_estimates() -> None:
    weights = [[1.0] + [0.0] * 9, [0.1] * 10]
    mean, std = quality.random_scores(weights, 400, 0)
    again = quality.random_scores(weights, 400, 0)
    assert mean.tolist() == again[0].tolist()
    assert mean[1] == pytest.approx(1.0) and std[1] == pytest.approx(0.0)  # all options equally relevant
    exact = np.mean([1 / math.log2(r + 2) for r in range(10)])  # the one relevant option at a uniform rank
    assert abs(mean[0] - exact) < 0.03 and std[0] > 0


def test_stratified_subset_keeps_every_stratum() -> None:
    questions = [{"hash": str(i), "condition_type": ["user_name"] if i < 30 else [], "target_type": "time_week"}
                 for i in range(31)]
    subset = quality.stratified_subset(questions, 0.1, 0)
    assert Counter(quality.stratum(q) for q in subset) == {"user_name -> time_week": 3, " -> time_week": 1}
    assert quality.stratified_subset(questions, 0.1, 0) == subset


# ------------------------------------------------------------------------------------------ validators
def test_keyword_answers_are_validated_against_the_twelve_types() -> None:
    stats: Counter[str] = Counter()
    shown = "how do i bake lasagna in rome with python"
    pairs = replace(TINY, keyword_format="pairs", keywords_grounded=True)
    kept = annotate.parse_keywords("food=Lasagna; cuisine=pasta; programming language=Python", shown, stats, pairs)
    assert kept == [{"keyword_type": "food", "value": "lasagna", "description": ""},
                    {"keyword_type": "programming_language", "value": "python", "description": ""}]
    kept = annotate.parse_keywords("location=Paris; game=Rome; person=T", shown, stats, pairs)
    assert kept == [{"keyword_type": "artwork", "value": "rome", "description": ""}]  # "game" reads as artwork
    assert stats["keyword_dropped_type"] == 1 and stats["keyword_dropped_not_in_text"] == 2
    assert annotate.parse_keywords("none", shown, stats, pairs) == []
    with pytest.raises(ValueError, match="type=value"):
        annotate.parse_keywords("I'm not sure.", shown, stats, pairs)
    paper = settings_for("paper")
    kept = annotate.parse_keywords('[{"type": "location", "value": "Rome", "description": "capital of Italy"}, '
                                   '{"type": "food", "value": "lasagna"}]', "tell me about rome", stats, paper)
    assert [k["value"] for k in kept] == ["rome"] and stats["keyword_dropped_example_copy"] == 1
    with pytest.raises(ValueError, match="keywords"):
        annotate.parse_keywords("Tokens: Tokens:", shown, stats, paper)


def test_summaries_are_cut_at_the_word_limit_and_echoes_rejected() -> None:
    stats: Counter[str] = Counter()
    long = "The user " + "asks about cooking " * 20
    assert len(annotate.parse_sentence("summary", long, 4, 30, stats).split()) == 30 and stats["summary_cut"] == 1
    with pytest.raises(ValueError, match="at least 4"):
        annotate.parse_sentence("summary", "Tokens:", 4, 30, stats)


def test_question_wording_keeps_conditions_and_leaks_no_option() -> None:
    query = {"condition_type": ["user_name", "label_level_1"], "condition_value": ["user-1a2b", "Cooking"],
             "target_type": "label_level_2", "keywords_type": None, "options": ["Pasta", "Baking", "Cooking"]}
    template = phrasing.template_question(query)
    assert template == ('Which subtopics come up most often in conversations by user user-1a2b and about the '
                        'topic "Cooking"?')
    assert phrasing.check("Which Cooking subtopics does user-1a2b ask about most?", query)
    for bad, reason in [("Which subtopics does user-1a2b ask about most?", "lost"),
                        ("Does user-1a2b ask about Pasta or Cooking most?", "names the option"),
                        ("Tell me about user-1a2b and Cooking.", "not a question")]:
        with pytest.raises(ValueError, match=reason):
            phrasing.check(bad, query)
    rows, report = phrasing.phrase([query, query], Replies(lambda _: "No idea."), max_attempts=2)
    assert [r["phrased_by"] for r in rows] == ["template", "template"] and report["calls"] == 4
    rows, _ = phrasing.phrase([query, query], Replies(lambda _: "Which Cooking subtopics does user-1a2b like?"), 1)
    assert [r["style"] for r in rows] == ["direct", "conversational"] and rows[0]["phrased_by"] == "scripted:scripted"


def test_table_8_has_73_combinations_with_the_paper_counts() -> None:
    assert len(COMBINATIONS) == 73 and len({c.name for c in COMBINATIONS}) == 73
    by_n = Counter(c.n_conditions for c in COMBINATIONS)
    questions = Counter()
    for c in COMBINATIONS:
        questions[c.n_conditions] += c.paper_count
    assert by_n == {0: 3, 1: 18, 2: 30, 3: 22}
    assert questions == {0: 3, 1: 828, 2: 2349, 3: 2847} and sum(questions.values()) == 6027
