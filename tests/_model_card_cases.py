"""Saved training records and evaluation results of every published model, as the release hands them to the
card step: enough to render each card template (both profiles, every optional paragraph) without training."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

SMOLLM2_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _folder(path: Path, files: dict[str, Any]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}", encoding="utf-8")
    for name, data in files.items():
        (path / name).write_text(json.dumps(data), encoding="utf-8")
    return path


def _chat_lm(tmp: Path, profile: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    record = {"model_name_or_path": "smollm2" if tiny else "convohub-tiny:causal",
              "base_model": SMOLLM2_ID if tiny else None, "dataset_path": "x", "dataset_config": "conversations",
              "train_split": "train", "eval_split": "validation", "max_eval_samples": 4, "max_length": 256,
              "method": "lora" if tiny else "full",
              "lora": {"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear"} if tiny else None,
              "learning_rate": 0.001, "lr_scheduler_type": "linear", "batch_size": 8, "steps": 3, "epochs": 0.3,
              "train_examples": 80, "train_loss": 2.5, "train_seconds": 30.0, "seconds_per_step": 10.0, "seed": 0}
    results = {"split": "validation", "conversations": 4, "max_length": 256, "base_model": record["model_name_or_path"],
               "perplexity_base": 12.3456, "perplexity_trained": 9.8765, "seconds_base": 1.0, "seconds_trained": 1.0}
    return _folder(tmp, {"train_results.json": record}), results


def _extract(tmp: Path, profile: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    script = {"model_name_or_path": "convohub-tiny:seq2seq" if tiny else "facebook/bart-base", "tiny_layers": 2,
              "tiny_d_model": 64, "train_tokenizer_on_data": tiny}
    results: dict[str, Any] = {"split": "test", "pairs": 16, "exact_match": 0.25, "exact_match_positive": 0.125,
                               "exact_match_null": 0.5, "no_repeat_ngram_size": 3 if tiny else 0,
                               "references_blocked_by_no_repeat": 2 if tiny else 0,
                               "pair_settings": {"alias_weight": 0.2, "with_persona_names": False,
                                                 "max_events_per_source": 5, "seed": 0}}
    if tiny:
        results["exact_match_without_no_repeat"] = 0.3125
    else:
        results["before"] = {"exact_match": 0.125, "exact_match_value_outputs": 0.0, "exact_match_null_outputs": 0.25}
    return _folder(tmp, {"training_args.json": {"script": script, "training": {"seed": 0}, "model": {}}}), results


def _extract_causal(tmp: Path, profile: str, model: str) -> tuple[Path, dict[str, Any]]:
    """A causal EXTRACT run (SmolLM2 + LoRA, or the random plumbing model), measured beside its base."""
    saved = {"script": {"architecture": "causal", "max_final_eval_pairs": 16},
             "training": {"seed": 0, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1},
             "model": {"model_name_or_path": model, "lora_r": 16, "lora_alpha": 32, "lora_target_modules": "all-linear"}}
    record = {"steps": 24, "batch_size": 8, "lora": {"r": 16, "alpha": 32, "target_modules": "all-linear"}}
    results: dict[str, Any] = {"split": "test", "pairs": 16, "exact_match": 0.625, "exact_match_null": 0.75,
                               "exact_match_value_outputs": 0.5, "exact_match_null_outputs": 0.875,
                               "no_repeat_ngram_size": 0, "references_blocked_by_no_repeat": 0,
                               "before": {"exact_match": 0.0625, "exact_match_value_outputs": 0.0,
                                          "exact_match_null_outputs": 0.125},
                               "pair_settings": {"alias_weight": 0.2, "with_persona_names": False,
                                                 "max_events_per_source": 5, "seed": 0}}
    return _folder(tmp, {"training_args.json": saved, "train_results.json": record}), results


def _retrieve(tmp: Path, profile: str, task: str) -> tuple[Path, dict[str, Any]]:
    labels = {"0": "irrelevant", "1": "relevant"} if task == "events" else \
        {"0": "irrelevant", "1": "relevant", "2": "partial"}
    results: dict[str, Any] = {"task": task, "split": "test", "labels": labels, "examples": 24, "accuracy": 0.625,
                               "f1_macro": 0.5, "data": {}}
    for name in labels.values():
        results |= {f"examples_{name}": 8, f"recall_{name}": 0.5}
    if profile == "tiny":
        results["training"] = {"split": "dev", "after": {"examples": 32, "f1_macro": 0.5}, "before": {"f1_macro": 0.25},
                               "accuracy_before": 0.375, "accuracy_after": 0.625, "train_examples": 48, "epochs": 1.0}
    if task == "events":
        results["retrieval"] = {"bm25_recall": 0.75, "bm25_precision": 0.125, "pipeline_recall": 0.5,
                                "pipeline_precision": 0.25, "candidates": 40.0, "returned": 10.5, "gold": 5.0,
                                "bm25_f1": 0.2, "pipeline_f1": 0.3, "calls": 3, "calls_in_split": 12,
                                "calls_without_gold": 0, "calls_estimated": 1 if profile == "tiny" else 0,
                                "classified_events": 24, "max_classified": 8, "pattern_model": profile == "tiny"}
    base = "minilm" if profile == "tiny" else "cross-encoder/ms-marco-MiniLM-L12-v2"
    return _folder(tmp, {"training_args.json": {"script": {"model_name_or_path": base}, "training": {"seed": 0},
                                                "model": {}}}), results


def _qud(tmp: Path, profile: str) -> tuple[Path, dict[str, Any]]:
    base = {"tiny": "convohub-tiny:causal", "paper": "meta-llama/Llama-3.2-1B-Instruct", "paper_xs": "smollm2"}[profile]
    random_base = profile == "tiny"
    args = {"script": {"train_tokenizer_on_data": random_base, "grammar_tokens": True, "tiny_layers": 2,
                       "tiny_hidden_size": 64, "max_input_tokens": 200},
            "training": {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "learning_rate": 0.001,
                         "lr_scheduler_type": "linear", "seed": 0},
            "model": {"model_name_or_path": base, "dtype": "float32"}}
    training = {"peft": None if random_base else {"lora_r": 16, "lora_alpha": 32, "lora_target_modules": "all-linear"},
                "optimizer_steps": 6, "train_pairs": 48, "train_seconds": 12.5, "data": {"source": "gold trees"}}
    results: dict[str, Any] = {
        "split": "test", "questions": 4, "hit@1": 0.25, "rlx_hit@1": 0.5, "rlx_hit@1_20": 0.5,
        "tree_exact_match": 0.125, "questions_with_gold_tree": 3, "first_step_exact_match": 0.5,
        "step_exact_match": 0.375, "gold_steps": 9, "parse_rate": 0.75, "tree_rate": 1.0, "answered": 3,
        "retriever": "BM25Retriever", "extractor": "DirectExtractor", "max_trees": 2, "decomposer": {},
        "decomposer_stats": {}, "generation_seconds": 3.5, "seconds": 5.0, "training": training}
    results["before"] = None if random_base else {**results, "model": base, "hit@1": 0.0, "generation_seconds": 1.0}
    if profile == "paper_xs":  # the release's end-to-end comparison, merged in by the card step
        def scores(hit: float, failed: int) -> dict[str, Any]:
            return {"hit@1": hit, "rlx_hit@1": hit, "rlx_hit@1_20": hit, "counts": {"failed_runs": failed},
                    "failures": {}, "per_category": {"ordering": {"hit@1": hit, "n": 3}, "join": {"hit@1": 0.0, "n": 1}}}

        test = {"n": 4, "both": 0, "neither": 2, "method": "exact binomial (two-sided) on discordant questions"}
        results["end_to_end"] = {
            "split": "test", "questions": 4, "llm": "local:HuggingFaceTB/SmolLM2-135M-Instruct", "top_n": 10, "rank_depth": 500,
            "reference": "reqap_sft", "systems": {"reqap_sft": scores(0.5, 1), "rag": scores(0.0, 0),
                                                  "codegen": scores(0.25, 2)},
            "mcnemar": {"rag": {**test, "only_a": 2, "only_b": 0, "p_value": 0.5},
                        "codegen": {**test, "only_a": 1, "only_b": 0, "neither": 2, "both": 1, "p_value": 1.0}}}
    return _folder(tmp, {"training_args.json": args, "eval_results.json": training}), results


def _wildfeedback(tmp: Path, profile: str, base: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    lora = None if base.startswith("convohub-tiny:") else {"r": 16, "alpha": 32, "dropout": 0.05,
                                                           "target_modules": "all-linear"}
    sft = {"stage": "sft", "base_model": base,
           "train_examples": 64, "steps": 4, "batch_size": 16, "learning_rate": 0.003, "loss_first": 3.2,
           "loss_last": 2.1, "train_seconds": 12.0, "collapse_check": "ok", "lora": lora,
           "max_train_samples": 64 if tiny else None}
    dpo = {"stage": "dpo", "reference_model": str(tmp.parent / "sft"), "train_pairs": 64, "steps": 4, "batch_size": 16,
           "learning_rate": 0.001, "beta": 0.1, "loss_first": 0.6931, "loss_last": 0.5, "reward_margin_first": 0.0,
           "reward_margin_last": 0.42, "reward_accuracy_last": 0.75, "train_seconds": 20.0, "collapse_check": "ok",
           "lora": lora, "max_train_samples": 64 if tiny else None, "max_prompt_length": 256, "max_length": 512,
           "variant": None if tiny else "expert", "reference": "the SFT model: a frozen copy",
           "data": {"variants": {"expert": 48, "on_policy": 16}, "truncated_prompts": 3, "dropped_too_long": 1,
                    "dropped_identical": 2}}

    def wtl(win: float, tie: float, lose: float) -> dict[str, Any]:
        return {"win": win, "tie": tie, "lose": lose, "mean_reward": 6.25, "n_judged": 6, "parse_failures": 0}

    nothing = {**wtl(math.nan, math.nan, math.nan), "mean_reward": math.nan, "n_judged": 0, "parse_failures": 12}
    judge = "convohub-lexical-judge" if lora is None else SMOLLM2_ID if tiny else "meta-llama/Llama-3.1-8B-Instruct"
    agreement = {"judge": {"judge": judge, "prompt_style": "wb-reward", "n": 64, "agree": 13, "ties": 42,
                           "wrong": 9, "parse_failures": 0}}
    if lora is not None:
        agreement["lexical"] = {"judge": "convohub-lexical-judge", "prompt_style": "wb-reward", "n": 64, "agree": 20,
                                "ties": 30, "wrong": 14, "parse_failures": 0}
    results = {"n": 6, "judge": judge, "prompt_style": "wb-reward" if tiny else "pointwise", "max_new_tokens": 32,
               "comparisons": {"sft": {"baseline": str(tmp.parent / "sft"), "with_checklist": wtl(0.5, 0.25, 0.25),
                                       "without_checklist": wtl(0.25, 0.5, 0.25)},
                               "base": {"baseline": base,
                                        "with_checklist": wtl(0.125, 0.25, 0.625),
                                        "without_checklist": nothing if not tiny else wtl(0.5, 0.0, 0.5)}},
               "judge_agreement": agreement if profile != "paper_mistral" else {}, "sft": sft, "dpo": dpo}
    return _folder(tmp, {"eval_results.json": dpo}), results


def _crychic(tmp: Path, profile: str, task: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    base = "minilm" if tiny else {"ifqc": "FacebookAI/roberta-base", "simplifier": "Alibaba-NLP/gte-base-en-v1.5",
                                  "judge": "Alibaba-NLP/gte-large-en-v1.5"}[task]
    args = {"script": {"model_name_or_path": base, "dataset_path": "x", "eval_split": "heldout"},
            "training": {"seed": 0, "max_steps": 2 if tiny else -1}}

    def measured(accuracy: float) -> dict[str, Any]:
        out = {"examples": 12, "units": 14, "accuracy": accuracy, "f1_macro": accuracy - 0.1,
               "recall_implicit": 0.5, "units_implicit": 7}
        return out | ({"auc": 0.625} if task == "judge" else {})

    scored = ({"scored_by": "training run", "reload": {"class": "CrychicIFQCModel", "tensors": 107}} if tiny
              else {"scored_by": "evaluation"})  # the paper case: a folder trained elsewhere, scored here
    results: dict[str, Any] = {"task": task, "split": "heldout", "before": measured(0.4286), **scored,
                               "after": measured(0.7857), "base_model": base, "max_steps": 2 if tiny else -1,
                               "training": {"train_examples": 96, "train_seconds": 3.5,
                                            "data_produced_by": "local:HuggingFaceTB/SmolLM2-135M-Instruct"}}
    if task == "ifqc" and tiny:  # the recipe's hand-written follow-ups (the paper case: a folder without them)
        results["gold"] = {"file": "convohub/data/crychic_ifqc_gold.jsonl", "before": measured(0.5),
                           "after": measured(0.9881) | {"examples": 84}}
    if task == "judge" and tiny:  # the tiny recipe's cosine-residual judge (the paper case: the MLP alone)
        results["training"] |= {"cosine_residual": True, "cosine_calibration": {
            "pairs": 96, "scale": 3.9781, "shift": -0.6365, "mean_cosine_parent": 0.2609,
            "mean_cosine_not_parent": 0.1096}, "root_threshold": {
            "threshold": 0.27, "accuracy": 0.6512, "reference_threshold": 0.4, "accuracy_at_reference": 0.5814,
            "roots": 61, "roots_at_reference": 20, "gold_roots": 70, "turns": 215, "conversations": 31,
            "window": 20, "grid": [0.05, 0.95]}, "implicit_threshold": {
            "threshold": 0.7, "accuracy": 0.686, "reference_threshold": 0.5, "accuracy_at_reference": 0.647,
            "implicit": 51, "implicit_at_reference": 66, "conversations": 31, "turns": 215, "window": 20,
            "grid": [0.5, 0.95]}}
    if task == "judge":
        def scores(acc: float) -> dict[str, float]:
            one = {"accuracy": acc, "precision": 0.5, "recall": 0.75, "f1": 0.6}
            return one | {f"macro_{k}": v for k, v in one.items()}

        systems = {name: {"scores": {"all_turns": scores(0.1 * (i + 3)), "without_first_turns": scores(0.1 * (i + 2))},
                          "rules": {}, "seconds": 1.5}
                   for i, name in enumerate(("Non-Reconstructing", "CRyCHIc w/o PS", "CRyCHIc w/o IFQC", "CRyCHIc"))}
        results["reconstruction"] = {"split": "test", "conversations": 10, "conversations_in_split": 100,
                                     "turns": 56, "judge_architecture": "bi", "systems": systems,
                                     **({"threshold": 0.27, "threshold_origin": "tuned for this judge",
                                         "implicit_threshold": 0.7, "implicit_threshold_origin": "tuned for this pipeline"}
                                        if tiny else {"threshold": 0.4, "threshold_origin": "the paper's",
                                                      "implicit_threshold": 0.5,
                                                      "implicit_threshold_origin": "the IFQC's argmax"})}
        if tiny:  # the release's LLM baseline step ran (the paper case: it did not)
            results["llm_baseline"] = {
                "llm": "HuggingFaceTB/SmolLM2-135M-Instruct", "scoring": "likelihood", "calibrated": True,
                "conversations": 4, "conversations_in_split": 100, "turns": 21, "seconds": 30.5, "ms_per_turn": 1452.4,
                "scores": {"all_turns": scores(0.25), "without_first_turns": scores(0.2)}, "unparsed": {},
                "crychic": {"scores": {"all_turns": scores(0.45)}, "seconds": 0.4}}
    return _folder(tmp, {"training_args.json": args}), results


def _f1(task: str, macro: float) -> dict[str, float]:
    names = ("not_satisfied", "satisfied") if task == "task1" else ("sq1", "sq2", "sq3", "sq4", "none")
    return {"micro_f1": macro + 0.1, "macro_f1": macro, **{f"f1_{n}": macro for n in names}, "invalid_rate": 0.0}


def _promise_encoder(tmp: Path, profile: str, task: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    base = "minilm" if tiny else "google-bert/bert-base-uncased"
    args = {"script": {"model_name_or_path": base, "dataset_path": "x"}, "training": {"seed": 0}}
    cv = {"folds": 4, "scores": _f1(task, 0.41), "fold_sizes": [5, 6, 4, 5]} if tiny else {"folds": 1}
    training = {"train_items": 20, "train_seconds": 4.2, "class_weighting": "balanced" if tiny else "none",
                "max_steps": 2 if tiny else -1, **({"head": "multiple-choice"} if tiny and task == "task2" else {})}
    # tiny beats the majority baseline, paper does not: both verdict paragraphs render
    after = _f1(task, 0.55 if tiny else 0.2)
    results = {"task": task, "split": "test", "items": 18, "before": _f1(task, 0.3), "after": after,
               "majority": _f1(task, 0.3), "cv": cv, "training": training}
    return _folder(tmp, {"training_args.json": args}), results


def _promise_generator(tmp: Path, profile: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    base = "smollm2" if tiny else "huggyllama/llama-7b"
    args = {"script": {"dataset_path": "x"}, "training": {"seed": 0}, "model": {"model_name_or_path": base}}
    training = {"train_turns": 40, "steps": 2 if tiny else 300, "train_seconds": 20.5, "first_loss": 3.1,
                "last_loss": 1.2, "learning_rate": 0.002, "lora": {"r": 64, "alpha": 16, "target_modules": "all-linear"},
                "reply_counts": {"1": 9, "2": 5, "3": 4, "4": 2, "done": 12, "none": 8}}
    # tiny oversamples the replies (6 x 12 rows), paper trains on the turns as they are: both forms render
    training |= {"action_balance": "oversample", "train_examples": 72} if tiny else \
        {"action_balance": "none", "train_examples": 40}
    before = {"task1": _f1("task1", 0.46), "task2": _f1("task2", 0.07)}
    after = {"task1": _f1("task1", 0.5 if tiny else 0.4), "task2": _f1("task2", 0.05 if tiny else 0.2)}
    majority = {"task1": _f1("task1", 0.46), "task2": _f1("task2", 0.07)}
    results = {"split": "test", "items": {"task1": 18, "task2": 12}, "base_model": base, "before": before,
               "after": after, "majority": majority, "training": training,
               "likelihood": {"before": before, "after": after},
               # calibrated: above the base on both tasks in either profile, so its row differs from the others
               "calibrated": {"before": before, "after": {"task1": _f1("task1", 0.55), "task2": _f1("task2", 0.12)}},
               "replies": {"before": {"sq1": 18}, "after": {"done": 3, "sq2": 14, "None": 1}}}
    if tiny:
        results["table"] = {"majority (validation)": majority, "zero-shot smollm2": before,
                            "zero-shot smollm2, likelihood": before, "encoders (task 1, task 2)": after,
                            "LoRA simulator": after, "LoRA simulator, likelihood": after,
                            "zero-shot smollm2, calibrated": before,
                            "LoRA simulator, calibrated": results["calibrated"]["after"]}
    return _folder(tmp, {"training_args.json": args}), results


#: (spec name, profile, variant) -> builder(model folder, profile) -> evaluation results; the variants reach every
#: optional paragraph of the templates (random or named base model, with or without LoRA, judge agreement ...)
def _aqa_causal_lm(tmp: Path, profile: str) -> tuple[Path, dict[str, Any]]:
    tiny = profile == "tiny"
    record = {"model_name_or_path": "smollm2" if tiny else "convohub-tiny:causal",
              "base_model": SMOLLM2_ID if tiny else None, "dataset_path": "x",
              "context": "summary" if tiny else "raw", "corpus_size": 520, "max_train_samples": 48 if tiny else None,
              "max_eval_questions": 40, "max_length": 128, "method": "lora" if tiny else "full",
              "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"} if tiny else None,
              "learning_rate": 0.001, "lr_scheduler_type": "linear", "batch_size": 8, "steps": 6, "epochs": 1.0,
              "train_examples": 48, "train_loss": 3.1, "train_seconds": 20.0, "seconds_per_step": 3.3, "seed": 0}
    answerers = ["likelihood"] if tiny else ["likelihood", "paper"]

    def scores(ndcg10: float, perplexity: float | None) -> dict[str, Any]:
        out: dict[str, Any] = {a: {"ndcg@1": 0.25, "ndcg@3": 0.35, "ndcg@5": 0.45, "ndcg@10": ndcg10,
                                   **({"parse_rate": 0.9} if a == "paper" else {})} for a in answerers}
        return out | ({"perplexity": perplexity} if perplexity else {})

    before, after = (0.6123, 0.5987) if tiny else (0.6211, 0.6346)
    results = {"questions": 40, "context": record["context"], "answerers": answerers, "base_model": "smollm2",
               "held_out": 24 if tiny else 0, "before": scores(before, 9.5 if tiny else None),
               "after": scores(after, 4.25 if tiny else None), "beats_base": after > before}
    return _folder(tmp, {"train_results.json": record}), results


CASES = {
    ("aqa_causal_lm", "tiny", ""): _aqa_causal_lm, ("aqa_causal_lm", "paper", ""): _aqa_causal_lm,
    ("chat_lm", "tiny", ""): _chat_lm, ("chat_lm", "paper", ""): _chat_lm,
    ("reqap_extract", "tiny", ""): _extract, ("reqap_extract", "paper", ""): _extract,
    ("reqap_extract", "tiny", "smollm2"): lambda t, p: _extract_causal(t, p, "smollm2"),
    ("reqap_extract", "tiny", "random"): lambda t, p: _extract_causal(t, p, "convohub-tiny:causal"),
    ("reqap_retrieve_patterns", "tiny", ""): lambda t, p: _retrieve(t, p, "patterns"),
    ("reqap_retrieve_patterns", "paper", ""): lambda t, p: _retrieve(t, p, "patterns"),
    ("reqap_retrieve_events", "tiny", ""): lambda t, p: _retrieve(t, p, "events"),
    ("reqap_retrieve_events", "paper", ""): lambda t, p: _retrieve(t, p, "events"),
    ("reqap_qud", "tiny", ""): _qud, ("reqap_qud", "paper", ""): _qud, ("reqap_qud", "paper_xs", ""): _qud,
    ("wildfeedback_dpo", "tiny", "random"): lambda t, p: _wildfeedback(t, p, "convohub-tiny:causal"),
    ("wildfeedback_dpo", "tiny", "smollm2"): lambda t, p: _wildfeedback(t, p, "smollm2"),
    ("wildfeedback_dpo", "paper", ""): lambda t, p: _wildfeedback(t, p, "microsoft/Phi-3-mini-4k-instruct"),
    ("wildfeedback_dpo", "paper_mistral", ""): lambda t, p: _wildfeedback(t, p, "mistralai/Mistral-7B-Instruct-v0.3"),
    **{(f"crychic_{task}", profile, ""): functools.partial(_crychic, task=task)
       for task in ("ifqc", "simplifier", "judge") for profile in ("tiny", "paper")},
    **{(f"promise_{task}_encoder", profile, ""): functools.partial(_promise_encoder, task=task)
       for task in ("task1", "task2") for profile in ("tiny", "paper")},
    ("promise_lora_simulator", "tiny", ""): _promise_generator, ("promise_lora_simulator", "paper", ""): _promise_generator,
}


def card_case(tmp: Path, name: str, profile: str, variant: str = "") -> tuple[Path, dict[str, Any]]:
    """A model folder holding the saved training files, and the evaluation results, of one case."""
    return CASES[(name, profile, variant)](tmp / name / f"{profile}{variant}" / "model", profile)
