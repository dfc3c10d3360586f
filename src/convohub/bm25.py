"""BM25 over English text: bm25s with scikit-learn's English stop-word list, for the index and for the queries
alike.

WildChat-AQA's retrieval and its BM25 ranking baseline, and ProMISe's passage retriever, search English prose
the same way, so they build their indexes and split their queries here (ReQAP's retrievers tokenise events
with their own rules instead).

Why scikit-learn's list (318 words) and not bm25s's own ``"en"`` (33 words): the queries here are questions,
and bm25s's list keeps "how", "do", "what", "my", "you", "get". In a small collection such words are rare, so
they weigh as much as the topic's words: for the 72 turns of a tiny ProMISe release (288 top-four passages),
125 of the passages came from another topic than the dialogue's with bm25s's list, 102 with scikit-learn's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

#: names the stop-word list in cache keys and cards, so an index built with another list is not reused
STOPWORDS_NAME = "scikit-learn ENGLISH_STOP_WORDS"


@lru_cache(maxsize=1)
def stopwords() -> list[str]:
    """The English stop words dropped from texts and queries (:data:`STOPWORDS_NAME`)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return sorted(ENGLISH_STOP_WORDS)


def english_index(texts: Sequence[str]) -> Any:
    """A ``bm25s.BM25`` index of ``texts`` (English stop words dropped)."""
    import bm25s

    index = bm25s.BM25()
    index.index(bm25s.tokenize(list(texts), stopwords=stopwords(), show_progress=False), show_progress=False)
    return index


def english_query_tokens(queries: Sequence[str]) -> list[list[str]]:
    """Each query's tokens as :func:`english_index` tokenised the texts (an empty list: nothing to match)."""
    import bm25s

    return bm25s.tokenize(list(queries), stopwords=stopwords(), return_ids=False, show_progress=False)
