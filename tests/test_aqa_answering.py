"""WildChat-AQA answering on the contract fixture (tests/_aqa_fixture.py): text-similarity rankers, the LLM
answerers with scripted replies (paper JSON, bare list, unreadable answers scored the authors' way), token
budgets, RAG / PROBE / oracle contexts with Recall@k and every PROBE fallback counted, the likelihood scorer
against a plain forward pass, the leaderboard benchmark and the CLI, the release evaluation's table and card
section, the fine-tuning chat format, and one real SmolLM2 run of the small-model prompt."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _aqa_fixture import build_fixture  # noqa: E402
from _replies import Replies  # noqa: E402

from convohub.aqa.context import ProbeStats, read_request  # noqa: E402
from convohub.aqa.evaluation import AQARunner, Setting, format_results, score_answers  # noqa: E402
from convohub.aqa.methods import rank_scores  # noqa: E402
from convohub.aqa.questions import Question, load_questions  # noqa: E402
from convohub.metrics import ndcg_at_k  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fixture(tmp_path_factory.mktemp("aqa-hub"))


@pytest.fixture(scope="module")
def questions(dataset: Path) -> list[Question]:
    return load_questions(dataset)


def _gold_ranking(q: Question) -> list[int]:
    return sorted(range(len(q.options)), key=lambda j: -q.weights[j])


def _reply(prompt: str) -> str:
    """A scripted model: PROBE requests name France and two queries; answers rank the options in order
    of the option text's position in the prompt's documents (a crude counter), as JSON."""
    if "search request" in prompt:
        return json.dumps({"explanation": "x", "query": {"start_time": "", "end_time": "", "country": ["france"],
                                                         "user_name": [], "queries": ["cooking recipes", 7]}})
    return json.dumps({"explanation": "counted", "answer": [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]})


# --- the fixture follows the contract and loads as users load it ------------------------------------------

def test_fixture_loads_with_plain_load_dataset(dataset: Path) -> None:
    import datasets

    qs = datasets.load_dataset(str(dataset.resolve()), "questions", split="test")
    conv = datasets.load_dataset(str(dataset.resolve()), "conversations", split="train")
    summ = datasets.load_dataset(str(dataset.resolve()), "summaries", split="train")
    assert len(qs) == 6 and len(conv) == len(summ) == 48 and "conversation" not in summ.column_names
    row = qs[0]
    assert len(row["options"]) == len(row["option_weights"]) == 10 and row["support"]
    assert {"hash", "user_name", "timestamp", "time_week", "country", "summary", "label_level_1"} <= set(conv.column_names)
    # the options are not in gold order, so option order cannot leak the answer
    assert any(_gold_ranking(Question.from_row(r))[:3] != [0, 1, 2] for r in qs)


# --- text similarity ----------------------------------------------------------------------------------------

def test_ties_are_broken_in_a_seeded_random_order_not_in_option_order(questions: list[Question]) -> None:
    flat = [rank_scores([0.0] * 10, q) for q in questions]
    assert all(sorted(r) == list(range(10)) for r in flat)
    assert any(r != list(range(10)) for r in flat) and flat == [rank_scores([0.0] * 10, q) for q in questions]
    assert rank_scores([0, 5, 0, 9, 0, 0, 0, 0, 0, 1], questions[0])[:3] == [3, 1, 9]


@pytest.mark.parametrize("method", ["random", "bm25", "cosine"])
def test_text_methods_rank_every_option(dataset: Path, method: str) -> None:
    runner = AQARunner(dataset)
    results, answers = runner.evaluate(Setting(method))
    assert all(sorted(a.ranking) == list(range(10)) for a in answers)
    assert 0 <= results["ndcg@1"] <= results["ndcg@10"] <= 1 and results["ndcg@10"] > 0 and "parse_rate" not in results
    again, _ = AQARunner(dataset).evaluate(Setting(method))
    assert again["ndcg@10"] == results["ndcg@10"]  # seeded


# --- LLM answerers with a scripted model --------------------------------------------------------------------

def test_paper_answerer_reads_json_and_scores_unreadable_answers_as_all_zero(dataset: Path,
                                                                             questions: list[Question]) -> None:
    replies = iter(['{"explanation": "e", "answer": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}', "I think 3 is best",
                    '```json\n{"answer": [4, 4, 12, 1]}\n```', '"answer": [2, 1]', "{broken", "[1, 2]"])
    runner = AQARunner(dataset, backend=Replies(lambda _: next(replies)))
    results, answers = runner.evaluate(Setting("no-context", answerer="paper"))
    # no braces: the authors read from '"answer":' on and fall back to the bare list
    assert [a.ranking for a in answers] == [list(range(10)), [], [4, 4, 12, 1], [2, 1], [], []]
    assert results["parse_rate"] == 0.5 and results["complete_rate"] == round(1 / 6, 4)
    expected = ndcg_at_k([a.ranking for a in answers], [list(q.weights) for q in questions])
    assert results["ndcg@10"] == round(expected["ndcg@10"], 4)
    assert results["input_tokens"] > 6 * 100 and "stand-in" in results["tokenizer"]  # MiniLM counted, and says so


def test_small_answerer_reads_the_first_list(dataset: Path) -> None:
    replies = iter(["The best answer is [2, 0, 1].", "[9, 8]", "none", "[x]", "[1.0, 2]", "[[3]]"])
    runner = AQARunner(dataset, backend=Replies(lambda _: next(replies)))
    _, answers = runner.evaluate(Setting("no-context", answerer="small"))
    assert [a.ranking for a in answers] == [[2, 0, 1], [9, 8], [], [], [1, 2], []]
    assert [a.parsed for a in answers] == [True, True, False, False, True, False]


def test_budget_packs_documents_in_retrieval_order(dataset: Path) -> None:
    seen: list[str] = []
    backend = Replies(lambda p: seen.append(p) or '{"answer": [0]}')
    small, answers = AQARunner(dataset, backend=backend).evaluate(Setting("oracle", answerer="paper", budget=400))
    big, more = AQARunner(dataset, backend=backend).evaluate(Setting("oracle", answerer="paper", budget=1500))
    assert 0 < small["documents_per_question"] < big["documents_per_question"]
    assert all(a.input_tokens <= 400 + 8 for a in answers)  # within the budget (markers of the template aside)
    assert all(a.doc_ids == b.doc_ids[: len(a.doc_ids)] for a, b in zip(answers, more, strict=True))
    assert "# Conversations" in seen[0] and "User: " in seen[0] and "Country: " in seen[0] and "\n0. " in seen[0]


def test_rag_and_oracle_report_recall_against_the_supports(dataset: Path, questions: list[Question]) -> None:
    runner = AQARunner(dataset, backend=Replies(_reply))
    rag, rag_answers = runner.evaluate(Setting("rag", answerer="paper", k=10))
    oracle, oracle_answers = runner.evaluate(Setting("oracle", answerer="paper"))
    assert rag["k"] == 10 and {"recall@5", "recall@10"} <= set(rag) and 0 < rag["recall@10"] < 1
    assert all(len(a.retrieved) == 10 for a in rag_answers)
    assert all(a.retrieved == list(q.support) for a, q in zip(oracle_answers, questions, strict=True))
    assert oracle[f"recall@{max(len(q.support) for q in questions)}"] == 1.0
    assert "Recall@10" in format_results(rag)


# --- PROBE ----------------------------------------------------------------------------------------------------

def test_probe_filters_and_counts_every_fallback(dataset: Path) -> None:
    runner = AQARunner(dataset, backend=Replies(_reply))
    results, answers = runner.evaluate(Setting("probe", answerer="paper", k=8))
    index = runner.index("summary")
    france = {str(h) for h, c in zip(index.conversation_hashes, index.country_vocab[index.country_codes],
                                     strict=True) if c == "France"}
    assert all(set(a.retrieved) <= france and a.retrieved for a in answers)  # the country filter held
    request = answers[0].request
    assert request["country"] == ["France"] and request["queries"][1] == runner.questions[0].question
    stats = results["probe"]
    assert (stats["json_valid"], stats["query_fallbacks"], stats["request_fallbacks"]) == (6, 6, 0)
    assert "6 queries -> question" in format_results(results)


def test_probe_request_reading(dataset: Path) -> None:
    index = AQARunner(dataset).index("summary")
    stats = ProbeStats()
    bad = read_request("sure! here you go", "Q?", index, stats)
    assert bad["queries"] == ["Q?"] and bad["fallback"] and stats.request_fallbacks == 1
    flat = read_request('{"start_time": "2023-05-01", "end_time": "05-07-2023", "country": ["Atlantis"], '
                        '"user_name": "TOUGHCUE8", "queries": []}', "Q?", index, stats)
    assert flat["start_time"] == "" and flat["end_time"] == "05-07-2023" and flat["user_name"] == ["toughcue8"]
    assert flat["queries"] == ["Q?"] and stats.date_fallbacks == 1 and stats.unknown_filter_values == 1
    assert stats.request_fallbacks == 2 and stats.json_valid == 1 and flat["country"] == ["Atlantis"]
    small = read_request('{"country": ["Atlantis", "germany"], "user_name": ["France"], "queries": ["x"]}', "Q?",
                         index, stats, drop_unknown=True)  # the small model's variant drops unknown values
    assert small["country"] == ["Germany"] and small["user_name"] == [] and stats.unknown_filter_values == 3
    from convohub.aqa.context import probe_context

    contexts = probe_context(index, [Question("h", "Q?", tuple("abcdefghij"), (1.0,) * 10)],
                             ['{"country": ["Atlantis"], "queries": ["cooking"]}'], 5, stats=stats)
    assert contexts[0].retrieved == [] and stats.empty_results == 1  # a filter nothing passes: counted


# --- the likelihood answerer ------------------------------------------------------------------------------------

def test_likelihood_scores_equal_a_plain_forward_pass() -> None:
    import torch

    from convohub.aqa.methods import LikelihoodScorer
    from convohub.llm import make_backend
    from convohub.training.models import resolve_model

    backend = make_backend(f"local:{resolve_model('convohub-tiny:causal')}")
    scorer = LikelihoodScorer(backend)
    items = [(scorer.prompt_ids("Which topics did users from France ask about?"),
              scorer.option_ids(["Cooking and Recipes", "Finance", "Travel"])),
             (scorer.prompt_ids("Conversations: a long list of documents about many things.\nQuestion: Who?"),
              scorer.option_ids(["lostclasp37", "toughcue8"]))]  # another length, fewer options: padded
    batched = scorer.score(items)
    for (prompt, options), scores in zip(items, batched, strict=True):
        assert len(scores) == len(options)
        for option, score in zip(options, scores, strict=True):
            with torch.inference_mode():
                logits = backend.model(input_ids=torch.tensor([prompt + option])).logits[0].float()
            logprobs = torch.log_softmax(logits, -1)
            plain = sum(float(logprobs[len(prompt) + t - 1, tok]) for t, tok in enumerate(option)) / len(option)
            assert score == pytest.approx(plain, abs=1e-3)


def test_likelihood_answerer_calibrates_with_context(dataset: Path) -> None:
    from convohub.llm import make_backend
    from convohub.training.models import resolve_model

    backend = make_backend(f"local:{resolve_model('convohub-tiny:causal')}")
    runner = AQARunner(dataset, backend=backend)
    none, plain = runner.evaluate(Setting("no-context", answerer="likelihood", budget=300))
    rag, calibrated = runner.evaluate(Setting("rag", answerer="likelihood", budget=300))
    assert all(sorted(a.ranking) == list(range(10)) and a.scores for a in plain + calibrated)
    assert rag["input_tokens"] > none["input_tokens"] and rag["tokenizer"] == backend.model_id
    assert all(a.input_tokens <= 2 * 300 + 2 * 60 for a in calibrated)  # prompt + calibration prompt + options
    # calibration subtracts each option's no-context score: the raw scores with the same context, minus the
    # no-context answer's scores, are the calibrated ones
    from convohub.aqa.methods import likelihood_rankings

    setting = Setting("rag", answerer="likelihood", budget=300)
    contexts, _ = runner.contexts(setting, runner.defaults(setting)[0])
    raw = likelihood_rankings(backend, runner.questions, contexts, budget=300, counter=runner.counter,
                              calibrate=False)
    with_docs = [i for i, a in enumerate(calibrated) if a.doc_ids]
    assert with_docs
    for i in with_docs:
        expected = [r - p for r, p in zip(raw[i].scores, plain[i].scores, strict=True)]
        assert calibrated[i].scores == pytest.approx(expected, abs=1e-4)
    with pytest.raises(ValueError, match="local model"):
        AQARunner(dataset, backend=Replies(_reply)).evaluate(Setting("no-context", answerer="likelihood"))


@pytest.mark.slow
def test_smollm2_small_prompt_parse_path(dataset: Path) -> None:
    """The real offline model answers the small prompt; whatever it writes is read or scored as all zero."""
    from convohub.llm import make_backend

    runner = AQARunner(dataset, backend=make_backend("smollm2"), limit=1)
    results, answers = runner.evaluate(Setting("no-context", answerer="small"))
    assert results["questions"] == 1 and results["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert "parse_rate" in results and results["tokenizer"] == results["model"]
    for a in answers:
        assert a.text and (a.parsed == bool(a.ranking))


# --- leaderboard and CLI ---------------------------------------------------------------------------------------

def _aqa_cli(argv: list[str]) -> int:
    """``convohub aqa ...`` through the subcommand the aqa system adds (convohub.aqa.cli.add_cli)."""
    import argparse

    from convohub.aqa.cli import add_cli

    parser = argparse.ArgumentParser(prog="convohub")
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.handler(args))


def _score(dataset: Path, submission: Path) -> dict[str, float]:
    """``convohub evaluate wildchat-aqa SUBMISSION --dataset DIR`` (convohub.scoring with the AQA benchmark)."""
    from convohub.aqa.benchmark import BENCHMARK
    from convohub.scoring import score_submission

    return score_submission(BENCHMARK, dataset, submission)


def test_benchmark_scores_submissions_the_authors_way(dataset: Path, questions: list[Question], tmp_path: Path) -> None:
    from convohub.scoring import SubmissionError

    perfect = tmp_path / "perfect.jsonl"
    perfect.write_text("".join(json.dumps({"id": q.hash, "prediction": _gold_ranking(q)}) + "\n" for q in questions))
    assert _score(dataset, perfect) == {"ndcg@1": 1.0, "ndcg@3": 1.0, "ndcg@5": 1.0, "ndcg@10": 1.0}
    odd = [[], [3, 3, 12, 1] * 4, [0], [-1, 2], [], []]
    messy = tmp_path / "messy.jsonl"
    messy.write_text("".join(json.dumps({"id": q.hash, "prediction": p}) + "\n" for q, p in zip(questions, odd, strict=True)))
    assert _score(dataset, messy) == ndcg_at_k(odd, [list(q.weights) for q in questions])
    for prediction, error in (([True], "option index"), ([0.5], "option index"), ([-11], "below -10")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text("".join(json.dumps({"id": q.hash, "prediction": prediction}) + "\n" for q in questions))
        with pytest.raises(SubmissionError, match=error):
            _score(dataset, bad)
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"id": questions[0].hash, "prediction": [0]}) + "\n")
    with pytest.raises(SubmissionError, match="5 of 6 gold id"):
        _score(dataset, partial)


def test_cli_evaluate_writes_a_submission_the_benchmark_scores(dataset: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    predictions, out = tmp_path / "p.jsonl", tmp_path / "r.json"
    assert _aqa_cli(["aqa", "evaluate", "--method", "bm25", "--dataset", str(dataset), "--predictions",
                     str(predictions), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    results = json.loads(out.read_text())
    assert f"NDCG@10 {results['ndcg@10']:.4f}" in printed and "bm25 on 6 questions" in printed
    assert round(_score(dataset, predictions)["ndcg@10"], 4) == results["ndcg@10"]
    with pytest.raises(SystemExit, match="not found"):
        _aqa_cli(["aqa", "evaluate", "--method", "rag", "--dataset", str(tmp_path / "nope")])


# --- release evaluation ------------------------------------------------------------------------------------------

def test_release_evaluation_writes_table_3_and_the_card_section(dataset: Path, tmp_path: Path) -> None:
    import shutil

    from convohub.aqa.model_specs import SPEC
    from convohub.aqa.release_eval import SECTION_START, evaluate_release
    from convohub.hub import HubTarget, read_card, read_json
    from convohub.release import ReleaseContext

    folder = tmp_path / "wildchat-aqa"
    shutil.copytree(dataset, folder)
    ctx = ReleaseContext(profile="tiny", target=HubTarget(tmp_path / "hub"), work_dir=tmp_path / "work",
                         llm=Replies(_reply))
    fine_tuned = tmp_path / "ft.json"
    after = {"likelihood": {"ndcg@1": 0.2, "ndcg@3": 0.3, "ndcg@5": 0.4, "ndcg@10": 0.5}}
    fine_tuned.write_text(json.dumps({"answerers": ["likelihood"], "context": "summary", "questions": 6,
                                      "base_model": "smollm2", "beats_base": False, "after": after}))
    ctx.artifacts[SPEC.artifact("eval_path")] = fine_tuned
    out = evaluate_release(ctx, folder)
    results = read_json(out["aqa_results_path"])
    assert [r["method"] for r in results["rows"]] == ["random", "bm25", "cosine", "no-context", "fine-tuned", "rag",
                                                     "probe", "oracle"]
    assert results["answerer"] == "paper" and results["prompt_checks"] == []  # an endpoint: the paper's prompts
    meta, body = read_card(folder / "README.md")
    assert "configs" in meta and body.count(SECTION_START) == 1
    assert "| Cosine Sim | - | - |" in body and "Oracle (ORACLE: gold supports)" in body and "| Finetune |" in body
    assert "PROBE (summary): 6/6 requests were JSON" in body
    evaluate_release(ctx, folder)  # a re-run replaces the section
    assert read_card(folder / "README.md")[1].count(SECTION_START) == 1


# --- fine-tuning format ------------------------------------------------------------------------------------------

def test_chat_format_follows_the_authors() -> None:
    from convohub.aqa.chat_format import aqa_messages

    row = {"hash": "h", "user_name": "u1", "country": "France", "timestamp": "2023-05-01T09:30:00",
           "summary": "Asks for a bread recipe.",
           "conversation": [{"role": "user", "content": "Bread?"}, {"role": "assistant", "content": "Flour."}]}
    system = {"role": "system", "content": "Time: May 01, 2023 09:30:00, user u1 is from France."}
    assert aqa_messages(row, "raw") == [system, {"role": "user", "content": "User u1: Bread?"},
                                        {"role": "assistant", "content": "Assistant: Flour."}]
    assert aqa_messages(row, "summary") == [system, {"role": "user", "content": "User u1: Asks for a bread recipe."}]
    with pytest.raises(KeyError, match="'x'.*summary"):
        aqa_messages({"hash": "x", "user_name": "u", "country": "c", "timestamp": "2023-05-01T00:00:00"}, "summary")


def test_score_answers_without_supports_has_no_recall() -> None:
    from convohub.aqa.methods import Answer

    q = Question("h", "q", tuple("abcdefghij"), (1.0,) + (0.0,) * 9)
    out = score_answers([q], [Answer([0], retrieved=["x"])], retrieval=True)
    assert out["ndcg@1"] == 1.0 and not any(k.startswith("recall@") for k in out)


# --- the Space ---------------------------------------------------------------------------------------------------

def test_space_ranks_shows_the_request_and_the_evidence(dataset: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from convohub.aqa.space import TYPED, AQAExplorer, export_space
    from convohub.cli import load_script
    from convohub.hub import HubTarget, read_card

    explorer = AQAExplorer(dataset, backend=Replies(_reply))
    q = explorer.questions[0]
    out = explorer.answer(q, "probe", k=5)
    assert sorted(r[1] for r in out["rows"]) == sorted(q.options) and [r[0] for r in out["rows"]] == list(range(1, 11))
    assert out["request"]["country"] == ["France"] and out["gold"] == dict(zip(q.options, q.weights, strict=True))
    assert 0 < len(out["evidence"]) <= 5 and all(row[2] == "France" for row in out["evidence"])
    assert "ndcg@10" in out["scores"] and "recall@5" in out["scores"]
    typed = explorer.question(TYPED, "Which food do people like?", "pizza\npasta\nsoup")
    plain = explorer.answer(typed, "bm25")
    assert len(plain["rows"]) == 3 and not any(k.startswith("ndcg@") for k in plain["scores"])
    with pytest.raises(ValueError, match="gold supporting"):
        explorer.answer(typed, "oracle")
    with pytest.raises(ValueError, match="2 to 10 options"):
        explorer.question(TYPED, "Which?", "only one")

    folder = export_space(HubTarget(tmp_path / "hub"), ROOT, dataset_id="convohub/wildchat-aqa")
    meta, _ = read_card(folder / "README.md")
    assert meta["sdk"] == "gradio" and meta["datasets"] == ["convohub/wildchat-aqa"]
    assert (folder / "app.py").is_file() and (folder / "convohub" / "aqa" / "space.py").is_file()

    monkeypatch.setenv("CONVOHUB_DATASET", str(dataset))
    app = load_script(ROOT / "spaces" / "wildchat_aqa" / "app.py")
    label = app._CHOICES[1]
    assert app.options_for(label).splitlines() == list(q.options)
    rows, chart, request, evidence, scores = app.rank(label, "", "", "cosine", "summary", None, 20, 192)
    assert len(rows) == len(chart) == 10 and list(chart.columns) == ["option", "gold weight"]
    assert request == {} and evidence == [] and "ndcg@10" in scores
    # the answerer shown before anything is picked is the one the backend will use, not an empty box
    answerers = [c for c in app.demo.blocks.values() if (getattr(c, "label", None) or "").startswith("answerer")]
    assert [c.value for c in answerers] == ["likelihood"]
    monkeypatch.setenv("CONVOHUB_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    assert load_script(ROOT / "spaces" / "wildchat_aqa" / "app.py").ANSWERER == "paper"


@pytest.mark.slow
def test_fine_tuning_script_trains_is_evaluated_before_and_after_and_carded(dataset: Path, tmp_path: Path) -> None:
    """One step on 8 summaries with the random tiny causal LM (plumbing): launched as the release launches it,
    the merged folder loads, evaluation compares base and trained on the same questions, the card renders."""
    from transformers import AutoModelForCausalLM

    from convohub.aqa.model_specs import SPEC, evaluate, read_record
    from convohub.hub import HubTarget, read_card

    out = SPEC.train(ROOT, "tiny", dataset, tmp_path / "model", 0,
                     extra=["--model_name_or_path", "convohub-tiny:causal", "--max_train_samples", "8",
                            "--max_length", "64", "--max_eval_questions", "3", "--max_steps", "1"])
    assert AutoModelForCausalLM.from_pretrained(out) is not None and not (out / "adapter_config.json").exists()
    record = read_record(out)
    assert (record["context"], record["train_examples"], record["steps"], record["corpus_size"]) == ("summary", 8, 1, 48)
    results = evaluate(out, dataset)
    assert results["questions"] == 3 and results["answerers"] == ["likelihood"] and results["held_out"] == 24
    before, after = results["before"], results["after"]
    assert before["perplexity"] != after["perplexity"]  # the weights changed
    assert (results["ndcg@10_before"], results["ndcg@10_after"]) == (before["likelihood"]["ndcg@10"],
                                                                      after["likelihood"]["ndcg@10"])
    folder = SPEC.publish(HubTarget(tmp_path / "hub"), ROOT, "tiny", out, results)
    meta, body = read_card(folder / "README.md")
    beats = after["likelihood"]["ndcg@10"] > before["likelihood"]["ndcg@10"]
    assert ("this model does not beat its base" in body) is not beats  # the verdict follows the measured numbers
    assert meta["datasets"] == ["convohub/wildchat-aqa"] and meta["model-index"][0]["results"]
    assert "Measured outcome:" in body and f"{results['questions']} questions" in body
