"""Fine-tune an encoder user simulator for ProMISe's Task 1 (intent satisfaction: is the intent satisfied at this turn? 2 classes).

Data: a built `promise` dataset folder (`convohub datasets build promise`); input the text pair (intent,
the questions asked so far and the four suggested questions), a new classification head. As in the paper the
model trains on the validation split (4-fold cross-validation grouped by dialogue, 3 epochs; the pooled held-out
predictions give the cross-validated scores) and is measured on test before (fresh head) and after training;
the figures go to `<output_dir>/eval_results.json` (`convohub.promise.training.run_encoder`).

Offline (CPU, the bundled all-MiniLM-L6-v2; the model card records the measured run):

    convohub train training/promise_task1_encoder/tiny.yaml --dataset_path hub_release/datasets/convohub/promise

Paper scale (BERT-base; paper_roberta.yaml: RoBERTa-base; paper_deberta.yaml: DeBERTa-v2-xlarge):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/promise_task1_encoder/train_promise_task1_encoder.py --config training/promise_task1_encoder/paper.yaml

Every TrainingArguments flag works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TASK = "task1"


def make_parser() -> Any:
    """(EncoderArguments, TrainingArguments), recipes parsed strictly."""
    from convohub.promise.training import make_encoder_parser

    return make_encoder_parser()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Cross-validate, train, measure test before and after, save (and push when asked). Returns the results."""
    from convohub.promise.training import run_encoder

    return run_encoder(TASK, argv)


if __name__ == "__main__":
    main()
