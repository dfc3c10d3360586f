"""Where an answerer's context comes from: nothing, RAG, PROBE, or the gold supports (oracle).

Every builder returns, per question, the documents in retrieval order (rendered with their metadata header,
:func:`convohub.aqa.prompts.render_document`) and the conversations retrieved (for Recall@k); the answerer
then packs documents into its prompt until the token budget (:func:`convohub.aqa.tokens.pack`).

* **RAG** embeds the question (all-MiniLM-L6-v2, as the index) and takes the ``k`` nearest documents
  (chunks of raw conversations, or summaries), unfiltered.
* **PROBE** asks an LLM for a search request, ``{start_time, end_time (MM-DD-YYYY), user_name[], country[],
  queries[]}`` (the paper's prompt wraps it as ``{"explanation", "query": {...}}``; both forms are read),
  turns the fields into pre-filters (:meth:`convohub.aqa.retrieval.Filters.from_probe`: a missing date takes
  the authors' default, the end date is inclusive) and runs one filtered search per query, pooled per
  conversation (max by default, sum as in the authors' code). What the authors do with a query that cannot
  be embedded, convohub does with every unusable part of a request, and counts it
  (:class:`ProbeStats`, printed by the CLI and written to the results): an answer that is not a JSON object,
  or has no usable query, is searched with the question itself; an unusable query string is replaced by the
  question; a date that is not MM-DD-YYYY takes the default. Countries and user names are matched to the
  index's values ignoring case; a value the index does not know matches nothing, as a term filter does, and a
  filter that leaves no document is counted (``empty_results``), not relaxed. The small model's variant
  (``probe_prompt="small"``) instead drops values the index does not know (counted in
  ``unknown_filter_values`` either way): SmolLM2 writes the question's country into ``user_name`` as often as
  not, and the authors' reading would then retrieve nothing for that question.
* **Oracle** puts the question's gold supporting conversations (``support``) in the context: every chunk of
  each for raw conversations, in chunk order.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from convohub.aqa.prompts import probe_prompt, render_document
from convohub.aqa.questions import Question
from convohub.aqa.retrieval import MAX_QUERIES, Filters, RetrievalIndex

logger = logging.getLogger(__name__)

#: PROBE's request generation: the paper's sampling for GPT-4.1-mini (temperature 0.5, top_p 0.5).
PROBE_TEMPERATURE = 0.5
PROBE_TOP_P = 0.5
PROBE_MAX_NEW_TOKENS = {"paper": 512, "small": 72}


@dataclass
class Context:
    """One question's context before packing: rendered documents in order, their ids, the conversations
    retrieved (Recall@k), and PROBE's request as it was used."""

    documents: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    retrieved: list[str] = field(default_factory=list)
    request: dict[str, Any] | None = None


def rendered(index: RetrievalIndex, rows: Iterable[int]) -> tuple[list[str], list[str]]:
    """(documents, doc ids) of index rows, each document with its metadata header."""
    docs, ids = [], []
    for r in rows:
        when = datetime.fromtimestamp(int(index.timestamps[r]), tz=timezone.utc)
        docs.append(render_document(str(index.texts[r]), str(index.user_vocab[index.user_codes[r]]),
                                    str(index.country_vocab[index.country_codes[r]]), when))
        ids.append(str(index.doc_ids[r]))
    return docs, ids


class _Rows:
    """doc id -> row, and conversation hash -> its rows in chunk order, for one index."""

    def __init__(self, index: RetrievalIndex) -> None:
        self.of_doc = {str(d): i for i, d in enumerate(index.doc_ids)}
        self.of_conversation: dict[str, list[int]] = {}
        for i, h in enumerate(index.conversation_hashes):
            self.of_conversation.setdefault(str(h), []).append(i)


def _embed(texts: Sequence[str]) -> np.ndarray:
    from convohub.embeddings import embed

    return embed(list(texts))


def no_context(questions: Sequence[Question]) -> list[Context]:
    return [Context() for _ in questions]


