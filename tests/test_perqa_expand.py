"""LLM-written PerQA templates (issue 12 item 5): the SQL whitelist, the bounded runs, the validation and
its report, the template file, and a build that adds the kept templates to their seeds' split."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import datasets
import duckdb
import pytest
from _replies import Replies

from convohub.cli import main as cli_main
from convohub.hub import HubTarget
from convohub.perqa.dataset import build_perqa
from convohub.perqa.expand import (
    GeneratedTemplate,
    expand_templates,
    lock_down,
    read_templates,
    run_bounded,
    sql_tables,
    write_templates,
)
from convohub.perqa.generate import PerQAConfig, generate_perqa, persona_databases
from convohub.perqa.questions import split_templates
from convohub.perqa.templates import TEMPLATES, QuestionTemplate

REPO = Path(__file__).resolve().parents[1]
CONFIG = PerQAConfig(n_personas=5, start_date=date(2023, 3, 1), seed=3, max_instances=2)
NEW_SQL = "SELECT ROUND(AVG(distance), 2) FROM workout WHERE workout_type = 'running'"
NEW_QUESTION = "How far do I run on average?"


@pytest.fixture
def con():
    c = duckdb.connect(":memory:")
    yield c
    c.close()


def test_whitelist_keeps_seed_vocabulary_and_rejects_everything_else(con) -> None:
    assert sql_tables(con, "SELECT COUNT(*) FROM movie_stream m JOIN workout w ON m.start_date = w.start_date "
                           "WHERE year(m.start_date) = 2023") == {"movie_stream", "workout"}
    assert sql_tables(con, NEW_SQL) == {"workout"}
    rejected = {
        "DROP TABLE workout": "SELECT",
        "SELECT 1; SELECT 2": "one statement",
        "SELECT * FROM read_csv('/etc/passwd')": "table functions",
        "SELECT * FROM range(10)": "table functions",
        "SELECT * FROM information_schema.tables": "not a canonical table",
        "SELECT * FROM _arrow_workout": "not a canonical table",
        "SELECT getenv('HOME') FROM workout": "getenv",
        "SELECT current_setting('memory_limit') FROM workout": "current_setting",
        "SELECT row_number() OVER () FROM workout": "not allowed",
        "WITH x AS (SELECT * FROM workout) SELECT * FROM x": "WITH",
        "SELECT 1": "reads no canonical table",
    }
    for sql, reason in rejected.items():
        with pytest.raises(ValueError, match=reason):
            sql_tables(con, sql)


def test_locked_connection_reads_no_files_and_runs_are_time_bounded(tmp_path: Path) -> None:
    (tmp_path / "secret.csv").write_text("a\n1\n")
    db = lock_down(duckdb.connect(":memory:"))
    with pytest.raises(duckdb.Error):
        db.execute(f"SELECT * FROM read_csv('{tmp_path / 'secret.csv'}')").fetchall()
    with pytest.raises(duckdb.Error):
        db.execute("SET enable_external_access = true")
    with pytest.raises(ValueError, match="time limit"):
        run_bounded(db, lambda: db.execute("SELECT count(*) FROM range(100000000000) a").fetchall(), 0.3)
    with pytest.raises(ValueError, match="SQL error"):
        run_bounded(db, lambda: db.execute("SELECT no_such_column FROM range(1)").fetchall(), 5)


def _proposal(question: str, sql: str, bind: str | None = None) -> str:
    return "Here it is: " + json.dumps({"question": question, "sql": sql, "bind": bind, "categories": ["aggregation"]})


def test_expansion_keeps_what_validates_and_counts_every_rejection() -> None:
    seed = next(t for t in TEMPLATES if not t.variables)
    answers = iter([
        _proposal(NEW_QUESTION, NEW_SQL),  # kept
        "I cannot write SQL.",  # not JSON
        _proposal("Which file?", "SELECT * FROM read_csv('/etc/passwd')"),  # unsafe
        _proposal("Did I swim on Mars?", "SELECT COUNT(*) FROM workout WHERE workout_type = 'mars'"),  # 0: empty
        _proposal("Which runs were on Mars?", "SELECT id FROM workout WHERE workout_type = 'mars'"),  # empty
        _proposal(seed.question, " ".join(seed.sql.lower().split())),  # a seed again
        _proposal(NEW_QUESTION.upper(), NEW_SQL),  # duplicate of the kept one
        _proposal("How many {kind} workouts?", "SELECT COUNT(*) FROM workout WHERE workout_type = {kind}",
                  "SELECT DISTINCT workout_type AS kind FROM workout"),  # kept, with a bind query
        _proposal("How far was my longest {sport}?", "SELECT MAX(distance) FROM workout WHERE workout_type = {sport}",
                  "SELECT DISTINCT workout_type FROM workout"),  # the bind query names no column sport
        _proposal("Which pairs of workouts?", "SELECT a.id FROM workout a, workout b"),  # too big to hold
        json.dumps({"question": "How many songs?", "sql": "SELECT COUNT(*) FROM music_stream",
                    "categories": ["fun"]}),  # no known category: not guessed
    ])
    backend = Replies(lambda text: next(answers, "no"))
    split_of = split_templates(TEMPLATES, CONFIG.seed)
    dbs = persona_databases(CONFIG, ("train", "dev"), 1)
    kept, report = expand_templates(TEMPLATES, split_of, dbs, backend, per_split=6, attempts=1, seed=CONFIG.seed)
    assert [g.template.question for g in kept] == [NEW_QUESTION, "How many {kind} workouts?"]
    assert report["rejections"] == {"not JSON": 2, "unsafe SQL": 1, "empty answer": 2, "duplicate": 2,
                                    "bad template": 2, "too many rows": 1}  # the twelfth request gets "no"
    assert report["requests"] == report["calls"] == 12 and report["kept_total"] == 2
    for g in kept:  # a template joins the split of the seeds it was shown
        assert g.seeds and {split_of[s] for s in g.seeds} == {g.split}
        assert g.template.template_id.startswith(f"gen_{g.split}_") and g.made_by == backend.name


def test_template_file_round_trip_and_errors_name_the_line(tmp_path: Path) -> None:
    g = GeneratedTemplate(QuestionTemplate("gen_dev_1", NEW_QUESTION, NEW_SQL, ("aggregation",)), "dev",
                          ("workout_count",), "endpoint:test")
    path = write_templates(tmp_path / "t.jsonl", [g])
    assert read_templates(path) == [g]
    bad = {
        '{"template_id": "x", "question": "q", "split": "dev"}': "field 'sql'",
        '{"template_id": "x", "question": "q", "sql": "SELECT 1 FROM workout", "split": "nope"}': "split 'nope'",
        '{"template_id": "x", "question": "q", "sql": "SELECT * FROM read_csv(1)", "split": "dev", '
        '"categories": ["join"]}': "unsafe SQL",
        "not json": "not valid JSON",
    }
    for line, reason in bad.items():
        (tmp_path / "bad.jsonl").write_text(json.dumps(g.to_json()) + "\n" + line + "\n")
        with pytest.raises(ValueError, match=rf"bad.jsonl:2.*{reason}|bad.jsonl:2: not valid JSON"):
            read_templates(tmp_path / "bad.jsonl")


def test_build_adds_generated_templates_to_their_split_only(tmp_path: Path) -> None:
    question = "How many birthdays have I celebrated?"
    sql = "SELECT COUNT(*) FROM annual_celebration WHERE celebration = 'birthday'"
    dev = GeneratedTemplate(QuestionTemplate("gen_dev_runs", question, sql, ("aggregation",)), "dev", (),
                            "endpoint:test")
    data = generate_perqa(PerQAConfig(n_personas=5, start_date=CONFIG.start_date, seed=CONFIG.seed,
                                      max_instances=1, generated=(dev,)))
    by_split = {s: {q["template_id"] for q in data.questions(s)} for s in ("train", "dev", "test")}
    assert "gen_dev_runs" in by_split["dev"]
    assert "gen_dev_runs" not in by_split["train"] | by_split["test"]
    assert "1 templates written by endpoint:test" in data.provenance
    folder = build_perqa(HubTarget(tmp_path / "hub"), REPO, data=data)
    rows = datasets.load_dataset(str(folder), "questions", split="dev", cache_dir=str(tmp_path / "cache"))
    assert question in rows["question"]
    with pytest.raises(ValueError, match="repeat seed template ids"):
        clash = GeneratedTemplate(TEMPLATES[0], "dev", (), "x")
        generate_perqa(PerQAConfig(n_personas=3, start_date=CONFIG.start_date, generated=(clash,)))


def test_cli_needs_an_llm_and_rejects_bad_counts(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    assert cli_main(["reqap", "expand", "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "needs an LLM" in capsys.readouterr().err
    assert cli_main(["reqap", "expand", "--out", str(tmp_path / "t.jsonl"), "--per-split", "0"]) == 2


def test_cli_writes_the_kept_templates_and_the_report(tmp_path: Path, monkeypatch, capsys) -> None:
    import convohub.reqap.cli as reqap_cli

    backend = Replies(lambda text: _proposal("How many birthdays have I celebrated?",
                                             "SELECT COUNT(*) FROM annual_celebration WHERE celebration = 'birthday'"))
    monkeypatch.setattr(reqap_cli, "_teacher", lambda args, command: backend)
    out = tmp_path / "t.jsonl"
    argv = ["reqap", "expand", "--out", str(out), "--per-split", "2", "--splits", "dev", "--personas", "1"]
    assert cli_main(argv) == 0 and backend.calls == 3
    assert cli_main(argv) == 0 and backend.calls == 3  # a second run answers from OUT.work/llm-cache
    kept = read_templates(out)
    report = json.loads(out.with_suffix(".report.json").read_text())
    assert len(kept) == 1 and kept[0].split == "dev"  # the second answer repeats the first
    assert report["requests"] == 2 and report["rejections"] == {"duplicate": 2}  # 2 tries of the second request
    assert "kept 1" in capsys.readouterr().out


def test_a_resumed_release_rebuilds_perqa_when_the_added_templates_change(tmp_path: Path, monkeypatch) -> None:
    from convohub.perqa.system import SYSTEM
    from convohub.release import _inputs_digest

    step = SYSTEM.steps[0]
    monkeypatch.delenv("CONVOHUB_PERQA_TEMPLATES", raising=False)
    without = _inputs_digest(step, None)
    path = tmp_path / "t.jsonl"
    path.write_text("")
    monkeypatch.setenv("CONVOHUB_PERQA_TEMPLATES", str(path))
    empty = _inputs_digest(step, None)
    path.write_text("{}\n")
    assert len({without, empty, _inputs_digest(step, None)}) == 3
