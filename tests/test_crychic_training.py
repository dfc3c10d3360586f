"""CRyCHIc's three training scripts end to end on a tiny random encoder (``convohub-tiny:encoder``) and a
handful of rows: parse the tiny recipe with overrides, measure the held-out split before and after, train,
save, and load the saved folder through the pipeline's components. Plumbing only: with a random encoder
and a dozen rows the numbers mean nothing, so the tests check that they exist and are consistent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _crychic_tiny import one_thread

from convohub.cli import load_script
from convohub.crychic.data_common import update_record, write_rows
from convohub.crychic.training import Collator, build_model, make_parser

ROOT = Path(__file__).resolve().parents[1]
ENCODER = "convohub-tiny:encoder"


@pytest.fixture(autouse=True, scope="module")
def _torch_on_one_thread() -> Iterator[None]:
    yield from one_thread()


def _rows() -> dict[str, list[dict[str, Any]]]:
    ifqc = [{"text": t, "label": label, "split": split} for t, label, split in [
        ("Continue.", "implicit", "train"), ("Make it shorter.", "implicit", "train"),
        ("How do I bake bread at home?", "explicit", "train"), ("Add garlic to the pasta sauce.", "explicit", "train"),
        ("Say that again.", "implicit", "heldout"), ("Which hotel in Rome is cheapest?", "explicit", "heldout")]]
    simplifier = [{"sentences": s, "labels": labels, "split": split} for s, labels, split in [
        (["Thanks!", "Write a haiku."], ["polite", "instruction"], "train"),
        (["I am a nurse.", "Explain the rota."], ["information", "instruction"], "train"),
        (["Hello.", "My code fails.", "Fix it."], ["polite", "information", "instruction"], "train"),
        (["Great job."], ["polite"], "heldout"), (["The file is big.", "Shrink it."], ["information", "instruction"],
                                                   "heldout")]]
    judge = [{"prompt": p, "history_prompt": hp, "history_response": hr, "label": y, "split": split}
             for p, hp, hr, y, split in [
                 ("Make it shorter.", "Write a poem about rain.", "Rain falls softly on the roof.", 1, "train"),
                 ("Make it shorter.", "What is 2 + 2?", "4.", 0, "train"),
                 ("Translate it to French.", "Write a toast.", "To friends and good health!", 1, "train"),
                 ("Translate it to French.", "Name a planet.", "Mars.", 0, "train"),
                 ("Continue.", "Tell a story.", "Once upon a time ...", 1, "heldout"),
                 ("Continue.", "How tall is Everest?", "8,849 m.", 0, "heldout")]]
    return {"ifqc": ifqc, "simplifier": simplifier, "judge": judge}


def _trees() -> list[dict[str, Any]]:
    """Two held-out conversations as tree records: what the judge's root threshold is tuned on."""
    from convohub.crychic.trees import tree_record

    return [tree_record("a", "single", [("Write a poem about rain.", "Rain falls softly."), ("Make it shorter.", "Rain."),
                                         ("How tall is Everest?", "8,849 m.")], [-1, 0, -1]),
            tree_record("b", "single", [("Tell a story.", "Once upon a time ..."), ("Continue.", "... the end.")],
                        [-1, 0])]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from convohub.crychic.judge_data import write_trees

    folder = tmp_path_factory.mktemp("crychic-data")
    for task, rows in _rows().items():
        counts = write_rows(folder, task, [{**r, "produced_by": "hand-written test rows"} for r in rows])
        update_record(folder, task, {"produced_by": "hand-written test rows", "rows": counts})
    write_trees(folder, _trees())
    return folder


def _train(task: str, data_dir: Path, out: Path, *extra: str) -> dict[str, Any]:
    script = load_script(ROOT / "training" / f"crychic_{task}" / f"train_crychic_{task}.py")
    return script.main(["--config", str(ROOT / "training" / f"crychic_{task}" / "tiny.yaml"),
                        "--model_name_or_path", ENCODER, "--dataset_path", str(data_dir), "--output_dir", str(out),
                        "--num_train_epochs", "2", "--per_device_train_batch_size", "2", "--learning_rate", "1e-3",
                        "--logging_steps", "1", *extra])


def _check_results(results: dict[str, Any], out: Path, task: str, heldout_units: int) -> None:
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved == results and results["task"] == task
    for side in ("before", "after"):
        assert results[side]["units"] == heldout_units
        assert 0.0 <= results[side]["accuracy"] <= 1.0 and 0.0 <= results[side]["f1_macro"] <= 1.0
    assert results["accuracy_before"] == results["before"]["accuracy"]
    assert results["train_examples"] == sum(r["split"] == "train" for r in _rows()[task])
    assert results["data_produced_by"] == "hand-written test rows"
    args = json.loads((out / "training_args.json").read_text())
    assert args["script"]["model_name_or_path"] == ENCODER and args["training"]["num_train_epochs"] == 2


