"""Sentence splitting for the prompt simplifier.

spaCy, as in the paper, through its rule-based ``sentencizer`` on a blank English pipeline
(``spacy.blank("en")``): it needs no trained model, which matters because spaCy's authors publish no English
model on PyPI and convohub's machines reach only PyPI. spaCy is actively maintained and ships wheels; pysbd,
the other offline candidate, has had no release since 2021. The sentencizer splits at sentence-final
punctuation, keeps abbreviations such as "e.g." and "Dr." inside their sentence, and does not split at bare
line breaks: a prompt without punctuation is one sentence.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _pipeline() -> Any:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones dropped (so an empty prompt has no sentences)."""
    if not text.strip():
        return []
    return [sentence.text.strip() for sentence in _pipeline()(text).sents if sentence.text.strip()]
