"""The `convohub` command as a user meets it: help texts, listings, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from convohub.cli import main


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "convohub.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_help_explains_every_command() -> None:
    out = _run("--help")
    assert out.returncode == 0
    for word in ("release", "datasets", "train", "evaluate", "space", "CONVOHUB_LLM_BASE_URL"):
        assert word in out.stdout
    rel = _run("release", "--help")
    assert "--profile" in rel.stdout and "--push" in rel.stdout and "--namespace" in rel.stdout


def test_release_list_names_registered_systems(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", "--list"]) == 0
    out = capsys.readouterr().out
    assert "corpus" in out and "build:wildchat-sample" in out and "space:wildchat-sample-explorer" in out


def test_datasets_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "list"]) == 0
    assert "wildchat-sample" in capsys.readouterr().out


def test_unknown_dataset_and_system_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["datasets", "build", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert main(["release", "--only", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown system(s) ['nope']" in capsys.readouterr().err


def test_push_requires_namespace(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--push needs --namespace"):
        main(["release", "--push", "--out", str(tmp_path)])


def test_evaluate_rejects_malformed_input(tmp_path: Path) -> None:
    bad = tmp_path / "in.json"
    bad.write_text(json.dumps({"predictions": [1]}))
    with pytest.raises(SystemExit, match="must be a JSON object with 'predictions' and 'references'"):
        main(["evaluate", "ndcg", str(bad)])
    assert main(["evaluate", "no_such_metric", str(bad)]) == 2


def test_train_needs_a_recipe(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not found"):
        main(["train", str(tmp_path / "missing.yaml")])


@pytest.mark.slow
def test_train_command_runs_a_recipe(tmp_path: Path) -> None:
    """`convohub train RECIPE --flag value` trains with the recipe, flags overriding it."""
    hub = tmp_path / "hub"
    assert main(["datasets", "build", "wildchat-sample", "--out", str(hub)]) == 0
    out = tmp_path / "model"
    recipe = Path(__file__).resolve().parents[1] / "training" / "chat_lm" / "tiny.yaml"
    assert main(["train", str(recipe), "--dataset_path", str(hub / "datasets" / "convohub" / "wildchat-sample"),
                 "--output_dir", str(out), "--max_train_samples", "32", "--num_train_epochs", "1",
                 "--model_name_or_path", "convohub-tiny:causal"]) == 0  # the random plumbing model: fast
    results = json.loads((out / "train_results.json").read_text())
    arguments = json.loads((out / "training_args.json").read_text())  # the format every script shares
    assert arguments["script"]["max_train_samples"] == 32 and arguments["model"]["use_peft"] is True
    assert results["train_examples"] == 32 and results["steps"] == 4 and results["epochs"] == 1.0
    assert results["model_name_or_path"] == "convohub-tiny:causal" and results["base_model"] is None
    assert (out / "model.safetensors").is_file() and (out / "chat_template.jinja").is_file()
    assert not (out / "adapter_config.json").exists()  # the recipe's LoRA adapter is merged on save


def test_space_command_exports(tmp_path: Path) -> None:
    assert main(["space", "corpus", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "spaces" / "convohub" / "wildchat-sample-explorer"
    assert {p.name for p in folder.iterdir()} >= {"README.md", "app.py", "requirements.txt"}
    assert main(["space", "nope", "--out", str(tmp_path)]) == 2


def test_evaluate_list_needs_no_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--list"]) == 0
    assert "perqa" in capsys.readouterr().out
    assert main(["evaluate"]) == 2
    assert "--list" in capsys.readouterr().err
