"""WildFeedback stage 1: supervised fine-tuning on the chosen responses of the preference pairs.

Each pair becomes a prompt/completion chat (prompt = the conversation up to the user query, completion = the
chosen response; loss on the completion only). Prompts longer than ``max_prompt_length`` lose their oldest
turns (``convohub.wildfeedback.alignment.truncate_prompt``). A collapse check stops the run when the loss is
non-finite or grows past ``collapse_loss_factor`` x its start and writes ``collapse_report.json``. The SFT
model is the starting point *and the reference* of stage 2 (training/wildfeedback_dpo/).

Offline (CPU, seconds), the tiny chat model of convohub.tiny:

    convohub train training/wildfeedback_sft/tiny.yaml --dataset_path <hub>/datasets/convohub/wildfeedback

Paper scale (Phi-3-mini-4k-instruct, 1 epoch, LR 5e-6, global batch 128, warmup 0.1, cosine), one node:

    accelerate launch --config_file training/accelerate/deepspeed_zero3.yaml \\
        training/wildfeedback_sft/train_wildfeedback_sft.py --config training/wildfeedback_sft/paper.yaml

Other base models: paper_llama3.yaml, paper_mistral.yaml; QLoRA on one GPU: paper_phi3_qlora.yaml. LR grid:
``--learning_rate_grid 5e-6 2e-6 1e-6 --validation_fraction 0.02``. Every SFTConfig / ModelConfig flag of
trl works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def make_parser() -> Any:
    """(AlignmentArguments, SFTConfig, ModelConfig), recipes parsed strictly."""
    from trl import SFTConfig

    from convohub.wildfeedback.alignment import make_alignment_parser

    return make_alignment_parser(SFTConfig)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train (or run the LR grid), save the model, write eval_results.json. Returns the results."""
    from convohub.wildfeedback.alignment import parse_stage_args, run_stage

    script_args, training_args, model_args = parse_stage_args(make_parser(), argv)
    return run_stage("sft", script_args, training_args, model_args)


if __name__ == "__main__":
    main()