def test_ifqc_script_end_to_end(data_dir: Path, tmp_path: Path) -> None:
    from convohub.crychic.components import ModelFollowUpClassifier

    out = tmp_path / "ifqc"
    results = _train("ifqc", data_dir, out)
    _check_results(results, out, "ifqc", heldout_units=2)
    # the recipe's gold_eval: the hand-written follow-ups scored before and after, with both classes counted
    from convohub.crychic.ifqc_data import load_ifqc_gold

    gold = load_ifqc_gold()
    assert results["gold"]["file"] == "convohub/data/crychic_ifqc_gold.jsonl"
    for side in ("before", "after"):
        scored = results["gold"][side]
        assert scored["examples"] == len(gold)
        assert scored["units_implicit"] == sum(g["label"] == "implicit" for g in gold)
        assert scored["units_explicit"] == sum(g["label"] == "explicit" for g in gold)
    p = ModelFollowUpClassifier(out).implicit_probability("Continue.")
    assert 0.0 <= p <= 1.0
    assert (out / "modeling_crychic.py").is_file()  # code saved for trust_remote_code


def test_simplifier_script_end_to_end(data_dir: Path, tmp_path: Path) -> None:
    from convohub.crychic.components import ModelSentenceLabeller

    out = tmp_path / "simplifier"
    results = _train("simplifier", data_dir, out)
    _check_results(results, out, "simplifier", heldout_units=3)  # sentences, not prompts
    labels = ModelSentenceLabeller(out).label("Thanks! Now write a poem.")
    assert [s for s, _ in labels] == ["Thanks!", "Now write a poem."]


@pytest.mark.parametrize(("architecture", "pooling"), [("bi", "mean"), ("cross", "cls")])
def test_judge_script_end_to_end(data_dir: Path, tmp_path: Path, architecture: str, pooling: str) -> None:
    from _crychic_tiny import save_tiny

    from convohub.crychic.components import ModelParentJudge, StoredTurn

    out = tmp_path / f"judge-{architecture}"
    residual = architecture == "bi"  # the tiny recipe's cosine residual; a cross-encoder must turn it off
    # the tiny recipe also tunes the pipeline's IFQC threshold, with the IFQC and simplifier the release passes
    pipeline = {kind: save_tiny(kind, tmp_path / kind) for kind in ("ifqc", "simplifier")}
    results = _train("judge", data_dir, out, "--architecture", architecture, "--pooling", pooling,
                     "--cosine_residual", str(residual).lower(), "--pipeline_ifqc", str(pipeline["ifqc"]),
                     "--pipeline_simplifier", str(pipeline["simplifier"]))
    assert json.loads((out / "config.json").read_text())["pooling"] == pooling
    _check_results(results, out, "judge", heldout_units=2)
    assert results["architecture"] == architecture and results["after"]["threshold"] == 0.4
    assert results["auc_before"] is not None and 0.0 <= results["auc_after"] <= 1.0
    assert results["cosine_residual"] is residual and ("cosine_calibration" in results) is residual
    # the tiny recipe tunes the root threshold on the held-out trees: 3 judged turns of 2 conversations
    tuned = results["root_threshold"]
    assert (tuned["conversations"], tuned["turns"], tuned["gold_roots"]) == (2, 3, 1)
    assert 0.05 <= tuned["threshold"] <= 0.95 and tuned["accuracy"] >= tuned["accuracy_at_reference"]
    implicit = results["implicit_threshold"]
    assert (implicit["conversations"], implicit["turns"], implicit["grid"]) == (2, 3, [0.5, 0.95])
    assert implicit["accuracy"] >= implicit["accuracy_at_reference"] and implicit["ifqc"] == str(pipeline["ifqc"])
    judge = ModelParentJudge(out)
    assert judge.architecture == architecture
    assert judge.root_threshold == tuned["threshold"] == json.loads((out / "config.json").read_text())["root_threshold"]
    assert judge.implicit_threshold == implicit["threshold"] == \
        json.loads((out / "config.json").read_text())["implicit_threshold"]
    turn = StoredTurn(0, "Write a poem.", "Roses are red.", -1)
    turn.embedding = judge.embed_turn(turn.prompt, turn.response)
    assert len(judge.scores("Make it shorter.", [turn])) == 1


def test_gold_eval_is_an_ifqc_only_setting() -> None:
    from convohub.crychic.training import gold_rows

    args, _ = make_parser().parse_args_and_config(["--model_name_or_path", ENCODER, "--gold_eval", "true",
                                                   "--output_dir", "/tmp/unused"])
    assert len(gold_rows("ifqc", args) or []) >= 60
    with pytest.raises(ValueError, match="only the IFQC"):
        gold_rows("simplifier", args)


def test_architecture_is_a_judge_only_setting() -> None:
    args, _ = make_parser().parse_args_and_config(["--model_name_or_path", ENCODER, "--architecture", "cross",
                                                   "--output_dir", "/tmp/unused"])
    with pytest.raises(ValueError, match="judge only"):
        build_model("ifqc", args)


