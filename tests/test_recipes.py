"""Every training recipe parses strictly against its script (unknown keys are errors), and every script
answers --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from convohub.cli import load_script, script_for_recipe
from convohub.training.recipes import parse_recipe

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p for p in (ROOT / "training").glob("*/*.yaml") if p.parent.name != "accelerate")
SCRIPTS = sorted((ROOT / "training").glob("*/train_*.py"))


def test_every_model_folder_has_both_recipes() -> None:
    folders = {p.parent for p in SCRIPTS}
    assert folders, "no training scripts found"
    for folder in folders:
        assert (folder / "tiny.yaml").is_file() and (folder / "paper.yaml").is_file(), folder


def _parser(module: object, recipe: Path) -> object:
    """The script's parser for ``recipe``: a script whose arguments depend on the recipe's architecture
    (reqap_extract: seq2seq or causal) reads it with its ``architecture`` function."""
    if hasattr(module, "architecture"):
        return module.make_parser(module.architecture(["--config", str(recipe)]))
    return module.make_parser()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recipe_parses_strictly(recipe: Path) -> None:
    module = load_script(script_for_recipe(recipe))
    parsed = parse_recipe(_parser(module, recipe), recipe)
    assert parsed, recipe


def test_extract_recipes_parse_as_their_architecture() -> None:
    module = load_script(ROOT / "training" / "reqap_extract" / "train_reqap_extract.py")
    folder = ROOT / "training" / "reqap_extract"
    assert [module.architecture(["--config", str(folder / f"{n}.yaml")]) for n in ("tiny", "tiny_bart", "paper")] \
        == ["causal", "seq2seq", "seq2seq"]
    assert module.architecture(["--config", str(folder / "tiny.yaml"), "--architecture", "seq2seq"]) == "seq2seq"
    with pytest.raises(ValueError, match="architecture must be one of"):
        module.architecture(["--architecture", "encoder"])
    with pytest.raises(ValueError, match="unknown recipe key"):  # the causal recipe is not a seq2seq one
        parse_recipe(module.make_parser("seq2seq"), folder / "tiny.yaml")


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    recipe = ROOT / "training" / "chat_lm" / "tiny.yaml"
    bad = tmp_path / "tiny.yaml"
    bad.write_text(recipe.read_text() + "warmup_ratio: 0.1\n")
    module = load_script(script_for_recipe(recipe))
    with pytest.raises(ValueError, match=r"unknown recipe key\(s\) \['warmup_ratio'\]"):
        parse_recipe(module.make_parser(), bad)


#: Runs each script given on its command line as ``python SCRIPT --help`` would (``__main__``, its own argv),
#: all in one fresh interpreter so that torch and transformers are imported once, not once per script (14
#: interpreters took ~140 s of the suite); prints {script: {"code", "stdout"}} after a marker line.
HELP_DRIVER = """
import contextlib, io, json, runpy, sys
results = {}
for path in sys.argv[1:]:
    buffer, code = io.StringIO(), None
    sys.argv = [path, "--help"]
    with contextlib.redirect_stdout(buffer):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code
    results[path] = {"code": code, "stdout": buffer.getvalue()}
print("@@help@@")
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, dict]:
    """Every training script's ``--help`` exit code and output."""
    import json

    out = subprocess.run([sys.executable, "-c", HELP_DRIVER, *map(str, SCRIPTS)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "@@help@@" in out.stdout, out.stderr[-3000:]
    return json.loads(out.stdout.split("@@help@@", 1)[1])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_script_help(script: Path, helps: dict[str, dict]) -> None:
    result = helps[str(script)]
    assert result["code"] == 0, result
    assert "--learning_rate" in result["stdout"] and "--dataset_path" in result["stdout"]


def test_accelerate_configs_parse() -> None:
    import yaml

    configs = sorted((ROOT / "training" / "accelerate").glob("*.yaml"))
    assert {p.stem for p in configs} >= {"single_gpu", "multi_gpu_ddp", "deepspeed_zero3", "fsdp"}
    for path in configs:
        data = yaml.safe_load(path.read_text())
        assert data["distributed_type"] in {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP"}
        assert "num_processes" not in data or data["distributed_type"] == "NO", path
