"""The WildFeedback release as a newcomer runs it (`convohub release --only wildfeedback`, offline, a smaller
sample corpus): the dataset loads by config, the aligned model loads with from_pretrained and its card carries
the win/tie/lose that the evaluation step measured, the Space folder is complete, and a re-run resumes."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from convohub.cli import main
from convohub.hub import folder_digest, read_card

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
NS = "convohub"
#: SFT and DPO cut to one optimiser step each (the full tiny recipes take ~9 minutes on 2 cores).
SMOKE = ["--max-train-steps", "1"]
#: on-policy episodes answered by SmolLM2 (the tiny profile's 96 take ~5 minutes on 2 cores)
EPISODES = "6"
#: test instances answered by the three models and judged (the tiny profile's 16)
EVAL_ITEMS = "6"


def _small_release(mp: pytest.MonkeyPatch) -> None:
    """The settings of the test's smaller WildFeedback release (users, on-policy episodes, judged items)."""
    mp.setenv("CONVOHUB_WILDFEEDBACK_USERS", "60")
    mp.setenv("CONVOHUB_WILDFEEDBACK_ON_POLICY_EPISODES", EPISODES)
    mp.setenv("CONVOHUB_WILDFEEDBACK_EVAL_ITEMS", EVAL_ITEMS)


@pytest.fixture(scope="module")
def release_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wf-hub")
    with pytest.MonkeyPatch.context() as mp:
        _small_release(mp)
        assert main(["release", "--only", "wildfeedback", "--out", str(root), *SMOKE]) == 0
    return root


def test_dataset_configs_load(release_root: Path) -> None:
    folder = (release_root / "datasets" / NS / "wildfeedback").resolve()
    pairs = datasets.load_dataset(str(folder), "wildfeedback", split="train")
    test = datasets.load_dataset(str(folder), "test", split="test")
    assert pairs.num_rows > 50 and test.num_rows > 0
    assert not set(pairs["user_id"]) & set(test["user_id"])  # split by user
    assert all(p[-1]["role"] == "user" for p in pairs["prompt"])
    assert all(c != r for c, r in zip(pairs["chosen"], pairs["rejected"], strict=True))
    meta, body = read_card(folder / "README.md")
    assert meta["license"] == "cc-by-4.0"  # built from convohub's generated corpus; a --source build is odc-by
    assert {c["config_name"] for c in meta["configs"]} >= {"wildfeedback", "sat_dsat_annotation", "test"}
    # offline, the on-policy variant comes from SmolLM2 (judged by it, moderated by the measured default)
    on_policy = [v for v in set(pairs["variant"]) if v.startswith("on_policy:")]
    assert on_policy == ["on_policy:HuggingFaceTB/SmolLM2-135M-Instruct"]
    assert f"policy `local:HuggingFaceTB/SmolLM2-135M-Instruct` answered a seeded sample of {EPISODES} of the" in body
    assert "moderation: every generated response was reviewed by `zero-shot:sentence-transformers/all-MiniLM-L6-v2`" in body
    assert "agreed better with 60 hand-labelled replies" in body


def test_aligned_model_loads_and_card_has_measured_judge_results(release_root: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = release_root / "models" / NS / "wildfeedback-tiny-dpo"
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    enc = tok.apply_chat_template([{"role": "user", "content": "Write a short poem about rain."}],
                                  add_generation_prompt=True, return_tensors="pt", return_dict=True)
    assert model.generate(**enc, max_new_tokens=4, do_sample=False).shape[1] > enc["input_ids"].shape[1]
    measured = json.loads((release_root / ".convohub-work" / "wildfeedback" / "alignment_eval.json").read_text())
    meta, body = read_card(folder / "README.md")
    assert meta["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and meta["license"] == "apache-2.0"
    metrics = {m["type"]: m for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert measured["judge"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and measured["prompt_style"] == "pointwise"
    assert measured["n"] == int(EVAL_ITEMS)
    for label in ("sft", "base"):
        w = measured["comparisons"][label]["with_checklist"]
        assert w["n_judged"] + w["parse_failures"] // 2 <= measured["n"]
        entry = metrics[f"win_rate_vs_{label}_checklist"]
        assert entry["value"] == round(w["win"], 4) and entry["name"].endswith(f"judge: {measured['judge']})")
    agreement = measured["judge_agreement"]
    assert agreement["judge"]["n"] >= 60 and agreement["lexical"]["judge"] == "convohub-lexical-judge"
    assert f"{agreement['judge']['agree']}/{agreement['judge']['n']}" in body
    assert f"lexical (word overlap): {agreement['lexical']['agree']}/" in body
    assert "Measured outcome: this model" in body and "LoRA (r 16" in body
    assert "Data variant(s): `on_policy:HuggingFaceTB/SmolLM2-135M-Instruct`" in body
    assert not (folder / "trainer_state.json").exists() and not (folder / "adapter_config.json").exists()


def test_space_folder(release_root: Path) -> None:
    space = release_root / "spaces" / NS / "wildfeedback-explorer"
    meta, _ = read_card(space / "README.md")
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert meta["models"] == [f"{NS}/wildfeedback-tiny-dpo"] and meta["datasets"] == [f"{NS}/wildfeedback"]
    assert (space / "app.py").is_file() and (space / "requirements.txt").is_file()


def test_rerun_resumes_and_changes_nothing(release_root: Path) -> None:
    before = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    with pytest.MonkeyPatch.context() as mp:
        _small_release(mp)
        assert main(["release", "--only", "wildfeedback", "--out", str(release_root), *SMOKE]) == 0
    after = {k: v for k, v in folder_digest(release_root).items() if not k.startswith(".convohub-work")}
    assert after == before
