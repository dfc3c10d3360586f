"""A random bf16 model of a paper base model's shape, with SmolLM2's real tokenizer: the weights are too large to
carry to the device, and shape is what GPU memory and time depend on.

    python random_shaped_model.py SMOLLM2_FOLDER OUT [--shape smollm2|llama-7b]

``smollm2`` keeps SmolLM2-135M's config; ``llama-7b`` takes huggyllama/llama-7b's dimensions (hidden 4096,
MLP 11008, 32 layers of 32 heads, 2048 positions) with SmolLM2's 49,152-token vocabulary. Either is built on
the GPU when there is one."""
import argparse
import shutil
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

#: huggyllama/llama-7b's config.json, less its vocabulary (the tokenizer travelling with the model is SmolLM2's);
#: SmolLM2 is itself a Llama, so the config class stays.
LLAMA_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("src", type=Path)
parser.add_argument("dst", type=Path)
parser.add_argument("--shape", choices=("smollm2", "llama-7b"), default="smollm2")
args = parser.parse_args()

torch.manual_seed(0)
config = AutoConfig.from_pretrained(args.src)
if args.shape == "llama-7b":
    for key, value in LLAMA_7B.items():
        setattr(config, key, value)
    config.head_dim = config.hidden_size // config.num_attention_heads
with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.save_pretrained(args.dst)
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    shutil.copy(args.src / name, args.dst / name)
print("params", sum(p.numel() for p in model.parameters()))