def test_cosine_residual_is_a_judge_only_setting() -> None:
    args, _ = make_parser().parse_args_and_config(["--model_name_or_path", ENCODER, "--cosine_residual", "true",
                                                   "--output_dir", "/tmp/unused"])
    with pytest.raises(ValueError, match="judge only"):
        build_model("ifqc", args)


def test_root_threshold_tuning_is_a_judge_only_setting_and_needs_the_heldout_trees(tmp_path: Path) -> None:
    args, _ = make_parser().parse_args_and_config(["--model_name_or_path", ENCODER, "--tune_root_threshold", "true",
                                                   "--output_dir", "/tmp/unused"])
    with pytest.raises(ValueError, match="judge only"):
        build_model("ifqc", args)
    folder = tmp_path / "pairs-only"
    write_rows(folder, "judge", [{**r, "produced_by": "hand-written test rows"} for r in _rows()["judge"]])
    with pytest.raises(FileNotFoundError, match=r"heldout_trees\.jsonl does not exist.*--task judge"):
        _train("judge", folder, tmp_path / "judge", "--tune_implicit_threshold", "false")
    # the pipeline's IFQC threshold needs the trained IFQC and simplifier, named before any work is done
    with pytest.raises(ValueError, match="needs the trained --pipeline_ifqc and --pipeline_simplifier"):
        _train("judge", folder, tmp_path / "judge")
    with pytest.raises(ValueError, match="judge only"):
        build_model("ifqc", make_parser().parse_args_and_config(
            ["--model_name_or_path", ENCODER, "--tune_implicit_threshold", "true", "--output_dir", "/tmp/unused"])[0])


def test_paper_recipe_keeps_the_papers_threshold() -> None:
    args, _ = make_parser().parse_args_and_config(["--config", str(ROOT / "training/crychic_judge/paper.yaml"),
                                                   "--output_dir", "/tmp/unused"])
    assert args.tune_root_threshold is False and args.tune_implicit_threshold is False


def test_calibration_fits_the_cosine_to_the_training_pairs() -> None:
    """The untrained residual judge is the encoder's cosine through a logistic fit on the training pairs:
    scale and shift land in the weights and the config, and the judge's probabilities on those pairs are the
    fitted regression's."""
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression

    from convohub.crychic.training import calibrate_cosine

    args, _ = make_parser().parse_args_and_config(["--config", str(ROOT / "training/crychic_judge/tiny.yaml"),
                                                   "--model_name_or_path", ENCODER, "--output_dir", "/tmp/unused"])
    assert args.cosine_residual  # the tiny recipe's judge
    model, tokenizer = build_model("judge", args)
    rows = _rows()["judge"]
    fitted = calibrate_cosine(model, tokenizer, rows)
    assert fitted["pairs"] == len(rows)
    for name in ("scale", "shift"):
        weight, configured = float(getattr(model, f"cosine_{name}").detach()), getattr(model.config, f"cosine_{name}")
        assert weight == pytest.approx(configured, rel=1e-5) and configured == pytest.approx(fitted[name], abs=1e-4)
    batch = Collator("judge", tokenizer, model.config)(rows)
    labels = batch.pop("labels")
    model.eval()
    with torch.no_grad():
        out = model(**batch)
        history = model.embed(batch["history_input_ids"], batch["history_attention_mask"],
                              batch["history_token_type_ids"])
        prompt = model.embed(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        cosines = torch.nn.functional.cosine_similarity(history, prompt)
    expected = LogisticRegression(C=1e4).fit(cosines.numpy().reshape(-1, 1), labels.int().numpy())
    assert np.allclose(out.probabilities.numpy(), expected.predict_proba(cosines.numpy().reshape(-1, 1))[:, 1],
                       atol=1e-4)
    with pytest.raises(ValueError, match="parent and non-parent"):
        calibrate_cosine(model, tokenizer, [r for r in rows if r["label"] == 1])


def test_pooling_is_refused_for_the_simplifier() -> None:
    args, _ = make_parser().parse_args_and_config(["--model_name_or_path", ENCODER, "--pooling", "mean",
                                                   "--output_dir", "/tmp/unused"])
    with pytest.raises(ValueError, match="separator"):
        build_model("simplifier", args)


def test_simplifier_collator_packs_sentences_and_pads_labels() -> None:
    args, _ = make_parser().parse_args_and_config(["--model_name_or_path", ENCODER, "--max_length", "16",
                                                   "--output_dir", "/tmp/unused"])
    model, tokenizer = build_model("simplifier", args)
    rows = _rows()["simplifier"]
    batch = Collator("simplifier", tokenizer, model.config)(rows[:3])
    separators = (batch["input_ids"] == model.config.sep_token_id).sum(dim=1)
    labelled = (batch["labels"] != -100).sum(dim=1)
    assert separators.tolist() == labelled.tolist()  # one label per sentence, at its separator
    assert int(labelled.sum()) == sum(len(r["sentences"]) for r in rows[:3])
