"""Train, evaluate and publish ReQAP's QUD model (release helpers; the release steps wire them).

Training runs training/reqap_qud/train_reqap_qud.py with the profile's recipe on a built PerQA folder.
Evaluation runs :class:`convohub.reqap.qud.SFTDecomposer` on the questions of one split (test: personas and
question templates unseen in training) and measures

* tree exact match -- the first (greedy) tree equals the gold tree, over questions whose template has one;
* parse rate -- the share of the model's step outputs that parse as a valid step, and the share of
  questions that got a complete tree;
* end-to-end Hit@1 / Rlx-Hit@1 (10 %, 20 %) -- candidate trees are tried in order and the first that
  executes answers (the paper's rule), with the BM25 retriever and lookup extractor unless the caller
  plugs in trained RETRIEVE/EXTRACT components.

The card reports exactly these measured numbers and says which data trained the model.
"""

from __future__ import annotations

import json
import random
from datetime import date
from pathlib import Path
from typing import Any

from convohub.hub import HubTarget, MetricResult, ModelCardInfo, write_model
from convohub.perqa.dataset import REQAP_CITATION

DATASET_REPO = "perqa"
SCRIPT = Path("training") / "reqap_qud" / "train_reqap_qud.py"
#: profile -> (model repo name, licence). Llama fine-tunes must be named starting with "Llama".
PROFILES: dict[str, tuple[str, str]] = {
    "tiny": ("reqap-qud-tiny", "mit"),
    "paper": ("Llama-3.2-1B-Instruct-reqap-qud", "llama3.2"),
    "paper_xs": ("SmolLM2-135M-Instruct-reqap-qud", "apache-2.0"),
    "paper_s": ("SmolLM2-360M-Instruct-reqap-qud", "apache-2.0"),
    "paper_l": ("Llama-3.2-3B-Instruct-reqap-qud", "llama3.2"),
}


def model_name(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown QUD profile {profile!r}; expected one of {sorted(PROFILES)}")
    return PROFILES[profile][0]


def recipe_path(repo: Path, profile: str) -> Path:
    return Path(repo) / "training" / "reqap_qud" / f"{profile}.yaml"


def _recipe(path: Path) -> dict[str, Any]:
    import yaml

    return dict(yaml.safe_load(Path(path).read_text(encoding="utf-8")))


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int) -> Path:
    """Run the training script on the built PerQA folder; returns the trained model folder."""
    from convohub.cli import load_script

    script = load_script(Path(repo) / SCRIPT)
    script.main(["--config", str(recipe_path(repo, profile)), "--dataset_path", str(dataset_dir),
                 "--output_dir", str(output_dir), "--seed", str(seed), "--data_seed", str(seed)])
    return Path(output_dir)


def evaluate(model_dir: Path | None, dataset_dir: Path, split: str = "test", *, max_questions: int | None = 100,
             retriever: Any = None, extractor: Any = None, decomposer: Any = None, max_trees: int = 10,
             time_budget: float = 60.0, seed: int = 0) -> dict[str, Any]:
    """Tree exact match, parse rate and end-to-end Hit@1 of the QUD model on ``split`` (see module doc).

    ``decomposer`` overrides the model (e.g. an :class:`~convohub.reqap.qud.ICLDecomposer` on a served LLM);
    ``retriever``/``extractor`` replace BM25 + lookup; ``max_trees`` candidates are tried per question.
    A seeded sample of ``max_questions`` questions is scored (None: all).
    """
    from tqdm.auto import tqdm

    from convohub.metrics import hit_at_1
    from convohub.reqap.events import EventStore
    from convohub.reqap.executor import REFERENCE_DATE
    from convohub.reqap.extraction import DirectExtractor
    from convohub.reqap.gold_trees import gold_tree_or_none
    from convohub.reqap.pipeline import ReQAP
    from convohub.reqap.qud import SFTDecomposer
    from convohub.reqap.qud_data import load_questions
    from convohub.reqap.retrieval import BM25Retriever

    if decomposer is None:
        if model_dir is None:
            raise ValueError("evaluate needs a model_dir or a decomposer")
        decomposer = SFTDecomposer(model_dir)
    retriever = retriever if retriever is not None else BM25Retriever()
    extractor = extractor if extractor is not None else DirectExtractor()
    questions = load_questions(dataset_dir, split)
    if max_questions is not None and len(questions) > max_questions:
        keep = set(random.Random(seed).sample(range(len(questions)), max_questions))
        questions = [q for i, q in enumerate(questions) if i in keep]
    if not questions:
        raise ValueError(f"{dataset_dir}: split {split!r} has no questions")
    system = ReQAP(decomposer, retriever, extractor, budget_s=time_budget, max_trees=max_trees)
    preds: list[str | None] = []
    refs: list[list[str]] = []
    with_tree = with_gold = exact = 0
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
        "parse_rate": stats["parse_rate"], "tree_rate": round(with_tree / n, 4),
        "answered": sum(p is not None for p in preds),
        "retriever": type(retriever).__name__, "extractor": type(extractor).__name__,
        "max_trees": max_trees, "decomposer": decomposer.describe(), "decomposer_stats": stats,
    }


def _training_results(model_dir: Path) -> dict[str, Any]:
    """What the training script recorded (data source, pairs, epochs), or {} for a model trained elsewhere."""
    from convohub.hub import read_json

    path = Path(model_dir) / "eval_results.json"
    return read_json(path) if path.is_file() else {}


