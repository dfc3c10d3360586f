"""`convohub evaluate wildfeedback SUBMISSION.jsonl`: a leaderboard submission of responses to the test prompts
is judged against the test set's expert responses by a judge the user names (--judge), never a silent one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _wildfeedback_fixture import write_fixture_dataset  # noqa: E402

from convohub.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fixture_dataset(tmp_path_factory.mktemp("wfbench") / "hub", n_users=6, test_users=2)


def _test_rows(dataset: Path) -> list[dict]:
    from convohub.hub import load_local

    return load_local(dataset, "test", "test").to_list()


def _submit(path: Path, rows: list[dict], answer) -> Path:
    path.write_text("".join(json.dumps({"id": r["id"], "prediction": answer(r)}) + "\n" for r in rows))
    return path


def test_scores_against_the_expert_responses(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    rows = _test_rows(dataset)
    assert rows
    same = _submit(tmp_path / "same.jsonl", rows, lambda r: r["chosen"])
    out = tmp_path / "index.json"
    lexical = ["--judge", "lexical"]
    assert main(["evaluate", "wildfeedback", str(same), "--dataset", str(dataset), "--model-index", str(out),
                 *lexical]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"checklist_tie +1\.0000", printed) and "convohub-lexical-judge" in printed
    entries = {m["type"]: m for m in json.loads(out.read_text())[0]["metrics"]}
    metrics = {k: m["value"] for k, m in entries.items()}
    assert metrics["checklist_tie"] == 1.0 and metrics["no_checklist_n_judged"] == len(rows)
    assert entries["checklist_win"]["name"] == "checklist_win (judge: convohub-lexical-judge)"

    empty = _submit(tmp_path / "empty.jsonl", rows, lambda r: None)
    assert main(["evaluate", "wildfeedback", str(empty), "--dataset", str(dataset), "--model-index", str(out),
                 *lexical]) == 0
    metrics = {m["type"]: m["value"] for m in json.loads(out.read_text())[0]["metrics"]}
    assert metrics["checklist_lose"] == 1.0 and metrics["checklist_mean_reward"] < 0


def test_missing_rows_are_rejected(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _test_rows(dataset)
    partial = _submit(tmp_path / "partial.jsonl", rows[:-1], lambda r: r["chosen"])
    assert main(["evaluate", "wildfeedback", str(partial), "--dataset", str(dataset), "--judge", "lexical"]) == 2
    assert rows[-1]["id"] in capsys.readouterr().err


def test_refuses_to_score_without_a_named_judge(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CONVOHUB_LLM_BASE_URL", raising=False)
    same = _submit(tmp_path / "same.jsonl", _test_rows(dataset), lambda r: r["chosen"])
    out = tmp_path / "index.json"
    assert main(["evaluate", "wildfeedback", str(same), "--dataset", str(dataset), "--model-index", str(out)]) == 2
    err = capsys.readouterr().err
    assert "wildfeedback is scored by an LLM judge: no judge named" in err
    assert all(option in err for option in ("--judge smollm2", "--judge lexical", "--judge http://",
                                            "CONVOHUB_LLM_BASE_URL"))
    assert not out.exists()
    # the same choice behaves the same in the library and the evaluate module
    from convohub.metrics.checklist_judge import checklist_judge

    row = _test_rows(dataset)[0]
    kwargs = {"predictions": [row["chosen"]], "references": [row["rejected"]], "histories": [row["prompt"][:-1]],
              "queries": [row["prompt"][-1]["content"]], "checklists": [row["preferences"]]}
    import evaluate

    module = evaluate.load(str(Path(__file__).resolve().parents[1] / "evaluation" / "checklist_judge"))
    assert module.compute(**kwargs, judge_model="lexical") == checklist_judge(**kwargs, judge_model="lexical")
    with pytest.raises(ValueError, match="no judge named"):
        module.compute(**kwargs)
