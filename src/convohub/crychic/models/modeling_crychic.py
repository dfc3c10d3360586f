"""CRyCHIc's three models as ``transformers`` models: an encoder plus an MLP head each.

* :class:`CrychicIFQCModel`: implicit vs explicit follow-up, read from the first token's last hidden state
  (the paper's "first-token embedding"; ``[CLS]`` for BERT-style encoders, ``<s>`` for RoBERTa).
* :class:`CrychicSimplifierModel`: input ``s1 [SEP] s2 [SEP] ...`` (built by :func:`pack_sentences`); every
  sentence is read at the separator that ends it and labelled polite / information / instruction.
* :class:`CrychicFollowUpJudgeModel`: probability that a history turn is the parent of a prompt; ``bi``
  embeds both sides with the first token's hidden state (gte's own pooling; the spec's "appended [CLS]" is
  the classification token the tokenizer adds) and scores ``[history; prompt; history - prompt]``, so the
  history side can be embedded once and cached (:meth:`~CrychicFollowUpJudgeModel.embed`,
  :meth:`~CrychicFollowUpJudgeModel.score_embeddings`); ``cross`` encodes the pair together. With
  ``config.cosine_residual`` the bi-encoder's MLP logit is added to the scaled and shifted cosine of the two
  embeddings (convohub's offline judge; the paper's is the MLP alone).

Like the configuration file, this file is copied into every saved folder and loaded from there with
``trust_remote_code=True``; it imports only ``torch``, ``transformers`` and the configuration file beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import ModelOutput

from .configuration_crychic import (
    CrychicEncoderConfig,
    CrychicFollowUpJudgeConfig,
    CrychicIFQCConfig,
    CrychicSimplifierConfig,
    CustomEncoderConfig,
    custom_encoder_class,
    is_custom_encoder,
)


def _is_custom(encoder_config: object) -> bool:
    return is_custom_encoder({"model_type": getattr(encoder_config, "model_type", None),
                              "auto_map": getattr(encoder_config, "auto_map", None)})


class CrychicMLPHead(nn.Module):
    """Linear -> ReLU -> dropout for every hidden size, then a linear output layer."""

    def __init__(self, in_features: int, hidden_sizes: Sequence[int], out_features: int, dropout: float):
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU(), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, out_features))
        self.layers = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


class CrychicPreTrainedModel(PreTrainedModel):
    """Shared plumbing: the nested encoder, weight initialisation of the head, building from an encoder."""

    config_class = CrychicEncoderConfig
    base_model_prefix = "crychic"
    supports_gradient_checkpointing = False

    def _build_encoder(self, config: CrychicEncoderConfig) -> nn.Module:
        """The encoder network (random weights; loading fills them). A custom-code encoder (gte) is built from
        its own classes: read from the folder being loaded (``config.name_or_path``), where ``save_pretrained``
        put its code, or, from :meth:`from_encoder`, from the encoder's own folder or repository."""
        encoder = config.encoder_config
        # by model type, not isinstance: loaded as remote code, this file and the configuration file are
        # imported under different module hashes, so the class objects differ
        if type(encoder).model_type == CustomEncoderConfig.model_type:
            source = config.name_or_path
            encoder = config.encoder_config = encoder.resolve(source)
        elif _is_custom(encoder):
            source = encoder.name_or_path
        else:
            return AutoModel.from_config(encoder)
        return custom_encoder_class(encoder.auto_map, "AutoModel", source)._from_config(encoder)

    def save_pretrained(self, save_directory, *args, **kwargs) -> None:
        """``PreTrainedModel.save_pretrained``, plus the code of a custom-code encoder (its modeling and
        configuration files, with their relative imports) copied into the folder, where ``config.json``'s
        nested ``auto_map`` points."""
        super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True) and _is_custom(self.config.encoder_config):
            from transformers.dynamic_module_utils import custom_object_save

            custom_object_save(self.encoder, save_directory)
            custom_object_save(self.config.encoder_config, save_directory)

    def _init_weights(self, module: nn.Module) -> None:
        # The encoder is a PreTrainedModel and initialises its own modules; this sees only the head's. The
        # functions of transformers.initialization leave weights that were loaded from a checkpoint alone.
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            init.zeros_(module.bias)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
               token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's last hidden states, ``(batch, tokens, hidden)``."""
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        return self.encoder(**kwargs).last_hidden_state

    def pool(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
             token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """One vector per text, ``(batch, hidden)``, by ``config.pooling``: the first token or the mean
        over the tokens the attention mask keeps."""
        hidden = self.encode(input_ids, attention_mask, token_type_ids)
        if self.config.pooling == "cls":
            return hidden[:, 0]
        if attention_mask is None:
            return hidden.mean(dim=1)
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

    @classmethod
    def from_encoder(cls, encoder_name_or_path: str, *, trust_remote_code: bool = False, **config_kwargs):
        """A model whose encoder starts from pretrained weights (a Hub id or a folder) and whose head is new.

        ``config_kwargs`` set the configuration's own fields (head sizes, dropout, ...). The encoder's
        configuration is copied into the model's, so the saved folder needs nothing else to rebuild it.
        """
        encoder = AutoModel.from_pretrained(encoder_name_or_path, trust_remote_code=trust_remote_code)
        encoder_config = AutoConfig.from_pretrained(encoder_name_or_path, trust_remote_code=trust_remote_code)
        config = cls.config_class(encoder_config=encoder_config, encoder_name_or_path=str(encoder_name_or_path),
                                  **config_kwargs)
        model = cls(config)
        missing, unexpected = model.encoder.load_state_dict(encoder.state_dict(), strict=False)
        if missing or unexpected:
            raise RuntimeError(f"{encoder_name_or_path}: encoder weights do not fit (missing {missing}, "
                               f"unexpected {unexpected})")
        return model


class CrychicIFQCModel(CrychicPreTrainedModel):
    """Implicit Follow-up Question Classifier: logits over (explicit, implicit) from the pooled prompt."""

    config_class = CrychicIFQCConfig

    def __init__(self, config: CrychicIFQCConfig):
        super().__init__(config)
        self.encoder = self._build_encoder(config)
        self.head = CrychicMLPHead(config.encoder_hidden_size, config.head_hidden_sizes, config.num_labels,
                                   config.head_dropout)
        self.post_init()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                **kwargs) -> SequenceClassifierOutput:
        logits = self.head(self.pool(input_ids, attention_mask, token_type_ids))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


