"""Time one LoRA training step of SmolLM2-135M-Instruct through trl's fused LM head, scoring every position (trl's
CPU default) against scoring only the labelled ones (convohub.training.lm_head), side by side on the same batch.

The shapes are those of convohub's offline recipes: an EXTRACT batch (8 x 200 tokens, 6 labelled), a QUD batch
(8 x 96, 32 labelled) and a WildFeedback DPO batch (16 x 256, 64 labelled). Prints seconds per forward and
backward pass, the ratio and the loss of both (they agree). Goal: ratio <= 0.7 on EXTRACT-shaped batches.

    python benchmarks/bench_lm_head.py [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

SHAPES = {"extract": (8, 200, 6), "qud": (8, 96, 32), "dpo": (16, 256, 64)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per setting (after one warm-up)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()

    import torch
    import trl.trainer.utils as trl_utils
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from convohub.models import smollm2_path
    from convohub.training.lm_head import score_label_positions_only

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                             task_type="CAUSAL_LM"))
    trl_default = trl_utils._use_triton
    print(f"{'shape':8} {'every position s':>17} {'labelled only s':>16} {'ratio':>6}  loss (both)")
    for name, (batch, length, labelled) in SHAPES.items():
        ids = torch.randint(0, model.config.vocab_size, (batch, length))
        labels = torch.full_like(ids, -100)
        labels[:, length - labelled:] = ids[:, length - labelled:]
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
        timings, losses = [], []
        for compact in (False, True):
            trl_utils._use_triton = trl_default
            if compact:
                score_label_positions_only()
            seconds = []
            for i in range(args.repeats + 1):
                model.zero_grad()
                start = time.perf_counter()
                out = model(**inputs, fused_lm_head=True)
                out.loss.backward()
                if i:  # the first pass warms the allocator up
                    seconds.append(time.perf_counter() - start)
            timings.append(sorted(seconds)[len(seconds) // 2])
            losses.append(float(out.loss.detach()))
        trl_utils._use_triton = trl_default
        print(f"{name:8} {timings[0]:17.2f} {timings[1]:16.2f} {timings[1] / timings[0]:6.2f}  "
              f"{losses[0]:.5f} / {losses[1]:.5f}")


if __name__ == "__main__":
    main()
