"""The ``wildchat-aqa`` release as users meet it: built by the construction pipeline (a scripted LLM stands in
for SmolLM2; MiniLM, datatrove and DuckDB are real), loaded with plain ``load_dataset`` per config, its
questions checked against aggregates recomputed by hand; the pipeline resumed after a kill in the middle of
its LLM stage; and the ``--source`` path over the authors' ``save_to_disk`` layout, malformed rows included."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import datasets
import pytest
from _aqa_replies import aqa_reply
from _replies import Replies

from convohub.aqa.dataset import CONVERSATION_FIELDS, DATASET_NAME
from convohub.aqa.proposal import support_hashes
from convohub.aqa.quality import stratum
from convohub.aqa.source import AQASourceError, read_source
from convohub.cli import main
from convohub.hub import HubTarget, read_card
from convohub.llm import ChatBackend, ChatRequest, ChatResponse

CONFIGS = {"questions": "test", "questions_subset": "test", "conversations": "train", "summaries": "train"}


def _context(root: Path, llm: Any) -> Any:
    from convohub.release import ReleaseContext

    return ReleaseContext(profile="tiny", target=HubTarget(root=root), work_dir=root / ".convohub-work", llm=llm)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from convohub.aqa.system import build_wildchat_aqa

    root = tmp_path_factory.mktemp("hub")
    backend = Replies(aqa_reply, model="scripted-aqa", whole_request=True)
    folder = build_wildchat_aqa(_context(root, backend))
    cache = tmp_path_factory.mktemp("cache")
    loaded = {config: datasets.load_dataset(str(folder.resolve()), config, split=split, cache_dir=str(cache))
              for config, split in CONFIGS.items()}
    return {"folder": folder, "work": root / ".convohub-work" / "aqa" / "build-tiny", "data": loaded,
            "calls": backend.calls}


def test_every_config_loads_with_the_contract_fields(built: dict[str, Any]) -> None:
    data = built["data"]
    questions, conversations = data["questions"], data["conversations"]
    assert len(questions) >= 40 and len(conversations) >= 60
    assert conversations.column_names == list(CONVERSATION_FIELDS)
    assert data["summaries"].column_names == [f for f in CONVERSATION_FIELDS if f != "conversation"]
    for name in ("hash", "question", "style", "condition_type", "condition_value", "target_type", "keywords_type",
                 "options", "option_weights", "support", "phrased_by"):
        assert name in questions.column_names
    for q in questions:
        assert len(q["options"]) == len(set(q["options"])) == 10 and len(q["option_weights"]) == 10
        assert len(q["condition_type"]) == len(q["condition_value"]) <= 3 and q["question"].endswith("?")
        assert max(q["option_weights"]) > 0
        assert q["phrased_by"] in ("scripted:scripted-aqa", "template") and "context=support-count" in q["qc_scorers"]
    row = conversations[0]
    assert row["time_week"] <= row["time_day"] == row["timestamp"][:10] and row["time_month"] == row["timestamp"][:7]
    assert row["label_level_1"] and row["label_level_2"] and "scripted:scripted-aqa" in row["labeller"]
    assert "minilm" in row["labeller"]
    assert len({r["hash"] for r in conversations}) == len(conversations)


def test_option_weights_and_supports_are_the_aggregates_recomputed_by_hand(built: dict[str, Any]) -> None:
    conversations = list(built["data"]["conversations"])
    by_hash = {c["hash"]: c for c in conversations}
    questions = list(built["data"]["questions"])
    checked = Counter()
    for q in questions:
        support = support_hashes(conversations, q["condition_type"], q["condition_value"], q["keywords_type"])
        assert q["support"] == support, q["question"]
        for option, weight in zip(q["options"], q["option_weights"], strict=True):
            count = 0
            for h in support:
                row = by_hash[h]
                if q["target_type"] == "keywords_aggregated":
                    values = {k["value"] for k in row["keywords_aggregated"] if k["keyword_type"] == q["keywords_type"]}
                else:
                    value = row[q["target_type"]]
                    values = set(value) if isinstance(value, list) else {value}
                count += option in values
            assert weight == pytest.approx(count / len(support)), (q["question"], option)
        checked[len(q["condition_type"])] += 1
    assert set(checked) >= {1, 2, 3}
    user_condition = [q for q in questions if "user_name" in q["condition_type"]]
    assert all(len(q["support"]) >= 3 for q in user_condition)
    assert all(len(q["support"]) >= 6 for q in questions if "user_name" not in q["condition_type"])


def test_subset_is_a_stratified_tenth_and_the_card_reports_the_build(built: dict[str, Any]) -> None:
    questions, subset = built["data"]["questions"], built["data"]["questions_subset"]
    assert set(subset["hash"]) <= set(questions["hash"])
    assert {stratum(q) for q in subset} == {stratum(q) for q in questions}
    meta, body = read_card(built["folder"] / "README.md")
    assert meta["license"] == "odc-by" and [c["config_name"] for c in meta["configs"]] == list(CONFIGS)
    assert "@inproceedings{zhao2024wildchat" in body and "Aggregative Question Answering" in body
    for text in ("| 3 |", "user,topic -> subtopic", "min supporting conversations", "| tiny |",
                 "MinHash/LSH de-duplication", "s_coverage", "Quality control scorers", "Build time",
                 "the byte-level BPE of HuggingFaceTB/SmolLM2-135M-Instruct"):
        assert text in body, text
    assert f"| all | {len(questions)} | 6027 |" in body


class Killer(ChatBackend):
    """Answers like the scripted model; dies (a kill) before answering past ``limit`` requests, or at the first
    request ``stop_at`` matches."""

    kind = "scripted"

    def __init__(self, limit: int | None = None, stop_at: str | None = None) -> None:
        self.limit, self.stop_at, self.answered = limit, stop_at, []

    @property
    def model_id(self) -> str:
        return "scripted-aqa"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        if self.limit is not None and len(self.answered) + len(requests) > self.limit:
            raise KeyboardInterrupt("killed")
        if self.stop_at and any(self.stop_at in r.messages[-1]["content"] for r in requests):
            raise KeyboardInterrupt("stopped after the annotation stage")
        self.answered += [json.dumps([r.messages, r.sampling_params()]) for r in requests]
        return [ChatResponse(aqa_reply(r), "stop") for r in requests]


def test_a_run_killed_in_the_llm_stage_repeats_no_finished_call(built: dict[str, Any], tmp_path: Path) -> None:
    from convohub.aqa.annotate import annotate
    from convohub.aqa.corpus import sample_rows
    from convohub.aqa.pipeline import Backends, run_pipeline
    from convohub.aqa.settings import TINY

    settings = replace(TINY, taxonomy_writer="llm")  # the LLM taxonomy prompt is where the second run is stopped
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(built["work"] / "corpus.json", work / "corpus.json")  # the datatrove stage is tested elsewhere
    first = Killer(limit=100)
    with pytest.raises(KeyboardInterrupt, match="killed"):
        run_pipeline(sample_rows(settings), settings, work, Backends(first), log=lambda m: None)
    assert len(first.answered) == 96  # six chunks of 16 answered and cached, the seventh killed in flight
    second = Killer(stop_at="Propose at most")  # runs the rest of the annotation stage, stops at the taxonomy
    with pytest.raises(KeyboardInterrupt, match="stopped"):
        run_pipeline(sample_rows(settings), settings, work, Backends(second), log=lambda m: None)
    assert second.answered and not set(first.answered) & set(second.answered)
    records = json.loads((work / "corpus.json").read_text())["value"]["records"]
    uninterrupted = Killer()
    annotate(records, uninterrupted, settings, progress=False)
    assert sorted(first.answered + second.answered) == sorted(uninterrupted.answered)


# ------------------------------------------------------------------------------------------ --source
TAXONOMY = {"classes": [{"class_name": "Food, Cooking and Nutrition", "class_description": "recipes", "index": 0},
                        {"class_name": "Travel and Tourism", "class_description": "trips", "index": 1}]}
SUBTAXONOMY = {0: {"classes": [{"class_name": "Recipes", "class_description": "how to cook", "index": 0},
                               {"class_name": "Diets", "class_description": "nutrition", "index": 1}]},
               1: {"classes": [{"class_name": "Itineraries", "class_description": "plans", "index": 0}]}}


def _conversation(i: int, user: str, topics: list[str], subtopics: list[str], country: str) -> dict[str, Any]:
    from datetime import datetime

    return {"conversation": [{"role": "user", "content": f"Question {i}, mail me at ana{i}@example.com",
                              "country": country, "state": "X", "language": "English"},
                             {"role": "assistant", "content": f"Answer {i}", "country": None, "state": None,
                              "language": "English"}],
            "user_name": user, "timestamp": datetime(2023, 5, 3 + i, 12, 0, 0), "conversation_id": f"c{i}",
            "hash": f"h{i}", "label_level_1": topics, "label_level_2": subtopics, "summary": f"The user asks {i}.",
            "keywords": [{"keyword_type": "food", "value": "Ramen", "description": "noodle soup"}],
            "keywords_aggregated": [{"keyword_type": "Film", "value": "Tampopo"}], "token_count": 20 + i}


def _question(hash_: str, kinds: list[str], values: list[str], target: str, options: list[str]) -> dict[str, Any]:
    return {"hash": hash_, "question": f"Question {hash_}?", "condition_type": kinds, "condition_value": values,
            "target_type": target, "target_candidates": options, "keywords_type": None, "options": options,
            "option_weights": [1.0] + [0.0] * (len(options) - 1), "question_embedding": [0.1, 0.2]}


def _write_source(root: Path, conversations: list[dict[str, Any]] | None = None,
                  questions: list[dict[str, Any]] | None = None, taxonomy: bool = True) -> Path:
    conversations = conversations or [_conversation(0, "ana", ["0"], ["0.0"], "France"),
                                      _conversation(1, "ana", ["0", "1"], ["0.1", "1.0"], "France"),
                                      _conversation(2, "bo", ["1"], ["1.0"], "Spain")]
    questions = questions or [
        _question("q1", ["user_name"], ["ana"], "label_level_1", ["0", "1"] + [f"x{i}" for i in range(8)]),
        _question("q2", ["label_level_1", "time_week"], ["1", "2023-05-01 00:00:00"], "label_level_2",
                  ["1.0", "0.0"] + [f"y{i}" for i in range(8)]),
    ]
    datasets.Dataset.from_list(conversations).save_to_disk(str(root / "wildchat_aqa_conversations"))
    datasets.Dataset.from_list(questions).save_to_disk(
        str(root / "wildchat_aqa_with_embedding_and_gpt_generated_query"))
    datasets.Dataset.from_list(questions[:1]).save_to_disk(
        str(root / "wildchat_aqa_sampled_subset_with_embedding_and_gpt_generated_query"))
    if taxonomy:
        folder = root / "wildchat_aqa_taxonomy"
        folder.mkdir()
        (folder / "step_3_3_manual_level_1_taxonomy_result.json").write_text(json.dumps(TAXONOMY))
        for topic, doc in SUBTAXONOMY.items():
            (folder / f"step_4_4_manual_level_2_taxonomy_result_{topic}.json").write_text(json.dumps(doc))
    return root


def test_source_build_maps_ids_to_names_and_recomputes_supports(tmp_path: Path) -> None:
    source = _write_source(tmp_path / "release")
    out = tmp_path / "hub"
    assert main(["datasets", "build", DATASET_NAME, "--source", str(source), "--out", str(out)]) == 0
    folder = out / "datasets" / "convohub" / DATASET_NAME
    cache = str(tmp_path / "cache")
    questions = datasets.load_dataset(str(folder), "questions", split="test", cache_dir=cache)
    conversations = datasets.load_dataset(str(folder), "conversations", split="train", cache_dir=cache)
    subset = datasets.load_dataset(str(folder), "questions_subset", split="test", cache_dir=cache)
    summaries = datasets.load_dataset(str(folder), "summaries", split="train", cache_dir=cache)
    assert conversations[1]["label_level_1"] == ["Food, Cooking and Nutrition", "Travel and Tourism"]
    assert conversations[1]["label_level_2"] == ["Diets", "Itineraries"] and conversations[1]["country"] == "France"
    assert conversations[0]["timestamp"] == "2023-05-03T12:00:00" and conversations[0]["time_week"] == "2023-05-01"
    assert "[EMAIL]" in conversations[0]["conversation"][0]["content"] and len(summaries) == 3 and len(subset) == 1
    q1, q2 = questions
    assert q1["options"][:2] == ["Food, Cooking and Nutrition", "Travel and Tourism"] and q1["support"] == ["h0", "h1"]
    assert q2["condition_value"] == ["Travel and Tourism", "2023-05-01"] and q2["support"] == ["h1", "h2"]
    assert q2["options"][:2] == ["Itineraries", "Recipes"] and q1["phrased_by"] == "authors (GPT-4.1)"
    _, body = read_card(folder / "README.md")
    assert "authors' released datasets" in body and "odc-by" in body


@pytest.mark.parametrize(("break_it", "message"), [
    (lambda c, q: c[1].pop("summary"), "wildchat_aqa_conversations row 1: field 'summary' is missing"),
    (lambda c, q: c[2].update(user_name=""), "wildchat_aqa_conversations row 2: field 'user_name' must be a non-empty"),
    (lambda c, q: c[0].update(label_level_1=["7"]), "row 0: field 'label_level_1': topic id '7' is not in"),
    (lambda c, q: q[1].update(option_weights=[1.0]),
     "wildchat_aqa_with_embedding_and_gpt_generated_query row 1: field 'option_weights' must be 10"),
    (lambda c, q: q[0].update(condition_type=["mood"]), "row 0: field 'condition_type' has 'mood'"),
])
def test_malformed_source_rows_name_dataset_row_and_field(tmp_path: Path, break_it: Any, message: str) -> None:
    conversations = [_conversation(0, "ana", ["0"], ["0.0"], "France"), _conversation(1, "ana", ["0"], ["0.1"], "FR"),
                     _conversation(2, "bo", ["1"], ["1.0"], "Spain")]
    questions = [_question("q1", ["user_name"], ["ana"], "label_level_1", ["0", "1"] + [f"x{i}" for i in range(8)]),
                 _question("q2", ["country"], ["Spain"], "user_name", [f"u{i}" for i in range(10)])]
    break_it(conversations, questions)
    source = _write_source(tmp_path / "release", conversations, questions)
    with pytest.raises(AQASourceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_source(source)


def test_topic_ids_without_the_taxonomy_and_empty_sources_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AQASourceError, match="holds topic ids .* wildchat_aqa_taxonomy"):
        read_source(_write_source(tmp_path / "a", taxonomy=False))
    (tmp_path / "empty").mkdir()
    with pytest.raises(AQASourceError, match="none of the expected subfolders"):
        read_source(tmp_path / "empty")


def test_the_dataset_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.registry import load_systems

    assert [(s.kind, s.name) for s in load_systems()["aqa"].steps] == [
        ("build", DATASET_NAME), ("train", "aqa-causal-lm"), ("evaluate", "aqa-causal-lm-eval"),
        ("card", "aqa-causal-lm-card"), ("evaluate", "wildchat-aqa-methods"), ("space", "wildchat-aqa-space")]
    assert main(["datasets", "list"]) == 0
    assert DATASET_NAME in capsys.readouterr().out
