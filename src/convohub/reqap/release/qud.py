"""Evaluate and publish ReQAP's QUD model, declared by :data:`SPEC` (the release steps come from it).

Training (``SPEC.train``) launches training/reqap_qud/train_reqap_qud.py under ``accelerate launch`` with the
profile's recipe on a built PerQA folder (:func:`convohub.training.runs.run_recipe`); the tiny recipe fine-tunes
SmolLM2-135M-Instruct with LoRA and saves merged weights. Evaluation runs
:class:`convohub.reqap.components.qud.SFTDecomposer` on a seeded sample of one split's questions (test: personas and
question templates unseen in training) -- all steps generated greedily in batches, level by level
(:meth:`~convohub.reqap.components.qud.RecursiveDecomposer.prefetch`) -- and measures

* step parse rate -- the share of the model's step outputs that parse as a valid step, and the share of
  questions that got a complete tree;
* first-step exact match -- the root step equals the gold tree's root step (same prompt for every model);
* step exact match -- the share of the gold trees' steps the model's own recursion reproduced (same
  ancestors, same input, same output; a step below a wrong ancestor counts as missed);
* tree exact match -- the first (greedy) tree equals the gold tree, over questions whose template has one;
* end-to-end Hit@1 / Rlx-Hit@1 (10 %, 20 %) -- each question answered by :meth:`ReQAP.answer` (candidate
  trees tried in order, the first that executes answers), with the BM25 retriever and lookup extractor unless
  the caller plugs in trained RETRIEVE/EXTRACT components.

:func:`evaluate_with_base` measures the base model the run started from on the same questions with the same
prompts and limits, so the card (``model_cards/reqap_qud.md``) shows before and after. It reports exactly these measured numbers,
reads what was trained (steps, pairs, LoRA, learning rate, time) from the files the script saved next to
the model, and says which data trained it.
"""

from __future__ import annotations

import json
import time
from datetime import date
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo
from convohub.model_spec import Block, CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.perqa.dataset import REQAP_CITATION
from convohub.training.runs import saved_arguments

DATASET_REPO = "perqa"
#: profile -> (model repo name, licence). Llama fine-tunes must be named starting with "Llama".
PROFILES: dict[str, tuple[str, str]] = {
    "tiny": ("reqap-qud-tiny", "apache-2.0"),
    "paper": ("Llama-3.2-1B-Instruct-reqap-qud", "llama3.2"),
    "paper_xs": ("SmolLM2-135M-Instruct-reqap-qud", "apache-2.0"),
    "paper_s": ("SmolLM2-360M-Instruct-reqap-qud", "apache-2.0"),
    "paper_l": ("Llama-3.2-3B-Instruct-reqap-qud", "llama3.2"),
}
#: Test questions the release scores (each model, base and trained): the cap keeps the QUD step of the
#: tiny release within its CPU budget; the card states it.
RELEASE_QUESTIONS = 32


def base_model_path(model_dir: Path) -> str | None:
    """The folder (or Hub id) of the model training started from, from the run's saved arguments; None for
    a base the run built from its own data (the random plumbing model), which is not kept."""
    from convohub.training.models import resolve_model

    args = saved_arguments(model_dir)
    if args["script"].get("train_tokenizer_on_data"):
        return None
    return resolve_model(str(args["model"]["model_name_or_path"]))


