"""One MiniLM embedding function for the whole construction, encoding every distinct text once.

The pipeline embeds the same summaries for the topic taxonomy, every subtopic search, the labels, the
keyword categories and quality control; on two CPU cores all-MiniLM-L6-v2 encodes a few dozen texts per
second, so re-encoding them was most of the non-LLM time of a build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


class Memo:
    """``embed(texts) -> normalised vectors``, memoised per text (``inner`` defaults to MiniLM)."""

    def __init__(self, inner: Callable[[Sequence[str]], np.ndarray] | None = None) -> None:
        if inner is None:
            from convohub.embeddings import embed as inner
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    def warm(self, texts: Sequence[str]) -> None:
        todo = sorted({t for t in texts if t not in self.cache})
        if todo:
            self.cache.update(zip(todo, np.asarray(self.inner(todo), dtype=np.float32), strict=True))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        self.warm(texts)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])