def rag_context(index: RetrievalIndex, questions: Sequence[Question], k: int) -> list[Context]:
    """The ``k`` documents nearest to each question's embedding."""
    rows = _Rows(index)
    vectors = _embed([q.question for q in questions])
    out = []
    for vector in vectors:
        hits = index.dense_search(vector[None, :], k)[0]
        docs, ids = rendered(index, (rows.of_doc[h.doc_id] for h in hits))
        out.append(Context(docs, ids, list(dict.fromkeys(h.conversation_hash for h in hits))))
    return out


def oracle_context(index: RetrievalIndex, questions: Sequence[Question]) -> list[Context]:
    """The gold supporting conversations of each question, in ``support`` order (ORACLE: uses the gold)."""
    rows = _Rows(index)
    out = []
    for q in questions:
        found = [h for h in q.support if h in rows.of_conversation]
        docs, ids = rendered(index, (r for h in found for r in rows.of_conversation[h]))
        out.append(Context(docs, ids, found))
    return out


# ------------------------------------------------------------------------------------------------ PROBE
@dataclass
class ProbeStats:
    """How PROBE's requests were read: what was usable and every fallback taken (never silent)."""

    requests: int = 0
    json_valid: int = 0  # the answer held a JSON object
    request_fallbacks: int = 0  # not a JSON object, or no usable query: the question was the only query
    query_fallbacks: int = 0  # unusable query strings replaced by the question
    date_fallbacks: int = 0  # start/end dates that were not MM-DD-YYYY: the authors' default dates
    unknown_filter_values: int = 0  # countries / user names the index does not know (match nothing, or dropped)
    empty_results: int = 0  # requests whose filters left no document
    queries: int = 0  # queries searched in all
    failed_calls: int = 0  # LLM calls that failed (counted in request_fallbacks too)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self)
        out["json_valid_rate"] = round(self.json_valid / self.requests, 4) if self.requests else None
        return out


