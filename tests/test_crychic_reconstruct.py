"""CRyCHIc's reconstruction rules driven by scripted components (one test per rule, the judge's 0.4
threshold, its ties and its 20-turn window), post-processing and the filtered history, the baselines scored
on a built WildChatTree folder, and ``convohub crychic evaluate`` end to end."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from _crychic_tiny import one_thread

from convohub.cli import main
from convohub.crychic.components import StoredTurn
from convohub.crychic.evaluate import evaluate_trees, load_trees
from convohub.crychic.reconstruct import RULES, AllRoots, Crychic, NonReconstructing, reconstruct


@pytest.fixture(autouse=True, scope="module")
def _torch_on_one_thread() -> Iterator[None]:
    yield from one_thread()


class ScriptedIFQC:
    def __init__(self, implicit: dict[str, float] | None = None):
        self.implicit, self.asked = implicit or {}, []

    def implicit_probability(self, prompt: str) -> float:
        self.asked.append(prompt)
        return self.implicit.get(prompt, 0.0)


class ScriptedLabeller:
    """Sentences split at '|', each written 'label:text'; an unscripted prompt is one instruction."""

    def label(self, prompt: str) -> list[tuple[str, str]]:
        if ":" not in prompt:
            return [(prompt, "instruction")]
        return [(part.split(":", 1)[1], part.split(":", 1)[0]) for part in prompt.split("|")]


class ScriptedJudge:
    """Scores come from ``score(query, turn_index)``; records every query and the candidates it saw."""

    def __init__(self, score: Callable[[str, int], float] = lambda query, index: 0.0):
        self.score, self.queries, self.seen, self.embedded = score, [], [], []

    def embed_turn(self, prompt: str, response: str) -> Any:
        self.embedded.append((prompt, response))
        return f"emb:{prompt}"

    def scores(self, prompt: str, candidates: Sequence[StoredTurn]) -> list[float]:
        self.queries.append(prompt)
        self.seen.append([turn.index for turn in candidates])
        return [self.score(prompt, turn.index) for turn in candidates]


def _crychic(judge: ScriptedJudge | None = None, ifqc: ScriptedIFQC | None = None, **kwargs: Any) -> Crychic:
    return Crychic(ifqc=ifqc or ScriptedIFQC(), simplifier=ScriptedLabeller(), judge=judge or ScriptedJudge(),
                   **kwargs)


def _fill(builder: Crychic, n: int) -> None:
    for i in range(n):
        builder.commit(f"p{i}", f"r{i}", builder.decide(f"p{i}"))


def test_first_turn_is_a_root_before_any_module_is_asked() -> None:
    ifqc, judge = ScriptedIFQC({"Continue": 1.0}), ScriptedJudge(lambda q, i: 1.0)
    decision = _crychic(judge, ifqc).decide("Continue")
    assert (decision.parent, decision.rule, decision.module) == (-1, "first-turn", "history")
    assert ifqc.asked == [] and judge.queries == []


def test_implicit_follow_up_is_a_child_of_the_most_recent_turn() -> None:
    judge = ScriptedJudge(lambda q, i: 0.9 if i == 0 else 0.0)
    builder = _crychic(judge, ScriptedIFQC({"Continue": 0.8}))
    _fill(builder, 3)
    decision = builder.decide("Continue")
    assert (decision.parent, decision.rule, decision.score) == (2, "ifqc-implicit", 0.8)
    assert "Continue" not in judge.queries


def test_ifqc_at_one_half_is_not_implicit() -> None:
    builder = _crychic(ifqc=ScriptedIFQC({"Continue": 0.5}))
    _fill(builder, 2)
    assert builder.decide("Continue").rule == "judge-root"


def test_information_is_a_child_of_the_most_recent_turn() -> None:
    builder = _crychic()
    _fill(builder, 3)
    decision = builder.decide("polite:Thanks!|information:My code is below.")
    assert (decision.parent, decision.rule, decision.label) == (2, "simplifier-information", "information")


def test_polite_only_prompt_is_a_root() -> None:
    builder = _crychic(ScriptedJudge(lambda q, i: 1.0))
    _fill(builder, 2)
    decision = builder.decide("polite:Thanks a lot!|polite:You are great.")
    assert (decision.parent, decision.rule) == (-1, "simplifier-polite")


def test_instruction_sends_instructions_and_the_first_information_sentence_to_the_judge() -> None:
    judge = ScriptedJudge(lambda q, i: 0.9 if i == 1 else 0.1)
    builder = _crychic(judge)
    _fill(builder, 3)
    decision = builder.decide("polite:Thanks.|information:The text is long.|instruction:Summarise it."
                              "|information:It is about cats.|instruction:Use bullets.")
    assert judge.queries[-1] == "The text is long. Summarise it. Use bullets."
    assert (decision.parent, decision.rule, decision.label, decision.score) == (1, "judge-parent", "instruction", 0.9)
    assert decision.simplified_prompt == judge.queries[-1]


def test_judge_threshold_is_strictly_above_point_four() -> None:
    for score, parent, rule in ((0.4, -1, "judge-root"), (0.41, 0, "judge-parent")):
        builder = _crychic(ScriptedJudge(lambda q, i, s=score: s if i == 0 else 0.0))
        _fill(builder, 2)
        decision = builder.decide("Write more.")
        assert (decision.parent, decision.rule, decision.score) == (parent, rule, score)


def test_judge_ties_go_to_the_most_recent_turn() -> None:
    builder = _crychic(ScriptedJudge(lambda q, i: 0.7 if i in (1, 3) else 0.2))
    _fill(builder, 5)
    assert builder.decide("Fix it.").parent == 3


def test_judge_sees_only_the_twenty_most_recent_turns() -> None:
    judge = ScriptedJudge(lambda q, i: 0.99 if i == 2 else (0.5 if i == 10 else 0.0))
    builder = _crychic(judge)
    _fill(builder, 25)
    decision = builder.decide("Explain the first one again.")
    assert judge.seen[-1] == list(range(5, 25))
    assert decision.parent == 10  # turn 2 scores higher but is outside the window
    narrow = _crychic(ScriptedJudge(lambda q, i: 0.99 if i == 2 else 0.0), window=23)
    _fill(narrow, 25)
    assert narrow.decide("Explain the first one again.").parent == 2


def test_ablations_skip_their_rule() -> None:
    judge = ScriptedJudge(lambda q, i: 0.9 if i == 0 else 0.0)
    no_simplifier = Crychic(ifqc=ScriptedIFQC(), simplifier=None, judge=judge)
    _fill(no_simplifier, 2)
    prompt = "polite:Thanks!"
    assert no_simplifier.decide(prompt).rule == "judge-parent" and judge.queries[-1] == prompt
    no_ifqc = Crychic(ifqc=None, simplifier=ScriptedLabeller(), judge=ScriptedJudge())
    _fill(no_ifqc, 2)
    assert no_ifqc.decide("Continue").rule == "judge-root"
    with pytest.raises(TypeError):
        Crychic(judge=ScriptedJudge())  # leaving a component out is never a silent default


def test_post_processing_stores_embeddings_and_filtered_history_is_the_ancestors() -> None:
    # turn 1 builds on 0, turn 2 starts a tree, turn 3 builds on 1, turn 4 on 2
    parents = {"p1": 0, "p3": 1, "p4": 2}
    judge = ScriptedJudge(lambda q, i: 0.9 if parents.get(q) == i else 0.0)
    builder = _crychic(judge)
    for i in range(5):
        builder.add_turn(f"p{i}", f"r{i}")
    assert builder.parents == [-1, 0, -1, 1, 2]
    assert judge.embedded == [(f"p{i}", f"r{i}") for i in range(5)]
    assert [t.embedding for t in builder.turns] == [f"emb:p{i}" for i in range(5)]
    assert [t.index for t in builder.filtered_history(3)] == [0, 1]
    assert [t.index for t in builder.filtered_history(4)] == [2]
    assert builder.filtered_history(0) == []
    assert [d.rule for d in builder.decisions] == ["first-turn", "judge-parent", "judge-root", "judge-parent",
                                                   "judge-parent"]
    with pytest.raises(ValueError, match="next turn"):
        builder.commit("p9", "r9", builder.decisions[0])


def test_judge_must_score_every_candidate() -> None:
    class Short(ScriptedJudge):
        def scores(self, prompt: str, candidates: Sequence[StoredTurn]) -> list[float]:
            return [0.9] * (len(candidates) - 1)

    builder = _crychic(Short())
    _fill(builder, 1)  # the first turn never asks the judge
    with pytest.raises(ValueError, match="0 scores for 1 candidate"):
        builder.decide("Fix it.")


def test_baselines_chain_or_split_every_turn() -> None:
    exchanges = [(f"p{i}", f"r{i}") for i in range(4)]
    assert reconstruct(exchanges, NonReconstructing).parents == [-1, 0, 1, 2]
    assert reconstruct(exchanges, AllRoots).parents == [-1, -1, -1, -1]
    assert [d.rule for d in reconstruct(exchanges, NonReconstructing).decisions] == [
        "first-turn", "previous-turn", "previous-turn", "previous-turn"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hub")
    assert main(["datasets", "build", "wildchat-tree", "--out", str(out)]) == 0
    return out / "datasets" / "convohub" / "wildchat-tree"


def test_baselines_scored_on_the_built_dataset(dataset: Path) -> None:
    rows = load_trees(dataset)
    gold = [[t["parent"] for t in row["turns"]] for row in rows]
    turns = sum(map(len, gold))
    roots = sum(p == -1 for g in gold for p in g)
    edges = turns - roots
    to_previous = sum(p == t - 1 for g in gold for t, p in enumerate(g) if p != -1)
    roots_result = evaluate_trees(rows, AllRoots)["scores"]["all_turns"]
    assert roots_result["accuracy"] == pytest.approx(roots / turns)
    assert roots_result["recall"] == 0.0
    chain = evaluate_trees(rows, NonReconstructing)
    assert chain["scores"]["all_turns"]["recall"] == pytest.approx(to_previous / edges)
    assert chain["scores"]["all_turns"]["precision"] == pytest.approx(to_previous / (turns - len(gold)))
    assert chain["rules"]["first-turn"]["turns"] == len(gold)
    assert 0 < to_previous < edges  # the dataset has refer-backs, so the chain is not always right


def test_cli_evaluates_a_baseline_and_writes_json(dataset: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "all-roots.json"
    assert main(["crychic", "evaluate", "--dataset", str(dataset), "--baseline", "all-roots",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("baseline: all-roots")
    result = json.loads(out.read_text())
    assert result["baseline"] == "all-roots" and result["system"] == "baseline: all-roots"
    assert f"{result['scores']['all_turns']['accuracy']:.3f}" in printed
    assert result["scores"]["without_first_turns"]["accuracy"] < result["scores"]["all_turns"]["accuracy"]


def test_cli_refuses_unstated_component_choices(dataset: Path) -> None:
    with pytest.raises(SystemExit, match="--ifqc PATH or --ablate ifqc"):
        main(["crychic", "evaluate", "--dataset", str(dataset), "--judge", str(dataset)])
    with pytest.raises(SystemExit, match="--baseline"):
        main(["crychic", "evaluate", "--dataset", str(dataset)])
    with pytest.raises(SystemExit, match="one or the other"):
        main(["crychic", "evaluate", "--dataset", str(dataset), "--baseline", "all-roots", "--judge", "x"])


def test_cli_end_to_end_with_tiny_random_models(dataset: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Plumbing only: the models are tiny and random, so the scores mean nothing; the test checks that every
    turn gets a valid parent from a named rule and that the report names the components."""
    from _crychic_tiny import save_tiny

    folders = {kind: save_tiny(kind, tmp_path / kind) for kind in ("ifqc", "simplifier", "judge-bi")}
    out = tmp_path / "crychic.json"
    assert main(["crychic", "evaluate", "--dataset", str(dataset), "--ifqc", str(folders["ifqc"]),
                 "--simplifier", str(folders["simplifier"]), "--judge", str(folders["judge-bi"]),
                 "--out", str(out)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith("CRyCHIc: ifqc=") and "bi-encoder judge, window 20, threshold 0.4: the paper's" in header
    result = json.loads(out.read_text())
    assert result["judge_architecture"] == "bi"
    total = 0
    for conv in result["per_conversation"]:
        for t, (parent, decision) in enumerate(zip(conv["predicted"], conv["decisions"], strict=True)):
            assert decision["rule"] in RULES and decision["module"] == RULES[decision["rule"]]
            assert parent == decision["parent"] and (parent == -1 or 0 <= parent < t)
            total += 1
    assert total == result["turns"] == sum(r["turns"] for r in result["rules"].values())
    ablated = tmp_path / "ablated.json"
    assert main(["crychic", "evaluate", "--dataset", str(dataset), "--ablate", "ifqc",
                 "--simplifier", str(folders["simplifier"]), "--judge", str(folders["judge-bi"]),
                 "--out", str(ablated)]) == 0
    ablation = json.loads(ablated.read_text())
    assert ablation["ifqc"] is None and "w/o ifqc" in ablation["system"]
    assert "ifqc-implicit" not in ablation["rules"]


def test_cli_evaluates_the_llm_baseline_through_the_named_llm(dataset: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing with a scripted LLM that scores every candidate 5 (tests/test_crychic_llm_baseline.py checks
    the baseline's rules)."""
    from test_crychic_llm_baseline import scripted

    monkeypatch.setattr("convohub.llm.make_backend", lambda spec, **kw: scripted(score=lambda e, n: "5"))
    out = tmp_path / "llm.json"
    assert main(["crychic", "evaluate", "--dataset", str(dataset), "--baseline", "llm", "--llm", "scripted",
                 "--max-conversations", "3", "--out", str(out)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith("baseline: llm (scripted-llm, answers read by generate, window 10")
    result = json.loads(out.read_text())
    assert result["conversations"] == 3 and result["scoring"] == "generate" and result["llm"] == "scripted-llm"
    # every later turn scores 5 against every candidate: the most recent wins, as the Non-Reconstructing chain
    for conv in result["per_conversation"]:
        assert conv["predicted"] == [-1, *range(len(conv["predicted"]) - 1)]
    with pytest.raises(SystemExit, match="needs an LLM"):
        monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
        main(["crychic", "evaluate", "--dataset", str(dataset), "--baseline", "llm"])


class Counting:
    """Wraps a model-backed component and counts its one-prompt calls (batched calls pass through)."""

    def __init__(self, inner: Any, single: str):
        self.inner, self.single, self.calls = inner, single, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name == self.single:
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls += 1
                return attr(*args, **kwargs)
            return counted
        return attr


@pytest.mark.parametrize("ablate", [None, "ifqc", "simplifier"])
def test_batched_reconstruction_decides_as_turn_by_turn(dataset: Path, tmp_path: Path, ablate: str | None) -> None:
    """``reconstruct`` batches every prompt-only step in ``Crychic.prepare``: on the built dataset with tiny
    random models it must give the turn-by-turn replay's parents, rules and scores, without asking any
    component one prompt at a time."""
    from _crychic_tiny import save_tiny

    from convohub.crychic.components import load_components

    folders = {kind: save_tiny(kind, tmp_path / kind, seed=3) for kind in ("ifqc", "simplifier", "judge-bi")}
    ifqc, simplifier, judge = load_components(folders["ifqc"], folders["simplifier"], folders["judge-bi"])
    rows = load_trees(dataset)[:12]
    for row in rows:
        exchanges = [(t["user_prompt"], t["assistant_response"]) for t in row["turns"]]
        plain = Crychic(ifqc=None if ablate == "ifqc" else ifqc,
                        simplifier=None if ablate == "simplifier" else simplifier, judge=judge)
        for prompt, response in exchanges:
            plain.add_turn(prompt, response)
        counted = {"ifqc": Counting(ifqc, "implicit_probability"), "simplifier": Counting(simplifier, "label_scored"),
                   "judge": Counting(judge, "embed_turn")}
        pipeline = Crychic(ifqc=None if ablate == "ifqc" else counted["ifqc"],
                           simplifier=None if ablate == "simplifier" else counted["simplifier"], judge=counted["judge"])
        batched = reconstruct(exchanges, lambda pipeline=pipeline: pipeline)
        assert batched.parents == plain.parents
        for a, b in zip(plain.decisions, batched.decisions, strict=True):
            assert (a.rule, a.simplified_prompt) == (b.rule, b.simplified_prompt)
            assert (a.score is None and b.score is None) or a.score == pytest.approx(b.score, abs=1e-5)
        assert [c.calls for c in counted.values()] == [0, 0, 0]
