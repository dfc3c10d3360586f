"""The trained chain as the default of ``reqap ask|evaluate``: models found in a release folder, every
component named in the header and results, ORACLE said where used, RAG's top N by cross-encoder score,
McNemar's test between two runs.

The release folder here holds random tiny models in the release's repository layout (plumbing: the real
trained models come from ``convohub release``; their quality is measured by the release, not here)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from convohub.cli import main
from convohub.hub import HubTarget
from convohub.perqa import PerQAConfig, build_perqa, generate_perqa
from convohub.reqap import EventStore
from convohub.reqap.components.baselines import SQL_END, RAGBaseline
from convohub.reqap.components.retrieve import CrossEncoderRetriever
from convohub.reqap.release.evaluation import compare_runs, mcnemar
from convohub.reqap.release.models import MissingRelease, find_release_models
from convohub.tiny import tiny_model

ROOT = Path(__file__).resolve().parents[1]
TV_HOURS = "How many hours have I spent watching TV series altogether?"
TINY_REPOS = {"reqap-qud-tiny": "causal", "reqap-retrieve-events-tiny": "cross-encoder-2",
              "reqap-retrieve-patterns-tiny": "cross-encoder-3", "reqap-extract-tiny": "causal"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = generate_perqa(PerQAConfig(n_personas=3, start_date=date(2024, 3, 1), seed=0, max_instances=1))
    return build_perqa(HubTarget(tmp_path_factory.mktemp("hub")), ROOT, data=data)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hub root laid out like `convohub release --out` writes it, with tiny random models."""
    hub = tmp_path_factory.mktemp("release")
    for repo, kind in TINY_REPOS.items():
        shutil.copytree(tiny_model(kind), hub / "models" / "convohub" / repo)
    # short steps, as a trained QUD folder's saved limits would say (a random model never stops by itself)
    (hub / "models" / "convohub" / "reqap-qud-tiny" / "qud_config.json").write_text(
        json.dumps({"max_new_tokens": 8, "max_input_tokens": 200}))
    return hub


def test_release_models_are_found_by_profile_and_missing_ones_named(release: Path, tmp_path: Path) -> None:
    found = find_release_models(release)
    assert found.profile == "tiny" and found.qud.name == "reqap-qud-tiny"
    assert found.specs()["retriever"] == f"ce:{found.events},{found.patterns}"
    with pytest.raises(MissingRelease, match="reqap-extract-bart-base"):  # the paper profile is not built
        find_release_models(release, profile="paper")
    with pytest.raises(MissingRelease, match=r"convohub release --only perqa reqap --out .*--hub"):
        find_release_models(tmp_path / "nothing")
    with pytest.raises(MissingRelease, match="Hub repositories my-org/"):  # offline: the Hub is not reached
        find_release_models(tmp_path / "nothing", namespace="my-org")


