"""Configurations of CRyCHIc's three models: the IFQC, the prompt simplifier and the follow-up judge.

Each configuration nests the configuration of the encoder it wraps (``encoder_config``, any model type the
Auto classes know, BERT when none is given), so a saved folder rebuilds the whole network from its
``config.json`` alone; the encoder's weights live in the same ``model.safetensors`` as the head.

An encoder that is itself custom code (the paper's gte encoders: model type ``new``, ``auto_map`` into
``Alibaba-NLP/new-impl``) cannot be rebuilt from the Auto classes' tables. Its saved fields are kept in a
:class:`CustomEncoderConfig` until the model is built, when :func:`custom_encoder_class` loads its code from
the folder (or Hub repository) being loaded: ``save_pretrained`` copies that code into the folder beside
CRyCHIc's own files and ``config.json`` points at the copies (:meth:`CrychicEncoderConfig.to_dict`), so a
saved folder needs neither the encoder's original repository nor convohub. Loading such a folder runs the
encoder's code, which is what ``trust_remote_code=True`` consents to.

This file is copied into every saved model folder (``save_pretrained`` of a class registered with
``register_for_auto_class``) and loaded from there by ``from_pretrained(..., trust_remote_code=True)``, so it
imports nothing but ``transformers``: no convohub, no relative imports outside the copied files.

Defaults are the paper's (seed 002): MLP heads of hidden sizes 768-512-256 (IFQC, simplifier) and
1024-512-256-64-16 (judge), dropout 0.2, IFQC inputs of at most 64 tokens, judge turns truncated to 512
tokens per side. Small profiles override the sizes.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

IFQC_LABELS = ("explicit", "implicit")
SIMPLIFIER_LABELS = ("polite", "information", "instruction")
JUDGE_ARCHITECTURES = ("bi", "cross")
POOLING_MODES = ("cls", "mean")


def is_custom_encoder(fields: dict[str, Any]) -> bool:
    """Whether saved encoder fields describe custom code: a model type the Auto classes do not know, with an
    ``auto_map`` naming the configuration class's code."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return fields.get("model_type") not in CONFIG_MAPPING and "AutoConfig" in (fields.get("auto_map") or {})


def local_reference(reference: Any) -> Any:
    """``"repo--module.Class"`` -> ``"module.Class"``: the class in a file of the folder itself."""
    return reference.split("--")[-1] if isinstance(reference, str) else reference


def custom_encoder_class(auto_map: dict[str, Any], auto_class: str, source: str) -> type:
    """The class ``auto_map[auto_class]`` names, its code read from ``source`` (a folder or Hub repo id; a
    reference of the form ``repo--module.Class`` names another repository, as gte's do)."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    if auto_class not in auto_map:
        raise ValueError(f"the custom encoder's auto_map {auto_map} names no {auto_class} class")
    if not source:
        raise ValueError("the encoder is custom code (its model type is unknown to transformers): build the model "
                         "with from_pretrained(folder) of a saved folder, which holds that code, or with from_encoder")
    return get_class_from_dynamic_module(auto_map[auto_class], source)


class CustomEncoderConfig(PretrainedConfig):
    """The saved fields of a custom-code encoder's configuration, kept as they are until the model is built
    from the folder holding its code (module docstring). Fields read as attributes (``hidden_size``)."""

    model_type = "crychic-custom-encoder"

    def __init__(self, fields: dict[str, Any] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.fields = copy.deepcopy(dict(fields or {}))

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("fields") or {}
        if name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def auto_map(self) -> dict[str, Any]:
        return dict(self.fields.get("auto_map") or {})

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()  # the base fields too: transformers diffs nested configs against them
        out.pop("fields", None)
        return {**out, **copy.deepcopy(self.fields)}

    def resolve(self, source: str) -> PretrainedConfig:
        """The encoder's own configuration, its class loaded from ``source``."""
        fields = {k: v for k, v in self.fields.items() if k != "transformers_version"}
        return custom_encoder_class(self.auto_map, "AutoConfig", source).from_dict(fields)


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
    #: how a text becomes one vector: ``cls`` the first token's hidden state (how RoBERTa and gte are
    #: fine-tuned in the paper), ``mean`` the mean over its tokens (how sentence-transformers models such as
    #: all-MiniLM-L6-v2 were trained, so their first token carries little of the sentence)
    pooling: str = "cls"

    #: the head's hidden sizes when none are given; each subclass states the paper's
    default_hidden_sizes: ClassVar[tuple[int, ...]] = ()
    #: class names in label-id order when ``id2label`` is not given (the judge has none: one logit)
    default_labels: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self, **kwargs):
        if isinstance(self.encoder_config, dict) and is_custom_encoder(self.encoder_config):
            self.encoder_config = CustomEncoderConfig(self.encoder_config)  # resolved when the model is built
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
        if self.pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {self.pooling!r}")
        if int(self.max_length) < 4:
            raise ValueError(f"max_length must leave room for text between special tokens, got {self.max_length}")

    @property
    def encoder_hidden_size(self) -> int:
        return int(self.encoder_config.hidden_size)

    def to_dict(self) -> dict[str, Any]:
        """As saved: a custom encoder's ``auto_map`` points at the code files ``save_pretrained`` copies
        into the folder, not at the repository the code first came from."""
        out = super().to_dict()
        encoder = out.get("encoder_config")
        if isinstance(encoder, dict) and encoder.get("auto_map"):
            encoder["auto_map"] = {k: local_reference(v) for k, v in encoder["auto_map"].items()}
        return out


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
    #: bi-encoder only. ``True``: the logit is ``cosine_scale * cos(history, prompt) + cosine_shift`` plus the
    #: MLP's, whose output layer starts at zero, so the untrained judge ranks turns by the encoder's own
    #: similarity and training learns a correction to it (convohub's choice for a pretrained sentence encoder,
    #: whose cosine already ranks parents far better than a new MLP head learns to from a few hundred pairs).
    #: ``False``: the paper's judge, the MLP alone. ``cosine_scale`` and ``cosine_shift`` are the starting values
    #: (training sets them to its logistic fit first); the trained values are weights of the saved model.
    cosine_residual: bool = False
    cosine_scale: float = 10.0
    cosine_shift: float = -2.5
    #: the probability the best of a prompt's candidate turns must exceed to become its parent (else the prompt
    #: starts a new tree), when it was tuned for this judge on held-out conversations; None: the pipeline uses
    #: the paper's 0.4
    root_threshold: float | None = None
    #: the IFQC probability above which the pipeline this judge was tuned in calls a prompt an implicit
    #: follow-up of the most recent turn, when it was tuned on held-out conversations with the IFQC and
    #: simplifier of its release; None: the IFQC's argmax (0.5)
    implicit_threshold: float | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.implicit_threshold is not None and not 0.0 <= self.implicit_threshold < 1.0:
            raise ValueError(f"implicit_threshold must be a probability in [0, 1), got {self.implicit_threshold!r}")
        if self.architecture not in JUDGE_ARCHITECTURES:
            raise ValueError(f"architecture must be one of {JUDGE_ARCHITECTURES}, got {self.architecture!r}")
        if self.root_threshold is not None and not 0.0 < self.root_threshold < 1.0:
            raise ValueError(f"root_threshold must be a probability in (0, 1), got {self.root_threshold!r}")
        if self.cosine_residual and self.architecture != "bi":
            raise ValueError("cosine_residual needs architecture='bi': a cross-encoder has no pair of embeddings "
                             "to compare")