def evaluate(model_dir: Path | str | None, dataset_dir: Path, split: str = "test", *,
             max_questions: int | None = 100, retriever: Any = None, extractor: Any = None, decomposer: Any = None,
             max_trees: int = 10, time_budget: float = 60.0, seed: int = 0, batch_size: int = 16,
             max_input_tokens: int | None = None, max_new_tokens: int | None = None,
             device: str | None = None) -> dict[str, Any]:
    """Step and tree exact match, parse rate and end-to-end Hit@1 of a QUD model on ``split`` (module doc).

    ``model_dir`` is a model folder (its ``qud_config.json`` limits apply unless ``max_input_tokens`` /
    ``max_new_tokens`` are given); ``decomposer`` overrides it (e.g. an
    :class:`~convohub.reqap.components.qud.ICLDecomposer` on a served LLM). ``retriever``/``extractor`` replace BM25 +
    lookup; ``max_trees`` candidates are tried per question. A seeded sample of ``max_questions`` questions is
    scored (None: all). Steps are generated first, ``batch_size`` prompts at a time. ``predictions`` lists
    each question's first tree, answer and hit (the Space picks its examples from them).
    """
    from tqdm.auto import tqdm

    from convohub.metrics import hit_at_1, is_hit
    from convohub.reqap.components.extract import DirectExtractor
    from convohub.reqap.components.pipeline import ReQAP
    from convohub.reqap.components.qud import SFTDecomposer
    from convohub.reqap.components.retrieve import BM25Retriever
    from convohub.reqap.data.gold import gold_tree_or_none
    from convohub.reqap.data.perqa import load_questions, sample_questions
    from convohub.reqap.data.qud import gold_steps
    from convohub.reqap.engine.events import EventStore
    from convohub.reqap.engine.executor import REFERENCE_DATE

    started = time.perf_counter()
    if decomposer is None:
        if model_dir is None:
            raise ValueError("evaluate needs a model_dir or a decomposer")
        decomposer = SFTDecomposer(model_dir, device=device, batch_size=batch_size,
                                   max_input_tokens=max_input_tokens, max_new_tokens=max_new_tokens)
    retriever = retriever if retriever is not None else BM25Retriever()
    extractor = extractor if extractor is not None else DirectExtractor()
    questions = sample_questions(load_questions(dataset_dir, split), max_questions, seed)
    if not questions:
        raise ValueError(f"{dataset_dir}: split {split!r} has no questions")
    generation = 0.0
    if hasattr(decomposer, "prefetch"):
        tick = time.perf_counter()
        decomposer.prefetch([q["question"] for q in questions])
        generation = time.perf_counter() - tick
    system = ReQAP(decomposer, retriever, extractor, budget_s=time_budget, max_trees=max_trees)
    preds: list[str | None] = []
    refs: list[list[str]] = []
    rows: list[dict[str, Any]] = []
    with_tree = with_gold = exact = first_exact = steps_total = steps_exact = 0
    stores: dict[str, EventStore] = {}
    for q in tqdm(questions, desc=f"QUD on {split}", unit="question"):
        pid = q["persona_id"]
        if pid not in stores:
            stores.clear()
            stores[pid] = EventStore.from_dataset_folder(dataset_dir, pid)
        run = system.answer(q["question"], stores[pid], date.fromisoformat(q["reference_date"])
                            if q.get("reference_date") else REFERENCE_DATE)
        first = run.tried[0]["tree"] if run.tried else None
        answer = None if run.tree is None else json.dumps(run.answer, ensure_ascii=False, default=str)
        with_tree += first is not None
        gold = gold_tree_or_none(q)
        if gold is not None:
            with_gold += 1
            exact += first == gold
            steps = gold_steps(q) or []
            proposed = getattr(decomposer, "proposed", lambda chain, question: None)
            hits = [(proposed(chain, inp) or [None])[0] == out for chain, inp, out in steps]
            first_exact += bool(hits and hits[0])
            steps_total += len(steps)
            steps_exact += sum(hits)
        preds.append(answer)
        refs.append([json.dumps(g, ensure_ascii=False, default=str) for g in q["answers"]])
        rows.append({"id": q.get("id"), "persona_id": pid, "template_id": q.get("template_id"),
                     "question": q["question"], "tree": first, "answer": answer,
                     "hit": answer is not None and is_hit(answer, refs[-1])})
    main = hit_at_1(preds, refs, relax=0.1)
    n = len(questions)
    stats = decomposer.stats.as_dict()
    return {
        "split": split, "questions": n,
        "hit@1": round(main["hit@1"], 4), "rlx_hit@1": round(main["rlx_hit@1"], 4),
        "rlx_hit@1_20": round(hit_at_1(preds, refs, relax=0.2)["rlx_hit@1"], 4),
        "tree_exact_match": round(exact / with_gold, 4) if with_gold else 0.0, "questions_with_gold_tree": with_gold,
        "first_step_exact_match": round(first_exact / with_gold, 4) if with_gold else 0.0,
        "step_exact_match": round(steps_exact / steps_total, 4) if steps_total else 0.0, "gold_steps": steps_total,
        "parse_rate": stats["parse_rate"], "tree_rate": round(with_tree / n, 4),
        "answered": sum(p is not None for p in preds),
        "retriever": type(retriever).__name__, "extractor": type(extractor).__name__,
        "max_trees": max_trees, "decomposer": decomposer.describe(), "decomposer_stats": stats,
        "generation_seconds": round(generation, 1), "seconds": round(time.perf_counter() - started, 1),
        "predictions": rows,
    }


