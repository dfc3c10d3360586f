"""BM25 over English text: bm25s with its English stop-word list, for the index and for the queries alike.

WildChat-AQA's retrieval and its BM25 ranking baseline, and ProMISe's passage retriever, search English prose
the same way, so they build their indexes and split their queries here (ReQAP's retrievers tokenise events
with their own rules instead)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def english_index(texts: Sequence[str]) -> Any:
    """A ``bm25s.BM25`` index of ``texts`` (English stop words dropped)."""
    import bm25s

    index = bm25s.BM25()
    index.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)
    return index


def english_query_tokens(queries: Sequence[str]) -> list[list[str]]:
    """Each query's tokens as :func:`english_index` tokenised the texts (an empty list: nothing to match)."""
    import bm25s

    return bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)
