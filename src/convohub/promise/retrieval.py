"""Where the agent's web snippets come from: a retrieval backend behind one small interface.

ProMISe's agent retrieved Bing web snippets for the current query (Algorithm 1, line 5). Bing's API is
retired and no machine here reaches the web, so the loop talks to a :class:`SnippetRetriever`: anything with
a ``name`` (recorded in every dialogue) and ``search(queries, k)``. Offline it is :class:`BM25Retriever`
(bm25s) over a :class:`PassageCollection` that convohub ships and names: ``src/convohub/data/
promise_passages.json``, 96 passages on 16 topics written by hand for convohub (its ``provenance`` field and
the dataset card say so). A web search API, a vector store or another collection (``PassageCollection.read``
of a JSON file of the same shape, or JSON Lines of ``{"id", "text"}``) plugs in behind the same interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from convohub.bm25 import english_index, english_query_tokens
from convohub.jsonlines import json_document, jsonl_records

DEFAULT_COLLECTION = Path(__file__).resolve().parents[1] / "data" / "promise_passages.json"


@dataclass(frozen=True)
class Passage:
    """One retrievable snippet: its id (``<topic id>-<n>``), text and topic id ("" when unknown)."""

    id: str
    text: str
    topic: str = ""


@dataclass(frozen=True)
class Topic:
    """A seed topic of the offline collection (standing in for the paper's Google Trends queries)."""

    id: str
    topic: str
    category: str


@dataclass(frozen=True)
class PassageCollection:
    """A named passage collection with its provenance and (for convohub's own) the topics it covers."""

    name: str
    provenance: str
    passages: tuple[Passage, ...]
    topics: tuple[Topic, ...] = ()

    @classmethod
    def read(cls, path: str | Path) -> PassageCollection:
        """A collection file: convohub's JSON shape (``name``, ``provenance``, ``topics`` with ``passages``), or
        JSON Lines of ``{"id", "text"}`` (named after the file)."""
        path = Path(path)
        if path.suffix == ".jsonl":
            passages = []
            expected = "an object with 'id' and 'text'"
            for where, row in jsonl_records(path, expected=expected):
                if not isinstance(row, dict) or not isinstance(row.get("text"), str) or "id" not in row:
                    raise ValueError(f"{where}: each line must be {expected}")
                passages.append(Passage(str(row["id"]), row["text"], str(row.get("topic", ""))))
            return cls(path.stem, f"passages read from {path.name}", tuple(passages))
        doc = json_document(path)
        passages, topics = [], []
        for t in doc["topics"]:
            topics.append(Topic(t["id"], t["topic"], t.get("category", "")))
            passages += [Passage(f"{t['id']}-{i}", text, t["id"]) for i, text in enumerate(t["passages"])]
        return cls(doc["name"], doc["provenance"], tuple(passages), tuple(topics))

    def __len__(self) -> int:
        return len(self.passages)


@lru_cache(maxsize=1)
def default_collection() -> PassageCollection:
    """convohub's own passage collection (module docstring)."""
    return PassageCollection.read(DEFAULT_COLLECTION)


class SnippetRetriever(Protocol):
    """What the loop needs of a retrieval backend."""

    @property
    def name(self) -> str:  # e.g. "bm25s:convohub-promise-passages-v1"; recorded in every dialogue
        ...

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """The ``k`` best passages for each query, best first (fewer when fewer match)."""
        ...


class BM25Retriever:
    """BM25 (bm25s, English stopwords) over a passage collection; passages without a query term are left out."""

    def __init__(self, collection: PassageCollection | None = None) -> None:
        self.collection = collection or default_collection()
        if not self.collection.passages:
            raise ValueError(f"passage collection {self.collection.name!r} is empty")
        self._index: Any = english_index([p.text for p in self.collection.passages])

    @property
    def name(self) -> str:
        return f"bm25s:{self.collection.name}"

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        import numpy as np

        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        out = []
        for query in english_query_tokens(queries):
            scores = np.asarray(self._index.get_scores(query)) if query else np.zeros(len(self.collection))
            order = [int(i) for i in np.argsort(-scores, kind="stable")[:k] if scores[i] > 0]
            out.append([self.collection.passages[i] for i in order])
        return out
