"""WildChatTree: build the dataset as users do (CLI), load it with ``load_dataset``, check the trees, the card,
the annotated ``--source`` path with its errors, and the ``wildchat-tree`` leaderboard benchmark."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import datasets
import pytest

from convohub.cli import main
from convohub.conversations import generate_wildchat_sample
from convohub.conversations.sample import PLAN_FIELD
from convohub.crychic import (
    WildChatTreeSourceError,
    build_wildchat_tree,
    interleave,
    plan_parents,
    read_annotated,
)
from convohub.crychic.construct import switches
from convohub.crychic.system import BENCHMARK
from convohub.hub import HubTarget, read_card
from convohub.paths import repo_root
from convohub.scoring import SubmissionError, score_submission

SAMPLE = repo_root() / "dataset_scripts" / "wildchat_tree" / "sample" / "annotated.jsonl"


def _load(folder: Path, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset(str(folder.resolve()), "trees", split="test", cache_dir=str(cache))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hub")
    assert main(["datasets", "build", "wildchat-tree", "--out", str(out)]) == 0
    return out / "datasets" / "convohub" / "wildchat-tree"


@pytest.fixture(scope="module")
def rows(built: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return list(_load(built, tmp_path_factory.mktemp("cache")))


def _root_and_depth(parents: list[int], t: int) -> tuple[int, int]:
    """Walk up from turn t: (its root, the number of turns on the way, itself included)."""
    depth = 1
    while parents[t] != -1:
        assert parents[t] < t
        t = parents[t]
        depth += 1
    return t, depth


# ------------------------------------------------------------------------------------------ the built data
def test_every_parent_is_an_earlier_turn_and_the_counts_follow(rows: list[dict[str, Any]]) -> None:
    assert len(rows) == 100 and {r["source"] for r in rows} == {"mixmc", "single"}
    assert len({r["conversation_id"] for r in rows}) == len(rows)
    for row in rows:
        turns = row["turns"]
        parents = [t["parent"] for t in turns]
        assert [t["turn_index"] for t in turns] == list(range(len(turns)))
        assert parents[0] == -1 and all(p == -1 or 0 <= p < i for i, p in enumerate(parents))
        assert all(t["user_prompt"].strip() for t in turns)
        walked = [_root_and_depth(parents, i) for i in range(len(turns))]
        assert [t["tree_id"] for t in turns] == [root for root, _ in walked]
        assert row["n_turns"] == len(turns) >= 2
        assert row["n_roots"] == parents.count(-1)
        assert row["depth"] == max(depth for _, depth in walked)
    # the construction yields real structure: edges that skip the previous turn, and roots after turn 0
    assert any(p not in (-1, i - 1) for r in rows for i, p in enumerate(t["parent"] for t in r["turns"]))
    assert any(t["parent"] == -1 and t["turn_index"] > 0 for r in rows if r["source"] == "single" for t in r["turns"])


def test_mixed_conversations_interleave_two_or_three_threads(rows: list[dict[str, Any]]) -> None:
    mixed = [r for r in rows if r["source"] == "mixmc"]
    assert len(mixed) >= 30
    for row in mixed:
        turns = row["turns"]
        threads = [t["thread"] for t in turns]
        n = len(set(threads))
        assert set(threads) == set(range(n)) and n in (2, 3)
        assert switches(threads) >= n, f"{row['conversation_id']} only concatenates its threads"
        for thread in range(n):
            own = [t for t in turns if t["thread"] == thread]
            assert len(own) >= 2 and own[0]["parent"] == -1  # each source conversation starts with a root
        for t in turns:  # a parent never crosses from one source conversation into another
            assert t["parent"] == -1 or turns[t["parent"]]["thread"] == t["thread"]
    singles = [r for r in rows if r["source"] == "single"]
    assert singles and all(t["thread"] == 0 for r in singles for t in r["turns"])


def test_pii_is_scrubbed(rows: list[dict[str, Any]]) -> None:
    text = " ".join(t["user_prompt"] + " " + t["assistant_response"] for r in rows for t in r["turns"])
    assert not re.search(r"[\w.]+@example\.com|sk-[A-Za-z0-9]{20,}", text)
    # the drawn conversations did carry PII (the placeholders are there), so the check above is not vacuous
    assert re.search(r"\[(?:EMAIL|KEY)\]", text)


def _stats_rows(readme: Path) -> dict[str, list[str]]:
    _, body = read_card(readme)
    section = body.split("## Statistics", 1)[1].split("\n## ", 1)[0]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
             if line.startswith("| ") and not line.startswith("| source")]
    return {c[0]: c[1:] for c in cells}


def test_card_statistics_match_the_rows(built: Path, rows: list[dict[str, Any]]) -> None:
    stats = _stats_rows(built / "README.md")
    assert set(stats) == {"mixmc", "single", "all"}
    for label, values in stats.items():
        subset = [r for r in rows if label in ("all", r["source"])]
        turns = sum(len(r["turns"]) for r in subset)
        roots = sum(t["parent"] == -1 for r in subset for t in r["turns"])
        depths = [r["depth"] for r in subset]
        assert values[:4] == [str(len(subset)), str(turns), str(roots), str(turns - roots)]
        assert float(values[4]) == pytest.approx(turns / len(subset), abs=0.005)
        assert values[6] == str(max(depths)) and float(values[7]) == pytest.approx(sum(depths) / len(subset), abs=0.005)
    meta, body = read_card(built / "README.md")
    assert meta["license"] == "odc-by" and meta["configs"][0]["config_name"] == "trees"
    assert "never released" in body and "not annotated by people" in body
    assert "@inproceedings{zhao2024wildchat" in body and "CRyCHIc" in body and "scrub_pii" in body


def test_rebuild_is_byte_identical_and_the_seed_matters(built: Path, tmp_path: Path) -> None:
    again = build_wildchat_tree(HubTarget(root=tmp_path / "a"), repo_root(), seed=0)
    files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((built / f).read_bytes() == (again / f).read_bytes() for f in files)
    other = build_wildchat_tree(HubTarget(root=tmp_path / "b"), repo_root(), seed=1)
    assert (other / "README.md").read_bytes() != (built / "README.md").read_bytes()


# ------------------------------------------------------------------------------------------ construction
def test_plan_parents_follow_the_papers_definition() -> None:
    plan = [{"kind": "ask"}, {"kind": "followup"}, {"kind": "thanks"}, {"kind": "followup"},
            {"kind": "switch"}, {"kind": "praise"}, {"kind": "refer_back", "refers_to": 2},
            {"kind": "continue"}, {"kind": "refer_back", "refers_to": 4}]
    # thanks/praise are roots; a follow-up after a thank-you hangs on the turn before it; a refer-back to a
    # thank-you turn lands on the turn that thank-you was about
    assert plan_parents(plan) == [-1, 0, -1, 1, -1, -1, 1, 6, 4]
    with pytest.raises(ValueError, match="refers_to"):
        plan_parents([{"kind": "ask"}, {"kind": "refer_back", "refers_to": 1}])


def test_interleave_keeps_each_threads_order_and_really_mixes() -> None:
    rng = random.Random(3)
    for lengths in ([2, 2], [2, 5], [3, 2, 4], [2, 2, 2]):
        for _ in range(20):
            labels = interleave(lengths, rng)
            assert sorted(labels) == sorted(t for t, n in enumerate(lengths) for _ in range(n))
            assert switches(labels) >= len(lengths)
    assert switches(interleave([2, 2], rng, attempts=0)) == 3  # no draw left: the threads take turns
    for lengths in ([4], [1, 3]):
        with pytest.raises(ValueError, match="two or more threads of at least two turns"):
            interleave(lengths, rng)


def test_sample_plan_is_opt_in_and_leaves_the_rows_unchanged() -> None:
    plain = generate_wildchat_sample(n_users=4, seed=5)
    planned = generate_wildchat_sample(n_users=4, seed=5, with_plan=True)
    assert all(PLAN_FIELD not in row for row in plain)
    for a, b in zip(plain, planned, strict=True):
        plan = b.pop(PLAN_FIELD)
        assert a == b and len(plan) == a["turn"]
        assert all(step["refers_to"] is None or step["refers_to"] < i - 1 for i, step in enumerate(plan))


# ------------------------------------------------------------------------------------------ annotated source
def test_source_build_keeps_the_annotated_parents(tmp_path: Path) -> None:
    hand = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    assert main(["datasets", "build", "wildchat-tree", "--source", str(SAMPLE.parent), "--out", str(tmp_path)]) == 0
    folder = tmp_path / "datasets" / "convohub" / "wildchat-tree"
    loaded = {r["conversation_id"]: r for r in _load(folder, tmp_path / "cache")}
    assert list(loaded) == [c["conversation_id"] for c in hand]
    for conv in hand:
        row = loaded[conv["conversation_id"]]
        assert row["source"] == "annotated"
        assert [t["parent"] for t in row["turns"]] == [t["parent"] for t in conv["turns"]]
    garden = loaded["hand-01-garden-and-email"]["turns"]
    assert [t["tree_id"] for t in garden] == [0, 1, 1, 0, 4]  # the file's labels, renamed by root index
    recipe = loaded["hand-06-recipe"]["turns"][0]["user_prompt"]
    assert "[EMAIL]" in recipe and "@example.com" not in recipe
    assert _stats_rows(folder / "README.md")["annotated"][:3] == [str(len(hand)), "23", "11"]


def _turn(i: int, parent: int, **extra: Any) -> dict[str, Any]:
    return {"turn_index": i, "user_prompt": f"prompt {i}", "assistant_response": f"reply {i}", "parent": parent,
            **extra}


GOOD = {"conversation_id": "ok", "turns": [_turn(0, -1), _turn(1, 0)]}


@pytest.mark.parametrize(("record", "message"), [
    ({"conversation_id": "c1", "turns": [_turn(0, -1), _turn(1, 1)]},
     r"conversation 'c1', turn 1: field 'parent' is 1; it must be -1 \(a root\) or the index of an earlier turn"),
    ({"conversation_id": "c2", "turns": [_turn(0, 0)]},
     r"conversation 'c2', turn 0: field 'parent' is 0; it must be -1 \(a root\) or nothing else"),
    ({"conversation_id": "c3", "turns": [_turn(0, -1), _turn(1, -2)]}, r"conversation 'c3', turn 1: field 'parent'"),
    ({"conversation_id": "c4", "turns": [_turn(0, -1), _turn(2, 0)]},
     r"conversation 'c4', turn 1: field 'turn_index' is 2, expected 1"),
    ({"conversation_id": "c5", "turns": [_turn(0, -1), {**_turn(1, 0), "user_prompt": "  "}]},
     r"conversation 'c5', turn 1: field 'user_prompt' must be a non-empty string"),
    ({"conversation_id": "c6", "turns": [{k: v for k, v in _turn(0, -1).items() if k != "parent"}]},
     r"conversation 'c6', turn 0: field 'parent' is missing"),
    ({"conversation_id": "c7", "turns": [_turn(0, -1), _turn(1, True)]}, r"conversation 'c7', turn 1: field 'parent'"),
    ({"conversation_id": "ok", "turns": [_turn(0, -1)]},
     r"conversation 'ok': field 'conversation_id' repeats the conversation at .*bad\.jsonl:1"),
    ({"conversation_id": "", "turns": [_turn(0, -1)]}, r"bad\.jsonl:2: field 'conversation_id' must be a non-empty"),
    ({"conversation_id": "c8", "turns": []}, r"conversation 'c8': field 'turns' must be a non-empty list"),
    ({"conversation_id": "c9", "turns": [_turn(0, -1, tree_id="a"), _turn(1, 0, tree_id="b")]},
     r"conversation 'c9', turn 1: field 'tree_id' is 'b' but its parent, turn 0, is in tree 'a'"),
    ({"conversation_id": "c10", "turns": [_turn(0, -1, tree_id=0), _turn(1, -1, tree_id=0)]},
     r"conversation 'c10', turn 1: field 'tree_id' is 0, the tree of root turn 0"),
])
def test_malformed_records_are_named(tmp_path: Path, record: dict[str, Any], message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(WildChatTreeSourceError, match=message) as error:
        read_annotated(bad)
    assert f"{bad}:2" in str(error.value)  # the file and line of the record at fault


def test_json_list_sources_and_unreadable_ones(tmp_path: Path) -> None:
    listed = tmp_path / "trees.json"
    listed.write_text(json.dumps([GOOD]), encoding="utf-8")
    assert read_annotated(listed)[0]["conversation_id"] == "ok"
    (tmp_path / "obj.json").write_text(json.dumps(GOOD), encoding="utf-8")
    with pytest.raises(WildChatTreeSourceError, match=r"obj\.json: a \.json file must hold a list"):
        read_annotated(tmp_path / "obj.json")
    (tmp_path / "broken.jsonl").write_text('{"conversation_id": "x",\n', encoding="utf-8")
    with pytest.raises(WildChatTreeSourceError, match=r"broken\.jsonl:1: not valid JSON"):
        read_annotated(tmp_path / "broken.jsonl")
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(WildChatTreeSourceError, match=r"expected a \.jsonl file"):
        read_annotated(tmp_path / "notes.txt")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WildChatTreeSourceError, match="holds no .jsonl or .json file"):
        read_annotated(empty)


# ------------------------------------------------------------------------------------------ benchmark
def _submit(tmp_path: Path, predictions: dict[str, list[int]]) -> Path:
    path = tmp_path / "sub.jsonl"
    path.write_text("".join(json.dumps({"id": cid, "prediction": p}) + "\n" for cid, p in predictions.items()))
    return path


def test_benchmark_scores_perfect_all_roots_and_previous_turn(built: Path, rows: list[dict[str, Any]],
                                                              tmp_path: Path) -> None:
    gold = {r["conversation_id"]: [t["parent"] for t in r["turns"]] for r in rows}
    perfect = score_submission(BENCHMARK, built, _submit(tmp_path, gold))
    assert all(perfect[k] == 1.0 for k in ("accuracy", "precision", "recall", "f1"))

    turns = sum(len(p) for p in gold.values())
    roots = sum(p.count(-1) for p in gold.values())
    flat = score_submission(BENCHMARK, built, _submit(tmp_path, {c: [-1] * len(p) for c, p in gold.items()}))
    assert flat["accuracy"] == pytest.approx(roots / turns) and 0.3 < flat["accuracy"] < 0.7
    assert flat["precision"] == flat["recall"] == flat["f1"] == 0.0

    # the paper's Non-Reconstructing baseline: every turn a child of the previous one
    chain = score_submission(BENCHMARK, built, _submit(tmp_path, {c: list(range(-1, len(p) - 1))
                                                                  for c, p in gold.items()}))
    kept = sum(1 for p in gold.values() for i, g in enumerate(p) if g >= 0 and g == i - 1)
    edges = turns - roots
    assert chain["recall"] == pytest.approx(kept / edges) and chain["recall"] < 1.0
    assert chain["precision"] == pytest.approx(kept / (turns - len(gold)))


def test_benchmark_rejects_incomplete_or_impossible_submissions(built: Path, rows: list[dict[str, Any]],
                                                                tmp_path: Path) -> None:
    gold = {r["conversation_id"]: [t["parent"] for t in r["turns"]] for r in rows}
    missing = next(iter(gold))
    with pytest.raises(SubmissionError, match=rf"1 of 100 gold id\(s\) have no prediction, e\.g\. \['{missing}'\]"):
        score_submission(BENCHMARK, built, _submit(tmp_path, {c: p for c, p in gold.items() if c != missing}))
    short = dict(gold, **{missing: gold[missing][:-1]})
    with pytest.raises(SubmissionError, match=rf"prediction for id '{missing}' has {len(gold[missing]) - 1} parents"):
        score_submission(BENCHMARK, built, _submit(tmp_path, short))
    ahead = dict(gold, **{missing: [-1] + [5] * (len(gold[missing]) - 1)})
    with pytest.raises(SubmissionError, match=rf"sub\.jsonl:1: prediction for id '{missing}': turn 1: parent 5"):
        score_submission(BENCHMARK, built, _submit(tmp_path, ahead))


def test_cli_evaluate_prints_the_scores(built: Path, rows: list[dict[str, Any]], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    gold = {r["conversation_id"]: [t["parent"] for t in r["turns"]] for r in rows}
    assert main(["evaluate", "wildchat-tree", str(_submit(tmp_path, gold)), "--dataset", str(built)]) == 0
    printed = capsys.readouterr().out
    assert "wildchat-tree (trees/test)" in printed and re.search(r"recall\s+1\.0000", printed)
