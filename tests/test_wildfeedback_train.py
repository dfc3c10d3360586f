"""WildFeedback alignment: recipes, truncation policy, collapse check, LR grid, QLoRA configs, and a tiny
SFT -> DPO -> checklist-judge evaluation -> model card run on the fixture preference rows."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from convohub.cli import load_script
from convohub.training.models import model_init_kwargs
from convohub.training.recipes import parse_recipe
from convohub.wildfeedback import alignment as al

sys.path.insert(0, str(Path(__file__).parent))
from _wildfeedback_fixture import fixture_rows, write_fixture_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SFT = ROOT / "training" / "wildfeedback_sft"
DPO = ROOT / "training" / "wildfeedback_dpo"


def _parse(folder: Path, name: str) -> tuple:
    module = load_script(next(folder.glob("train_*.py")))
    return parse_recipe(module.make_parser(), folder / name)


# ----------------------------------------------------------------------------------------------- recipes
@pytest.mark.parametrize("name,model", [("paper.yaml", "microsoft/Phi-3-mini-4k-instruct"),
                                        ("paper_llama3.yaml", "meta-llama/Meta-Llama-3-8B-Instruct"),
                                        ("paper_mistral.yaml", "mistralai/Mistral-7B-Instruct-v0.3")])
def test_paper_recipes_carry_the_papers_hyperparameters(name: str, model: str) -> None:
    _, sft, sft_model = _parse(SFT, name)
    assert sft_model.model_name_or_path == model
    assert (sft.learning_rate, sft.num_train_epochs, sft.warmup_steps) == (5e-6, 1, 0.1)
    assert sft.per_device_train_batch_size * sft.gradient_accumulation_steps == 128
    assert sft.lr_scheduler_type.value == "cosine"
    script, dpo, dpo_model = _parse(DPO, name)
    assert (dpo.learning_rate, dpo.beta, list(dpo.loss_type), dpo.warmup_steps) == (5e-7, 0.1, ["sigmoid"], 0.1)
    assert dpo.per_device_train_batch_size * dpo.gradient_accumulation_steps == 32
    assert dpo_model.model_name_or_path == sft.output_dir  # DPO starts from (and is referenced to) the SFT model
    if name == "paper_mistral.yaml":
        assert script.learning_rate_grid == [5e-7, 2e-7, 1e-7] and script.validation_fraction > 0


def test_tiny_recipes_lora_on_smollm2_within_budget() -> None:
    """The release's recipes: SmolLM2 + LoRA r16, capped pairs, no bf16/checkpointing on CPU; DPO starts
    from the SFT output (its reference, with the adapter disabled)."""
    from peft import LoraConfig

    for folder, cap in ((SFT, 128), (DPO, 64)):
        script, args, model_args = _parse(folder, "tiny.yaml")
        assert isinstance(al.lora_config(model_args), LoraConfig) and model_args.lora_r == 16
        assert script.max_train_samples == cap and script.variant is None
        assert (args.bf16, args.activation_checkpointing, args.use_cpu) == (False, False, True)
    assert _parse(SFT, "tiny.yaml")[2].model_name_or_path == "smollm2"
    assert _parse(DPO, "tiny.yaml")[2].model_name_or_path == _parse(SFT, "tiny.yaml")[1].output_dir


def test_variant_selects_rows_and_names_the_ones_present() -> None:
    import datasets

    rows = fixture_rows(n_users=3)
    policy = "on_policy:HuggingFaceTB/SmolLM2-135M-Instruct"
    mixed = datasets.Dataset.from_list([{**r, "variant": policy if i % 2 else "expert"}
                                        for i, r in enumerate(rows)])
    for name in ("on_policy", policy):
        on_policy = al.select_variant(mixed, name, "fixture")
        assert len(on_policy) == len(rows) // 2 and set(on_policy["variant"]) == {policy}
    assert al.select_variant(mixed, None, "fixture") is mixed
    with pytest.raises(ValueError, match=r"fixture: no training rows of variant 'on_pol'; variants present: "
                                         r"\['expert', 'on_policy:HuggingFaceTB/SmolLM2-135M-Instruct'\]"):
        al.select_variant(mixed, "on_pol", "fixture")


def test_qlora_recipe_builds_bitsandbytes_and_lora_configs() -> None:
    from peft import LoraConfig
    from transformers import BitsAndBytesConfig

    for folder in (SFT, DPO):
        _, _, model_args = _parse(folder, "paper_phi3_qlora.yaml")
        kwargs = model_init_kwargs(model_args)
        quant = kwargs["quantization_config"]
        assert isinstance(quant, BitsAndBytesConfig) and quant.load_in_4bit
        assert quant.bnb_4bit_quant_type == "nf4" and quant.bnb_4bit_use_double_quant
        lora = al.lora_config(model_args)
        assert isinstance(lora, LoraConfig) and lora.r == 16 and lora.lora_alpha == 32
    _, _, full = _parse(SFT, "paper.yaml")
    assert al.lora_config(full) is None and "quantization_config" not in model_init_kwargs(full)


# ------------------------------------------------------------------------------------------- truncation
def _words(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"].split()) + 1 for m in messages)


def test_truncation_drops_oldest_exchanges_and_keeps_system_and_query() -> None:
    msgs = [{"role": "system", "content": "be brief"},
            {"role": "user", "content": "one two three four"}, {"role": "assistant", "content": "a b c d e f"},
            {"role": "user", "content": "five six"}, {"role": "assistant", "content": "g h"},
            {"role": "user", "content": "the query"}]
    assert al.truncate_prompt(msgs, _words, 100).messages == msgs
    fitted = al.truncate_prompt(msgs, _words, 12)
    assert fitted.messages == [msgs[0], *msgs[3:]] and fitted.dropped_turns == 2 and not fitted.cut_query
    only = al.truncate_prompt(msgs, _words, 6)
    assert only.messages == [msgs[0], msgs[-1]] and only.dropped_turns == 4
    assert al.truncate_prompt(msgs, _words, 3).messages is None  # no tokenizer: cannot cut the query


def test_truncation_cuts_a_long_query_keeping_its_end() -> None:
    from transformers import AutoTokenizer

    from convohub.tiny import tiny_model

    tok = AutoTokenizer.from_pretrained(tiny_model("causal"))
    count = al.chat_token_counter(tok)
    query = " ".join(["filler"] * 200) + " please summarise the text above"
    msgs = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": query}]
    fitted = al.truncate_prompt(msgs, count, 40, tokenizer=tok)
    assert fitted.cut_query and fitted.dropped_turns == 2 and fitted.tokens <= 40
    assert count(fitted.messages) <= 40 and fitted.messages[-1]["content"].endswith("summarise the text above")


def test_conversion_drops_identical_pairs_for_dpo_and_names_bad_rows() -> None:
    from transformers import AutoTokenizer

    from convohub.tiny import tiny_model

    tok = AutoTokenizer.from_pretrained(tiny_model("causal"))
    rows = fixture_rows(n_users=3)
    rows[0] = {**rows[0], "chosen": rows[0]["rejected"]}
    dpo, stats = al.convert_rows(rows, tok, "dpo", 128)
    assert stats.dropped_identical == 1 and len(dpo) == len(rows) - 1
    assert set(dpo.column_names) == {"prompt", "chosen", "rejected"} and dpo[0]["chosen"][0]["role"] == "assistant"
    sft, sft_stats = al.convert_rows(rows, tok, "sft", 128)
    assert len(sft) == len(rows) and set(sft.column_names) == {"prompt", "completion"}
    assert sft_stats.variants == {"expert": len(rows)}
    bad = {**rows[1], "prompt": [*rows[1]["prompt"], {"role": "assistant", "content": "x"}]}
    with pytest.raises(ValueError, match=rf"row {rows[1]['id']}: the prompt must end with the user query"):
        al.convert_rows([bad], tok, "dpo", 128)


# ------------------------------------------------------------------------------------------ collapse check
def test_collapse_check_triggers_on_diverging_logs(tmp_path: Path) -> None:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    assert al.CollapseCheck().check({"loss": float("nan")}, 3) == "loss is nan at step 3"
    growing = al.CollapseCheck(loss_factor=4.0)
    assert [growing.check({"loss": v}, s) is None for s, v in enumerate([0.7, 1.5, 2.7])] == [True] * 3
    assert "exceeds 4.0 x the first logged loss" in growing.check({"loss": 2.9}, 4)
    margins = al.CollapseCheck(margin_window=4, margin_threshold=1.0)
    healthy = [margins.check({"loss": 0.69, "rewards/margins": m}, s) for s, m in enumerate([0.0, 0.2, -0.1, 0.3])]
    assert healthy == [None] * 4
    diverging = [margins.check({"rewards/margins": m}, s) for s, m in enumerate([-0.2, -0.6, -0.9, -1.4], 4)]
    assert diverging[:3] == [None] * 3 and "rewards/margins diverged" in diverging[3]

    check = al.CollapseCheck(tmp_path / "report.json", margin_window=3, margin_threshold=0.5)
    state, control = TrainerState(), TrainerControl()
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=2e-5, use_cpu=True, report_to="none")
    for step, logs in enumerate([{"loss": 0.69, "rewards/margins": -0.1}, {"loss": 0.8, "rewards/margins": -0.4},
                                 {"loss": 0.9, "rewards/margins": -0.7}], 1):
        state.global_step = step
        check.on_log(args, state, control, logs=logs)
    assert control.should_training_stop and check.collapsed
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "collapsed" and report["step"] == 3 and report["learning_rate"] == 2e-5


def test_lr_grid_keeps_the_best_non_collapsed_run(tmp_path: Path) -> None:
    assert al.check_lr_grid([1e-7, 5e-7, 1e-7]) == [5e-7, 1e-7]
    with pytest.raises(ValueError, match="positive learning rates"):
        al.check_lr_grid([0.0])

    class Args:
        output_dir, learning_rate = str(tmp_path / "out"), 0.0

    def run_once(args: Args) -> dict:
        if args.learning_rate > 4e-7:
            raise al.TrainingCollapsed("loss is nan at step 2")
        out = Path(args.output_dir)
        out.mkdir(parents=True)
        (out / "model.bin").write_text(str(args.learning_rate))
        result = {"eval_loss": 0.5 + args.learning_rate * 1e6}
        (out / al.RESULTS_FILE).write_text(json.dumps(result))
        return result

    script = al.AlignmentArguments(learning_rate_grid=[5e-7, 2e-7, 1e-7], validation_fraction=0.1)
    results = al.run_lr_grid(script, Args(), run_once)
    assert results["lr_grid"]["selected_learning_rate"] == 1e-7
    assert [r["status"] for r in results["lr_grid"]["runs"]] == ["collapsed", "ok", "ok"]
    assert (tmp_path / "out" / "model.bin").read_text() == "1e-07"
    with pytest.raises(ValueError, match="validation_fraction"):
        al.run_lr_grid(al.AlignmentArguments(learning_rate_grid=[1e-7]), Args(), run_once)


# ----------------------------------------------------------------------------------------- end to end
#: Plumbing runs swap SmolLM2 + LoRA for the random tiny model, fully fine-tuned (seconds on CPU).
PLUMBING = ["--use_peft", "false", "--max_train_samples", "64"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("wf")
    dataset = write_fixture_dataset(root / "hub")
    dpo_dir = al.train(ROOT, "tiny", dataset, root / "run", seed=0, variant="expert",
                       sft_args=["--model_name_or_path", "convohub-tiny:causal", "--learning_rate", "3e-3",
                                 "--num_train_epochs", "2", *PLUMBING],
                       dpo_args=["--learning_rate", "1e-3", *PLUMBING])
    return {"root": root, "dataset": dataset, "sft": root / "run" / "sft", "dpo": dpo_dir}


def test_tiny_sft_then_dpo_trains_and_loads(trained: dict) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sft, dpo = al.read_results(trained["sft"]), al.read_results(trained["dpo"])
    assert sft["stage"] == "sft" and sft["collapse_check"] == "ok" and sft["steps"] > 0
    assert math.isfinite(sft["loss_first"]) and sft["loss_last"] < sft["loss_first"]
    assert dpo["reference_model"] == str(trained["sft"]) and dpo["beta"] == 0.1 and dpo["loss_type"] == ["sigmoid"]
    assert dpo["loss_first"] == pytest.approx(math.log(2), abs=1e-3)  # policy == reference at step 0
    assert "reward_margin_last" in dpo and dpo["data"]["variants"] == {"expert": dpo["train_pairs"]}
    assert sft["variant"] == dpo["variant"] == "expert" and dpo["lora"] is None and dpo["train_seconds"] > 0
    assert (trained["root"] / "run" / "sft.log").is_file()  # each stage ran as an `accelerate launch` subprocess
    models = {k: AutoModelForCausalLM.from_pretrained(trained[k]) for k in ("sft", "dpo")}
    AutoTokenizer.from_pretrained(trained["dpo"])
    changed = any(not torch.equal(a, b) for a, b in zip(models["sft"].parameters(), models["dpo"].parameters(),
                                                            strict=True))
    assert changed, "DPO left the SFT weights unchanged"


def _dpo_trainer_on_the_sft_model(trained: dict, tmp_path: Path, *extra_args: str) -> tuple[Any, dict]:
    """The DPO script's trainer (tiny recipe plus ``extra_args``) on the trained SFT model, not trained."""
    script = load_script(DPO / "train_wildfeedback_dpo.py")
    args = script.make_parser().parse_args_and_config(
        ["--config", str(DPO / "tiny.yaml"), "--dataset_path", str(trained["dataset"]), "--output_dir",
         str(tmp_path / "dpo"), "--model_name_or_path", str(trained["sft"]), *extra_args],
        fail_with_unknown_args=True)
    run = al.build_dpo_trainer(*args)
    assert run.base_path == str(trained["sft"])
    return run.trainer, run.extra


