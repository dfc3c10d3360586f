"""Fine-tune ReQAP's event cross-encoder: does one candidate event match a RETRIEVE query? (2 classes)

Examples come from a built PerQA dataset (:mod:`convohub.reqap.data.retrieve`): for every RETRIEVE call of
the gold operator trees whose BM25 recall is >= 0.5, <= 5 gold events as positives, <= 5 hard negatives
(best BM25 scores, not gold) and <= 5 random negatives (inverse source frequency); input
``(query, "key: json(value)" lines)``. Held-out accuracy and macro-F1 (dev personas) are measured before
and after training and written to ``<output_dir>/eval_results.json``.

Offline (CPU, about a minute; starts from the bundled all-MiniLM-L6-v2):

    convohub datasets build perqa --out /tmp/hub
    convohub train training/reqap_retrieve_events/tiny.yaml --dataset_path /tmp/hub/datasets/convohub/perqa

Paper scale (cross-encoder/ms-marco-MiniLM-L-12-v2, 5 epochs, lr 5e-5, batch 64, weight decay 0.001,
max length 512, best checkpoint by held-out accuracy):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/reqap_retrieve_events/train_reqap_retrieve_events.py \\
        --config training/reqap_retrieve_events/paper.yaml

Paper sizes: L ms-marco-MiniLM-L-12-v2, M ``--model_name_or_path cross-encoder/ms-marco-MiniLM-L-6-v2``,
S ``cross-encoder/ms-marco-MiniLM-L-2-v2``, XS ``cross-encoder/ms-marco-TinyBERT-L-2-v2``. Every
CrossEncoderTrainingArguments flag works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TASK = "events"


def make_parser() -> Any:
    """(RetrieveArguments, CrossEncoderTrainingArguments), recipes parsed strictly."""
    from convohub.reqap.release.retrieve import make_parser as parser

    return parser()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Derive examples, train, measure held-out accuracy before/after, save. Returns the results."""
    from convohub.reqap.release.retrieve import run

    return run(TASK, argv)


if __name__ == "__main__":
    main()
