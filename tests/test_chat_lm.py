"""The corpus chat LM as a user meets it: one conversation -> one chat, then (slow) a real LoRA run from
SmolLM2 through `accelerate launch`, loaded back with plain `from_pretrained`, evaluated and carded."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from convohub.corpus.chat_format import conversation_to_messages

ROOT = Path(__file__).resolve().parents[1]


def test_conversation_to_messages_puts_metadata_in_the_system_line() -> None:
    row = {"conversation_id": "c1", "timestamp": "2023-05-01T10:00:00", "user_id": "u7", "country": "France",
           "turns": [{"role": "user", "content": "Bonjour"}, {"role": "assistant", "content": "Salut !"},
                     {"role": "human", "content": 3}]}
    assert conversation_to_messages(row) == [
        {"role": "system", "content": "Time: 2023-05-01, user u7 is from France."},
        {"role": "user", "content": "Bonjour"}, {"role": "assistant", "content": "Salut !"},
        {"role": "user", "content": "3"}]
    bare = conversation_to_messages({"turns": [], "country": None})
    assert bare == [{"role": "system", "content": "Time: unknown, user unknown is from unknown."}]
    with pytest.raises(KeyError, match="'c9' has no 'turns'"):
        conversation_to_messages({"conversation_id": "c9"})


@pytest.mark.slow
def test_lora_from_smollm2_trains_merges_and_is_evaluated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1 LoRA step on 8 short chats: the saved folder is a plain Llama with SmolLM2's vocabulary, and
    evaluation and card read what training recorded -- without importing the CLI or the script."""
    from transformers import AutoModelForCausalLM

    from convohub import cli
    from convohub.corpus import chat_lm
    from convohub.corpus.dataset import build_wildchat_sample
    from convohub.hub import HubTarget, read_card
    from convohub.models import SMOLLM2_ID
    from convohub.training.runs import saved_arguments

    def forbidden(*_: object) -> None:
        raise AssertionError("library code must launch the script, not import it")

    monkeypatch.setattr(cli, "load_script", forbidden)
    target = HubTarget(root=tmp_path / "hub", namespace="convohub")
    dataset = build_wildchat_sample(target, ROOT, seed=0)
    out = chat_lm.SPEC.train(ROOT, "tiny", dataset, tmp_path / "model", 0,
                             extra=["--max_train_samples", "8", "--max_length", "64", "--max_eval_samples", "4"])

    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.model_type == "llama" and model.config.vocab_size == 49152
    assert not (out / "adapter_config.json").exists()  # LoRA merged into the weights
    args = chat_lm.read_training_record(out)
    assert saved_arguments(out)["script"]["max_train_samples"] == 8  # the common format of every script
    assert (args["steps"], args["train_examples"], args["max_length"]) == (1, 8, 64)
    assert args["method"] == "lora" and args["lora"]["r"] == 16 and args["base_model"] == SMOLLM2_ID

    results = chat_lm.evaluate(out, dataset)
    assert (results["conversations"], results["max_length"]) == (4, 64)
    assert all(math.isfinite(results[k]) and results[k] > 1 for k in ("perplexity_base", "perplexity_trained"))
    assert results["perplexity_trained"] != results["perplexity_base"]  # the weights did change

    folder = chat_lm.SPEC.publish(target, ROOT, "tiny", out, results)
    meta, body = read_card(folder / "README.md")
    assert meta["base_model"] == SMOLLM2_ID and meta["license"] == "apache-2.0"
    assert meta["datasets"] == ["convohub/wildchat-sample"] and meta["pipeline_tag"] == "text-generation"
    assert "lora" in meta["tags"] and meta["library_name"] == "transformers"
    [metric] = meta["model-index"][0]["results"][0]["metrics"]
    assert metric == {"type": "perplexity", "value": results["perplexity_trained"], "name": "Perplexity"}
    assert f"| base (before fine-tuning) | {results['perplexity_base']} |" in body
    assert "LoRA r 16, alpha 32" in body and "| optimiser steps | 1 |" in body
    assert not {"training_args.json", "train_results.json"} & {f.name for f in folder.iterdir()} and (folder / "model.safetensors").is_file()
