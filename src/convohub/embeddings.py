"""Sentence embeddings from the bundled encoder, shared by every system that compares texts by meaning.

WildFeedback clusters and de-duplicates its test items, WildChat-AQA ranks options and retrieves, ProMISe
re-ranks its agent's snippets: all with all-MiniLM-L6-v2 (``minilm``, the offline base of every encoder) or
any sentence-transformers model a recipe names. One loaded model per folder serves a whole process.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["embed", "sentence_encoder"]


@lru_cache(maxsize=2)
def sentence_encoder(path: str) -> Any:
    """One loaded ``SentenceTransformer`` per model folder, on the CPU (a release embeds many times in one
    process; loading MiniLM takes about a second each time)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def embed(texts: Sequence[str], model: str = "minilm") -> np.ndarray:
    """Normalised sentence embeddings (float32, C-contiguous: the input FAISS wants); ``model`` is a recipe's
    model name (``minilm``) or a folder or Hub id."""
    from convohub.training.models import resolve_model

    vectors = sentence_encoder(resolve_model(model)).encode(list(texts), batch_size=64, normalize_embeddings=True,
                                                           show_progress_bar=False)
    return np.ascontiguousarray(vectors, dtype="float32")