@dataclass
class CrychicSentenceOutput(ModelOutput):
    """Per-sentence logits ``(batch, sentences, labels)``; ``sentence_mask`` marks the real sentences of each
    row (rows with fewer separators are padded)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    sentence_mask: torch.Tensor | None = None


def pack_sentences(tokenizer, sentences: Sequence[str], max_length: int) -> list[tuple[list[int], list[int]]]:
    """``[CLS] s1 [SEP] s2 [SEP] ...`` inputs for the simplifier, split into as many rows as needed.

    Returns ``(input_ids, sentence_indices)`` per row. A sentence longer than a row allows is cut (it keeps its
    first tokens and its separator); sentences never straddle two rows, so every sentence gets exactly one
    separator and one label however long the prompt is.
    """
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls_id is None or sep_id is None:
        raise ValueError("the simplifier needs a tokenizer with a classification and a separator token")
    room = max_length - 2  # one row holds [CLS], the sentence and its [SEP]
    rows: list[tuple[list[int], list[int]]] = []
    ids, members = [cls_id], []
    for index, sentence in enumerate(sentences):
        pieces = tokenizer(sentence, add_special_tokens=False)["input_ids"][:room] + [sep_id]
        if members and len(ids) + len(pieces) > max_length:
            rows.append((ids, members))
            ids, members = [cls_id], []
        ids = ids + pieces
        members.append(index)
    if members:
        rows.append((ids, members))
    return rows


class CrychicSimplifierModel(CrychicPreTrainedModel):
    """Prompt simplifier: one (polite, information, instruction) logit vector per separator token."""

    config_class = CrychicSimplifierConfig

    def __init__(self, config: CrychicSimplifierConfig):
        super().__init__(config)
        if config.sep_token_id is None:
            raise ValueError("CrychicSimplifierConfig.sep_token_id must name the tokenizer's separator token")
        self.encoder = self._build_encoder(config)
        self.head = CrychicMLPHead(config.encoder_hidden_size, config.head_hidden_sizes, config.num_labels,
                                   config.head_dropout)
        self.post_init()

    @classmethod
    def from_encoder(cls, encoder_name_or_path: str, *, trust_remote_code: bool = False, **config_kwargs):
        """As :meth:`CrychicPreTrainedModel.from_encoder`; the separator and classification token ids come
        from the encoder's tokenizer unless given."""
        if config_kwargs.get("sep_token_id") is None or config_kwargs.get("cls_token_id") is None:
            tokenizer = AutoTokenizer.from_pretrained(encoder_name_or_path, trust_remote_code=trust_remote_code)
            config_kwargs.setdefault("sep_token_id", tokenizer.sep_token_id)
            config_kwargs.setdefault("cls_token_id", tokenizer.cls_token_id)
        return super().from_encoder(encoder_name_or_path, trust_remote_code=trust_remote_code, **config_kwargs)

    def separator_states(self, hidden: torch.Tensor, input_ids: torch.Tensor,
                         attention_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states at the separators, left-aligned per row ``(batch, sentences, hidden)``, and the mask."""
        is_sep = input_ids == self.config.sep_token_id
        if attention_mask is not None:
            is_sep = is_sep & attention_mask.bool()
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device).expand_as(input_ids)
        # separators keep their position, everything else sorts after them
        order = torch.where(is_sep, positions, torch.full_like(positions, length)).sort(dim=1).values
        counts = is_sep.sum(dim=1)
        width = max(int(counts.max()), 1)
        order = order[:, :width]
        mask = torch.arange(width, device=input_ids.device)[None, :] < counts[:, None]
        index = torch.where(mask, order, torch.zeros_like(order))
        states = hidden.gather(1, index[..., None].expand(-1, -1, hidden.shape[-1]))
        return states, mask

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                **kwargs) -> CrychicSentenceOutput:
        """``labels``: ``(batch, sentences)`` class ids, ``-100`` where a row has no such sentence."""
        hidden = self.encode(input_ids, attention_mask, token_type_ids)
        states, mask = self.separator_states(hidden, input_ids, attention_mask)
        logits = self.head(states)
        loss = None
        if labels is not None:
            labels = labels[:, : logits.shape[1]].masked_fill(~mask[:, : labels.shape[1]], -100)
            loss = nn.functional.cross_entropy(logits[:, : labels.shape[1]].reshape(-1, logits.shape[-1]),
                                               labels.reshape(-1), ignore_index=-100)
        return CrychicSentenceOutput(loss=loss, logits=logits, sentence_mask=mask)


@dataclass
class CrychicJudgeOutput(ModelOutput):
    """``logits`` ``(batch,)``: the parent score before the sigmoid; ``probabilities`` after it."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    probabilities: torch.Tensor | None = None


class CrychicFollowUpJudgeModel(CrychicPreTrainedModel):
    """Follow-up judge, bi-encoder (default) or cross-encoder (``config.architecture``)."""

    config_class = CrychicFollowUpJudgeConfig

    def __init__(self, config: CrychicFollowUpJudgeConfig):
        super().__init__(config)
        self.encoder = self._build_encoder(config)
        width = config.encoder_hidden_size * (3 if config.architecture == "bi" else 1)
        self.head = CrychicMLPHead(width, config.head_hidden_sizes, 1, config.head_dropout)
        if config.cosine_residual:
            self.cosine_scale = nn.Parameter(torch.tensor(float(config.cosine_scale)))
            self.cosine_shift = nn.Parameter(torch.tensor(float(config.cosine_shift)))
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if not self.config.cosine_residual:
            return
        if module is self.head.layers[-1]:  # the MLP adds nothing until training gives it something to add
            init.zeros_(module.weight)
        elif module is self:
            init.constant_(self.cosine_scale, float(self.config.cosine_scale))
            init.constant_(self.cosine_shift, float(self.config.cosine_shift))

    @property
    def is_bi_encoder(self) -> bool:
        return self.config.architecture == "bi"

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
              token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """One vector per text (``config.pooling``): what the pipeline stores for every turn."""
        return self.pool(input_ids, attention_mask, token_type_ids)

    def score_embeddings(self, history: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
        """Bi-encoder logits for stored history embeddings against prompt embeddings (broadcast over batch)."""
        if not self.is_bi_encoder:
            raise ValueError("score_embeddings needs architecture='bi'; a cross-encoder scores text pairs")
        history, prompt = torch.broadcast_tensors(history, prompt)
        logits = self.head(torch.cat([history, prompt, history - prompt], dim=-1)).squeeze(-1)
        if self.config.cosine_residual:
            similarity = nn.functional.cosine_similarity(history, prompt, dim=-1)
            logits = logits + self.cosine_scale * similarity + self.cosine_shift
        return logits

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, history_input_ids: torch.Tensor | None = None,
                history_attention_mask: torch.Tensor | None = None,
                history_token_type_ids: torch.Tensor | None = None,
                history_embeds: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                **kwargs) -> CrychicJudgeOutput:
        """Bi: ``input_ids`` is the prompt, the history comes as ``history_input_ids`` or cached
        ``history_embeds``. Cross: ``input_ids`` is the (history, prompt) pair encoded together.
        ``labels``: 1.0 when the history turn is the parent, else 0.0."""
        if input_ids is None:
            raise ValueError("input_ids is required (the prompt, or the history-prompt pair for a cross-encoder)")
        if self.is_bi_encoder:
            if history_embeds is None:
                if history_input_ids is None:
                    raise ValueError("a bi-encoder judge needs history_input_ids or history_embeds")
                history_embeds = self.embed(history_input_ids, history_attention_mask, history_token_type_ids)
            logits = self.score_embeddings(history_embeds, self.embed(input_ids, attention_mask, token_type_ids))
        else:
            logits = self.head(self.embed(input_ids, attention_mask, token_type_ids)).squeeze(-1)
        loss = None
        if labels is not None:
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return CrychicJudgeOutput(loss=loss, logits=logits, probabilities=torch.sigmoid(logits))