def test_evaluate_runs_the_trained_chain_by_default(dataset: Path, release: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "chain"
    assert main(["reqap", "evaluate", "--dataset", str(dataset), "--split", "test", "--limit", "2", "--hub",
                 str(release), "--out", str(out), "--in-process", "--no-attribution", "--time-budget", "20"]) == 0
    printed = capsys.readouterr().out
    head = printed.split("\n\n")[0].splitlines()
    assert head[0] == "reqap on test" and "ORACLE" not in printed
    assert head[1].startswith("QUD: trained QUD model ") and "reqap-qud-tiny" in head[1]
    assert head[2].startswith("RETRIEVE: BM25 first stage -> patterns cross-encoder -> events cross-encoder")
    assert head[3].startswith("EXTRACT: trained EXTRACT model ") and "reqap-extract-tiny" in head[3]
    assert head[4] == f"trained models from: local hub root {release} (profile tiny)"
    results = json.loads((out / "results.json").read_text())
    components = results["components"]
    assert results["oracle"] is False and components["oracle"] == []
    assert components["decomposer"].startswith("sft:") and components["extractor"].startswith("model:")
    assert components["retriever"].count(",") == 1 and results["n"] == 2

    # ask takes the same defaults and says what it ran
    assert main(["reqap", "ask", "--dataset", str(dataset), "--persona", "test_persona_0", "--hub", str(release),
                 "--time-budget", "20", "--json", TV_HOURS]) in (0, 1)
    answer = json.loads(capsys.readouterr().out)
    assert answer["components"]["labels"] == components["labels"]


class _KeywordModel:
    """A stand-in event cross-encoder: relevance = how many query words the event text holds."""

    def __init__(self) -> None:
        self.calls = 0

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        return ["relevant" if p > 0.5 else "irrelevant" for p in self.probabilities(pairs, "relevant")]

    def probabilities(self, pairs: Sequence[tuple[str, str]], label: str) -> list[float]:
        self.calls += 1
        return [sum(w in text.lower() for w in query.lower().split()) / 10 for query, text in pairs]


def test_rag_keeps_the_top_n_by_cross_encoder_score() -> None:
    records = [{"id": f"e{i}", "start_date": f"2024-01-{i + 1:02d}", "event_type": "mail",
                "event_data": {"subject": "tennis" + (" racket shop" if i >= 7 else ""), "text": "hello"}}
               for i in range(10)]
    store = EventStore.from_records(records)
    retriever = CrossEncoderRetriever(_KeywordModel(), None)
    assert retriever.rank("tennis racket shop", store)[:3] == ["e7", "e8", "e9"]  # by score, not by time

    class Echo:
        name = "echo"

        def chat(self, requests):  # noqa: ANN001 - the ChatBackend protocol, reduced to what RAG calls
            from convohub.llm import ChatResponse

            return [ChatResponse(text='{"answer": 1}') for _ in requests]

    rag = RAGBaseline(Echo(), retriever, top_n=3)
    result = rag.answer("tennis racket shop", store)
    assert result.event_ids == ["e7", "e8", "e9"]

    # the cross-encoder re-scores only the first stage's rank_depth best
    scored: list[int] = []

    class Counting(_KeywordModel):
        def probabilities(self, pairs: Sequence[tuple[str, str]], label: str) -> list[float]:
            scored.append(len(pairs))
            return super().probabilities(pairs, label)

    counting = CrossEncoderRetriever(Counting(), None)
    assert RAGBaseline(Echo(), counting, top_n=1).rank_depth == 500
    assert RAGBaseline(Echo(), counting, top_n=2, rank_depth=4).answer("tennis racket shop", store).event_ids
    assert scored == [4]
    with pytest.raises(ValueError, match="rank_depth"):
        RAGBaseline(Echo(), counting, top_n=5, rank_depth=4)


def test_mcnemar_matches_the_exact_binomial_test() -> None:
    result = mcnemar([True] * 10 + [False] * 5 + [True] * 3, [False] * 10 + [True] * 5 + [True] * 3)
    assert (result["only_a"], result["only_b"], result["both"], result["neither"]) == (10, 5, 3, 0)
    from scipy.stats import binomtest

    assert result["p_value"] == pytest.approx(binomtest(10, 15, 0.5).pvalue)
    assert result["chi2"] == pytest.approx((abs(10 - 5) - 1) ** 2 / 15)
    assert mcnemar([True, False], [True, False])["p_value"] == 1.0
    with pytest.raises(ValueError, match="same questions"):
        mcnemar([True], [True, False])


def test_evaluate_compare_prints_mcnemar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = {}
    for name, hits in (("reqap", [1, 1, 1, 1, 1, 1, 0, 1]), ("rag", [0, 0, 0, 0, 0, 1, 0, 1])):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps({"system": name, "components": {"oracle": []}}))
        (folder / "predictions.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "hit": bool(h)}) + "\n"
                                                          for i, h in enumerate(hits)))
        runs[name] = folder
    assert main(["reqap", "evaluate", "--compare", str(runs["reqap"] / "results.json"), str(runs["rag"])]) == 0
    printed = capsys.readouterr().out
    assert "McNemar's test on 8 shared questions" in printed and "| A: reqap | 0.8750 |" in printed
    assert compare_runs(runs["reqap"], runs["rag"])["p_value"] == pytest.approx(0.0625)
    assert main(["reqap", "evaluate", "--compare", str(runs["reqap"]), str(tmp_path / "nope")]) == 2


class _ScriptedLLM:
    """RAG answers with the gold answer of the question it is asked (so RAG hits every question), CodeGen
    writes a query that answers 1; counts its calls."""

    name = "scripted"

    def __init__(self, gold: dict[str, Any]) -> None:
        self.gold = gold
        self.calls = 0
        self.stops: set[tuple[str, ...]] = set()

    def chat(self, requests):  # noqa: ANN001 - the ChatBackend protocol, reduced to what the baselines call
        from convohub.llm import ChatResponse

        out = []
        for request in requests:
            self.calls += 1
            prompt = request.messages[-1]["content"]
            if "JSON answer:" in prompt:  # RAG
                question = prompt.rsplit("Question: ", 1)[1].split("\n", 1)[0]
                out.append(ChatResponse(text=json.dumps({"answer": self.gold[question]})))
            else:  # CodeGen: generation stopped at the closing fence, which the reply then lacks
                self.stops.add(request.stop)
                out.append(ChatResponse(text="```sql\nSELECT 1"))
        return out


