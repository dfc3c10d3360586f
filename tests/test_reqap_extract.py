"""EXTRACT model of ReQAP: pair derivation, value conversion, weighted loss, and a tiny end-to-end training
that saves a model ``AutoModelForSeq2SeqLM`` loads and generates with."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import date, datetime, time
from pathlib import Path

import pytest

from convohub.hub import HubTarget
from convohub.perqa import PerQAConfig, build_perqa, generate_perqa
from convohub.reqap.components.extract import NULL, convert_value, extraction_input
from convohub.reqap.data.extract import (
    ABSENT_KEYS,
    KEY_ALIASES,
    TEMPORAL_KEYS,
    PairConfig,
    format_value,
    pairs_from_dataset,
    pairs_from_perqa,
)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "training" / "reqap_extract" / "train_reqap_extract.py"


@pytest.fixture(scope="module")
def data():
    return generate_perqa(PerQAConfig(n_personas=4, start_date=date(2024, 6, 1)))


@pytest.fixture(scope="module")
def train_pairs(data):
    return pairs_from_perqa(data, "train", PairConfig(max_events_per_source=30), max_pairs=None)


@pytest.fixture(scope="module")
def dataset_dir(data, tmp_path_factory):
    return build_perqa(HubTarget(tmp_path_factory.mktemp("hub")), ROOT, data=data)


def test_every_kind_of_pair_is_derived(train_pairs) -> None:
    kinds = Counter(p.kind for p in train_pairs)
    assert set(kinds) == {"temporal", "mentioned", "native", "alias", "unmentioned", "other_source", "absent"}
    assert all(p.input.startswith(f"Attribute: {p.attribute}, Event: ") for p in train_pairs)
    assert all(p.output == NULL for p in train_pairs if p.kind in ("unmentioned", "other_source", "absent"))
    assert all(p.key in ABSENT_KEYS for p in train_pairs if p.kind == "absent")
    assert {p.key for p in train_pairs if p.kind == "temporal"} == set(TEMPORAL_KEYS)
    assert all(p.output != NULL for p in train_pairs if p.kind == "mentioned")


def test_weights_and_aliases(train_pairs) -> None:
    assert {p.weight for p in train_pairs if p.kind != "alias"} == {1.0}
    aliases = [p for p in train_pairs if p.kind == "alias"]
    assert aliases and {p.weight for p in aliases} == {0.2}
    assert all(p.attribute in KEY_ALIASES[p.key] for p in aliases)
    assert all(len(v) <= 5 for v in KEY_ALIASES.values())
    originals = {(p.event_id, p.persona_id, p.key): p.output for p in train_pairs if p.kind != "alias"}
    assert all(originals[(p.event_id, p.persona_id, p.key)] == p.output for p in aliases)


def test_values_follow_the_events(data, train_pairs) -> None:
    p0 = data.split("train")[0]
    events = {e["id"]: e for e in p0.observable}
    for p in train_pairs:
        if p.persona_id == p0.persona_id and p.kind == "temporal":
            assert p.output == format_value(events[p.event_id][p.key])
    artists = [p for p in train_pairs if p.key == "song_artist" and p.kind == "mentioned"]
    assert artists and all(isinstance(json.loads(p.output), list) for p in artists)


def test_deterministic_deduplicated_and_capped(data, train_pairs) -> None:
    again = pairs_from_perqa(data, "train", PairConfig(max_events_per_source=30), max_pairs=None)
    assert again == train_pairs
    assert len({p.input for p in train_pairs}) == len(train_pairs)
    capped = pairs_from_perqa(data, "train", PairConfig(max_events_per_source=30), max_pairs=200)
    assert len(capped) == 200
    assert capped == pairs_from_perqa(data, "train", PairConfig(max_events_per_source=30), max_pairs=200)
    assert set(capped) <= set(train_pairs)
    other_seed = pairs_from_perqa(data, "train", PairConfig(seed=1, max_events_per_source=30), max_pairs=200)
    assert other_seed != capped


def test_pairs_from_dataset_match_the_generator(data, dataset_dir) -> None:
    config = PairConfig(max_events_per_source=10)
    from_folder = pairs_from_dataset(dataset_dir, "dev", config, max_pairs=None)
    assert from_folder == pairs_from_perqa(data, "dev", config, max_pairs=None)
    assert {p.persona_id for p in from_folder} == {p.persona_id for p in data.split("dev")}


def test_persona_names_are_optional(data) -> None:
    plain = pairs_from_perqa(data, "dev", PairConfig(max_events_per_source=2), max_pairs=None)
    named = pairs_from_perqa(data, "dev", PairConfig(max_events_per_source=2, with_persona_names=True),
                             max_pairs=None)
    name = data.split("dev")[0].persona["name"]
    assert all(name not in p.input for p in plain[:5]) and all(f"me: {name}" in p.input for p in named)


@pytest.mark.parametrize(("text", "attr_type", "expected"), [
    ("84.44 EUR", "float", 84.44),
    ("34 minutes", int, 34),
    ("1,200.5", "float", 1200.5),
    ("null", "float", None),
    ("about five", "int", None),
    ("2024-03-13", "date", date(2024, 3, 13)),
    ("2024-03-13 08:00:00", "time", time(8, 0)),
    ("2024-03-13 08:00:00", "datetime", datetime(2024, 3, 13, 8, 0)),
    ('["Hollow Summer", "Nadia Silva"]', "list", ["Hollow Summer", "Nadia Silva"]),
    ("Anna and Tom", list, ["Anna", "Tom"]),
    ("Lyon", "str", "Lyon"),
    ("", "str", None),
])
def test_convert_value(text, attr_type, expected) -> None:
    assert convert_value(text, attr_type) == expected


def test_convert_value_rejects_unknown_types() -> None:
    with pytest.raises(ValueError, match="unknown attr_type"):
        convert_value("1", "complex")


def test_format_value_round_trips() -> None:
    assert format_value(95.0) == "95" and convert_value(format_value(95.0), "int") == 95
    assert format_value(None) == NULL and format_value(False) == "false"
    assert convert_value(format_value(["a", "b"]), "list") == ["a", "b"]


def test_weighted_loss_scales_examples() -> None:
    import torch

    from convohub.reqap.release.extract import weighted_loss

    logits = torch.randn(2, 3, 5)
    labels = torch.tensor([[1, 2, -100], [3, 4, 0]])
    full = weighted_loss(logits, labels, torch.tensor([1.0, 1.0]))
    first = weighted_loss(logits[:1], labels[:1], torch.tensor([1.0]))
    second = weighted_loss(logits[1:], labels[1:], torch.tensor([1.0]))
    assert torch.isclose(full, (first + second) / 2)
    assert torch.isclose(weighted_loss(logits, labels, torch.tensor([1.0, 0.2])), (first + 0.2 * second) / 2)


def test_no_repeat_check_flags_repeated_ngrams() -> None:
    from transformers import AutoTokenizer

    from convohub.reqap.release.extract import blocked_by_no_repeat
    from convohub.tiny import tiny_model

    tok = AutoTokenizer.from_pretrained(tiny_model("seq2seq"))
    assert blocked_by_no_repeat(tok, '["Ann Lee", "Bo Lee", "Cy Lee"]', 3)
    assert not blocked_by_no_repeat(tok, "2024-03-13", 3)
    assert not blocked_by_no_repeat(tok, '["Ann Lee", "Bo Lee", "Cy Lee"]', 0)


def test_tiny_training_end_to_end(dataset_dir, tmp_path) -> None:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from convohub.cli import load_script

    out = tmp_path / "model"
    script = load_script(SCRIPT)
    results = script.main([
        "--config", str(ROOT / "training" / "reqap_extract" / "tiny_bart.yaml"),
        "--dataset_path", str(dataset_dir),
        "--output_dir", str(out), "--max_train_pairs", "256", "--max_eval_pairs", "64",
        "--max_final_eval_pairs", "16", "--num_train_epochs", "1", "--tokenizer_vocab_size", "512",
        "--max_events_per_source", "5"])
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved["exact_match"] == results["exact_match"] and 0.0 <= saved["exact_match"] <= 1.0
    assert saved["pairs"] == 16 and saved["train_pairs"] == 256
    assert not (out / "base-model").exists()
    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert model.generation_config.no_repeat_ngram_size == 3
    event = {"start_date": "2024-07-01", "start_time": "10:00:00", "event": "played a song", "song_name": "X"}
    ids = model.generate(**tok(extraction_input("start_date", event), return_tensors="pt"), max_new_tokens=8)
    assert isinstance(tok.decode(ids[0], skip_special_tokens=True), str)

    from convohub.reqap.release import extract as release

    evaluated = release.evaluate(out, dataset_dir, "test", max_pairs=8)
    assert evaluated["split"] == "test" and evaluated["pairs"] == 8
    # evaluation derives pairs with the run's own settings: the CLI override, not the recipe's 40
    assert evaluated["pair_settings"]["max_events_per_source"] == 5 and evaluated["pair_settings"]["seed"] == 0
    card_dir = release.SPEC.publish(HubTarget(tmp_path / "hub"), ROOT, "tiny", out, evaluated)
    card = (card_dir / "README.md").read_text()
    assert "exact_match" in card and "christmann2025reqap" in card and "license: mit" in card
    assert not (card_dir / "eval_results.json").exists()


def test_causal_training_end_to_end(dataset_dir, tmp_path) -> None:
    """The causal variant (the SmolLM2 recipe on a random 2-layer plumbing model): chats in, a merged causal
    model out, measured held-out and on test beside its base, published with the causal usage and base."""
    from convohub.cli import load_script
    from convohub.reqap.components.extract import ModelExtractor, is_causal, load_extract_model
    from convohub.reqap.release import extract as release

    out = tmp_path / "model"
    results = load_script(SCRIPT).main([
        "--config", str(ROOT / "training" / "reqap_extract" / "tiny.yaml"),
        "--model_name_or_path", "convohub-tiny:causal", "--dataset_path", str(dataset_dir),
        "--output_dir", str(out), "--max_train_pairs", "64", "--max_eval_pairs", "32",
        "--max_final_eval_pairs", "8", "--max_steps", "2", "--max_events_per_source", "5",
        "--max_target_length", "8"])
    assert results["pairs"] == 8 and results["steps"] == 2 and results["train_pairs"] == 64
    assert 0 < results["train_chats"] <= 64  # alias pairs kept at their weight's rate
    saved = json.loads((out / "eval_results.json").read_text())
    assert saved["exact_match"] == results["exact_match"] and saved["no_repeat_ngram_size"] == 0
    record = json.loads((out / "train_results.json").read_text())
    assert record["architecture"] == "causal" and record["method"] == "lora" and record["steps"] == 2
    tokenizer, model = load_extract_model(out)
    assert is_causal(model) and not (out / "adapter_config.json").exists()  # the adapter is merged

    evaluated = release.evaluate(out, dataset_dir, "test", max_pairs=4)
    assert evaluated["pairs"] == 4 and set(evaluated["before"]) == {
        "exact_match", "exact_match_value_outputs", "exact_match_null_outputs"}
    from convohub.models import cache_root

    def kept() -> dict[str, int]:
        return {f.name: f.stat().st_mtime_ns for f in (cache_root() / "extract-base").glob("scores-*.json")}

    before = kept()
    assert before and release.evaluate(out, dataset_dir, "test", max_pairs=4)["before"] == evaluated["before"]
    assert kept() == before  # the base's scores were read back, not measured and written again
    default = release.evaluate(out, dataset_dir, "test")  # default: the run's own max_final_eval_pairs
    assert default["pairs"] == 8
    card_dir = release.SPEC.publish(HubTarget(tmp_path / "hub"), ROOT, "tiny", out, evaluated)
    card = (card_dir / "README.md").read_text()
    assert "AutoModelForCausalLM" in card and "extraction_messages" in card and "randomly initialised tiny causal" in card
    assert f"exact match {evaluated['before']['exact_match']} on the same pairs" in card
    assert "pipeline_tag: text-generation" in card and "no_repeat_ngram_size" not in card.split("## Training")[0]

    # a long input is clipped before the chat template, so the prompt still ends with the generation prompt
    from convohub.reqap.components.extract import causal_prompts

    long_input = extraction_input("song_name", {**{f"note_{k}": "word " * 40 for k in range(20)}, "song_name": "X"})
    short, clipped = causal_prompts(tokenizer, ["Attribute: a, Event: b: 1", long_input], 32)
    ending = short[short.index("Event: b: 1") + len("Event: b: 1"):]
    assert clipped.endswith(ending) and len(tokenizer(clipped)["input_ids"]) < 32 + len(tokenizer(short)["input_ids"])

    extractor = ModelExtractor(out, max_new_tokens=4)
    event = {"start_date": "2024-07-01", "start_time": "10:00:00", "event": "played a song", "song_name": "X"}
    assert len(extractor.extract([event, event], "song_name")) == 2


def test_script_help() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for flag in ("--learning_rate", "--dataset_path", "--train_tokenizer_on_data", "--no_repeat_ngram_size"):
        assert flag in out.stdout