def evaluate_with_base(model_dir: Path, dataset_dir: Path, split: str = "test", *,
                       max_questions: int | None = RELEASE_QUESTIONS, seed: int = 0, batch_size: int = 16,
                       **kwargs: Any) -> dict[str, Any]:
    """:func:`evaluate` of the trained model, with ``before``: the same measurement of the base model the
    run started from (same questions, prompts and limits: the trained model's ``qud_config.json``), None
    when that base was built from the data and not kept; and ``training``: what the script recorded."""
    from convohub.reqap.components.qud import QUD_CONFIG

    limits = json.loads((Path(model_dir) / QUD_CONFIG).read_text(encoding="utf-8"))
    results = evaluate(model_dir, dataset_dir, split, max_questions=max_questions, seed=seed,
                       batch_size=batch_size, **kwargs)
    base = base_model_path(model_dir)
    results["before"] = None if base is None else {
        "model": base, **evaluate(base, dataset_dir, split, max_questions=max_questions, seed=seed,
                                  batch_size=batch_size, max_input_tokens=int(limits["max_input_tokens"]),
                                  max_new_tokens=int(limits["max_new_tokens"]), **kwargs)}
    results["training"] = _training_results(model_dir)
    return results


def _training_results(model_dir: Path) -> dict[str, Any]:
    """What the training script recorded (data source, pairs, epochs), or {} for a model trained elsewhere."""
    from convohub.hub import read_json

    path = Path(model_dir) / "eval_results.json"
    return read_json(path) if path.is_file() else {}