def publish(target: HubTarget, profile: str, model_dir: Path, results: dict[str, Any], recipe: Path) -> Path:
    """Write the model repo with a card carrying the measured tree exact match, parse rate and Hit@1."""
    name, licence = PROFILES[profile][0], PROFILES[profile][1]
    dataset_id = target.repo_id(DATASET_REPO)
    spec = _recipe(recipe)
    base_model = str(spec["model_name_or_path"])
    training = _training_results(model_dir)
    data_source = str(training.get("data", {}).get("source", "unknown"))
    grammar = (" plus the operator grammar's fixed pieces as single tokens" if spec.get("grammar_tokens") else "")
    base_note = (f"a Llama-style causal LM of {spec.get('tiny_layers', 2)} layers (hidden size "
                 f"{spec.get('tiny_hidden_size', 64)}) randomly initialised by `convohub.tiny.build_tiny_causal_lm`, "
                 f"whose byte-level BPE tokenizer was trained on the QUD pairs{grammar}"
                 if profile == "tiny" else f"`{base_model}`")
    description = (
        "The QUD (question understanding and decomposition) model of ReQAP (*Recursive Question Understanding "
        "for Complex Question Answering over Heterogeneous Personal Data*): given a (sub-)question and its "
        "ancestor steps as a chat, it writes exactly one operator whose inputs are sub-questions "
        '`{{ QU(question="...") }}`; `convohub.reqap.qud.SFTDecomposer` recurses until every branch ends '
        "in a RETRIEVE and assembles the operator tree that convohub's engine executes over personal events. "
        f"Training data: **{data_source}**, built from the train/dev questions of "
        f"[`{dataset_id}`](https://huggingface.co/datasets/{dataset_id}) by `convohub.reqap.qud_data`, one pair "
        "per decomposition step (input = the ancestor dialogue, output = the operator), de-duplicated. "
        f"Base model: {base_note}. Trained by `{SCRIPT.as_posix()}` with the `{recipe.name}` recipe."
    )
    usage = (
        "```python\nfrom convohub.reqap import EventStore, Executor\n"
        "from convohub.reqap.qud import SFTDecomposer\n\n"
        "from huggingface_hub import snapshot_download\n"
        f'qud = SFTDecomposer(snapshot_download("{target.repo_id(name)}"))\n'
        'tree = next(qud.candidates("How many runs did I do in 2023?"))\n'
        "print(tree)  # then Executor(EventStore.from_records(events)).execute(tree)\n```"
    )
    r = results
    evaluation = (
        f"Measured by `convohub.reqap.qud_model.evaluate` on {r['questions']} questions of the `{r['split']}` "
        "split (its personas and question templates are not in the training data), with the "
        f"{r['retriever']} retriever and {r['extractor']} extractor in the engine; up to {r['max_trees']} "
        "candidate trees per question, the first that executes answers.\n\n"
        "| metric | value |\n|---|---|\n"
        f"| Hit@1 | {r['hit@1']} |\n| Rlx-Hit@1 (10 %) | {r['rlx_hit@1']} |\n"
        f"| Rlx-Hit@1 (20 %) | {r['rlx_hit@1_20']} |\n"
        f"| tree exact match ({r['questions_with_gold_tree']} questions with a gold tree) | "
        f"{r['tree_exact_match']} |\n| step parse rate | {r['parse_rate']} |\n"
        f"| questions with a complete tree | {r['tree_rate']} |"
    )
    limitations = (
        "The tiny profile demonstrates the pipeline end to end: the small model described above, trained from "
        f"scratch on CPU ({training.get('epochs', '?')} epochs over {training.get('train_pairs', '?')} pairs), "
        "learns the operator grammar and the step patterns of the "
        "training templates, but the test templates are unseen, so its trees rarely match the gold ones and "
        "its answers are seldom right (see the measured numbers above). Use a paper profile for real use."
        if profile == "tiny" else
        "Trained on synthetic personas and templated questions; real questions are phrased more freely. "
        "Tree exact match only counts the gold phrasing of sub-questions and RETRIEVE queries.")
    licence_text = ("This model is a fine-tune of Llama 3.2 and is distributed under the Llama 3.2 Community "
                    "License (https://www.llama.com/llama3_2/license/); built with Llama."
                    if licence == "llama3.2" else f"Model licence: {licence}.")
    card = ModelCardInfo(
        license=licence,
        description=description,
        pipeline_tag="text-generation",
        base_model=None if profile == "tiny" else base_model,
        datasets=(dataset_id,),
        tags=("convohub", "reqap", "perqa", "question-decomposition", "operator-trees"),
        results=(
            MetricResult(task_type="question-answering", dataset_name="perqa", dataset_type=dataset_id,
                         dataset_config="questions", dataset_split=r["split"], metric_type="hit@1",
                         metric_name="Hit@1", value=r["hit@1"]),
            MetricResult(task_type="question-answering", dataset_name="perqa", dataset_type=dataset_id,
                         dataset_config="questions", dataset_split=r["split"], metric_type="rlx_hit@1",
                         metric_name="Rlx-Hit@1", value=r["rlx_hit@1"]),
            MetricResult(task_type="text-generation", dataset_name="perqa", dataset_type=dataset_id,
                         dataset_config="questions", dataset_split=r["split"], metric_type="exact_match",
                         metric_name="Tree exact match", value=r["tree_exact_match"]),
        ),
        citation=REQAP_CITATION,
        sections={"Usage": usage, "Evaluation": evaluation,
                  "Training recipe": f"```yaml\n{Path(recipe).read_text(encoding='utf-8')}```",
                  "Licence": licence_text + f" The training data, [`{dataset_id}`](https://huggingface.co/"
                             f"datasets/{dataset_id}), is CC BY 4.0; the code that trained this model is MIT.",
                  "Limitations": limitations},
    )
    return write_model(target, name, Path(model_dir), card)
