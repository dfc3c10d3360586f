"""ProMISe's release steps at smoke scale (`convohub release --only promise --max-train-steps 1`): the dataset
is generated (scripted agent, the user chosen by agreement with the hand-labelled decisions) and loads with
``load_dataset``; the two encoders and the LoRA simulator are trained by their scripts, load with
``from_pretrained``, and their cards carry the numbers the evaluation measured beside the majority baselines;
the leaderboard benchmarks score submissions and name malformed lines; ``convohub promise evaluate`` prints
Table 4's layout; the exported Space answers through gradio_client with the trained simulator beside the
visitor's choice; a re-run resumes every step without changing a published file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from convohub.cli import main
from convohub.hub import folder_digest, read_card
from convohub.release import run_release

sys.path.insert(0, str(Path(__file__).parent))
from _replies import Replies  # noqa: E402
from _spaces import SpaceApp, serve  # noqa: E402
from test_promise import scripted_reply  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
NS = "convohub"
STEPS = 11  # build, 3 x (train, evaluate, card), space


def _release(root: Path) -> list:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONVOHUB_PROMISE_DIALOGUES", "12")
        records, failure = run_release(out=root, only=["promise"], llm=Replies(scripted_reply, "scripted-agent",
                                                                              whole_request=True), max_train_steps=1)
    assert failure is None, failure
    return records


@pytest.fixture(scope="module")
def release_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("promise-hub")
    records = _release(root)
    assert [r.status for r in records] == ["done"] * STEPS
    return root


def _dataset(root: Path) -> Path:
    return root / "datasets" / NS / "promise"


def test_dataset_loads_like_users_load_it(release_root: Path, tmp_path: Path) -> None:
    import datasets

    folder = _dataset(release_root)
    cache = str(tmp_path / "cache")  # datasets keys its cache of a local folder on the folder's name, not its rows
    dialogues = datasets.load_dataset(str(folder), "dialogues", cache_dir=cache)
    assert set(dialogues) == {"validation", "test"}
    rows = [d for split in dialogues.values() for d in split]
    agent = "scripted:scripted-agent (questions for snippet sentences)"  # the tiny profile's answer-first mode
    assert rows and all(d["agent_llm"] == agent and d["retrieval_backend"].startswith("bm25s:")
                        and "+rerank:sentence-transformers/all-MiniLM-L6-v2" in d["retrieval_backend"]
                        and d["user_simulator"] == "rules:intent-coverage-v2" for d in rows)
    assert all(d["topic"].split()[0].lower() in d["initial_question"].lower() for d in rows)
    task1 = datasets.load_dataset(str(folder), "task1_intent_satisfaction", split="test", cache_dir=cache)
    task2 = datasets.load_dataset(str(folder), "task2_sq_selection", split="test", cache_dir=cache)
    test = dialogues["test"]
    assert len(task1) == sum(d["num_turns"] for d in test)
    assert len(task2) == len(task1) - sum(d["outcome"] == "intent_satisfied" for d in test)
    assert task1[0]["id"] == f"{test[0]['dialogue_id']}-0"
    _, body = read_card(folder / "README.md")
    total_turns = sum(d["num_turns"] for d in rows)
    assert f"| turns | {sum(d['num_turns'] for d in dialogues['validation'])} | " in body and f"| {total_turns} |" in body
    assert "rules:intent-coverage-v2" in body and "llm:scripted-agent" in body  # the user and how it was chosen
    assert "| all turns (pooled) |" in body and "BERTScore" in body
    assert "re-ordered by the cosine" in body and "those under a cosine of 0.25 dropped" in body
    assert "Suggestions written from a passage of another topic" in body


@pytest.mark.parametrize("task", ["task1", "task2"])
def test_encoder_cards_carry_the_measured_numbers(release_root: Path, task: str) -> None:
    from transformers import AutoModelForMultipleChoice, AutoModelForSequenceClassification

    folder = release_root / "models" / NS / f"promise-{task}-minilm-tiny"
    # the tiny recipes: Task 1 a sequence classifier, Task 2 a multiple-choice head over its five options
    auto = AutoModelForSequenceClassification if task == "task1" else AutoModelForMultipleChoice
    model = auto.from_pretrained(folder)
    assert model.config.num_labels == (2 if task == "task1" else 5)
    assert model.config.promise_head == ("sequence" if task == "task1" else "multiple-choice")
    measured = json.loads((release_root / ".convohub-work" / "promise" / f"promise_{task}_encoder_eval.json").read_text())
    meta, body = read_card(folder / "README.md")
    after, majority = measured["after"], measured["majority"]
    assert f"| macro_f1 | {100 * majority['macro_f1']:.2f} | {100 * measured['before']['macro_f1']:.2f} | " \
           f"{100 * after['macro_f1']:.2f} |" in body
    assert ("does not beat the majority baseline" in body) == (after["macro_f1"] <= majority["macro_f1"])
    recipe = Path(__file__).resolve().parents[1] / "training" / f"promise_{task}_encoder" / "tiny.yaml"
    folds = yaml.safe_load(recipe.read_text())["folds"]
    assert "stopped after 1 optimiser step(s)" in body and f"{folds}-fold cross-validation" in body
    metrics = {m["name"]: m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert any(v == pytest.approx(after["macro_f1"], abs=5e-5) for k, v in metrics.items() if "macro" in k)  # 4 decimals


def test_lora_simulator_card_has_table_4(release_root: Path) -> None:
    from transformers import AutoModelForCausalLM

    folder = release_root / "models" / NS / "promise-simulator-smollm2-lora-tiny"
    assert AutoModelForCausalLM.from_pretrained(folder).config.model_type == "llama"
    measured = json.loads((release_root / ".convohub-work" / "promise" / "promise_lora_simulator_eval.json").read_text())
    assert set(measured["table"]) == {"majority (validation)", "zero-shot smollm2", "encoders (task 1, task 2)",
                                      "LoRA simulator", "zero-shot smollm2, likelihood", "LoRA simulator, likelihood",
                                      "zero-shot smollm2, calibrated", "LoRA simulator, calibrated"}
    for decode in ("likelihood", "calibrated"):  # the most likely reply is always a label: nothing invalid
        for reading in measured[decode].values():
            assert reading["task1"]["invalid_rate"] == reading["task2"]["invalid_rate"] == 0
    meta, body = read_card(folder / "README.md")
    assert "**Scoring rule.**" in body and "Every simulator of this release on test" in body
    calibrated = measured["calibrated"]
    for task in ("task1", "task2"):  # the readings table and the model-index carry the calibrated figures
        before, after = (100 * calibrated[k][task]["macro_f1"] for k in ("before", "after"))
        assert f"{before:.2f} -> {after:.2f}" in body
    metrics = {m["name"]: m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert metrics["Task 1 (intent satisfaction) macro-F1, calibrated likelihood"] == pytest.approx(
        calibrated["after"]["task1"]["macro_f1"], abs=5e-5)
    assert ("it does not beat its base" in body) == any(
        measured["after"][t]["macro_f1"] <= measured["before"][t]["macro_f1"] for t in ("task1", "task2"))
    for name in measured["table"]:
        assert f"| {name} | " in body
    assert measured["training"]["steps"] == 1
    counts = measured["training"]["reply_counts"]  # the tiny recipe oversamples the replies, and the card says so
    assert measured["training"]["action_balance"] == "oversample"
    assert measured["training"]["train_examples"] == len(counts) * max(counts.values())
    assert f"{measured['training']['train_examples']} rows from {measured['training']['train_turns']} turns" in body


def test_leaderboard_scores_and_names_malformed_lines(release_root: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.hub import load_local

    folder = _dataset(release_root)
    items = load_local(folder, "task2_sq_selection", "test")
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"id": i, "prediction": int(label)}) + "\n"
                            for i, label in zip(items["id"], items["label"], strict=True)))
    assert main(["evaluate", "promise-task2", str(good), "--dataset", str(folder)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"micro_f1\s+1.0000", out) and "macro_f1" in out
    lines = good.read_text().splitlines()
    for bad, message in (("not json", ":2: not valid JSON"), (json.dumps({"id": items["id"][1], "prediction": 7}),
                                                            ":2: prediction for id .* label 7 is not one of 0-4"),
                         (json.dumps({"id": items["id"][1], "prediction": "2"}), ":2: prediction .* must be int")):
        broken = tmp_path / "broken.jsonl"
        broken.write_text("\n".join([lines[0], bad, *lines[2:]]) + "\n")
        assert main(["evaluate", "promise-task2", str(broken), "--dataset", str(folder)]) == 2
        assert re.search(message, capsys.readouterr().err)


def test_promise_evaluate_prints_table_4(release_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = release_root / "models" / NS
    spec = f"encoder:{models / 'promise-task1-minilm-tiny'},{models / 'promise-task2-minilm-tiny'}"
    assert main(["promise", "evaluate", "--simulator", spec, "--dataset", str(_dataset(release_root))]) == 0
    out = capsys.readouterr().out
    assert "| majority (validation) |" in out and "T2 macro-F1" in out and "task2 per-class F1: sq1" in out


def test_space_shows_the_simulator_beside_the_visitor(release_root: Path) -> None:
    from gradio_client import Client

    space = release_root / "spaces" / NS / "promise-explorer"
    meta, _ = read_card(space / "README.md")
    assert f"{NS}/promise" in meta["datasets"] and f"{NS}/promise-task1-minilm-tiny" in meta["models"]
    models = release_root / "models" / NS
    app = SpaceApp("promise", space / "app.py", {"CONVOHUB_PROMISE_AGENT": "smollm2",
                                                 "CONVOHUB_PROMISE_TASK1_MODEL": str(models / "promise-task1-minilm-tiny"),
                                                 "CONVOHUB_PROMISE_TASK2_MODEL": str(models / "promise-task2-minilm-tiny")})
    with serve(app) as (url, module):
        client = Client(url, verbose=False)
        table, history, state = client.predict(module.EXAMPLE_INTENT, module.EXAMPLE_QUESTION, api_name="/start")
        rows = table["data"]
        assert [r[0] for r in rows] == ["SQ1", "SQ2", "SQ3", "SQ4"] and all(r[1].endswith("?") and r[3] for r in rows)
        text, chart, _, history, state = client.predict("none helps", state, api_name="/choose")
        assert text.startswith("You chose: none helps. The simulator predicted:")
        bars = chart["data"]
        assert len(bars) == 6 and sum(b[1] for b in bars) == pytest.approx(1.0, abs=1e-3)
        # the choice is recorded as the first turn of the dialogue the page keeps, and shown in its history
        assert f"- turn 1 (query: {module.EXAMPLE_QUESTION}): none helps" in history
        kept = json.loads(state)
        assert [t["action"] for t in kept["turns"]] == ["none"] and kept["nones"] == 1 and kept["outcome"] is None


def test_space_names_the_settings_when_the_simulator_is_missing(release_root: Path, tmp_path: Path) -> None:
    import gradio as gr

    space = release_root / "spaces" / NS / "promise-explorer"
    missing = tmp_path / "no-such-model"
    app = SpaceApp("promise", space / "app.py", {"CONVOHUB_PROMISE_AGENT": "smollm2",
                                                 "CONVOHUB_PROMISE_TASK1_MODEL": str(missing),
                                                 "CONVOHUB_PROMISE_TASK2_MODEL": str(missing)})
    with serve(app) as (_, module), pytest.raises(gr.Error) as caught:
        module.pick(module.CHOICE_LABELS["sq1"], json.dumps({"intent": "x"}))  # the visitor's Choose
    message = str(caught.value.message)
    assert message.startswith("The trained user simulator could not be loaded: ")  # not wrapped a second time
    assert "CONVOHUB_PROMISE_TASK1_MODEL" in message and "CONVOHUB_PROMISE_TASK2_MODEL" in message
    assert f"the task1 simulator {str(missing)!r} cannot be loaded" in message
    assert "convohub release --only promise" in message


def test_rerun_resumes_and_changes_nothing(release_root: Path) -> None:
    before = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    records = _release(release_root)
    assert [r.status for r in records] == ["resumed"] * STEPS
    after = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    assert after == before