#: The Evaluation table's rows: result key -> template value name (``$hit_at_1``; ``$before_hit_at_1`` for the base).
_TABLE = {"hit@1": "hit_at_1", "rlx_hit@1": "rlx_hit_at_1", "rlx_hit@1_20": "rlx_hit_at_1_20",
          "tree_exact_match": "tree_exact_match", "first_step_exact_match": "first_step_exact_match",
          "step_exact_match": "step_exact_match", "parse_rate": "parse_rate", "tree_rate": "tree_rate"}


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values: the measured numbers (before and after training) and the run's own
    arguments (read from ``training_args.json``, not from the recipe)."""
    from huggingface_hub import EvalResult

    from convohub.training.models import SMOLLM2, hub_id
    from convohub.training.runs import saved_arguments

    r = card.results
    arguments = saved_arguments(card.model_dir)
    script, train_args, model_args = arguments["script"], arguments["training"], arguments["model"]
    base = str(model_args["model_name_or_path"])
    random_base = bool(script.get("train_tokenizer_on_data"))
    base_id = None if random_base else hub_id(base)
    licence = PROFILES[card.profile][1] if base_id is not None else "mit"  # a random base is convohub's own (MIT)
    training = r.get("training") or _training_results(card.model_dir)
    peft, before = training.get("peft"), r.get("before")
    metric = {"dataset_name": DATASET_REPO, "dataset_type": card.dataset_id, "dataset_config": "questions",
              "dataset_split": r["split"]}
    info = ModelCardInfo(
        license=licence,
        pipeline_tag="text-generation",
        base_model=base_id,
        datasets=(card.dataset_id,),
        tags=("convohub", "reqap", "perqa", "question-decomposition", "operator-trees"),
        results=(
            EvalResult(**metric, task_type="question-answering", metric_type="hit@1", metric_name="Hit@1",
                       metric_value=r["hit@1"]),
            EvalResult(**metric, task_type="question-answering", metric_type="rlx_hit@1", metric_name="Rlx-Hit@1",
                       metric_value=r["rlx_hit@1"]),
            EvalResult(**metric, task_type="text-generation", metric_type="exact_match",
                       metric_name="Tree exact match", metric_value=r["tree_exact_match"]),
            EvalResult(**metric, task_type="text-generation", metric_type="exact_match",
                       metric_name="Step exact match", metric_value=r["step_exact_match"]),
        ),
    )
    values: dict[str, Any] = {
        "data_source": str(training.get("data", {}).get("source", "unknown")),
        "start": Block("random_base" if random_base else "smollm2_base" if base == SMOLLM2 else "named_base"),
        "base": base, "base_id": base_id, "tiny_layers": script.get("tiny_layers"),
        "tiny_hidden_size": script.get("tiny_hidden_size"), "grammar": block(bool(script.get("grammar_tokens")), "grammar"),
        "method": block(bool(peft), "lora", "full"),
        **({f"lora_{k}": peft[f"lora_{k}"] for k in ("r", "alpha", "target_modules")} if peft else {}),
        "optimizer_steps": training.get("optimizer_steps", "?"),
        "batch": int(train_args.get("per_device_train_batch_size", 0)) * int(train_args.get("gradient_accumulation_steps", 1)),
        "train_pairs": training.get("train_pairs", "?"), "learning_rate": train_args.get("learning_rate"),
        "lr_scheduler_type": train_args.get("lr_scheduler_type"), "max_input_tokens": script.get("max_input_tokens"),
        "train_seconds": training.get("train_seconds", "?"), "dtype": model_args.get("dtype"),
        **{k: r[k] for k in ("questions", "split", "retriever", "extractor", "max_trees", "questions_with_gold_tree")},
        "gold_steps": r.get("gold_steps", "?"),
        **{name: r.get(key, "-") for key, name in _TABLE.items()},
        "compared": block(bool(before), "compared"), "table": block(bool(before), "table_before", "table"),
        "timing": block("generation_seconds" in r, "timing"), "generation_seconds": r.get("generation_seconds"),
        "before_timing": block(bool(before), "before_timing"),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
        "licence_text": Block("llama_licence" if licence == "llama3.2" else "named_licence" if base_id else "own_licence"),
        "citation": REQAP_CITATION.strip(),
    }
    values |= _end_to_end_values(r.get("end_to_end"))
    if before:
        values |= {f"before_{name}": before.get(key, "-") for key, name in _TABLE.items()}
        values["before_generation_seconds"] = before.get("generation_seconds")
    return info, values


#: The end-to-end systems as the card names them.
_SYSTEM_NAMES = {"reqap_sft": "ReQAP (this model, SFT QUD)", "reqap_icl": "ReQAP (ICL QUD)", "rag": "RAG",
                 "codegen": "CodeGen"}


def _end_to_end_values(comparison: dict[str, Any] | None) -> dict[str, Any]:
    """The values of the card's end-to-end block (:mod:`convohub.reqap.release.comparison`'s results), or
    none of them without a comparison."""
    from convohub.hub import markdown_table
    from convohub.perqa.templates import CATEGORIES
    from convohub.reqap.engine.executor import DEFAULT_TIME_BUDGET

    if not comparison:
        return {"end_to_end": ""}
    systems = {name: comparison["systems"][name] for name in _SYSTEM_NAMES if name in comparison["systems"]}
    counts = {c: next((s["per_category"][c]["n"] for s in systems.values() if c in s["per_category"]), 0)
              for c in CATEGORIES}
    cats = [c for c in CATEGORIES if counts[c]]
    rows = [[_SYSTEM_NAMES[name], r["hit@1"], r["rlx_hit@1"], r["counts"]["failed_runs"],
             *(r["per_category"].get(c, {}).get("hit@1", "-") for c in cats)] for name, r in systems.items()]
    table = markdown_table(["system", "Hit@1", "Rlx-Hit@1", "failed runs", *(f"{c} ({counts[c]})" for c in cats)],
                           rows)
    tests = comparison["mcnemar"]
    mcnemar_rows = [[_SYSTEM_NAMES[name], t["both"], t["only_a"], t["only_b"], t["neither"], t["p_value"]]
                    for name in _SYSTEM_NAMES if (t := tests.get(name))]
    left_out = [_SYSTEM_NAMES[name] for name in _SYSTEM_NAMES if name not in systems]
    return {"end_to_end": Block("end_to_end"), "top_n": comparison["top_n"],
            "rank_depth": comparison.get("rank_depth", "?"),
            "e2e_left_out": (f"; not run in this profile: {', '.join(left_out)}, minutes a question on a CPU"
                             if left_out else ""), "e2e_llm": comparison["llm"],
            "e2e_questions": comparison["questions"], "e2e_split": comparison["split"], "e2e_table": table,
            "e2e_budget": f"{comparison.get('budget_s', DEFAULT_TIME_BUDGET):g}",  # runs made before it was recorded
            "mcnemar_method": next(iter(tests.values()))["method"] if tests else "no baseline",
            "mcnemar_table": markdown_table(["baseline", "both right", "only ReQAP right", "only baseline right",
                                             "neither", "p-value"], mcnemar_rows)}


SPEC = ModelSpec(
    name="reqap_qud",
    script="training/reqap_qud/train_reqap_qud.py",
    recipes=profile_recipes("training/reqap_qud", *PROFILES),
    repos={profile: name for profile, (name, _licence) in PROFILES.items()},
    dataset=DATASET_REPO,
    template="reqap_qud",
    card_values=card_values,
    # the test questions are sampled with the seed the training run saved (the release's seed)
    evaluate=lambda model_dir, dataset_dir, _models: evaluate_with_base(
        model_dir, dataset_dir, "test", seed=int(saved_arguments(model_dir)["training"]["seed"])),
    headline=("hit@1",),
)
