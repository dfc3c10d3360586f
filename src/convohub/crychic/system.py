"""Registers WildChatTree and CRyCHIc (issue 14) as a release system: the dataset, the three models'
training data (:mod:`convohub.crychic.release_data`), the IFQC, prompt simplifier and follow-up judge each
trained by its script under ``accelerate launch``, measured before and after training and published with its
card (:mod:`convohub.crychic.model_specs`; the judge's evaluation also reconstructs the WildChatTree test split
with CRyCHIc, both ablations and the Non-Reconstructing baseline, and a step of its own runs the paper's LLM
baseline through the release's LLM: the card's Table 1), the Space (``spaces/crychic``), one leaderboard
benchmark, and the ``convohub crychic`` and ``convohub tree`` subcommands (:mod:`convohub.crychic.cli`).

Without a source the dataset is constructed offline from the sample corpus; ``--source`` (or the
``CONVOHUB_WILDCHAT_TREE_SOURCE`` environment variable, for release runs) reads annotated conversations in
the spec's schema instead. The paper profile builds the same way: the paper's annotations were never released.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.crychic.dataset import CONFIG, DATASET_NAME, SPLIT, build_wildchat_tree
from convohub.crychic.model_specs import (
    EVAL_CONVERSATIONS_ENV,
    IFQC,
    JUDGE,
    LLM_CONVERSATIONS_ENV,
    SIMPLIFIER,
)
from convohub.crychic.trees import check_parents
from convohub.model_spec import card_step, evaluate_step, release_steps, train_step
from convohub.registry import DatasetBuilder, Step, System
from convohub.scoring import Benchmark, SubmissionError

SOURCE_ENV = "CONVOHUB_WILDCHAT_TREE_SOURCE"


def _add_cli(subparsers: Any) -> None:
    from convohub.crychic.cli import add_cli

    add_cli(subparsers)


def _build_dataset(ctx: Any, source: Path | None) -> Path:
    if source is None and os.environ.get(SOURCE_ENV):
        source = Path(os.environ[SOURCE_ENV])
    return build_wildchat_tree(ctx.target, ctx.repo, source=source, seed=ctx.seed)


def _step_build(ctx: Any) -> dict[str, Any]:
    return {"wildchat_tree_dir": _build_dataset(ctx, None)}


def _tree_dir(ctx: Any) -> Path:
    """The WildChatTree folder of this run, or of an earlier run into the same root; built if absent."""
    if "wildchat_tree_dir" in ctx.artifacts:
        return Path(ctx.artifacts["wildchat_tree_dir"])
    folder = ctx.target.repo_dir("datasets", DATASET_NAME)
    return folder if (folder / "README.md").is_file() else _build_dataset(ctx, None)


def _step_training_data(ctx: Any) -> dict[str, Any]:
    from convohub.crychic.release_data import build_release_training_data

    return {"crychic_training_data_dir": build_release_training_data(ctx)}


#: the artifacts :func:`_training_data_dir` looks up (in a release the training-data step always ran before)
TRAINING_DATA_READS = ("crychic_training_data_dir",)


def _training_data_dir(ctx: Any) -> Path:
    """The training-data folder the ``crychic-training-data`` step built (rebuilt, resumably, if absent)."""
    if "crychic_training_data_dir" in ctx.artifacts:
        return Path(ctx.artifacts["crychic_training_data_dir"])
    from convohub.crychic.release_data import build_release_training_data

    return build_release_training_data(ctx)


LLM_BASELINE_EVAL = "crychic_llm_baseline_eval_path"


def _step_llm_baseline(ctx: Any) -> dict[str, Any]:
    """The paper's LLM baseline through the release's LLM (the configured one, else the offline SmolLM2) on
    the first test conversations; with ``--llm rules`` there is no LLM, which the card then says."""
    from convohub.crychic.model_specs import evaluate_llm_baseline, llm_conversation_cap
    from convohub.hub import atomic_write_text, dump_json

    if ctx.use_rules:
        results: dict[str, Any] = {"skipped": "the release ran with --llm rules, so no LLM answered"}
    else:
        folders = {spec.name: Path(ctx.artifacts[spec.artifact("dir")]) for spec in (IFQC, SIMPLIFIER, JUDGE)}
        results = evaluate_llm_baseline(_tree_dir(ctx), folders, ctx.chat_llm(),
                                        max_conversations=llm_conversation_cap())
        ctx.log(f"LLM baseline ({results['llm']}, {results['scoring']}) on {results['conversations']} conversations: "
                f"accuracy {results['scores']['all_turns']['accuracy']:.3f}, {results['seconds']} s")
    path = ctx.scratch("crychic") / "crychic_llm_baseline_eval.json"
    atomic_write_text(path, dump_json(results))
    return {LLM_BASELINE_EVAL: path}


def _llm_baseline_results(ctx: Any) -> dict[str, Any]:
    from convohub.hub import read_json

    path = ctx.artifacts.get(LLM_BASELINE_EVAL)
    return {"llm_baseline": read_json(Path(path))} if path else {}


def _pipeline_args(ctx: Any) -> list[str]:
    """The judge's recipe tunes the pipeline's IFQC threshold with the IFQC and simplifier trained before it."""
    return ["--pipeline_ifqc", str(ctx.artifacts[IFQC.artifact("dir")]),
            "--pipeline_simplifier", str(ctx.artifacts[SIMPLIFIER.artifact("dir")])]


def _step_space(ctx: Any) -> dict[str, Any]:
    from convohub.crychic.space import export_space

    models = [ctx.target.repo_id(spec.repo_name(ctx.profile)) for spec in (IFQC, SIMPLIFIER, JUDGE)]
    return {"crychic_space_dir": export_space(ctx.target, ctx.repo, dataset_id=ctx.target.repo_id(DATASET_NAME),
                                              models=models)}


def _reference(row: Mapping[str, Any]) -> tuple[str, list[int]]:
    return str(row["conversation_id"]), [int(turn["parent"]) for turn in row["turns"]]


def _score_trees(predictions: list[Any], references: list[Any]) -> dict[str, float]:
    """Tree reconstruction scores; a prediction with the wrong number of turns is refused, naming the id."""
    from convohub.metrics import tree_reconstruction_scores

    for prediction, (conversation_id, gold) in zip(predictions, references, strict=True):
        if len(prediction) != len(gold):
            raise SubmissionError(f"prediction for id {conversation_id!r} has {len(prediction)} parents but the "
                                  f"conversation has {len(gold)} turns; give one parent per turn (-1 for a root)")
    return tree_reconstruction_scores(predictions, [gold for _, gold in references])


#: ``convohub evaluate wildchat-tree SUBMISSION.jsonl``: one {"id": conversation id, "prediction": [parent of
#: each turn, -1 for a root]} per test conversation; accuracy, precision, recall and F1 of the parents, micro
#: and per-conversation macro (``convohub.metrics.tree_reconstruction_scores``).
BENCHMARK = Benchmark(
    name=DATASET_NAME, description="WildChatTree test conversations, parent accuracy / precision / recall / F1",
    dataset=DATASET_NAME, config=CONFIG, split=SPLIT, id_field="conversation_id", task_type="other",
    prediction_type=list, reference=_reference, score=_score_trees, check=check_parents,
)

SYSTEM = System(
    name="crychic",
    title="WildChatTree and CRyCHIc: chat-tree reconstruction",
    steps=(
        Step("build", DATASET_NAME, _step_build, settings=(SOURCE_ENV,)),
        Step("build", "crychic-training-data", _step_training_data),
        *release_steps(IFQC, system="crychic", dataset=_training_data_dir, dataset_reads=TRAINING_DATA_READS),
        *release_steps(SIMPLIFIER, system="crychic", dataset=_training_data_dir, dataset_reads=TRAINING_DATA_READS),
        # the judge trains on the training data; its evaluation also reconstructs WildChatTree's test split, and
        # its card carries the LLM baseline measured after it
        train_step(JUDGE, system="crychic", dataset=_training_data_dir, dataset_reads=TRAINING_DATA_READS,
                   extra_args=_pipeline_args, extra_reads=(IFQC.artifact("dir"), SIMPLIFIER.artifact("dir"))),
        evaluate_step(JUDGE, system="crychic", dataset=_tree_dir, dataset_reads=("wildchat_tree_dir",)),
        Step("evaluate", "crychic-llm-baseline", _step_llm_baseline,
             settings=(LLM_CONVERSATIONS_ENV, EVAL_CONVERSATIONS_ENV)),
        card_step(JUDGE, extra=_llm_baseline_results, extra_reads=(LLM_BASELINE_EVAL,)),
        Step("space", "crychic-space", _step_space),
    ),
    space="crychic",
    datasets=(DatasetBuilder(DATASET_NAME, "Conversation trees: one parent per turn (MixMC-mixed or annotated)",
                             _build_dataset),),
    benchmarks=(BENCHMARK,),
    add_cli=_add_cli,
    cost=5.3,
)
