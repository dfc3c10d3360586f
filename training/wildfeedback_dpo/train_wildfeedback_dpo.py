"""WildFeedback stage 2: DPO on the preference pairs, starting from the SFT model, which is also the reference.

Each pair becomes a conversational prompt/chosen/rejected example (pairs with chosen == rejected dropped;
long prompts lose their oldest turns). Sigmoid loss, beta 0.1, no NLL term, as in the paper. The reference
is loaded from ``model_name_or_path`` (the SFT output): a frozen second copy for a full fine-tune, the same
weights with the adapter disabled for LoRA/QLoRA. A collapse check stops the run when the loss diverges or
the chosen-rejected reward margin goes persistently negative and writes ``collapse_report.json``.

Offline (CPU, seconds), after training/wildfeedback_sft/tiny.yaml:

    convohub train training/wildfeedback_dpo/tiny.yaml --dataset_path <hub>/datasets/convohub/wildfeedback \\
        --model_name_or_path outputs/wildfeedback_sft-tiny

Paper scale (1 epoch, LR 5e-7, global batch 32, warmup 0.1, cosine, beta 0.1), one node:

    accelerate launch --config_file training/accelerate/deepspeed_zero3.yaml \\
        training/wildfeedback_dpo/train_wildfeedback_dpo.py --config training/wildfeedback_dpo/paper.yaml

The paper needed lower LRs for on-policy data and for Mistral: ``--learning_rate_grid 5e-7 2e-7 1e-7
--validation_fraction 0.02`` runs one model per LR and keeps the best non-collapsed one by held-out loss.
Every DPOConfig / ModelConfig flag of trl works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def make_parser() -> Any:
    """(AlignmentArguments, DPOConfig, ModelConfig), recipes parsed strictly."""
    from trl import DPOConfig

    from convohub.wildfeedback.alignment import make_alignment_parser

    return make_alignment_parser(DPOConfig)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train (or run the LR grid), save the model, write eval_results.json. Returns the results."""
    from convohub.wildfeedback.alignment import parse_stage_args, run_stage

    script_args, training_args, model_args = parse_stage_args(make_parser(), argv)
    return run_stage("dpo", script_args, training_args, model_args)


if __name__ == "__main__":
    main()
