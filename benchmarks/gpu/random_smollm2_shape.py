"""A random model of SmolLM2-135M's exact shape (its config and real tokenizer), bf16: the weights are too
large to carry to the device, and shape is what GPU memory and time depend on."""
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
config = AutoConfig.from_pretrained(src)
model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.save_pretrained(dst)
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    shutil.copy(src / name, dst / name)
print("params", sum(p.numel() for p in model.parameters()))
