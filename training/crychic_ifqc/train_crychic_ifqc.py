"""Fine-tune CRyCHIc's Implicit Follow-up Question Classifier (IFQC): is a prompt an implicit follow-up
("Continue", "Make it shorter") or explicit? (2 classes).

Data: a folder built by ``convohub crychic training-data`` (LLM-synthesised sentences of the paper's three
templates (implicit follow-ups naming no domain noun, explicit follow-ups naming one, new-topic questions),
validated and de-duplicated; label = the template's class). Rows of the ``train`` split train, the ``heldout``
split is measured before and after training (accuracy and macro-F1) and the figures go to
``<output_dir>/eval_results.json``, so a card can show the gain over the untrained head.

Offline (CPU, from the bundled all-MiniLM-L6-v2; README.md gives the times measured and their conditions):

    convohub crychic training-data --out outputs/crychic-training-data
    convohub train training/crychic_ifqc/tiny.yaml --dataset_path outputs/crychic-training-data

Paper scale (RoBERTa-base, MLP head 768-512-256, dropout 0.2, max 64 tokens, 5 epochs, lr 3e-5, batch 32):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/crychic_ifqc/train_crychic_ifqc.py --config training/crychic_ifqc/paper.yaml

Every TrainingArguments flag works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TASK = "ifqc"


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