def test_dpo_reference_is_the_sft_model(trained: dict, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    trainer, extra = _dpo_trainer_on_the_sft_model(trained, tmp_path, "--use_peft", "false")
    sft = AutoModelForCausalLM.from_pretrained(trained["sft"])
    ref = trainer.ref_model
    assert ref is not None and ref is not trainer.model and extra["reference_model"] == str(trained["sft"])
    for (name, a), b in zip(ref.named_parameters(), sft.parameters(), strict=True):
        assert torch.equal(a.detach().cpu(), b), name
        assert not a.requires_grad, name


def test_lora_dpo_reference_is_the_sft_model_with_the_adapter_disabled(trained: dict, tmp_path: Path) -> None:
    """With LoRA the policy is a fresh adapter on the SFT weights and the reference is the adapter-disabled
    model, i.e. exactly the SFT model (no second copy)."""
    import torch
    from transformers import AutoModelForCausalLM

    trainer, extra = _dpo_trainer_on_the_sft_model(trained, tmp_path, "--max_train_samples", "8")
    assert trainer.ref_model is None and extra["lora"]["r"] == 16 and "adapter disabled" in extra["reference"]
    ids = torch.tensor([[1, 5, 9, 3]])
    with torch.no_grad(), trainer.model.disable_adapter():
        reference = trainer.model(input_ids=ids).logits
    sft = AutoModelForCausalLM.from_pretrained(trained["sft"])
    with torch.no_grad():
        assert torch.allclose(reference, sft(input_ids=ids).logits, atol=1e-5)


def test_evaluate_cli_and_card_report_measured_numbers(trained: dict, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from convohub.hub import HubTarget, read_card
    from convohub.wildfeedback.eval_cli import add_evaluate_cli

    parser = argparse.ArgumentParser()
    add_evaluate_cli(parser.add_subparsers(dest="cmd"))
    out = tmp_path / "eval.json"
    args = parser.parse_args(["evaluate", "--model", str(trained["dpo"]), "--baseline", "convohub-tiny:causal",
                              "--dataset", str(trained["dataset"]), "--judge-model", "lexical", "--limit", "6",
                              "--max-new-tokens", "32", "--max-prompt-length", "256", "--out", str(out)])
    assert args.handler(args) == 0
    printed = capsys.readouterr().out
    assert "checklist" in printed and "no checklist" in printed and "plumbing" in printed
    results = json.loads(out.read_text())
    assert results["n"] == 6 and results["judge"] == "convohub-lexical-judge"
    [comparison] = results["comparisons"].values()
    for key in ("with_checklist", "without_checklist"):
        r = comparison[key]
        assert r["n_judged"] == 6 and r["parse_failures"] == 0  # the lexical judge always answers
    bad = parser.parse_args(["evaluate", "--model", "m", "--baseline", "b", "--dataset", str(tmp_path / "none"),
                             "--judge-model", "lexical"])
    assert bad.handler(bad) == 2
    nameless = parser.parse_args(["evaluate", "--model", "m", "--baseline", "b", "--dataset", str(trained["dataset"])])
    assert nameless.handler(nameless) == 2 and "no judge named" in capsys.readouterr().err

    results["comparisons"] = {"sft": {**comparison, "baseline": str(trained["sft"])},
                              "base": {**comparison, "baseline": "convohub-tiny:causal"}}
    results |= {"sft": al.read_results(trained["sft"]), "dpo": al.read_results(trained["dpo"]),
                "judge_agreement": {"judge": {"judge": "convohub-lexical-judge", "prompt_style": "wb-reward", "n": 64,
                                              "agree": 13, "ties": 42, "wrong": 9, "parse_failures": 0}}}
    card_dir = al.SPEC.publish(HubTarget(root=tmp_path / "hub"), ROOT, "tiny", trained["dpo"], results)
    meta, body = read_card(card_dir / "README.md")
    assert (card_dir / "config.json").is_file() and not (card_dir / al.RESULTS_FILE).exists()
    wc = comparison["with_checklist"]
    row = (f"| {100 * wc['win']:.1f} | {100 * wc['tie']:.1f} | {100 * wc['lose']:.1f} | "
           f"{wc['mean_reward']:.1f} | {wc['n_judged']} | {wc['parse_failures']} |")
    assert f"| SFT model (stage 1) (`sft`) | with checklist {row}" in body
    assert "`convohub-lexical-judge`: 13/64 (42 ties, 9 wrong, 0 unparsed; wb-reward prompt)" in body
    assert "plumbing check, not a quality claim" in body and "`expert`" in body
    assert f"{results['dpo']['reward_margin_first']} -> {results['dpo']['reward_margin_last']}" in body
    assert "Collapse check: SFT ok, DPO ok." in body  # read from the runs' results, not asserted by the card
    assert "capped at 64 pairs" in body and meta.get("base_model") is None  # random plumbing model: no Hub id
    metrics = {m["type"]: m for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert metrics["win_rate_vs_base_checklist"]["value"] == round(wc["win"], 4)
    assert metrics["win_rate_vs_sft_no_checklist"]["name"].endswith("judge: convohub-lexical-judge)")


def test_a_diverging_run_stops_and_reports(tmp_path: Path) -> None:
    dataset = write_fixture_dataset(tmp_path / "hub", n_users=6, test_users=1)
    script = load_script(SFT / "train_wildfeedback_sft.py")
    out = tmp_path / "sft"
    with pytest.raises(al.TrainingCollapsed, match="exceeds 4.0 x the first logged loss"):
        script.main(["--config", str(SFT / "tiny.yaml"), "--dataset_path", str(dataset), "--output_dir", str(out),
                     "--model_name_or_path", "convohub-tiny:causal", *PLUMBING, "--learning_rate", "30", "--warmup_steps", "0", "--max_steps", "6", "--logging_steps", "1"])
    report = json.loads((out / al.COLLAPSE_REPORT).read_text())
    assert report["status"] == "collapsed" and report["learning_rate"] == 30 and report["step"] < 6
    assert not (out / "model.safetensors").exists()  # a collapsed run is not saved as a model
