"""CRyCHIc's release steps at smoke scale (`convohub release --only crychic --max-train-steps 2`): the three
models are trained by their scripts, load with from_pretrained(trust_remote_code=True), their cards carry the
before/after numbers the evaluation step measured, the judge's card carries the reconstruction table, and a
re-run resumes every step without changing a published file.

The IFQC sentences come from a scripted writer (SmolLM2 would take minutes) and the reconstruction is cut to a
few test conversations (``CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS``), so the test stays near a minute.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from convohub.hub import folder_digest, read_card
from convohub.release import run_release

sys.path.insert(0, str(Path(__file__).parent))
from test_crychic_training_data import good_sentence, scripted  # noqa: E402

pytestmark = pytest.mark.slow
NS = "convohub"
CONVERSATIONS = "6"
TASKS = ("ifqc", "simplifier", "judge")


def _release(root: Path) -> list:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS", CONVERSATIONS)
        records, failure = run_release(out=root, only=["crychic"], llm=scripted(good_sentence, "writer"),
                                       max_train_steps=2)
    assert failure is None, failure
    return records


@pytest.fixture(scope="module")
def release_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crychic-hub")
    records = _release(root)
    assert [r.status for r in records] == ["done"] * 11
    return root


def _measured(root: Path, task: str) -> dict:
    return json.loads((root / ".convohub-work" / "crychic" / f"crychic_{task}_eval.json").read_text())


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
    # the evaluation re-measures the fresh head exactly as the script did, and the saved model as trained
    assert measured["before"]["accuracy"] == measured["training"]["accuracy_before"]
    assert measured["after"]["accuracy"] == measured["training"]["accuracy_after"]
    meta, body = read_card(folder / "README.md")
    assert meta["license"] == "mit" and meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    before, after = measured["before"], measured["after"]
    assert f"| accuracy | {before['accuracy']} | {after['accuracy']} |" in body
    assert f"| f1_macro | {before['f1_macro']} | {after['f1_macro']} |" in body
    assert "stopped after 2 optimiser step(s)" in body
    metrics = {m["name"]: m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert metrics[f"Held-out accuracy ({task})"] == after["accuracy"]
    assert ("## Chat-tree reconstruction" in body) == (task == "judge")


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
    for name, result in systems.items():
        micro = result["scores"]["all_turns"]
        row = f"| {name} | " + " | ".join(f"{micro[m]:.3f}" for m in ("accuracy", "precision", "recall", "f1"))
        assert row in body, row


def test_rerun_resumes_and_changes_nothing(release_root: Path) -> None:
    before = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    records = _release(release_root)
    assert [r.status for r in records] == ["resumed"] * 11
    after = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    assert after == before
