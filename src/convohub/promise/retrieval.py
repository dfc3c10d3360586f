"""Where the agent's web snippets come from: a retrieval backend behind one small interface.

ProMISe's agent retrieved Bing web snippets for the current query (Algorithm 1, line 5). Bing's API is retired
and no machine here reaches the web, so the loop talks to a :class:`SnippetRetriever`: anything with a
``name`` (recorded in every dialogue) and ``search(queries, k)``. Offline it is :class:`BM25Retriever` (bm25s)
re-ranked by :class:`RerankedRetriever` (:func:`offline_retriever`) over a :class:`PassageCollection` that
convohub ships and names: ``src/convohub/data/promise_passages.json``,
384 passages on 16 topics (24 each) written by hand for convohub (its ``provenance`` field and the dataset
card say so). A web search API, a vector store or another collection (``PassageCollection.read`` of a JSON
file of the same shape, or JSON Lines of ``{"id", "text", "topic"}``) plugs in behind the same interface: in
Python, pass any :class:`SnippetRetriever` to :func:`convohub.promise.simulate.generate`; from the command
line, ``CONVOHUB_PROMISE_PASSAGES=FILE`` makes ``convohub datasets build promise``, the release and the Space
search that collection instead (:func:`configured_collection`; its topics seed the dialogues).

Why re-rank: a web index has thousands of pages on a query's subject, the collection 24 per topic, so
BM25's later hits are often another topic's passage that shares a word such as "long" or "take" ("How long
does it take for a budget drone to take a shot?" finds passages on eggs, recessions and phone cases among its
eight). The agent writes a suggestion from each snippet, so such a passage becomes an off-topic suggestion.
Re-ordering BM25's first 32 candidates by the cosine of their MiniLM embeddings to the query keeps its
lexical recall and puts the passages on the query's subject first: over the 62 search texts of a tiny release
on the 12-a-topic collection (version 2), passages of another topic than the dialogue's fell from 20.4% to
2.8% of the eight snippets a turn gets, and from 9.3% to 1.6% of the first four.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from convohub.bm25 import english_index, english_query_tokens
from convohub.embeddings import embed
from convohub.jsonlines import json_document, jsonl_records
from convohub.promise.settings import PASSAGES_ENV

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
        """A collection file: convohub's JSON shape (``name``, ``provenance``, ``topics``: a list of ``{"id",
        "topic", "category", "passages": [text, ...]}``), or JSON Lines of ``{"id", "text", "topic"}`` (named
        after the file; ``topic`` is optional, and the distinct topics, in order of appearance, are the
        collection's topics). Errors name the file, the line or topic, and the field."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"passage collection {str(path)!r} does not exist")
        if path.suffix == ".jsonl":
            passages = []
            expected = "an object with 'id' and 'text' (and optionally 'topic')"
            for where, row in jsonl_records(path, expected=expected):
                if not isinstance(row, dict) or not isinstance(row.get("text"), str) or "id" not in row:
                    raise ValueError(f"{where}: each line must be {expected}")
                passages.append(Passage(str(row["id"]), row["text"], str(row.get("topic") or "")))
            names = dict.fromkeys(p.topic for p in passages if p.topic)
            return cls(path.stem, f"passages read from {path.name}", tuple(passages),
                       tuple(Topic(name, name, "") for name in names))
        doc = json_document(path)
        if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
            raise ValueError(f"{path}: expected an object with 'name', 'provenance' and a 'topics' list, or use a "
                             ".jsonl file of {'id', 'text', 'topic'} lines")
        passages, topics = [], []
        for n, t in enumerate(doc["topics"]):
            missing = [k for k in ("id", "topic", "passages") if not isinstance(t, dict) or k not in t]
            if missing or not isinstance(t["passages"], list) or not all(isinstance(x, str) for x in t["passages"]):
                raise ValueError(f"{path}: topic {n}: needs 'id', 'topic' and 'passages' (a list of strings); "
                                 f"missing or wrong: {missing or ['passages']}")
            topics.append(Topic(str(t["id"]), str(t["topic"]), str(t.get("category", ""))))
            passages += [Passage(f"{t['id']}-{i}", text, str(t["id"])) for i, text in enumerate(t["passages"])]
        return cls(str(doc.get("name") or path.stem), str(doc.get("provenance") or f"passages read from {path.name}"),
                   tuple(passages), tuple(topics))

    @property
    def fingerprint(self) -> str:
        """A digest of the passages' ids and texts: two collections with one name but other passages differ."""
        from convohub.stages import digest

        return digest([[p.id, p.text, p.topic] for p in self.passages])

    def __len__(self) -> int:
        return len(self.passages)


@lru_cache(maxsize=1)
def default_collection() -> PassageCollection:
    """convohub's own passage collection (module docstring)."""
    return PassageCollection.read(DEFAULT_COLLECTION)


def configured_collection() -> PassageCollection:
    """The collection ``$CONVOHUB_PROMISE_PASSAGES`` names, else convohub's own; a named file that cannot be read,
    or has no topics to seed dialogues with, is an error naming the variable and the file."""
    path = os.environ.get(PASSAGES_ENV)
    if not path:
        return default_collection()
    try:
        collection = PassageCollection.read(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{PASSAGES_ENV}={path}: {exc}") from exc
    if not collection.passages or not collection.topics:
        raise ValueError(f"{PASSAGES_ENV}={path}: the collection needs passages and topics (a 'topic' on the lines "
                         "of a .jsonl file): the topics seed the dialogues")
    return collection


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

    @property
    def fingerprint(self) -> str:
        return self.collection.fingerprint

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


class RerankedRetriever:
    """A first-stage retriever's candidates re-ordered by a sentence encoder (module docstring).

    For each query the first stage returns up to ``candidates`` passages (at least ``k``); they are sorted by
    the cosine of their embedding to the query's, ties kept in the first stage's order, those under
    ``min_cosine`` (when given) are dropped, and the first ``k`` are returned. The candidates are the first
    stage's, so a passage sharing no term with the query is still left out. Passage embeddings are computed
    once per passage id, as queries reach them.
    """

    def __init__(self, first: SnippetRetriever, encoder: str = "minilm", candidates: int = 32,
                 min_cosine: float | None = None) -> None:
        if candidates < 1:
            raise ValueError(f"candidates must be positive, got {candidates}")
        if min_cosine is not None and not -1 <= min_cosine <= 1:
            raise ValueError(f"min_cosine must be in [-1, 1], got {min_cosine}")
        self.first, self.encoder, self.candidates, self.min_cosine = first, encoder, candidates, min_cosine
        self._vectors: dict[str, Any] = {}

    @property
    def collection(self) -> PassageCollection:
        return self.first.collection  # type: ignore[attr-defined, no-any-return]

    @property
    def name(self) -> str:
        floor = f",cos>={self.min_cosine:g}" if self.min_cosine is not None else ""
        return f"{self.first.name}+rerank:{encoder_name(self.encoder)}@{self.candidates}{floor}"

    @property
    def fingerprint(self) -> str | None:
        return getattr(self.first, "fingerprint", None)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        import numpy as np

        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        if not queries:
            return []
        hits = self.first.search(queries, max(k, self.candidates))
        new = list({p.id: p.text for hit in hits for p in hit if p.id not in self._vectors}.items())
        if new:
            self._vectors |= dict(zip([i for i, _ in new], embed([t for _, t in new], self.encoder), strict=True))
        out = []
        for hit, query in zip(hits, embed(list(queries), self.encoder), strict=True):
            if not hit:
                out.append([])
                continue
            cosines = np.stack([self._vectors[p.id] for p in hit]) @ query
            floor = -np.inf if self.min_cosine is None else self.min_cosine
            out.append([hit[i] for i in np.argsort(-cosines, kind="stable") if cosines[i] >= floor][:k])
        return out


def encoder_name(encoder: str) -> str:
    """How a re-ranking encoder is named in records: the Hub id of a recipe name (``minilm`` ->
    ``sentence-transformers/all-MiniLM-L6-v2``), else the id or folder name given."""
    from convohub.training.models import hub_id

    return hub_id(encoder) or Path(encoder).name


#: the offline search's cosine floor (MiniLM): over 128 search texts of two tiny releases, 0.25 keeps 94.5% of the
#: (query, passage of the dialogue's topic) pairs and 1.4% of the pairs with another topic's passage
OFFLINE_MIN_COSINE = 0.25


def offline_retriever(collection: PassageCollection | None = None, rerank: str | None = "minilm",
                      min_cosine: float | None = OFFLINE_MIN_COSINE) -> SnippetRetriever:
    """The agent's offline search: BM25 over ``collection`` (default: convohub's own), re-ranked by the
    ``rerank`` sentence encoder with a cosine floor (``rerank=None``: BM25 alone, as the paper's bare web
    search)."""
    bm25 = BM25Retriever(collection)
    return bm25 if rerank is None else RerankedRetriever(bm25, rerank, min_cosine=min_cosine)


def off_topic_suggestions(dialogues: Sequence[dict[str, Any]], collection: PassageCollection) -> tuple[int, int]:
    """How many suggestions were written from a passage of another topic than their dialogue's, of how many
    whose passage and dialogue topic the collection knows (the dataset card reports it). Passages are matched
    by text: a dialogue record keeps its snippets' texts, as the paper's records do, not the collection's ids;
    a text two topics share counts for the topic listed last."""
    topic_id = {t.topic: t.id for t in collection.topics}
    passage_topic = {p.text: p.topic for p in collection.passages if p.topic}
    off = total = 0
    for dialogue in dialogues:
        wanted = topic_id.get(str(dialogue.get("topic")))
        for turn in dialogue.get("turns", ()):
            snippets = list(turn.get("web_snippets", ()))
            for qa in turn.get("suggested_qas", ()):
                index = qa.get("snippet_index")
                got = passage_topic.get(snippets[index]) if isinstance(index, int) and index < len(snippets) else None
                if wanted and got:
                    total += 1
                    off += got != wanted
    return off, total
