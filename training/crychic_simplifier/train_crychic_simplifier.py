"""Fine-tune CRyCHIc's prompt simplifier: every sentence of a prompt labelled polite / information / instruction,
read at the separator after it (input `s1 [SEP] s2 [SEP] ...`).

Data: a folder built by ``convohub crychic training-data`` (sample-corpus prompts split by spaCy's
sentencizer, labelled with a 0-5 confidence by the labeller that agreed best with the hand-labelled sentences
(or the one named), prompts below confidence 4 dropped). Rows of the ``train`` split train, the ``heldout``
split is measured before and after training (per-sentence accuracy and macro-F1) and the figures go to
``<output_dir>/eval_results.json``, so a card can show the gain over the untrained head.

Offline (CPU, from the bundled all-MiniLM-L6-v2; README.md gives the times measured and their conditions):

    convohub crychic training-data --out outputs/crychic-training-data
    convohub train training/crychic_simplifier/tiny.yaml --dataset_path outputs/crychic-training-data

Paper scale (Alibaba-NLP/gte-base-en-v1.5, MLP head 768-512-256, 20 epochs, lr 5e-5, batch 64):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/crychic_simplifier/train_crychic_simplifier.py --config training/crychic_simplifier/paper.yaml

Every TrainingArguments flag works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TASK = "simplifier"


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
