"""CRyCHIc's release steps at smoke scale (`convohub release --only crychic --max-train-steps 2`): the three
models are trained by their scripts, load with from_pretrained(trust_remote_code=True), their cards carry the
before/after numbers the training run measured, the judge's card carries the reconstruction table with the LLM
baseline's row, `convohub tree reconstruct` runs on the released models, the Space is exported, and a re-run
resumes every step without changing a published file.

The IFQC sentences and the LLM baseline's answers come from a scripted LLM (SmolLM2 would take minutes) and
the reconstruction is cut to a few test conversations (``CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS``), so the test
stays near a minute.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from convohub.hub import folder_digest, read_card
from convohub.llm import ChatRequest
from convohub.release import run_release

sys.path.insert(0, str(Path(__file__).parent))
from test_crychic_training_data import good_sentence, scripted  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
NS = "convohub"
CONVERSATIONS = "6"
TASKS = ("ifqc", "simplifier", "judge")


STEPS = 13


def writer_and_baseline(request: ChatRequest) -> str:
    """IFQC sentences as tests/test_crychic_training_data.py writes them; the LLM baseline's label and score
    questions answered "instruction" and 4 (so every later turn is scored and gets a parent)."""
    text = request.messages[-1]["content"].rstrip()
    if text.endswith("Kind:"):
        return "instruction"
    if text.endswith("Score:"):
        return "Score: 4"
    return good_sentence(request)


def _release(root: Path) -> list:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS", CONVERSATIONS)
        records, failure = run_release(out=root, only=["crychic"], llm=scripted(writer_and_baseline, "writer"),
                                       max_train_steps=2)
    assert failure is None, failure
    return records


@pytest.fixture(scope="module")
def release_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crychic-hub")
    records = _release(root)
    assert [r.status for r in records] == ["done"] * STEPS
    return root


def _measured(root: Path, task: str) -> dict:
    return json.loads((root / ".convohub-work" / "crychic" / f"crychic_{task}_eval.json").read_text())


def test_a_folder_without_the_training_runs_scores_is_scored_again_alike(release_root: Path, tmp_path: Path) -> None:
    """A model folder trained elsewhere (no ``eval_results.json``) is scored by the evaluation itself: the
    recipe's encoder with the run's fresh head, and the saved model, on the rows the run held out; the numbers
    equal the ones the training run measured."""
    import shutil

    from convohub.crychic.model_specs import TRAINING_FILE, evaluate_heldout

    trained = release_root / ".convohub-work" / "crychic" / "crychic_ifqc-tiny"
    copy = shutil.copytree(trained, tmp_path / "ifqc")
    (copy / TRAINING_FILE).unlink()
    rescored = evaluate_heldout("ifqc", copy)
    run = json.loads((trained / TRAINING_FILE).read_text())
    assert rescored.get("scored_by") != "training run" and "training" not in rescored
    for side in ("before", "after"):
        assert rescored[side]["accuracy"] == pytest.approx(run[side]["accuracy"], abs=1e-6)
        assert rescored[side]["f1_macro"] == pytest.approx(run[side]["f1_macro"], abs=1e-6)
        # the recipe's hand-written follow-ups too
        assert rescored["gold"][side]["accuracy"] == pytest.approx(run["gold"][side]["accuracy"], abs=1e-6)
        assert rescored["gold"][side]["examples"] == run["gold"][side]["examples"] >= 60


def test_the_cards_usage_code_runs_without_a_question(release_root: Path) -> None:
    """The card's Usage snippet, run as a user runs it (a fresh interpreter, the repo id pointing at the
    folder): it loads model and tokenizer without stopping to ask whether to run the repository's code
    (``input`` fails the run if transformers asks)."""
    import re
    import subprocess
    import sys

    folder = release_root / "models" / NS / "crychic-ifqc-tiny"
    _, body = read_card(folder / "README.md")
    snippet = re.search(r"## Usage\n\n```python\n(.*?)```", body, re.S).group(1)
    snippet = snippet.replace(f"{NS}/crychic-ifqc-tiny", str(folder))
    guard = "import builtins\ndef _asked(*a, **k):\n    raise SystemExit('asked: ' + str(a))\nbuiltins.input = _asked\n"
    done = subprocess.run([sys.executable, "-c", guard + snippet + "print(type(tokenizer).__name__)"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Tokenizer" in done.stdout and "asked" not in done.stdout + done.stderr


@pytest.mark.parametrize("task", TASKS)
def test_models_load_and_cards_carry_the_measured_before_and_after(release_root: Path, task: str) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = release_root / "models" / NS / f"crychic-{task}-tiny"
    model = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if task == "ifqc":
        with torch.inference_mode():
            logits = model(**tokenizer(["Continue"], return_tensors="pt")).logits
        assert logits.shape == (1, 2)
    measured = _measured(release_root, task)
    assert measured["max_steps"] == 2 and measured["training"]["task"] == task
    # the held-out rows are scored once, by the training run; the evaluation checks the Hub-style reload
    assert measured["scored_by"] == "training run"
    reload = measured["reload"]
    assert reload["class"] == model.__class__.__name__ and reload["trust_remote_code"] is True
    assert reload["missing_keys"] == reload["unexpected_keys"] == [] and reload["tensors"] > 0
    meta, body = read_card(folder / "README.md")
    assert meta["license"] == "mit" and meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    before, after = measured["before"], measured["after"]
    assert f"| accuracy | {before['accuracy']} | {after['accuracy']} |" in body
    assert f"| f1_macro | {before['f1_macro']} | {after['f1_macro']} |" in body
    assert "stopped after 2 optimiser step(s)" in body
    metrics = {m["name"]: m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert metrics[f"Held-out accuracy ({task})"] == after["accuracy"]
    assert ("## Chat-tree reconstruction" in body) == (task == "judge")
    gold = measured.get("gold")
    assert (gold is not None) == (task == "ifqc") == ("| metric (hand-written set) |" in body)
    if gold:
        assert f"| accuracy | {gold['before']['accuracy']} | {gold['after']['accuracy']} |" in body
        assert f"{gold['after']['examples']} follow-ups written by hand" in body


def test_judge_card_has_the_reconstruction_table(release_root: Path) -> None:
    recon = _measured(release_root, "judge")["reconstruction"]
    assert recon["conversations"] == int(CONVERSATIONS) and recon["conversations_in_split"] == 100
    systems = recon["systems"]
    assert set(systems) == {"Non-Reconstructing", "CRyCHIc w/o PS", "CRyCHIc w/o IFQC", "CRyCHIc"}
    # the baseline never makes a root past the first turn; the ablations never consult the left-out module
    assert set(systems["Non-Reconstructing"]["rules"]) <= {"first-turn", "previous-turn"}
    assert not any("simplifier" in rule for rule in systems["CRyCHIc w/o PS"]["rules"])
    assert not any("ifqc" in rule for rule in systems["CRyCHIc w/o IFQC"]["rules"])
    _, body = read_card(release_root / "models" / NS / "crychic-judge-tiny" / "README.md")
    llm = json.loads((release_root / ".convohub-work" / "crychic" / "crychic_llm_baseline_eval.json").read_text())
    assert llm["llm"] == "writer" and llm["scoring"] == "generate" and llm["conversations"] == int(CONVERSATIONS)
    assert llm["unparsed"] == {} and set(llm["rules"]) == {"first-turn", "llm-parent"}
    rows = {**{name: result["scores"]["all_turns"] for name, result in systems.items()},
            "LLM baseline: writer (generate)†": llm["scores"]["all_turns"]}
    for name, micro in rows.items():
        row = f"| {name} | " + " | ".join(f"{micro[m]:.3f}" for m in ("accuracy", "precision", "recall", "f1"))
        assert row in body, row
    assert f"ran on the first {CONVERSATIONS} test conversations only" in body


def test_tree_reconstruct_and_the_space_use_the_released_models(release_root: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.cli import main
    from convohub.crychic.evaluate import load_trees

    record = load_trees(release_root / "datasets" / NS / "wildchat-tree")[0]
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"conversation_id": record["conversation_id"],
                                "turns": [{k: t[k] for k in ("turn_index", "user_prompt", "assistant_response",
                                                             "parent")} for t in record["turns"]]}))
    assert main(["tree", "reconstruct", str(path), "--hub", str(release_root), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["turn_index"] for r in rows] == list(range(len(record["turns"])))
    assert main(["tree", "reconstruct", str(path), "--hub", str(release_root)]) == 0
    assert "parents match the gold tree" in capsys.readouterr().out
    space = release_root / "spaces" / NS / "crychic-demo"
    meta, _ = read_card(space / "README.md")
    assert meta["models"] == [f"{NS}/crychic-{task}-tiny" for task in TASKS]
    assert meta["datasets"] == [f"{NS}/wildchat-tree"] and (space / "app.py").is_file()


def test_rerun_resumes_and_changes_nothing(release_root: Path) -> None:
    before = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    records = _release(release_root)
    assert [r.status for r in records] == ["resumed"] * STEPS
    after = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    assert after == before
