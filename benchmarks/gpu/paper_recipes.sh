#!/bin/bash
# GPU smoke run of the paper recipes at small scale (not CI: it needs CUDA and bitsandbytes). Each recipe is
# launched as its README says, with the paper's precision and quantisation, on a random model of
# SmolLM2-135M's exact shape (real tokenizer), a built tiny dataset and a few steps.
#
#   bash benchmarks/gpu/paper_recipes.sh HUB_DIR [SMOLLM2_FOLDER]
#
# HUB_DIR is a release folder (`convohub release` output) holding datasets/convohub/{promise,wildfeedback,
# wildchat-sample}; SMOLLM2_FOLDER a folder with SmolLM2's config and tokenizer (default: the converted
# offline model). Logs and the peak GPU memory go to $OUT (default /tmp/convohub-gpu).
# Seen on one H200 (2026-11-28; torch 2.11+cu130, bitsandbytes 0.50.2): ProMISe QLoRA 20 steps 34.6 s,
# 1.2 GB; WildFeedback SFT QLoRA 3 steps of 128 rows 71 s, 1.2 GB; DPO bf16 3 steps 52 s, 2.4 GB;
# chat LM fp16 (float32 weights) 3 steps 13.7 s.
set -u
HUB=${1:?usage: paper_recipes.sh HUB_DIR [SMOLLM2_FOLDER]}
SMOL=${2:-$(python3 -c "from convohub.models import smollm2_path; print(smollm2_path())")}
OUT=${OUT:-/tmp/convohub-gpu}; W=$OUT/work; mkdir -p $W
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
python3 "$(dirname "$0")/random_shaped_model.py" "$SMOL" $W/model || exit 1
D=$HUB/datasets/convohub; A="--config_file training/accelerate/single_gpu.yaml"
. "$(dirname "$0")/gpumem.sh"
gpumem_start $OUT/gpumem.txt
run() {
  name=$1; shift; : > $OUT/gpumem.txt; s=$(date +%s)
  timeout 600 accelerate launch "$@" > $OUT/$name.log 2>&1; rc=$?
  echo "== $name rc=$rc $(( $(date +%s)-s )) s peak_gpu_MiB=$(gpumem_peak $OUT/gpumem.txt)"
  grep -E "Error|train_runtime" $OUT/$name.log | tail -2
}
run promise_qlora --mixed_precision bf16 $A training/promise_lora_simulator/train_promise_lora_simulator.py \
  --config training/promise_lora_simulator/paper.yaml --model_name_or_path $W/model --chat_template_path $W/model \
  --dataset_path $D/promise --max_steps 20 --save_strategy no --output_dir $W/promise
run wf_sft_qlora --mixed_precision bf16 $A training/wildfeedback_sft/train_wildfeedback_sft.py \
  --config training/wildfeedback_sft/paper_phi3_qlora.yaml --model_name_or_path $W/model \
  --dataset_path $D/wildfeedback --max_steps 3 --save_strategy no --output_dir $W/sft
run wf_dpo_bf16 --mixed_precision bf16 $A training/wildfeedback_dpo/train_wildfeedback_dpo.py \
  --config training/wildfeedback_dpo/paper.yaml --model_name_or_path $W/model \
  --dataset_path $D/wildfeedback --max_steps 3 --save_strategy no --output_dir $W/dpo
run chat_lm_fp16 --mixed_precision fp16 $A training/chat_lm/train_chat_lm.py \
  --config training/chat_lm/paper.yaml --model_name_or_path $W/model --dataset_path $D/wildchat-sample \
  --max_steps 3 --save_strategy no --output_dir $W/chat --max_eval_samples 20
gpumem_stop
python3 -c "
from transformers import AutoModelForCausalLM
m = AutoModelForCausalLM.from_pretrained('$W/promise', device_map={'': 'cpu'})
q = m.model.layers[0].self_attn.q_proj
assert type(q).__name__ == 'Linear' and getattr(m.config, 'quantization_config', None) is None, 'QLoRA merge re-quantised'
print('QLoRA publish: plain', q.weight.dtype, 'weights')"
