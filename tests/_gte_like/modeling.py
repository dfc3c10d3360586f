"""A gte-like encoder for tests: embeddings and standard transformer layers, last hidden state out. Like the
real gte code it imports its configuration relatively, so both files must travel together."""

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from .configuration import NewConfig


class NewModel(PreTrainedModel):
    config_class = NewConfig
    base_model_prefix = "new"

    def __init__(self, config: NewConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_types = nn.Embedding(config.type_vocab_size, config.hidden_size)
        layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads, config.intermediate_size,
                                           dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, **kwargs) -> BaseModelOutput:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        hidden = self.embeddings(input_ids) + self.positions(positions)
        if token_type_ids is not None:
            hidden = hidden + self.token_types(token_type_ids)
        padding = None if attention_mask is None else attention_mask == 0
        return BaseModelOutput(last_hidden_state=self.layers(hidden, src_key_padding_mask=padding))
