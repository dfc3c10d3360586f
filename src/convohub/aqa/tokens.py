"""Input tokens, counted with the answering model's tokenizer, and the context budgets that bound them.

The paper reports the input tokens each method consumed (Table 3, millions) and packs retrieved documents
into the prompt until a per-model budget is reached [repo]: 195K tokens for o4-mini and GPT-4.1-mini,
127K for Gemma3-4B, 98K for Qwen3-32B. Counting needs the tokenizer of the model that reads the prompt: a
local model brings its own; for an endpoint convohub loads the tokenizer of the model's name (a Hub id in
the cache or a local folder) and, when that is impossible, says which tokenizer counted instead.

The offline budget is far smaller: SmolLM2-135M-Instruct reads 8,192 tokens, but every prompt token is run
through the model on a CPU, so :data:`TINY_BUDGET` keeps a question's prompt short enough that every method
of the release fits its time budget (the release logs each method's seconds and writes them to its results
JSON, :mod:`convohub.aqa.release_eval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from convohub.llm.choices import local_model

#: The authors' prompt budgets (tokens of the whole prompt) per answering model [repo].
PAPER_BUDGETS: dict[str, int] = {
    "o4-mini": 195_000,
    "gpt-4.1-mini": 195_000,
    "google/gemma-3-4b-it": 127_000,
    "Qwen/Qwen3-32B": 98_000,
}
#: Default prompt budget for an answering model the table does not name (the smallest paper budget).
DEFAULT_BUDGET = 98_000
#: Prompt budget of the offline profile (SmolLM2-135M-Instruct on CPU).
TINY_BUDGET = 192


def budget_for(model_id: str, *, tiny: bool = False) -> int:
    """The prompt budget for ``model_id``: :data:`TINY_BUDGET` offline, else the paper's value."""
    if tiny:
        return TINY_BUDGET
    return PAPER_BUDGETS.get(model_id, DEFAULT_BUDGET)


@dataclass
class TokenCounter:
    """Counts tokens of plain text (no special tokens, no chat template) with one named tokenizer; counts of
    texts seen before are cached (retrieved documents recur across questions)."""

    tokenizer: Any
    name: str
    _cache: dict[str, int] = field(default_factory=dict, repr=False)

    def __call__(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if len(self._cache) < 200_000:
                self._cache[text] = n
        return n

    def many(self, texts: Sequence[str]) -> list[int]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            for text, ids in zip(todo, self.tokenizer(todo, add_special_tokens=False)["input_ids"], strict=True):
                self._cache[text] = len(ids)
        return [self._cache[t] for t in texts]


def counter_for(backend: Any) -> TokenCounter:
    """A counter with the tokenizer of ``backend``'s model: its own for a local model; for an endpoint the
    tokenizer of the model's name when it loads offline, else the MiniLM tokenizer (named as such)."""
    local = local_model(backend)
    if local is not None:
        return TokenCounter(local.tokenizer, local.model_id)
    model_id = getattr(backend, "model_id", "")
    try:
        from transformers import AutoTokenizer

        return TokenCounter(AutoTokenizer.from_pretrained(model_id), model_id)
    except Exception:  # noqa: BLE001 - any failure to load means: count with a named stand-in
        from convohub.aqa.chunking import minilm_tokenizer
        from convohub.models import MINILM_ID

        return TokenCounter(minilm_tokenizer(), f"{MINILM_ID} (stand-in: {model_id}'s tokenizer did not load)")


def pack(documents: Sequence[str], counts: Sequence[int], used: int, budget: int) -> int:
    """How many leading documents fit: the authors add documents in retrieval order while the prompt's
    token count (``used`` so far) plus the next document stays under ``budget``, and stop at the first that
    does not fit."""
    n = 0
    for count in counts[: len(documents)]:
        if used + count >= budget:
            break
        used += count
        n += 1
    return n
