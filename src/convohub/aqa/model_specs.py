"""The fine-tuned WildChat-AQA model (method (c)), declared once (:class:`convohub.model_spec.ModelSpec`).

Training launches ``training/aqa_causal_lm/train_aqa_causal_lm.py`` with the profile's recipe under
``accelerate launch`` (``tiny.yaml``: SmolLM2-135M-Instruct with LoRA on summaries; ``paper.yaml``: Qwen3-8B,
lr 1e-5, one epoch, batch 8, linear decay). :func:`evaluate` asks the questions of the built folder with no
context, once with the base model and once with the trained folder, with the same answerer (the
``likelihood`` answerer, plus the paper's prompt when the base is not the offline model) and scores both with
NDCG@1/3/5/10; it also measures the perplexity of chats the run held out (conversations outside its
seeded training subset, rendered in the same format), which shows what training changed even when the
rankings do not move. The card (``model_cards/wildchat_aqa_causal_lm.md``) reports those numbers and says
plainly whether the trained model beats its base.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.aqa.questions import DATASET_NAME
from convohub.hub import ModelCardInfo, markdown_table, read_json
from convohub.model_spec import CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.training.chat_sft import TRAINING_RECORD_FILE, card_training_values

#: Held-out chats whose perplexity the evaluation measures (the first ones outside the training subset).
HELD_OUT = 24
NDCG_KEYS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10")


def read_record(model_dir: Path) -> dict[str, Any]:
    path = Path(model_dir) / TRAINING_RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {model_dir} was not written by {SPEC.script} (re-run the "
                                "training step, or `convohub train training/aqa_causal_lm/<profile>.yaml`)")
    return read_json(path)


def held_out_chats(dataset_dir: Path, record: Mapping[str, Any]) -> list[list[dict[str, str]]]:
    """Up to :data:`HELD_OUT` chats outside the run's seeded training subset (the cap and seed it recorded),
    in the training format."""
    from convohub.aqa.chat_format import aqa_messages
    from convohub.aqa.questions import corpus_config
    from convohub.hub import load_local
    from convohub.training.chat_sft import held_out

    context = record["context"]
    rows = load_local(dataset_dir, corpus_config(context), "train")
    return [aqa_messages(r, context) for r in held_out(rows, record.get("max_train_samples"), record["data_seed"],
                                                        HELD_OUT)]


def _score(model_path: str, dataset_dir: Path, questions: Any, answerers: tuple[str, ...],
           chats: list[list[dict[str, str]]], max_length: int) -> dict[str, Any]:
    from convohub.aqa.evaluation import AQARunner, Setting
    from convohub.llm import make_backend
    from convohub.training.perplexity import perplexity

    started = time.perf_counter()
    backend = make_backend(f"local:{model_path}")
    runner = AQARunner(dataset_dir, backend=backend, questions=questions)
    out: dict[str, Any] = {}
    for answerer in answerers:
        results, _ = runner.evaluate(Setting("no-context", answerer=answerer))
        out[answerer] = {k: results[k] for k in (*NDCG_KEYS, "parse_rate", "input_tokens") if k in results}
    if chats:
        texts = [backend.tokenizer.apply_chat_template(c, tokenize=False) for c in chats]
        out["perplexity"] = round(perplexity(backend.model, backend.tokenizer, texts, max_length=max_length), 4)
    out["seconds"] = round(time.perf_counter() - started, 1)
    del backend, runner
    gc.collect()
    return out


def evaluate(model_dir: Path, dataset_dir: Path, *, max_questions: int | None = None) -> dict[str, Any]:
    """NDCG@k with no context before (base model) and after (trained folder) on the same questions, and the
    perplexity of held-out chats (module doc). The base model, context, caps and seed come from the run's
    record."""
    from convohub.aqa.questions import load_questions
    from convohub.training.models import is_offline_model, resolve_model

    record = read_record(model_dir)
    limit = max_questions if max_questions is not None else record.get("max_eval_questions")
    questions = load_questions(dataset_dir, "questions", limit)
    answerers = ("likelihood",) if is_offline_model(record["model_name_or_path"]) else ("likelihood", "paper")
    max_length = int(record.get("max_length") or 1024)
    chats = held_out_chats(Path(dataset_dir), record)
    base = _score(resolve_model(record["model_name_or_path"]), Path(dataset_dir), questions, answerers, chats,
                  max_length)
    trained = _score(str(model_dir), Path(dataset_dir), questions, answerers, chats, max_length)
    main = answerers[0]
    return {"questions": len(questions), "context": record["context"], "answerers": list(answerers),
            "base_model": record["model_name_or_path"], "held_out": len(chats), "before": base, "after": trained,
            "beats_base": trained[main]["ndcg@10"] > base[main]["ndcg@10"],
            **{f"{k}_before": base[main][k] for k in NDCG_KEYS}, **{f"{k}_after": trained[main][k] for k in NDCG_KEYS}}


# ------------------------------------------------------------------------------------------------ card
def _rows(results: Mapping[str, Any]) -> str:
    rows = []
    for answerer in results["answerers"]:
        for name, key in (("base (before fine-tuning)", "before"), ("this model", "after")):
            scores = results[key][answerer]
            rows.append([name, answerer, *[scores[k] for k in NDCG_KEYS],
                         scores.get("parse_rate", "-") if answerer != "likelihood" else "-"])
    return markdown_table(["model", "answerer", *[k.upper() for k in NDCG_KEYS], "parse rate"], rows)


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values: the measured NDCG@k and perplexities, what the training run recorded."""
    from huggingface_hub import EvalResult

    args, results = read_record(card.model_dir), card.results
    base_model, lora = args.get("base_model"), args.get("lora")
    main = results["answerers"][0]
    after = results["after"][main]
    metrics = [EvalResult(task_type="text-ranking", dataset_name=DATASET_NAME, dataset_type=card.dataset_id,
                          dataset_config="questions", dataset_split="test", metric_type=k,
                          metric_name=f"{k.upper()} (no context, {main} answerer)", metric_value=after[k])
               for k in NDCG_KEYS]
    info = ModelCardInfo(
        license="apache-2.0", pipeline_tag="text-generation", base_model=base_model, datasets=(card.dataset_id,),
        tags=("convohub", "wildchat-aqa", "aggregative-qa", "trl", "sft", *(("lora",) if lora else ())),
        results=tuple(metrics))
    perplexities = "perplexity" in results["before"] and "perplexity" in results["after"]
    values = {
        **card_training_values(args, "corpus_size"),
        "context": args["context"], "context_words": "summaries" if args["context"] == "summary" else "conversations",
        "questions": results["questions"], "ndcg_table": _rows(results),
        "verdict": block(bool(results["beats_base"]), "beats", "does_not_beat"),
        "ndcg10_before": results["before"][main]["ndcg@10"], "ndcg10_after": after["ndcg@10"],
        "perplexity": block(perplexities, "perplexity"), "held_out": results["held_out"],
        "perplexity_base": results["before"].get("perplexity"), "perplexity_trained": results["after"].get("perplexity"),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
    }
    return info, values


SPEC = ModelSpec(
    name="aqa_causal_lm",
    script="training/aqa_causal_lm/train_aqa_causal_lm.py",
    recipes=profile_recipes("training/aqa_causal_lm", "tiny", "paper"),
    repos={"tiny": "wildchat-aqa-causal-lm-tiny", "paper": "wildchat-aqa-causal-lm-qwen3-8b"},
    dataset=DATASET_NAME,
    template="wildchat_aqa_causal_lm",
    card_values=card_values,
    evaluate=lambda model_dir, dataset_dir, _models: evaluate(model_dir, dataset_dir),
    headline=("ndcg@10_before", "ndcg@10_after"),
)
