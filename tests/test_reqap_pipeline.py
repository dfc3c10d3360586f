"""ReQAP end to end: the pipeline's tree fallback, the RAG/CodeGen baselines (scripted LLM and a real local
server), the SQL guard against hostile generated SQL, evaluation numbers and the ``reqap ask|evaluate`` CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import pytest
from _serving import served_fixture, tiny_causal_fixture  # noqa: F401  (pytest fixtures)

from convohub.cli import main
from convohub.hub import HubTarget
from convohub.llm import ChatBackend, ChatRequest, ChatResponse
from convohub.perqa import PerQAConfig, build_perqa, generate_perqa
from convohub.perqa.templates import CATEGORIES
from convohub.reqap.cli import answer_line
from convohub.reqap.components.baselines import (
    CodeGenBaseline,
    ICLExample,
    RAGBaseline,
    SafeDatabase,
    UnsafeSQLError,
    check_sql,
    icl_pool_from_dataset,
    observable_tables,
)
from convohub.reqap.components.pipeline import ReQAP
from convohub.reqap.components.qud import StaticDecomposer
from convohub.reqap.components.retrieve import BM25Retriever
from convohub.reqap.data.gold import GoldTreeDecomposer
from convohub.reqap.data.perqa import load_persona
from convohub.reqap.release.evaluation import evaluate

ROOT = Path(__file__).resolve().parents[1]
TV_HOURS = "How many hours have I spent watching TV series altogether?"
GOOD = 'APPLY(l=RETRIEVE(query="I watched an episode of a TV series"), fct=len)'


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = generate_perqa(PerQAConfig(n_personas=3, start_date=date(2024, 3, 1), seed=0, max_instances=1))
    return build_perqa(HubTarget(tmp_path_factory.mktemp("hub")), ROOT, data=data)


@pytest.fixture(scope="module")
def persona(dataset: Path):
    return load_persona(dataset, "test_persona_0")


class Scripted(ChatBackend):
    """Replies from a list (the last one repeats); records prompts. ``None`` -> a failed response."""

    kind = "scripted"

    def __init__(self, replies: Sequence[str | None]) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []
        self.requests: list[ChatRequest] = []

    @property
    def model_id(self) -> str:
        return "scripted"

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = []
        for r in requests:
            self.prompts.append(r.messages[-1]["content"])
            self.requests.append(r)
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
            out.append(ChatResponse.failure("HTTP 500") if reply is None else ChatResponse(reply, "stop"))
        return out


# -- pipeline -----------------------------------------------------------------------------------------------
def test_first_tree_that_executes_wins(persona) -> None:
    store = persona[0]
    trees = ["NOT_AN_OPERATOR(x=1)", 'APPLY(l=RETRIEVE(query="I watched a movie"), fct=lambda l: 1 / 0)', GOOD]
    res = ReQAP(StaticDecomposer({"q": trees}), BM25Retriever()).answer("q", store)
    assert res.ok and res.tree == GOOD and isinstance(res.answer, int) and res.answer > 0
    assert [t["error"] is None for t in res.tried] == [False, False, True]
    assert "TreeSyntaxError" in res.tried[0]["error"]
    assert [t["operator"] for t in res.trace] == ["APPLY", "RETRIEVE"]

    failed = ReQAP(StaticDecomposer({"q": trees[:2]})).answer("q", store)
    assert failed.answer is None and failed.error.startswith("NoTreeExecuted") and len(failed.tried) == 2
    assert ReQAP(StaticDecomposer({})).answer("q", store).error.startswith("NoTree:")
    assert ReQAP(StaticDecomposer({"q": [GOOD]}), budget_s=0).answer("q", store).error.startswith("TimeoutError")


def test_gold_decomposer_matches_template_text() -> None:
    oracle = GoldTreeDecomposer()
    [tree] = list(oracle.candidates(TV_HOURS))
    assert tree.startswith("APPLY(") and "RETRIEVE" in tree
    assert list(oracle.candidates("What is the meaning of life?")) == []


# -- SQL guard ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "ATTACH 'evil.db' AS e", "COPY (SELECT 1) TO 'out.csv'", "SELECT * FROM read_csv('/etc/passwd')",
    'SELECT * FROM "read_csv_auto"(\'data\')', "SELECT * FROM '/etc/passwd'", "SELECT 1; SELECT 2",
    "SELECT 1; DROP TABLE workout", "CREATE TABLE t AS SELECT 1", "DROP TABLE workout", "INSERT INTO workout VALUES (1)",
    "PRAGMA database_list", "INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true",
    "SELECT getenv('HOME')", "SELECT * FROM read_parquet('s3://bucket/x.parquet')", "",
])
def test_sql_guard_rejects_hostile_sql(sql: str) -> None:
    with pytest.raises(UnsafeSQLError):
        check_sql(sql)


def test_database_is_locked_down(persona) -> None:
    db = SafeDatabase(observable_tables(persona[0].events), timeout_s=0.3)
    try:
        assert check_sql("WITH w AS (SELECT * FROM workout) SELECT count(*) FROM w;").endswith("FROM w")
        assert db.run("SELECT count(*) FROM calendar WHERE summary ILIKE '%copy%' OR true")[0][0] > 0
        import duckdb

        with pytest.raises(duckdb.Error):  # even past the guard, no file access and no settings changes
            db.con.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.Error):
            db.con.execute("SET enable_external_access = true")
        with pytest.raises(TimeoutError):
            db.run("SELECT count(*) FROM range(100000000) a, range(1000000) b")
    finally:
        db.close()


# -- baselines with a scripted LLM ----------------------------------------------------------------------------
def test_codegen_runs_checked_sql_and_counts_failures(persona) -> None:
    store = persona[0]
    examples = [ICLExample(f"question {i} about workouts", f"SELECT {i}") for i in range(12)]
    sql = "SELECT ROUND(SUM(duration) / 60, 2) FROM tvseries_stream"
    backend = Scripted([f"Here:\n```sql\n{sql}\n```", "ATTACH 'x.db'", "no idea", "SELECT nope FROM workout",
                        None])
    codegen = CodeGenBaseline(backend, examples, timeout_s=5)
    good = codegen.answer(TV_HOURS, store)
    db = SafeDatabase(observable_tables(store.events))
    assert good.ok and good.answer == db.run(sql)[0][0] and good.sql == sql
    prompt = backend.prompts[0]
    assert prompt.count("```sql") == 8 and "tvseries_stream(" in prompt and TV_HOURS in prompt
    errors = [codegen.answer(TV_HOURS, store).error.split(":")[0] for _ in range(4)]
    assert errors == ["NoSQL", "NoSQL", "SQLError", "LLMError"]
    rejected = CodeGenBaseline(Scripted(["SELECT 1; DROP TABLE workout"])).answer(TV_HOURS, store)
    assert rejected.error.startswith("UnsafeSQL")
    assert dict(codegen.stats) == {"questions": 5, "no_sql": 2, "sql_errors": 1, "llm_failures": 1}


def test_icl_pool_keeps_sql_that_runs_on_observable_tables(dataset: Path) -> None:
    pool = icl_pool_from_dataset(dataset, "train")
    assert pool and len({e.question for e in pool}) == len(pool)
    top = CodeGenBaseline(Scripted(["x"]), pool).select_examples("How many hours did I watch movies?")
    assert len(top) == min(8, len(pool)) and any("movie" in e.question.lower() for e in top[:3])


def test_rag_gives_top_n_events_and_parses_the_answer(persona) -> None:
    store = persona[0]
    backend = Scripted(['{"answer": 42}', "Forty-two", None])
    rag = RAGBaseline(backend, BM25Retriever(), top_n=10)
    res = rag.answer(TV_HOURS, store)
    assert res.ok and res.answer == 42 and len(res.event_ids) == 10
    assert "Events (10, most relevant first)" in backend.prompts[0]
    # worked examples in the prompt's own format come first, and the one-line answer ends at the line break
    request = backend.requests[0]
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert all(m["content"].endswith("JSON answer:") for m in request.messages[1:5:2])
    assert all(json.loads(m["content"])["answer"] is not None for m in request.messages[2:5:2])
    assert request.stop == ("\n",)
    assert rag.answer(TV_HOURS, store).answer == "Forty-two"
    assert rag.answer(TV_HOURS, store).error.startswith("LLMError")
    assert rag.stats["llm_failures"] == 1 and rag.stats["unparsed_answers"] == 1


# -- evaluation ---------------------------------------------------------------------------------------------
def test_evaluation_numbers_categories_and_metric_agreement(dataset: Path, tmp_path: Path) -> None:
    oracle = GoldTreeDecomposer()
    results = evaluate(dataset, "test", "reqap", ReQAP(oracle, BM25Retriever()), out_dir=tmp_path,
                       on_persona=lambda pid, qs: [oracle.add(q) for q in qs])
    assert {"hit@1", "rlx_hit@1", "rlx_hit@1_20", "per_category", "counts", "failures", "error_attribution"} <= set(results)
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    n = results["counts"]["questions"]
    assert len(records) == n == results["n"] > 0
    assert set(results["per_category"]) <= set(CATEGORIES)
    assert sum(c["n"] for c in results["per_category"].values()) == sum(len(r["categories"]) for r in records)
    assert results["hit@1"] == pytest.approx(sum(r["hit"] for r in records) / n)
    assert 0 < results["hit@1"] <= results["rlx_hit@1"] <= results["rlx_hit@1_20"] <= 1
    missed = [r for r in records if not r["hit"]]
    assert sum(results["error_attribution"]["counts"].values()) == len(missed)
    assert all(r.get("attribution") in (None, "tree", "retrieve", "extract", "gold_tree_misses") for r in missed)
    assert results["failures"].get("NoTree", 0) == sum(r["error"] is not None and r["error"].startswith("NoTree:")
                                                        for r in records)
    import evaluate as hf_evaluate

    metric = hf_evaluate.load(str(ROOT / "evaluation" / "hit_at_1"))
    scores = metric.compute(predictions=[r["prediction"] for r in records],
                            references=[[json.dumps(g) for g in r["gold"]] for r in records])
    assert scores["hit@1"] == pytest.approx(results["hit@1"])
    assert scores["rlx_hit@1"] == pytest.approx(results["rlx_hit@1"])
    assert json.loads((tmp_path / "results.json").read_text())["hit@1"] == results["hit@1"]


def test_evaluate_with_limit_and_without_attribution(dataset: Path) -> None:
    from convohub.reqap.components.build import make_system

    oracle_results = evaluate(dataset, "test", "reqap", make_system("reqap", retriever="all"), limit=3,
                              attribution=False)
    assert oracle_results["error_attribution"] is None and oracle_results["n"] == 3


# -- CLI ----------------------------------------------------------------------------------------------------
def test_cli_ask_and_evaluate(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stand_ins = ["--decomposer", "gold", "--extractor", "lookup", "--retriever", "bm25"]  # named: never a default
    base = ["reqap", "ask", "--dataset", str(dataset), "--persona", "test_persona_0", *stand_ins]
    assert main([*base, "--retriever", "oracle", TV_HOURS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("answer: ") and "operator tree:\nAPPLY(" in out and "\n  EXTRACT(" in out
    assert answer_line(7.5) == "answer: 7.5"
    shown = answer_line([{"event": "watched", "n": i} for i in range(287)])
    assert shown.startswith('answer: [{"event": "watched", "n": 0}') and shown.endswith(
        ", ... +284 more] (the first 3 of 287; --json prints all)") and len(shown) < 400
    assert main([*base, "--json", TV_HOURS]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["tree"] and parsed["trace"] and parsed["error"] is None
    assert main([*base, "What is the meaning of life?"]) == 1
    assert "NoTree" in capsys.readouterr().out
    assert main([*base, "--system", "rag", TV_HOURS]) == 2  # no LLM configured
    assert "needs an LLM" in capsys.readouterr().err
    assert main(["reqap", "ask", "--dataset", str(dataset), "--persona", "test_persona_9", *stand_ins, TV_HOURS]) == 2
    capsys.readouterr()

    out_dir = tmp_path / "eval"
    # no component named: the trained chain of the release in --hub, which is not built here
    assert main(["reqap", "ask", "--dataset", str(dataset), "--persona", "test_persona_0", "--hub",
                 str(tmp_path / "none"), TV_HOURS]) == 2
    err = capsys.readouterr().err
    assert "no trained ReQAP models" in err and "convohub release --only perqa reqap --out" in err
    assert main(["reqap", "evaluate", "--dataset", str(dataset), "--split", "test", "--limit", "4",
                 "--out", str(out_dir), *stand_ins]) == 0
    printed = capsys.readouterr().out
    assert "| all | 4 |" in printed and (out_dir / "predictions.jsonl").is_file()
    assert printed.startswith("ORACLE reqap on test\nORACLE (--decomposer gold)") and "EXTRACT: key lookup" in printed
    saved = json.loads((out_dir / "results.json").read_text())
    assert saved["components"]["decomposer"] == "gold" and saved["components"]["oracle"] == ["decomposer"]
    assert saved["oracle"] is True and saved["components"]["labels"]["retriever"].startswith("BM25")
    assert main(["reqap", "evaluate", "--dataset", str(tmp_path / "missing"), "--split", "test"]) == 2
    assert main(["reqap", "evaluate", "--dataset", str(dataset), *stand_ins, "--retriever", "nope"]) == 2


# -- a real local server ----------------------------------------------------------------------------------
@pytest.mark.server
def test_codegen_against_local_server(served: tuple[str, str], dataset: Path) -> None:
    """Plumbing through a real endpoint: every question gets a result, failures are counted by kind."""
    from convohub.llm import EndpointBackend

    url, model = served
    backend = EndpointBackend(url, model, max_retries=1, timeout=60, backoff=(0.1, 0.5))
    codegen = CodeGenBaseline(backend, icl_pool_from_dataset(dataset, "train"), max_new_tokens=24)
    results = evaluate(dataset, "test", "codegen", codegen, limit=2)
    stats = results["baseline_stats"]
    assert results["n"] == stats["questions"] == 2
    failures = sum(v for k, v in stats.items() if k != "questions")
    assert failures == results["counts"]["failed_runs"] == sum(results["failures"].values())
    assert 0.0 <= results["hit@1"] <= 1.0
