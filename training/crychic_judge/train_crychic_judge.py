"""Fine-tune CRyCHIc's follow-up judge: the probability that a history turn is the parent of a prompt
(bi-encoder, MLP over [history; prompt; history - prompt]; `--architecture cross` for the cross-encoder).

Data: a folder built by ``convohub crychic training-data`` (pairs known by construction from the sample
corpus's plan: (parent turn, follow-up) positives, same-conversation and other-conversation negatives,
balanced and seeded). Rows of the ``train`` split train, the ``heldout`` split is measured before and after
training (accuracy and macro-F1 at the paper's threshold 0.4, and ROC AUC) and the figures go to
``<output_dir>/eval_results.json``, so a card can show the gain over the untrained head.

Offline (CPU, from the bundled all-MiniLM-L6-v2; README.md gives the times measured and their conditions):

    convohub crychic training-data --out outputs/crychic-training-data
    convohub train training/crychic_judge/tiny.yaml --dataset_path outputs/crychic-training-data

Paper scale (Alibaba-NLP/gte-large-en-v1.5, MLP head 1024-512-256-64-16, 20 epochs, lr 1e-5, batch 512):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/crychic_judge/train_crychic_judge.py --config training/crychic_judge/paper.yaml

Every TrainingArguments flag works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TASK = "judge"


def make_parser() -> Any:
    """(CrychicArguments, TrainingArguments), recipes parsed strictly."""
    from convohub.crychic.training import make_parser as parser

    return parser()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, measure the held-out split before and after, save (and push when asked). Returns the results."""
    from convohub.crychic.training import run

    return run(TASK, argv)


if __name__ == "__main__":
    main()
