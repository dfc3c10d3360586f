"""Configurations of CRyCHIc's three models: the IFQC, the prompt simplifier and the follow-up judge.

Each configuration nests the configuration of the encoder it wraps (``encoder_config``, any model type the
Auto classes know, BERT when none is given), so a saved folder rebuilds the whole network from its
``config.json`` alone; the encoder's weights live in the same ``model.safetensors`` as the head.

This file is copied into every saved model folder (``save_pretrained`` of a class registered with
``register_for_auto_class``) and loaded from there by ``from_pretrained(..., trust_remote_code=True)``, so it
imports nothing but ``transformers``: no convohub, no relative imports outside the copied files.

Defaults are the paper's (seed 002): MLP heads of hidden sizes 768-512-256 (IFQC, simplifier) and
1024-512-256-64-16 (judge), dropout 0.2, IFQC inputs of at most 64 tokens, judge turns truncated to 512
tokens per side. Small profiles override the sizes.
"""

from __future__ import annotations

from typing import ClassVar

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

IFQC_LABELS = ("explicit", "implicit")
SIMPLIFIER_LABELS = ("polite", "information", "instruction")
JUDGE_ARCHITECTURES = ("bi", "cross")


class CrychicEncoderConfig(PretrainedConfig):
    """Shared fields: the nested encoder configuration, where it came from, and the MLP head's shape."""

    sub_configs_defaults = {"encoder_config": SubConfigSpec(config_class=AutoConfig, model_type="bert")}

    encoder_config: PretrainedConfig | dict | None = None
    #: the name or folder the encoder's weights were first loaded from (provenance only)
    encoder_name_or_path: str | None = None
    head_hidden_sizes: list[int] | None = None
    head_dropout: float = 0.2
    #: longest input, in tokens, the model is fed (the tokenizer truncates to it)
    max_length: int = 512

    #: the head's hidden sizes when none are given; each subclass states the paper's
    default_hidden_sizes: ClassVar[tuple[int, ...]] = ()
    #: class names in label-id order when ``id2label`` is not given (the judge has none: one logit)
    default_labels: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self, **kwargs):
        # id2label before the parent's __post_init__, which derives num_labels from it
        if self.default_labels and self.id2label is None:
            self.id2label = dict(enumerate(self.default_labels))
        super().__post_init__(**kwargs)
        if self.default_labels and self.label2id is None:
            self.label2id = {name: i for i, name in self.id2label.items()}
        if self.head_hidden_sizes is None:
            self.head_hidden_sizes = list(self.default_hidden_sizes)
        self.head_hidden_sizes = [int(size) for size in self.head_hidden_sizes]
        if any(size <= 0 for size in self.head_hidden_sizes):
            raise ValueError(f"head_hidden_sizes must be positive, got {self.head_hidden_sizes}")
        if not 0.0 <= float(self.head_dropout) < 1.0:
            raise ValueError(f"head_dropout must be in [0, 1), got {self.head_dropout}")
        if int(self.max_length) < 4:
            raise ValueError(f"max_length must leave room for text between special tokens, got {self.max_length}")

    @property
    def encoder_hidden_size(self) -> int:
        return int(self.encoder_config.hidden_size)


class CrychicIFQCConfig(CrychicEncoderConfig):
    """Implicit Follow-up Question Classifier: is a prompt an implicit follow-up ("Continue", "Translate
    this") or explicit? Label 1 (``implicit``) makes the turn a child of the most recent turn."""

    model_type = "crychic-ifqc"
    default_hidden_sizes: ClassVar[tuple[int, ...]] = (768, 512, 256)
    default_labels: ClassVar[tuple[str, ...]] = IFQC_LABELS
    max_length: int = 64


class CrychicSimplifierConfig(CrychicEncoderConfig):
    """Prompt simplifier: one label per sentence (polite / information / instruction), read at the
    separator token that ends the sentence. ``sep_token_id`` and ``cls_token_id`` come from the encoder's
    tokenizer and are needed to find the separators."""

    model_type = "crychic-simplifier"
    default_hidden_sizes: ClassVar[tuple[int, ...]] = (768, 512, 256)
    default_labels: ClassVar[tuple[str, ...]] = SIMPLIFIER_LABELS
    sep_token_id: int | None = None
    cls_token_id: int | None = None


class CrychicFollowUpJudgeConfig(CrychicEncoderConfig):
    """Follow-up judge: the probability that a history turn is the parent of a prompt.

    ``architecture`` ``bi`` (the paper's choice, kept for speed): history and prompt embedded separately and
    an MLP over ``[history; prompt; history - prompt]``, so each history turn is embedded once and cached.
    ``cross``: history and prompt encoded together as one pair, MLP over the pair's embedding (the paper's
    more accurate but slower variant: every candidate turn is re-encoded for every prompt).
    ``turn_max_tokens``: each side of a stored turn (prompt, response) is truncated to this many tokens
    before the two are concatenated and embedded.
    """

    model_type = "crychic-followup-judge"
    default_hidden_sizes: ClassVar[tuple[int, ...]] = (1024, 512, 256, 64, 16)
    architecture: str = "bi"
    turn_max_tokens: int = 512

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.architecture not in JUDGE_ARCHITECTURES:
            raise ValueError(f"architecture must be one of {JUDGE_ARCHITECTURES}, got {self.architecture!r}")
