"""Tiny randomly initialised CRyCHIc models for plumbing tests: a 1-layer, 16-wide BERT encoder with the
bundled all-MiniLM-L6-v2 tokenizer (its real vocabulary, so text tokenizes as in the tiny profile). Their
predictions mean nothing; tests use them to check shapes, saving, loading and the CLI, never quality."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig

from convohub.crychic.models import (
    CrychicFollowUpJudgeConfig,
    CrychicFollowUpJudgeModel,
    CrychicIFQCConfig,
    CrychicIFQCModel,
    CrychicSimplifierConfig,
    CrychicSimplifierModel,
)
from convohub.models import minilm_path

KINDS = ("ifqc", "simplifier", "judge-bi", "judge-cross")


def one_thread() -> Iterator[None]:
    """Body of a module fixture: torch on one thread. The tiny models' matrices are so small that a second
    thread only adds contention; on a busy 2-core machine it made these tests 75 times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(str(minilm_path()))


def encoder_config() -> BertConfig:
    return BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=512)


def tiny_model(kind: str, seed: int = 0) -> Any:
    """A fresh tiny model of ``kind`` (one of :data:`KINDS`), initialised from ``seed``."""
    torch.manual_seed(seed)
    common = {"encoder_config": encoder_config().to_dict(), "head_hidden_sizes": [8, 4], "head_dropout": 0.2}
    if kind == "ifqc":
        return CrychicIFQCModel(CrychicIFQCConfig(**common)).eval()
    if kind == "simplifier":
        tok = tokenizer()
        return CrychicSimplifierModel(CrychicSimplifierConfig(
            sep_token_id=tok.sep_token_id, cls_token_id=tok.cls_token_id, max_length=48, **common)).eval()
    if kind.startswith("judge-"):
        config = CrychicFollowUpJudgeConfig(architecture=kind.split("-")[1], turn_max_tokens=24, max_length=64,
                                            **common)
        return CrychicFollowUpJudgeModel(config).eval()
    raise ValueError(kind)


def save_tiny(kind: str, folder: Path, seed: int = 0) -> Path:
    """Save a tiny model with its tokenizer, as a trained model folder would be."""
    tiny_model(kind, seed).save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return folder


GTE_LIKE_CODE = Path(__file__).parent / "_gte_like"


def save_gte_like_encoder(folder: Path, seed: int = 0) -> Path:
    """A tiny random encoder folder shaped like Alibaba-NLP's gte-*-en-v1.5: model type ``new``, unknown to
    transformers, its configuration and modeling code in the folder and named by ``auto_map``, so it loads only
    with ``trust_remote_code=True``; the MiniLM tokenizer beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("configuration.py", "modeling.py"):
        shutil.copy(GTE_LIKE_CODE / name, folder / name)
    fields = {"model_type": "new", "architectures": ["NewModel"], "hidden_size": 16, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 32, "vocab_size": 30522,
              "auto_map": {"AutoConfig": "configuration.NewConfig", "AutoModel": "modeling.NewModel"}}
    (folder / "config.json").write_text(json.dumps(fields), encoding="utf-8")
    torch.manual_seed(seed)
    AutoModel.from_config(AutoConfig.from_pretrained(folder, trust_remote_code=True),
                          trust_remote_code=True).save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return folder
