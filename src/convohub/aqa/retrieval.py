"""One retrieval index over WildChat-AQA documents (conversation chunks or summaries) with metadata filters.

The authors search an Elasticsearch index whose kNN and BM25 queries carry a filter (timestamp range,
country terms, user_name terms) applied *before* ranking: a selective filter still returns k documents.
convohub keeps that contract without a server:

* Documents are stored sorted by timestamp, so a time range is a contiguous slice found by binary search
  and needs no scan; country and user_name are integer codes, so a term filter is one ``np.isin`` over the
  slice. Together they give the candidate rows before any similarity is computed (a pre-filter).
* Dense search scores only the candidate rows, for all queries of a PROBE request in one BLAS matrix
  product (the queries share the filter), then takes the top k with ``argpartition``. The embeddings are
  normalised sentence-transformers vectors, so the inner product is the cosine; the reported score is
  Elasticsearch's ``(1 + cos) / 2`` so that sum pooling adds positive numbers, as it does upstream.
  ``backend="faiss"`` runs the same pre-filtered search through a faiss ``IndexFlatIP`` with an
  ``IDSelector`` in ``SearchParameters``; ``benchmarks/bench_aqa_retrieval.py`` measures both (the faiss
  selector path searches query by query and was slower here, hence the default). The products are small
  (a few thousand rows by ten queries), so BLAS runs them on one thread by default (``blas_threads``):
  measured on two shared cores, OpenBLAS's thread hand-off cost more than the product itself.
* BM25 (bm25s) scores every document for a query from its sparse index, then keeps the candidate rows with
  a positive score (Elasticsearch returns only documents matching a query term) and takes the top k.

PROBE (:meth:`RetrievalIndex.probe_search`) runs one filtered search per generated query and merges the
hits per conversation: max pooling by default (the paper), sum as an option (the authors' code).
Elasticsearch's ``num_candidates = 5 * k`` is an accuracy knob of its approximate HNSW search; the search
here is exact, so it has no counterpart. Where a generated query could not be embedded, the authors use the
question's embedding in its place: callers pass that vector among the query vectors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from convohub.aqa.chunking import MAX_TOKENS, OVERLAP, chunk_text, render_conversation
from convohub.bm25 import english_index, english_query_tokens

#: PROBE uses at most this many generated queries (the authors' ``MAX_QUERY``).
MAX_QUERIES = 10
#: Filter defaults of the authors' PROBE (dates of the corpus), used when the LLM leaves a date empty.
PROBE_DEFAULT_START = "04-08-2023"
PROBE_DEFAULT_END = "05-01-2024"
INDEX_FORMAT = 1

Pooling = Literal["max", "sum"]
Method = Literal["dense", "bm25"]
Backend = Literal["blas", "faiss"]


@dataclass(frozen=True)
class Document:
    """A searchable text with the metadata PROBE filters on; ``conversation_hash`` groups the chunks of one
    conversation (for summaries it is the only document of that conversation)."""

    doc_id: str
    conversation_hash: str
    text: str
    timestamp: datetime
    country: str
    user_name: str


@dataclass(frozen=True)
class Filters:
    """Pre-filters: ``start <= timestamp <= end`` (both inclusive, either may be open) and, when given,
    country and user_name membership. An empty set matches nothing, ``None`` matches everything."""

    start: datetime | None = None
    end: datetime | None = None
    countries: frozenset[str] | None = None
    user_names: frozenset[str] | None = None

    @classmethod
    def from_probe(cls, request: Mapping[str, Any]) -> Filters:
        """The filters of a PROBE request ``{start_time, end_time (MM-DD-YYYY), country[], user_name[]}``:
        an empty or missing date takes the authors' default, the end date covers its whole day, and an empty
        country or user list means no filter on that field (as in the authors' ``build_filter``)."""
        def day(field: str, default: str) -> datetime:
            value = str(request.get(field) or "").strip() or default
            try:
                return datetime.strptime(value, "%m-%d-%Y").replace(tzinfo=timezone.utc)
            except ValueError as err:
                raise ValueError(f"PROBE request field {field!r}: {value!r} is not MM-DD-YYYY") from err

        def terms(field: str) -> frozenset[str] | None:
            values = request.get(field) or []
            if isinstance(values, str) or not isinstance(values, Iterable):
                raise ValueError(f"PROBE request field {field!r} must be a list of strings, got {values!r}")
            return frozenset(str(v) for v in values) or None

        return cls(day("start_time", PROBE_DEFAULT_START),
                   day("end_time", PROBE_DEFAULT_END) + timedelta(days=1) - timedelta(seconds=1),
                   terms("country"), terms("user_name"))


@dataclass(frozen=True)
class Hit:
    """One search result; after PROBE pooling ``doc_id`` is the conversation's best-scoring document."""

    doc_id: str
    conversation_hash: str
    score: float


def _epoch(value: datetime, where: str) -> int:
    if not isinstance(value, datetime):
        raise ValueError(f"{where}: timestamp must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None:  # WildChat timestamps are UTC
        value = value.replace(tzinfo=timezone.utc)
    return int(value.timestamp() // 1)


def _codes(values: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    vocab, codes = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return vocab, codes.astype(np.int32)


def conversation_documents(records: Iterable[Mapping[str, Any]], context: Literal["raw", "summary"] = "raw",
                           tokenizer: Any | None = None, max_tokens: int = MAX_TOKENS,
                           overlap: int = OVERLAP) -> list[Document]:
    """Documents of WildChat-AQA conversation records (fields ``hash``, ``conversation``, ``summary``,
    ``timestamp``, ``country``, ``user_name``): raw conversations chunked (``<hash>#<i>``), summaries whole."""
    if context not in ("raw", "summary"):
        raise ValueError(f"unknown context {context!r}: use 'raw' (chunked conversations) or 'summary'")
    documents = []
    for row, record in enumerate(records):
        fields = ("hash", "timestamp", "country", "user_name", "conversation" if context == "raw" else "summary")
        missing = [f for f in fields if f not in record]
        if missing:
            raise ValueError(f"conversation record {row}: missing field(s) {', '.join(missing)}")
        meta = {"timestamp": record["timestamp"], "country": str(record["country"] or ""),
                "user_name": str(record["user_name"])}
        if context == "summary":
            documents.append(Document(str(record["hash"]), str(record["hash"]), str(record["summary"]), **meta))
            continue
        try:
            text = render_conversation(record["conversation"])
        except ValueError as err:
            raise ValueError(f"conversation record {row} ({record['hash']}): field 'conversation': {err}") from err
        for i, chunk in enumerate(chunk_text(text, tokenizer, max_tokens, overlap)):
            documents.append(Document(f"{record['hash']}#{i}", str(record["hash"]), chunk.text, **meta))
    return documents


class RetrievalIndex:
    """Dense and BM25 search over one document collection, pre-filtered by time, country and user_name."""

    def __init__(self, doc_ids: Sequence[str], conversation_hashes: Sequence[str], texts: Sequence[str],
                 timestamps: np.ndarray, countries: Sequence[str], user_names: Sequence[str],
                 embeddings: np.ndarray | None = None, bm25: Any | None = None, sort: bool = True,
                 blas_threads: int | None = 1) -> None:
        """Arrays are row-aligned; ``timestamps`` are epoch seconds. Rows are re-ordered by timestamp unless
        ``sort=False`` (used by :meth:`load`, whose files are already sorted); a BM25 index passed in must
        already follow the final row order. ``blas_threads`` caps BLAS threads during dense scoring
        (``None``: BLAS's own default)."""
        n = len(doc_ids)
        sizes = {"conversation_hashes": len(conversation_hashes), "texts": len(texts),
                 "timestamps": len(timestamps), "countries": len(countries), "user_names": len(user_names)}
        if embeddings is not None:
            sizes["embeddings"] = len(embeddings)
        wrong = {name: size for name, size in sizes.items() if size != n}
        if wrong:
            raise ValueError(f"index columns disagree with {n} doc_ids: {wrong}")
        order = np.argsort(np.asarray(timestamps, dtype=np.int64), kind="stable") if sort else np.arange(n)
        self.doc_ids = np.asarray(doc_ids, dtype=object)[order]
        self.conversation_hashes = np.asarray(conversation_hashes, dtype=object)[order]
        self.texts = np.asarray(texts, dtype=object)[order]
        self.timestamps = np.asarray(timestamps, dtype=np.int64)[order]
        self.country_vocab, self.country_codes = _codes(np.asarray(countries, dtype=object)[order])
        self.user_vocab, self.user_codes = _codes(np.asarray(user_names, dtype=object)[order])
        self.embeddings = None if embeddings is None else np.ascontiguousarray(embeddings[order], dtype=np.float32)
        self.bm25 = bm25
        self.blas_threads = blas_threads
        self._faiss: Any | None = None

    def __len__(self) -> int:
        return len(self.doc_ids)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, documents: Sequence[Document], embed: Callable[[Sequence[str]], np.ndarray] | None = None,
              embeddings: np.ndarray | None = None, with_bm25: bool = True) -> RetrievalIndex:
        """Index ``documents``: embeddings given, or computed with ``embed`` (default: the cached
        all-MiniLM-L6-v2 encoder, normalised), plus a BM25 index unless ``with_bm25=False``."""
        seen: set[str] = set()
        for i, doc in enumerate(documents):
            if doc.doc_id in seen:
                raise ValueError(f"document {i}: doc_id {doc.doc_id!r} is not unique")
            seen.add(doc.doc_id)
        if embeddings is None:
            if embed is None:
                from convohub.embeddings import embed as minilm_embed
                embed = minilm_embed
            embeddings = embed([d.text for d in documents]) if documents else np.zeros((0, 384), np.float32)
        index = cls([d.doc_id for d in documents], [d.conversation_hash for d in documents],
                    [d.text for d in documents],
                    np.fromiter((_epoch(d.timestamp, f"document {d.doc_id}") for d in documents), np.int64,
                                count=len(documents)),
                    [d.country for d in documents], [d.user_name for d in documents], embeddings)
        if with_bm25:
            index.bm25 = english_index(index.texts)
        return index

    # ------------------------------------------------------------------ filtering
    def candidates(self, filters: Filters | None) -> tuple[int, int, np.ndarray | None]:
        """``(lo, hi, local)``: the time range is rows ``lo:hi``; ``local`` holds the offsets inside it that
        pass the term filters, or ``None`` when every row of the slice passes."""
        filters = filters or Filters()
        lo = 0 if filters.start is None else int(np.searchsorted(self.timestamps, _epoch(filters.start, "filter start"), "left"))
        hi = len(self) if filters.end is None else int(np.searchsorted(self.timestamps, _epoch(filters.end, "filter end"), "right"))
        hi = max(lo, hi)
        keep: np.ndarray | None = None
        for wanted, vocab, codes in ((filters.countries, self.country_vocab, self.country_codes),
                                     (filters.user_names, self.user_vocab, self.user_codes)):
            if wanted is None:
                continue
            wanted_codes = np.flatnonzero(np.isin(vocab, sorted(wanted)))
            mask = np.isin(codes[lo:hi], wanted_codes)
            keep = mask if keep is None else keep & mask
        return lo, hi, None if keep is None else np.flatnonzero(keep)

    def filter_rows(self, filters: Filters | None) -> np.ndarray:
        """Row numbers passing ``filters`` (for tests and baselines)."""
        lo, hi, local = self.candidates(filters)
        return np.arange(lo, hi) if local is None else lo + local

    # ------------------------------------------------------------------ search
    def _hits(self, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        return [Hit(self.doc_ids[r], self.conversation_hashes[r], float(s)) for r, s in zip(rows, scores, strict=True)]

    def dense_search(self, query_vectors: np.ndarray, k: int, filters: Filters | None = None,
                     backend: Backend = "blas") -> list[list[Hit]]:
        """Top-``k`` documents per query vector among the rows passing ``filters`` (fewer only when fewer
        rows pass), best first, scored ``(1 + cos) / 2``."""
        if self.embeddings is None:
            raise ValueError("this index has no embeddings: build it with embeddings for dense search")
        queries = np.atleast_2d(np.asarray(query_vectors, dtype=np.float32))
        if queries.shape[1] != self.embeddings.shape[1]:
            raise ValueError(f"query vectors have {queries.shape[1]} dimensions, the index {self.embeddings.shape[1]}")
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        lo, hi, local = self.candidates(filters)
        if backend == "faiss":
            return self._faiss_search(queries, k, lo, hi, local)
        if backend != "blas":
            raise ValueError(f"unknown dense backend {backend!r}: use 'blas' or 'faiss'")
        with blas_limit(self.blas_threads):
            if local is None:
                rows = np.arange(lo, hi)
                sims = self.embeddings[lo:hi] @ queries.T
            elif len(local) * 2 < hi - lo:  # selective: gather the few rows
                rows = lo + local
                sims = self.embeddings[rows] @ queries.T
            else:  # most rows pass: score the contiguous slice, then drop the others
                rows = lo + local
                sims = (self.embeddings[lo:hi] @ queries.T)[local]
        results = []
        for j in range(len(queries)):
            top = _top_k(sims[:, j], k)
            results.append(self._hits(rows[top], (1.0 + sims[top, j]) / 2.0))
        return results

    def _faiss_search(self, queries: np.ndarray, k: int, lo: int, hi: int, local: np.ndarray | None) -> list[list[Hit]]:
        import faiss

        if self._faiss is None:
            self._faiss = faiss.IndexFlatIP(self.embeddings.shape[1])
            self._faiss.add(self.embeddings)
        selector = faiss.IDSelectorRange(lo, hi) if local is None else faiss.IDSelectorBatch(lo + local)
        sims, rows = self._faiss.search(queries, k, params=faiss.SearchParameters(sel=selector))
        results = []
        for j in range(len(queries)):
            found = rows[j] >= 0
            results.append(self._hits(rows[j][found], (1.0 + sims[j][found]) / 2.0))
        return results

    def bm25_search(self, queries: Sequence[str], k: int, filters: Filters | None = None) -> list[list[Hit]]:
        """Top-``k`` BM25 documents per query among the rows passing ``filters`` that match at least one
        query term, best first."""
        if self.bm25 is None:
            raise ValueError("this index has no BM25 index: build it with with_bm25=True")
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        lo, hi, local = self.candidates(filters)
        rows = np.arange(lo, hi) if local is None else lo + local
        tokens = english_query_tokens(queries)
        results = []
        for query_tokens in tokens:
            scores = np.asarray(self.bm25.get_scores(query_tokens))[rows] if query_tokens else np.zeros(len(rows))
            matching = np.flatnonzero(scores > 0)
            top = matching[_top_k(scores[matching], k)]
            results.append(self._hits(rows[top], scores[top]))
        return results

    def probe_search(self, queries: Sequence[str] | np.ndarray, k: int, filters: Filters | None = None,
                     method: Method = "dense", pooling: Pooling = "max", backend: Backend = "blas") -> list[Hit]:
        """PROBE retrieval: one filtered search per query (at most :data:`MAX_QUERIES`), each keeping
        ``floor(k / n) * 2`` hits as the authors' code does (at least one, at most k), merged per
        conversation by ``max`` (paper) or ``sum`` (authors' code) of the hit scores; top ``k``
        conversations, each represented by its best-scoring document. Dense queries are vectors or texts
        (texts are embedded with MiniLM); BM25 queries are texts."""
        if isinstance(queries, str):
            raise ValueError("PROBE queries must be a list of strings or an array of vectors, not one string")
        queries = queries[:MAX_QUERIES]
        if len(queries) == 0:
            raise ValueError("PROBE needs at least one query (fall back to the question itself)")
        if pooling not in ("max", "sum"):
            raise ValueError(f"unknown pooling {pooling!r}: use 'max' or 'sum'")
        per_query = min(k, max(1, (k // len(queries)) * 2))
        if method == "dense":
            if not isinstance(queries, np.ndarray):
                from convohub.embeddings import embed
                queries = embed([str(q) for q in queries])
            runs = self.dense_search(queries, per_query, filters, backend)
        elif method == "bm25":
            runs = self.bm25_search([str(q) for q in queries], per_query, filters)
        else:
            raise ValueError(f"unknown method {method!r}: use 'dense' or 'bm25'")
        return pool_hits(runs, k, pooling)

    # ------------------------------------------------------------------ persistence
    def save(self, folder: str | Path) -> None:
        """Write the index to ``folder`` atomically (a temp folder renamed into place): documents and
        metadata as Parquet, embeddings as ``.npy``, the BM25 index in bm25s's own format."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from convohub.hub import atomic_dir

        with atomic_dir(Path(folder)) as tmp:
            table = pa.table({
                "doc_id": pa.array(list(self.doc_ids), pa.string()),
                "conversation_hash": pa.array(list(self.conversation_hashes), pa.string()),
                "text": pa.array(list(self.texts), pa.string()),
                "timestamp": pa.array(self.timestamps, pa.int64()),
                "country": pa.array(list(self.country_vocab[self.country_codes]), pa.string()),
                "user_name": pa.array(list(self.user_vocab[self.user_codes]), pa.string()),
            })
            pq.write_table(table, tmp / "documents.parquet")
            if self.embeddings is not None:
                np.save(tmp / "embeddings.npy", self.embeddings)
            if self.bm25 is not None:
                self.bm25.save(str(tmp / "bm25"))
            manifest = {"format": INDEX_FORMAT, "documents": len(self), "order": "timestamp",
                        "embedding_dim": None if self.embeddings is None else int(self.embeddings.shape[1]),
                        "bm25": self.bm25 is not None}
            (tmp / "index.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> RetrievalIndex:
        """Read an index written by :meth:`save`; a missing or inconsistent file is named in the error."""
        import pyarrow.parquet as pq

        folder = Path(folder)
        manifest_path = folder / "index.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{manifest_path} is missing: not a convohub AQA retrieval index")
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("format") != INDEX_FORMAT:
            raise ValueError(f"{manifest_path}: format {manifest.get('format')!r}, expected {INDEX_FORMAT}")
        columns = pq.read_table(folder / "documents.parquet").to_pydict()
        embeddings = None
        if manifest.get("embedding_dim") is not None:
            embeddings = np.load(folder / "embeddings.npy")
            if embeddings.shape != (manifest["documents"], manifest["embedding_dim"]):
                raise ValueError(f"{folder / 'embeddings.npy'}: shape {embeddings.shape}, index.json says "
                                 f"({manifest['documents']}, {manifest['embedding_dim']})")
        if len(columns["doc_id"]) != manifest["documents"]:
            raise ValueError(f"{folder / 'documents.parquet'}: {len(columns['doc_id'])} rows, index.json says "
                             f"{manifest['documents']}")
        bm25 = None
        if manifest.get("bm25"):
            import bm25s
            bm25 = bm25s.BM25.load(str(folder / "bm25"))
        return cls(columns["doc_id"], columns["conversation_hash"], columns["text"],
                   np.asarray(columns["timestamp"], dtype=np.int64), columns["country"], columns["user_name"],
                   embeddings, bm25, sort=False)


@lru_cache(maxsize=1)
def _threadpools() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def blas_limit(threads: int | None) -> Any:
    """A context capping BLAS threads (about 10 us to enter); a no-op context for ``None``."""
    if threads is None:
        from contextlib import nullcontext
        return nullcontext()
    return _threadpools().limit(limits=threads, user_api="blas")


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest scores, best first (ties by position, so results are stable)."""
    if len(scores) <= k:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]


def pool_hits(runs: Sequence[Sequence[Hit]], k: int, pooling: Pooling = "max") -> list[Hit]:
    """Merge per-query hit lists into conversations: the pooled score is the max (or the sum) of every hit
    of the conversation; its representative document is its best single hit. Top ``k``, best first."""
    pooled: dict[str, float] = {}
    best: dict[str, Hit] = {}
    for run in runs:
        for hit in run:
            key = hit.conversation_hash
            if key not in pooled:
                pooled[key], best[key] = hit.score, hit
                continue
            pooled[key] = max(pooled[key], hit.score) if pooling == "max" else pooled[key] + hit.score
            if hit.score > best[key].score:
                best[key] = hit
    ranked = sorted(pooled, key=lambda key: -pooled[key])[:k]
    return [Hit(best[key].doc_id, key, pooled[key]) for key in ranked]