def test_end_to_end_comparison_runs_every_system_on_the_same_questions(dataset: Path, release: Path,
                                                                          tmp_path: Path) -> None:
    from convohub.reqap.data.perqa import load_questions
    from convohub.reqap.release.comparison import RAG_TOP_N, SCORES_STAGE, compare_systems, question_sample
    from convohub.reqap.release.evaluation import evaluate

    questions = {q["id"]: q for q in load_questions(dataset, "test")}
    ids = question_sample(dataset, 3, seed=0)
    assert len(ids) == 3 and set(ids) <= set(questions) and ids == question_sample(dataset, 3, seed=0)
    llm = _ScriptedLLM({q["question"]: q["answers"][0] for q in questions.values()})
    # BM25 as the retriever: the random plumbing cross-encoder has no "relevant" label for RAG's ranking
    components = {**find_release_models(release).specs(), "retriever": "bm25"}
    result = compare_systems(dataset, components, llm, tmp_path, question_ids=ids,
                             systems=("reqap_sft", "rag", "codegen"), llm_name="scripted", budget_s=60.0)
    assert result["budget_s"] == 60.0
    assert json.loads((tmp_path / "reqap_sft" / f"{SCORES_STAGE}.json").read_text())["fingerprint"]["budget_s"] == 60
    assert result["questions"] == 3 and result["llm"] == "scripted" and set(result["systems"]) == {
        "reqap_sft", "rag", "codegen"}
    from convohub.reqap.release.comparison import run_predictions

    assert sorted(row["id"] for row in run_predictions(tmp_path)) == sorted(ids)  # the trained chain's, for the Space
    assert run_predictions(tmp_path, "reqap_icl") == []
    for name in result["systems"]:  # every run kept, on exactly these questions
        run = json.loads((tmp_path / name / "results.json").read_text())
        assert run["question_ids"] == sorted(ids) and run["counts"]["questions"] == 3
        lines = (tmp_path / name / "predictions.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["id"] for line in lines) == sorted(ids)
    assert result["systems"]["rag"]["hit@1"] == 1.0
    ones = sum(questions[i]["answers"] == [1] or 1 in questions[i]["answers"] for i in ids)
    assert result["systems"]["codegen"]["counts"]["failed_runs"] == 0 and llm.stops == {SQL_END}
    assert result["systems"]["codegen"]["hit@1"] == pytest.approx(ones / 3)
    reqap_hits = round(result["systems"]["reqap_sft"]["hit@1"] * 3)
    rag = result["mcnemar"]["rag"]
    assert rag["n"] == 3 and rag["both"] == reqap_hits and rag["only_b"] == 3 - reqap_hits and rag["only_a"] == 0
    assert set(result["mcnemar"]) == {"rag", "codegen"}

    calls = llm.calls  # a second run reads the kept runs back; other questions run again
    assert compare_systems(dataset, components, llm, tmp_path, question_ids=ids,
                           systems=("reqap_sft", "rag"), budget_s=60.0)["systems"]["rag"] == result["systems"]["rag"]
    assert llm.calls == calls
    # a run made with other weights in the same folders (a retrained model) is not reused
    stage_file = tmp_path / "rag" / f"{SCORES_STAGE}.json"
    saved = json.loads(stage_file.read_text())
    key = saved["fingerprint"]
    assert key["llm"] == "scripted" and key["top_n"] == RAG_TOP_N and key["question_ids"] == sorted(ids)
    stage_file.write_text(json.dumps({**saved, "fingerprint": {**key, "weights": {"retriever": ["an earlier model"]}}}))
    compare_systems(dataset, components, llm, tmp_path, question_ids=ids, systems=("reqap_sft", "rag"),
                    llm_name="scripted", budget_s=60.0)
    assert llm.calls > calls and json.loads(stage_file.read_text())["fingerprint"] == key
    calls = llm.calls
    # the paper profile's fourth system: the same chain with in-context QUD on the LLM (which writes no tree here)
    icl = compare_systems(dataset, components, llm, tmp_path, question_ids=ids, systems=("reqap_sft", "reqap_icl"),
                          budget_s=60.0)
    assert llm.calls > calls and icl["systems"]["reqap_icl"]["counts"]["questions"] == 3
    described = json.loads((tmp_path / "reqap_icl" / "results.json").read_text())["components"]
    assert described["decomposer"] == "icl" and described["llm"] == "scripted"
    assert set(icl["mcnemar"]) == {"reqap_icl"}
    with pytest.raises(ValueError, match="expected 'reqap_sft'"):
        compare_systems(dataset, components, llm, tmp_path, question_ids=ids, systems=("rag",))
    with pytest.raises(ValueError, match=r"no question ids \['nope'\]"):
        evaluate(dataset, "test", "rag", RAGBaseline(llm), question_ids=["nope"])


def test_the_release_compares_its_profiles_systems_on_its_question_sample(dataset: Path, release: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.reqap.release import comparison

    seen: dict = {}

    def fake_compare(dataset_dir: Path, components: dict, backend: object, out_dir: Path, **kwargs: object) -> dict:
        seen.update(components=components, out_dir=out_dir, **kwargs)
        return {"systems": {"reqap_sft": {"hit@1": 0.5}}}

    monkeypatch.setattr(comparison, "compare_systems", fake_compare)
    models = find_release_models(release)
    folders = {"qud": models.qud, "events": models.events, "patterns": models.patterns, "extract": models.extract}
    path, results = comparison.compare_for_release(dataset, folders, object(), tmp_path, profile="tiny", seed=0)
    assert path == tmp_path / comparison.COMPARISON_FILE
    assert json.loads(path.read_text()) == results == {"systems": {"reqap_sft": {"hit@1": 0.5}}}
    assert seen["components"] == models.specs() and seen["out_dir"] == tmp_path
    assert seen["systems"] == comparison.PROFILE_SYSTEMS["tiny"] and seen["budget_s"] == comparison.PROFILE_BUDGET_S["tiny"]
    assert seen["question_ids"] == comparison.question_sample(dataset, comparison.PROFILE_QUESTIONS["tiny"], 0)
    comparison.compare_for_release(dataset, folders, object(), tmp_path, profile="paper", seed=0)
    assert seen["systems"] == comparison.DEFAULT_SYSTEMS and len(seen["question_ids"]) == len(
        comparison.question_sample(dataset, None, 0))


def test_the_qud_card_waits_for_the_end_to_end_comparison() -> None:
    from convohub.reqap.system import SYSTEM

    names = [step.name for step in SYSTEM.steps]
    assert names.index("reqap-qud-eval") < names.index("reqap-end-to-end") < names.index("reqap-qud-card")
    for model in ("reqap-extract", "reqap-retrieve-patterns", "reqap-retrieve-events"):
        assert names.index(f"{model}-eval") < names.index("reqap-end-to-end")


def test_run_key_names_the_weights_of_every_model_folder(tmp_path: Path) -> None:
    from convohub.reqap.release.comparison import run_key

    folders = {}
    for name in ("qud", "events", "patterns", "extract"):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "model.safetensors").write_bytes(name.encode())
    components = {"decomposer": f"sft:{folders['qud']}", "retriever": f"ce:{folders['events']},{folders['patterns']}",
                  "extractor": f"model:{folders['extract']}"}
    kw = {"question_ids": ["b", "a"], "llm_name": "scripted", "top_n": 10}
    key = run_key("reqap_sft", components, **kw)
    assert key["question_ids"] == ["a", "b"] and key["llm"] is None and key["top_n"] is None
    assert key["budget_s"] == 600.0 and run_key("reqap_sft", components, **kw, budget_s=60.0)["budget_s"] == 60.0
    assert set(key["weights"]) == {"decomposer", "retriever", "extractor"} and len(key["weights"]["retriever"]) == 2
    rag = run_key("rag", components, **kw)
    assert rag["llm"] == "scripted" and rag["top_n"] == 10 and set(rag["weights"]) == {"retriever"}
    assert rag["budget_s"] is None  # the baselines have no per-question budget
    codegen = run_key("codegen", components, **kw)
    assert codegen["components"] == {} and codegen["weights"] == {} and codegen["top_n"] is None
    assert run_key("reqap_icl", components, **kw)["components"]["decomposer"] == "icl"
    (folders["patterns"] / "model.safetensors").write_bytes(b"retrained")
    changed = run_key("reqap_sft", components, **kw)
    assert changed["weights"]["retriever"][1] != key["weights"]["retriever"][1]
    assert changed["weights"]["retriever"][0] == key["weights"]["retriever"][0]
    assert changed["weights"]["decomposer"] == key["weights"]["decomposer"]
    rag_before = run_key("rag", components, **kw)
    (folders["qud"] / "model.safetensors").write_bytes(b"retrained")  # RAG does not run the QUD model
    assert run_key("rag", components, **kw) == rag_before
    assert run_key("reqap_sft", components, **kw)["weights"]["decomposer"] != changed["weights"]["decomposer"]
