"""A gte-like encoder configuration for tests: a model type transformers does not know ("new", as
Alibaba-NLP's gte-*-en-v1.5 use), so it loads only as custom code with ``trust_remote_code``."""

from transformers import PretrainedConfig


class NewConfig(PretrainedConfig):
    model_type = "new"

    def __init__(self, vocab_size: int = 30522, hidden_size: int = 16, num_hidden_layers: int = 1,
                 num_attention_heads: int = 2, intermediate_size: int = 32, max_position_embeddings: int = 512,
                 type_vocab_size: int = 2, pad_token_id: int = 0, **kwargs):
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        self.vocab_size, self.hidden_size, self.num_hidden_layers = vocab_size, hidden_size, num_hidden_layers
        self.num_attention_heads, self.intermediate_size = num_attention_heads, intermediate_size
        self.max_position_embeddings, self.type_vocab_size = max_position_embeddings, type_vocab_size