def _request_fields(value: Any) -> Mapping[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    inner = value.get("query")
    return inner if isinstance(inner, Mapping) else value


def _date(fields: Mapping[str, Any], name: str, stats: ProbeStats) -> str:
    value = fields.get(name)
    if value in (None, ""):
        return ""
    text = str(value).strip()
    try:
        datetime.strptime(text, "%m-%d-%Y")
    except ValueError:
        stats.date_fallbacks += 1
        return ""
    return text


def _terms(fields: Mapping[str, Any], name: str, vocab: Mapping[str, str], stats: ProbeStats,
           drop_unknown: bool) -> list[str]:
    values = fields.get(name) or []
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        return []
    out = []
    for v in values:
        if not isinstance(v, str) or not v.strip():
            continue
        known = vocab.get(v.strip().lower())
        if known is None:
            stats.unknown_filter_values += 1
            if drop_unknown:
                continue
        out.append(known or v.strip())
    return out


def read_request(text: str | None, question: str, index: RetrievalIndex, stats: ProbeStats, *,
                 drop_unknown: bool = False) -> dict[str, Any]:
    """A usable PROBE request from an LLM answer (module doc: every fallback is counted in ``stats``):
    ``{"start_time", "end_time", "country", "user_name", "queries", "fallback"}``. ``drop_unknown``: leave out
    filter values the index does not know (the small model's variant) instead of matching nothing."""
    from convohub.llm import parse_json_answer

    stats.requests += 1
    parsed = parse_json_answer(text, dict) if text else None
    fields = _request_fields(parsed.value) if parsed is not None and parsed.ok else None
    if fields is None:
        stats.request_fallbacks += 1
        return {"start_time": "", "end_time": "", "country": [], "user_name": [], "queries": [question],
                "fallback": "unreadable request: the question is the only query, no filters"}
    stats.json_valid += 1
    countries = {str(v).lower(): str(v) for v in index.country_vocab}
    users = {str(v).lower(): str(v) for v in index.user_vocab}
    raw = fields.get("queries") or []
    raw = [raw] if isinstance(raw, str) else (raw if isinstance(raw, list) else [])
    queries = []
    for q in raw[:MAX_QUERIES]:
        if isinstance(q, str) and q.strip():
            queries.append(q.strip())
        else:
            stats.query_fallbacks += 1
            queries.append(question)
    request = {"start_time": _date(fields, "start_time", stats), "end_time": _date(fields, "end_time", stats),
               "country": _terms(fields, "country", countries, stats, drop_unknown),
               "user_name": _terms(fields, "user_name", users, stats, drop_unknown), "queries": queries,
               "fallback": ""}
    if not queries:
        stats.request_fallbacks += 1
        request["queries"] = [question]
        request["fallback"] = "no usable query: the question is the only query"
    return request


def probe_requests(backend: Any, questions: Sequence[Question], *, style: str = "paper",
                   seed: int = 0, progress: bool = False) -> list[str | None]:
    """The LLM's raw answers to PROBE's prompt, one per question (None for a failed call), in one batch."""
    from convohub.llm import ChatRequest, run_chat

    requests = [ChatRequest.from_prompt(probe_prompt(q.question, style=style),
                                        max_new_tokens=PROBE_MAX_NEW_TOKENS[style], temperature=PROBE_TEMPERATURE,
                                        top_p=PROBE_TOP_P, seed=seed) for q in questions]
    responses = run_chat(backend, requests, desc="PROBE requests", progress=progress)
    return [r.text if r.ok else None for r in responses]


def probe_context(index: RetrievalIndex, questions: Sequence[Question], answers: Sequence[str | None], k: int, *,
                  pooling: str = "max", stats: ProbeStats | None = None, drop_unknown: bool = False) -> list[Context]:
    """PROBE's retrieval for each question from the LLM's ``answers`` (see :func:`probe_requests`);
    ``drop_unknown`` as in :func:`read_request`."""
    stats = stats if stats is not None else ProbeStats()
    rows = _Rows(index)
    requests = []
    for q, text in zip(questions, answers, strict=True):
        if text is None:
            stats.failed_calls += 1
        requests.append(read_request(text, q.question, index, stats, drop_unknown=drop_unknown))
    texts = sorted({t for r in requests for t in r["queries"]})
    vectors = dict(zip(texts, _embed(texts), strict=True)) if texts else {}
    out = []
    for request in requests:
        stats.queries += len(request["queries"])
        filters = Filters.from_probe(request)
        query_vectors = np.stack([vectors[t] for t in request["queries"]])
        hits = index.probe_search(query_vectors, k, filters, pooling=pooling)
        if not hits:
            stats.empty_results += 1
        docs, ids = rendered(index, (rows.of_doc[h.doc_id] for h in hits))
        out.append(Context(docs, ids, [h.conversation_hash for h in hits], request))
    return out


def build_index(dataset_dir: Any, context: str = "summary", *, with_bm25: bool = False,
                cache: bool = True) -> RetrievalIndex:
    """The retrieval index of a built folder's corpus: summaries whole, or raw conversations chunked to at
    most 512 tokens with at most 128 overlap (:func:`convohub.aqa.retrieval.conversation_documents`),
    embedded with all-MiniLM-L6-v2.

    With ``cache`` the index is saved under ``<convohub cache>/aqa-index/<key>`` and loaded from there next
    time (every ``aqa evaluate``, release step and Space start would otherwise embed the whole corpus again:
    seconds on the sample, hours on WildChat-1M). The key (:func:`index_key`) covers the corpus files' bytes,
    the encoder's weights and the chunking, so a rebuilt dataset or another encoder gets its own index. An
    unreadable cached index is rebuilt; a cache folder that cannot be written only costs the saving. Only the
    ``$CONVOHUB_AQA_INDEX_KEEP`` (default 8) most recently used indexes are kept (:func:`prune_index_cache`).
    """
    from convohub.aqa.questions import load_corpus
    from convohub.aqa.retrieval import conversation_documents

    folder = index_cache_dir() / index_key(dataset_dir, context, with_bm25=with_bm25) if cache else None
    if folder is not None and (folder / "index.json").is_file():
        try:
            index = RetrievalIndex.load(folder)
            _mark_used(folder)
            return index
        except (OSError, ValueError, KeyError) as err:
            logger.warning("cached AQA index %s is unreadable (%s); building it again", folder, err)
    documents = conversation_documents(load_corpus(dataset_dir, context), context)  # type: ignore[arg-type]
    if not documents:
        raise ValueError(f"{dataset_dir}: the {context} corpus is empty; nothing to retrieve from")
    index = RetrievalIndex.build(documents, with_bm25=with_bm25)
    if folder is not None:
        try:
            index.save(folder)
            prune_index_cache(keep_current=folder)
        except OSError as err:
            logger.warning("could not cache the AQA index in %s (%s); it will be built again next time", folder, err)
    return index


KEEP_ENV = "CONVOHUB_AQA_INDEX_KEEP"


def _mark_used(folder: Path) -> None:
    import contextlib

    with contextlib.suppress(OSError):  # a read-only cache still serves the index
        (folder / "index.json").touch()


def prune_index_cache(keep: int | None = None, keep_current: Path | None = None) -> list[Path]:
    """Delete all but the ``keep`` most recently used cached indexes (``$CONVOHUB_AQA_INDEX_KEEP``, default 8;
    use = written or loaded), never ``keep_current``; returns what was deleted. One corpus per rebuilt dataset
    adds an index, and at WildChat-1M scale each is gigabytes."""
    import shutil

    from convohub.registry import positive_int_setting

    if keep is None:
        keep = positive_int_setting(KEEP_ENV, 8)
    root = index_cache_dir()
    if not root.is_dir():
        return []

    def last_used(folder: Path) -> float:
        try:
            return (folder / "index.json").stat().st_mtime
        except OSError:
            return 0.0  # a half-written or foreign folder goes first

    folders = sorted((f for f in root.iterdir() if f.is_dir() and not f.name.startswith(".")), key=last_used,
                     reverse=True)
    doomed = [f for f in folders[keep:] if keep_current is None or f.resolve() != Path(keep_current).resolve()]
    for folder in doomed:
        shutil.rmtree(folder, ignore_errors=True)
    return doomed


def index_cache_dir() -> Path:
    """Where :func:`build_index` keeps indexes: ``aqa-index/`` under the convohub cache (``$CONVOHUB_CACHE``)."""
    from convohub.models import cache_root

    return cache_root() / "aqa-index"


def index_key(dataset_dir: Any, context: str, *, with_bm25: bool = False) -> str:
    """What an index of ``dataset_dir``'s ``context`` corpus depends on, hashed: the index format, the
    chunking, the encoder's weights and the bytes of the corpus's Parquet shards."""
    from convohub.aqa.chunking import MAX_TOKENS, OVERLAP
    from convohub.aqa.questions import corpus_config
    from convohub.aqa.retrieval import INDEX_FORMAT
    from convohub.bm25 import STOPWORDS_NAME
    from convohub.hub import data_files
    from convohub.models import file_digest, minilm_path, weights_digest

    config = corpus_config(context)
    digest = hashlib.sha256(json.dumps({
        "format": INDEX_FORMAT, "context": context, "bm25": STOPWORDS_NAME if with_bm25 else False,
        "chunk": [MAX_TOKENS, OVERLAP],
        "encoder": weights_digest(minilm_path())}, sort_keys=True).encode())
    files = data_files(dataset_dir, config)
    if "train" not in files:
        raise KeyError(f"{dataset_dir}: config {config!r} has no train split; splits: {sorted(files)}")
    for path in files["train"]:
        digest.update(path.name.encode())
        digest.update(file_digest(path).encode())
    return digest.hexdigest()[:20]
