#!/bin/bash
# The ProMISe generative simulator's paper recipe (QLoRA NF4, r 64, alpha 16, batch 4 x 4, bf16) on a random model
# of LLaMA-7B's shape, on one GPU: the time per optimiser step and the peak GPU memory of the paper's 300-step run,
# and the time to publish its merged weights. Not CI: it needs CUDA and bitsandbytes, and ~27 GB of disk.
#
#   bash benchmarks/gpu/promise_qlora_7b.sh PROMISE_DATASET [SMOLLM2_FOLDER] [STEPS]
#
# PROMISE_DATASET is a built `promise` dataset folder (`convohub datasets build promise`); SMOLLM2_FOLDER a folder
# with SmolLM2's config and tokenizer (default: the converted offline model). STEPS (default 30) stands in for the
# recipe's 300: a step's time depends on the batch's shape, not on how many steps run, so 300 take ten times as long.
# Logs and the GPU memory samples go to $OUT (default /tmp/convohub-gpu).
set -u
DATA=${1:?usage: promise_qlora_7b.sh PROMISE_DATASET [SMOLLM2_FOLDER] [STEPS]}
SMOL=${2:-$(python3 -c "from convohub.models import smollm2_path; print(smollm2_path())")}
STEPS=${3:-30}
OUT=${OUT:-/tmp/convohub-gpu}; W=${WORK:-/tmp/convohub-gpu-work}; mkdir -p "$OUT" "$W"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
s=$(date +%s)
python3 "$(dirname "$0")/random_shaped_model.py" "$SMOL" "$W/llama7b" --shape llama-7b || exit 1
echo "== random llama-7b shape written in $(( $(date +%s)-s )) s ($(du -sh "$W/llama7b" | cut -f1))"
. "$(dirname "$0")/gpumem.sh"
gpumem_start "$OUT/gpumem.txt"
s=$(date +%s)
timeout 900 python3 -m accelerate.commands.launch --mixed_precision bf16 \
  --config_file training/accelerate/single_gpu.yaml \
  training/promise_lora_simulator/train_promise_lora_simulator.py \
  --config training/promise_lora_simulator/paper.yaml --model_name_or_path "$W/llama7b" \
  --chat_template_path "$W/llama7b" --dataset_path "$DATA" --max_steps "$STEPS" --logging_steps 5 \
  --save_strategy no --output_dir "$W/promise7b" > "$OUT/promise_qlora_7b.log" 2>&1
rc=$?
gpumem_stop
echo "== promise QLoRA llama-7b shape: rc=$rc $(( $(date +%s)-s )) s in all, peak_gpu_MiB=$(gpumem_peak "$OUT/gpumem.txt")"
grep -E "Error|train_runtime|seconds_per_step|train_seconds|'loss'" "$OUT/promise_qlora_7b.log" | tail -8
ls -la "$W/promise7b" 2>/dev/null | head
