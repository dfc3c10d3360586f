"""Publish a LoRA run as one plain model folder, also when it was trained as QLoRA.

Merging an adapter into the 4-bit base it was trained on (peft's ``merge_and_unload`` on a bitsandbytes model)
re-quantises the merged weights: the saved folder is a 4-bit checkpoint that needs bitsandbytes and a GPU to
load, and the merge itself rounds the adapter's update away (peft warns of it). Measured on an H200 with the
ProMISe paper recipe on a SmolLM2-135M-shaped model: the merged folder held 112 MB of NF4 weights and a
``quantization_config``. The QLoRA practice is to merge into the base loaded again in the recipe's dtype
(``dtype``, bf16 in the paper recipes), which is what :func:`merged_for_publishing` does.
"""

from __future__ import annotations

import tempfile
from typing import Any


def is_quantised(model_args: Any) -> bool:
    """True when the recipe loads its base in 4 or 8 bits (bitsandbytes)."""
    return bool(getattr(model_args, "load_in_4bit", False) or getattr(model_args, "load_in_8bit", False))


def merged_for_publishing(peft_model: Any, model_path: str, model_args: Any) -> Any:
    """The trained adapter merged into its base, as a plain ``from_pretrained``-loadable model.

    ``peft_model`` is the trained (unwrapped) PEFT model; ``model_path`` the base it was loaded from. An
    unquantised base is merged in place. A quantised one is loaded again on the CPU in ``model_args.dtype``
    (``auto`` when unset), the adapter is copied onto it through a temporary adapter folder, and that copy
    is merged, so the published weights carry the whole update at the recipe's precision.
    """
    if not is_quantised(model_args):
        return peft_model.merge_and_unload()
    from transformers import AutoModelForCausalLM

    dtype = model_args.dtype or "auto"
    with tempfile.TemporaryDirectory(prefix="convohub-adapter-") as adapter:
        peft_model.save_pretrained(adapter)
        base = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, device_map={"": "cpu"})
        # the trained model's own PEFT class loads the adapter: this module names no training-only package,
        # so the Spaces that reach the training helpers do not list peft (convohub.space_export follows imports)
        merged = type(peft_model).from_pretrained(base, adapter).merge_and_unload()
    return merged
