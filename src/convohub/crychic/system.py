"""Registers WildChatTree and CRyCHIc (issue 14) as a release system: the dataset, the three models'
training data (:mod:`convohub.crychic.release_data`), the IFQC, prompt simplifier and follow-up judge each
trained by its script under ``accelerate launch``, measured before and after training and published with its
card (:mod:`convohub.crychic.model_specs`; the judge's evaluation also reconstructs the WildChatTree test split
with CRyCHIc, both ablations and the Non-Reconstructing baseline: the card's Table 1), one leaderboard
benchmark, and the ``convohub crychic`` subcommands (:mod:`convohub.crychic.cli`).

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
from convohub.crychic.model_specs import IFQC, JUDGE, SIMPLIFIER
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


def _training_data_dir(ctx: Any) -> Path:
    """The training-data folder the ``crychic-training-data`` step built (rebuilt, resumably, if absent)."""
    if "crychic_training_data_dir" in ctx.artifacts:
        return Path(ctx.artifacts["crychic_training_data_dir"])
    from convohub.crychic.release_data import build_release_training_data

    return build_release_training_data(ctx)


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
        Step("build", DATASET_NAME, _step_build),
        Step("build", "crychic-training-data", _step_training_data),
        *release_steps(IFQC, system="crychic", dataset=_training_data_dir),
        *release_steps(SIMPLIFIER, system="crychic", dataset=_training_data_dir),
        # the judge trains on the training data; its evaluation also reconstructs WildChatTree's test split
        train_step(JUDGE, system="crychic", dataset=_training_data_dir),
        evaluate_step(JUDGE, system="crychic", dataset=_tree_dir),
        card_step(JUDGE),
    ),
    datasets=(DatasetBuilder(DATASET_NAME, "Conversation trees: one parent per turn (MixMC-mixed or annotated)",
                             _build_dataset),),
    benchmarks=(BENCHMARK,),
    add_cli=_add_cli,
)
