"""Publishing a (Q)LoRA run: the merged folder is a plain model at the recipe's dtype, and fp16 mixed precision
on float16 weights is refused before anything loads."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from convohub.training.merge import is_quantised, merged_for_publishing
from convohub.training.models import check_mixed_precision, model_init_kwargs, resolve_model


def _model_args(**kw: object) -> SimpleNamespace:
    base = {"dtype": "float32", "attn_implementation": None, "load_in_4bit": False, "load_in_8bit": False,
            "use_peft": True, "bnb_4bit_quant_type": "nf4", "use_bnb_nested_quant": False,
            "bnb_4bit_quant_storage": None, "model_name_or_path": "convohub-tiny:causal"}
    return SimpleNamespace(**(base | kw))


def _trained_adapter(model: torch.nn.Module) -> torch.nn.Module:
    """A LoRA model whose B matrices are non-zero, as after training (a fresh adapter is the identity)."""
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    generator = torch.Generator().manual_seed(0)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            param.data = torch.randn(param.shape, generator=generator) * 0.1
    return peft_model


def test_qlora_adapter_is_merged_into_the_unquantised_base(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    path = resolve_model("convohub-tiny:causal")
    args = _model_args(load_in_4bit=True)
    assert is_quantised(args)
    quantised = AutoModelForCausalLM.from_pretrained(path, **model_init_kwargs(args))
    assert getattr(quantised.config, "quantization_config", None) is not None
    peft_model = _trained_adapter(quantised)
    adapter = {k: v.detach().clone() for k, v in peft_model.state_dict().items() if "lora_" in k}

    merged = merged_for_publishing(peft_model, path, args)
    merged.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert getattr(reloaded.config, "quantization_config", None) is None
    layer = reloaded.model.layers[0].self_attn.q_proj
    assert type(layer) is torch.nn.Linear and layer.weight.dtype == torch.float32

    # the published weight is the unquantised base weight plus the whole update B @ A * alpha / r
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).model.layers[0].self_attn.q_proj.weight
    a = next(v for k, v in adapter.items() if "layers.0.self_attn.q_proj.lora_A" in k)
    b = next(v for k, v in adapter.items() if "layers.0.self_attn.q_proj.lora_B" in k)
    torch.testing.assert_close(layer.weight, base + (b @ a) * (8 / 4))


def test_plain_lora_is_merged_in_place() -> None:
    from transformers import AutoModelForCausalLM

    path = resolve_model("convohub-tiny:causal")
    peft_model = _trained_adapter(AutoModelForCausalLM.from_pretrained(path))
    before = peft_model.base_model.model.model.layers[0].self_attn.q_proj.base_layer.weight.detach().clone()
    merged = merged_for_publishing(peft_model, path, _model_args())
    assert not torch.equal(merged.model.layers[0].self_attn.q_proj.weight, before)


@pytest.mark.parametrize(("fp16", "dtype", "peft", "deepspeed", "refused"), [
    (True, "float16", False, None, True),
    (True, "float32", False, None, False),
    (True, "float16", True, None, False),
    (True, "float16", False, "ds.json", False),
    (False, "float16", False, None, False),
])
def test_fp16_mixed_precision_needs_float32_weights(monkeypatch: pytest.MonkeyPatch, fp16: bool, dtype: str,
                                                    peft: bool, deepspeed: str | None, refused: bool) -> None:
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED", raising=False)
    model_args = _model_args(dtype=dtype, use_peft=peft)
    training_args = SimpleNamespace(fp16=fp16, deepspeed=deepspeed)
    if refused:
        with pytest.raises(ValueError, match="needs float32 master weights.*--dtype float32"):
            check_mixed_precision(model_args, training_args)
    else:
        check_mixed_precision(model_args, training_args)


def test_the_launcher_flag_counts_as_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    with pytest.raises(ValueError, match="float16"):
        check_mixed_precision(_model_args(dtype="float16", use_peft=False), SimpleNamespace(fp16=False))


@pytest.mark.parametrize("recipe", ["chat_lm", "aqa_causal_lm"])
def test_fp16_paper_recipes_load_float32(recipe: str) -> None:
    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "training" / recipe / "paper.yaml").read_text())
    assert config["fp16"] is True
    check_mixed_precision(_model_args(dtype=config["dtype"], use_peft=bool(config.get("use_peft"))),
                          SimpleNamespace(fp16=True, deepspeed=None))
