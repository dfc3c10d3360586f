"""RETRIEVE's component: the sparse first stage, the oracle/all stand-ins and the cross-encoder pipeline.

Every retriever has ``retrieve(query, store) -> list of event ids`` (protocol:
:class:`convohub.reqap.engine.protocols.Retriever`):

* :class:`BM25Retriever` -- sparse retrieval over verbalised events (``key: json(value)`` lines,
  :func:`verbalise_event`) with ``bm25s``; the paper's first stage is SPLADE (:class:`SpladeFirstStage`);
* :class:`OracleRetriever` (a fixed query -> ids mapping or function, for tests and upper bounds) and
  :class:`AllRetriever` (every event; for debugging a tree's other operators);
* :class:`CrossEncoderRetriever` -- the paper's pipeline:

  1. first stage: every event whose sparse score is above ``first_stage_threshold`` (recall first);
  2. pattern detection (:meth:`PatternIndex.detect`): non-numeric key-value pairs shared by >=
     ``pattern_threshold`` candidates, plus one ``source: ...`` pattern per candidate source;
  3. the pattern cross-encoder labels each pattern relevant / irrelevant / partial: a relevant pattern
     keeps *every* event of the whole store it matches (also those the first stage missed); an irrelevant
     source pattern drops that source's candidates, an irrelevant key-value pattern drops the candidates it
     matches (a relevant pattern wins over an irrelevant one: recall first); partial patterns decide
     nothing;
  4. the event cross-encoder classifies the remaining candidates (batched; input :func:`event_text`: the
     source line, then the verbalised event), keeping the relevant ones. :meth:`CrossEncoderRetriever.rank`
     orders candidates by the event cross-encoder's relevance probability (RAG's top N).

  Step 5 of the paper (merging events with overlapping time spans) is the RETRIEVE operator's
  (:func:`convohub.reqap.engine.operators.retrieve`). Results are cached per (store, query);
  :attr:`CrossEncoderRetriever.traces` says what each step decided.

The cross-encoders' inputs and labels (:data:`EVENT_LABELS`, :data:`PATTERN_LABELS`, :class:`Pattern`,
:func:`event_text`) are defined here once, for inference and for the training examples
(:mod:`convohub.reqap.data.retrieve`).
"""

from __future__ import annotations

import json
import re
import weakref
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.pace import Pace, TimeCheck, paced_chunks

__all__ = [
    "AllRetriever", "BM25Retriever", "CrossEncoderClassifier", "CrossEncoderRetriever", "EVENT_LABELS",
    "OracleRetriever", "PATTERN_LABELS", "PairClassifier", "Pattern", "PatternIndex", "RetrievePlan",
    "RetrieveTrace", "SpladeFirstStage", "event_text", "pattern_value", "tokenize", "verbalise_event"
]

#: Keys left out of the text a retriever sees: identifiers and benchmark metadata.
HIDDEN_KEYS = frozenset({"id", "structured_event_id", "properties_mentioned", "merged_ids", "event_type"})


_STOPWORDS = frozenset(["a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "had", "has", "have", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "our", "the", "their", "to", "was", "we", "were", "what", "when", "where", "which", "who", "with", "you", "your", "how", "many", "much", "times", "time"])


_TOKEN = re.compile(r"[0-9a-z]+")


def verbalise_event(event: dict[str, Any]) -> str:
    """``key: json(value)`` lines (the paper's verbalisation), identifiers left out."""
    lines = []
    for k, v in event.items():
        if k in HIDDEN_KEYS or v is None:
            continue
        lines.append(f"{k}: {json.dumps(v, ensure_ascii=False, default=str)}")
    return "\n".join(lines)


def _stem(token: str) -> str:
    """A deliberately light stemmer (plurals, -ing, -ed, final e/y): "workouts" ~ "workout", "running" ~ "run"."""
    t = token
    if len(t) <= 3 or t.isdigit():
        return t
    if t.endswith("ies") and len(t) > 4:
        t = t[:-3] + "y"
    elif t.endswith("sses"):
        t = t[:-2]
    elif t.endswith("s") and not t.endswith(("ss", "us")):
        t = t[:-1]
    for suffix, min_len in (("ing", 6), ("ed", 5)):
        if t.endswith(suffix) and len(t) >= min_len:
            t = t[: -len(suffix)]
            if len(t) >= 3 and t[-1] == t[-2] and t[-1] not in "lsz":
                t = t[:-1]
            break
    if t.endswith("e") and len(t) > 4:
        t = t[:-1]
    if t.endswith("y") and len(t) > 3:
        t = t[:-1] + "i"
    return t


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens (``workout_type`` -> ``workout``, ``type``), stop words dropped."""
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


class BM25Retriever:
    """BM25 over verbalised events; every event scoring above ``threshold`` is returned (recall first).

    ``top_k`` caps the result when set. The index is built once per store.
    """

    def __init__(self, threshold: float = 0.0, top_k: int | None = None) -> None:
        self.threshold = threshold
        self.top_k = top_k
        self._indexes: dict[int, tuple[Any, list[str]]] = {}

    def _index(self, store: EventStore) -> tuple[Any, list[str]]:
        key = id(store)
        if key not in self._indexes:
            import bm25s

            ids = [e["id"] for e in store.events]
            corpus = [tokenize(verbalise_event(e)) or ["_"] for e in store.events]
            model = bm25s.BM25()
            model.index(corpus, show_progress=False)
            self._indexes = {key: (model, ids)}  # one store at a time keeps memory flat
        return self._indexes[key]

    def scores(self, query: str, store: EventStore) -> list[tuple[str, float]]:
        """(id, score) of every event, best first."""
        if not len(store):
            return []
        model, ids = self._index(store)
        tokens = tokenize(query)
        if not tokens:
            return []
        raw = model.get_scores(tokens)
        ranked = sorted(zip(ids, (float(s) for s in raw), strict=False), key=lambda p: (-p[1], p[0]))
        return ranked

    def retrieve(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> list[str]:
        hits = [i for i, s in self.scores(query, store) if s > self.threshold]
        return hits[: self.top_k] if self.top_k is not None else hits


class OracleRetriever:
    """Returns fixed ids per query: a mapping (unknown queries -> nothing) or a function.

    ``calls`` records every query, so tests can check that a rejected tree never reached retrieval.
    """

    def __init__(self, ids: Mapping[str, Sequence[str]] | Callable[[str, EventStore], Sequence[str]]) -> None:
        self.ids = ids
        self.calls: list[str] = []

    def retrieve(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> list[str]:
        self.calls.append(query)
        got = self.ids(query, store) if callable(self.ids) else self.ids.get(query, [])
        return [str(i) for i in got]


class AllRetriever:
    """Every event of the store, whatever the query."""

    def retrieve(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> list[str]:
        return [e["id"] for e in store.events]


#: Class ids of the event cross-encoder (2 classes) and of the pattern cross-encoder (3 classes).
EVENT_LABELS: dict[int, str] = {0: "irrelevant", 1: "relevant"}


PATTERN_LABELS: dict[int, str] = {0: "irrelevant", 1: "relevant", 2: "partial"}
IRRELEVANT, RELEVANT, PARTIAL = 0, 1, 2


#: Keys never used in patterns: identifiers, the source (it has its own pattern) and the time span.
PATTERN_SKIP_KEYS = HIDDEN_KEYS | {"source", "start_date", "start_time", "end_date", "end_time"}


MAX_PATTERN_VALUE_CHARS = 80


# numbers, amounts with a short unit ("5.99 EUR", "42 min"), dates, times, timestamps
_NUMERIC = re.compile(r"^[-+]?\d[\d.,:\- T]*\s*[A-Za-z%]{0,5}$")


@dataclass(frozen=True, order=True)
class Pattern:
    """A set of events: all of one ``source`` (``key`` None) or those whose ``key`` has ``value``."""

    source: str
    key: str | None = None
    value: str | None = None

    @property
    def is_source(self) -> bool:
        return self.key is None

    @property
    def text(self) -> str:
        """What the pattern cross-encoder reads: ``"source: mail"`` or ``"source: calendar, summary: ..."``."""
        head = f"source: {self.source}"
        return head if self.key is None else f"{head}, {self.key}: {self.value}"

    def matches(self, event: Mapping[str, Any]) -> bool:
        if event.get("source") != self.source:
            return False
        return self.key is None or pattern_value(event.get(self.key)) == self.value


def event_text(event: Mapping[str, Any]) -> str:
    """What the event cross-encoder reads: the ``source`` line first (so truncation to a short max length
    keeps it), then the event's other ``key: json(value)`` lines as the first stage verbalises them."""
    rest = verbalise_event({k: v for k, v in event.items() if k != "source"})
    source = event.get("source")
    return f"source: {json.dumps(source)}\n{rest}" if source is not None else rest


def pattern_value(value: Any) -> str | None:
    """The pattern form of a value, None when it cannot be a pattern (missing, numeric, temporal, long)."""
    if value is None or isinstance(value, (bool, int, float, dict)):
        return None
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value).strip()
    if not text or len(text) > MAX_PATTERN_VALUE_CHARS or _NUMERIC.match(text):
        return None
    return text


def _event_patterns(event: Mapping[str, Any]) -> Iterator[Pattern]:
    source = event.get("source")
    if source is None:
        return
    for k, v in event.items():
        if k in PATTERN_SKIP_KEYS:
            continue
        value = pattern_value(v)
        if value is not None:
            yield Pattern(str(source), k, value)


class PatternIndex:
    """Which events of a store each pattern matches, and each event's patterns (built once per store)."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._ids: dict[Pattern, list[str]] = defaultdict(list)
        self._of: dict[str, tuple[Pattern, ...]] = {}
        for e in store.events:
            if e.get("source") is None:
                continue
            own = tuple(_event_patterns(e))
            self._of[e["id"]] = own
            self._ids[Pattern(str(e["source"]))].append(e["id"])
            for p in own:
                self._ids[p].append(e["id"])

    def ids(self, pattern: Pattern) -> list[str]:
        """Ids of every event of the store the pattern matches, in store order."""
        return self._ids.get(pattern, [])

    def detect(self, candidate_ids: Iterable[str], threshold: int) -> list[Pattern]:
        """Frequent non-numeric key-value patterns of the candidates (>= ``threshold`` events), most frequent
        first, then one source pattern per source of the candidates (in order of first appearance)."""
        counts: Counter[Pattern] = Counter()
        sources: dict[str, None] = {}
        for i in candidate_ids:
            if i not in self._of:
                continue
            sources.setdefault(str(self.store.by_id[i]["source"]))
            counts.update(self._of[i])
        return _frequent(counts, threshold) + [Pattern(s) for s in sources]


#: Pairs a cross-encoder of the pipeline classifies at a time: the question's deadline is checked between
#: chunks (RETRIEVE's ``check_time``), since the event step over thousands of first-stage candidates runs for
#: tens of seconds on a CPU (a tiny release's question took 47 s of its 40 s budget, 2026-12-02). A classifier
#: with a ``batch_size`` gets chunks of one batch, so chunking changes no batch and no label.
CLASSIFY_CHUNK = 64


def _frequent(counts: Counter[Pattern], threshold: int) -> list[Pattern]:
    return sorted((p for p, n in counts.items() if n >= threshold), key=lambda p: (-counts[p], p))


class PairClassifier(Protocol):
    """What the pipeline needs from a cross-encoder: a label name per (query, text) pair."""

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]: ...


class CrossEncoderClassifier:
    """A trained sentence-transformers ``CrossEncoder`` as a :class:`PairClassifier` (argmax of the logits,
    named through the model's ``id2label``). ``max_length`` None keeps the length saved with the model."""

    def __init__(self, model: Any, max_length: int | None = None, batch_size: int = 64,
                 device: str | None = None) -> None:
        if isinstance(model, (str, Path)):
            from sentence_transformers.cross_encoder import CrossEncoder

            model = CrossEncoder(str(model), device=device)
        if max_length is not None:
            model.max_seq_length = max_length
        self.model = model
        self.batch_size = batch_size
        id2label = model.config.id2label
        self.labels = {int(k): str(v) for k, v in id2label.items()}
        if len(self.labels) != model.num_labels:
            raise ValueError(f"cross-encoder has {model.num_labels} labels but id2label {self.labels}")

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        if not pairs:
            return []
        logits = self.model.predict([list(p) for p in pairs], batch_size=self.batch_size,
                                    convert_to_numpy=True, show_progress_bar=False)
        return [self.labels[int(i)] for i in logits.reshape(len(pairs), -1).argmax(axis=1)]

    def probabilities(self, pairs: Sequence[tuple[str, str]], label: str) -> list[float]:
        """The softmax probability of ``label`` for each pair (ranking by relevance)."""
        import numpy as np
        import torch

        if not pairs:
            return []
        index = {v: k for k, v in self.labels.items()}[label]
        logits = self.model.predict([list(p) for p in pairs], batch_size=self.batch_size, convert_to_numpy=True,
                                    show_progress_bar=False, activation_fn=torch.nn.Identity(),
                                    apply_softmax=False).reshape(len(pairs), -1)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted[:, index] / shifted.sum(axis=1)).tolist()


class SpladeFirstStage:
    """SPLADE first stage (the paper's): sparse dot products of query and event vectors above ``threshold``.

    Needs a SPLADE checkpoint (``naver/splade-cocondenser-ensembledistil`` in the paper) loadable by
    sentence-transformers' ``SparseEncoder``; document vectors are computed once per store. Not exercised
    offline (no SPLADE model ships with convohub); BM25 is the default first stage.
    """

    def __init__(self, model_path: str | Path, batch_size: int = 64) -> None:
        from sentence_transformers import SparseEncoder

        self.model = SparseEncoder(str(model_path))
        self.batch_size = batch_size
        self._docs: weakref.WeakKeyDictionary[EventStore, tuple[list[str], Any]] = weakref.WeakKeyDictionary()

    def scores(self, query: str, store: EventStore) -> list[tuple[str, float]]:
        if store not in self._docs:
            ids = [e["id"] for e in store.events]
            docs = self.model.encode_document([verbalise_event(e) for e in store.events],
                                              batch_size=self.batch_size, convert_to_tensor=True)
            self._docs[store] = (ids, docs)
        ids, docs = self._docs[store]
        q = self.model.encode_query([query], convert_to_tensor=True)
        raw = self.model.similarity(q, docs)[0].tolist()
        return sorted(zip(ids, (float(s) for s in raw), strict=True), key=lambda p: (-p[1], p[0]))


@dataclass
class RetrieveTrace:
    """What each step decided for one query (for evaluation, debugging and the Space)."""

    candidates: int = 0
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern text, label)
    kept_by_patterns: int = 0
    dropped_sources: list[str] = field(default_factory=list)
    dropped_by_patterns: int = 0
    classified: int = 0
    kept_by_events: int = 0
    returned: int = 0


@dataclass
class RetrievePlan:
    """The outcome of steps 1-3 for one query: candidates, ids kept by relevant patterns, ids left for the
    event cross-encoder."""

    candidates: list[str]
    kept: set[str]
    remaining: list[str]
    trace: RetrieveTrace


class CrossEncoderRetriever:
    """The paper's RETRIEVE pipeline over an :class:`EventStore` (see the module docstring).

    ``event_model`` / ``pattern_model``: a trained cross-encoder folder, a loaded ``CrossEncoder`` or any
    :class:`PairClassifier`; None skips that step (no pattern model: every pattern is partial; no event
    model: remaining candidates are kept). Max lengths default to the paper's (512 events, 50 patterns);
    pass None to keep the length saved with each model.
    """

    def __init__(self, event_model: Any = None, pattern_model: Any = None, *, first_stage: Any = None,
                 first_stage_threshold: float = 0.0, pattern_threshold: int = 100,
                 event_max_length: int | None = 512, pattern_max_length: int | None = 50,
                 batch_size: int = 64, drop_irrelevant_patterns: bool = True) -> None:
        self.events = self._classifier(event_model, event_max_length, batch_size)
        self.patterns = self._classifier(pattern_model, pattern_max_length, batch_size)
        self.first_stage = first_stage if first_stage is not None else BM25Retriever(threshold=first_stage_threshold)
        self.first_stage_threshold = first_stage_threshold
        self.pattern_threshold = pattern_threshold
        self.drop_irrelevant_patterns = drop_irrelevant_patterns
        self._cache: weakref.WeakKeyDictionary[EventStore, dict[str, list[str]]] = weakref.WeakKeyDictionary()
        self._indexes: weakref.WeakKeyDictionary[EventStore, Any] = weakref.WeakKeyDictionary()
        self.traces: dict[str, RetrieveTrace] = {}
        #: seconds per pair of each cross-encoder over earlier queries, to start no batch that would overrun
        self.paces = {"pattern": Pace(), "event": Pace()}

    @classmethod
    def from_pretrained(cls, *paths: str | Path, **kwargs: Any) -> CrossEncoderRetriever:
        """From folders that are cross-encoders (2 labels: the event step, 3 labels: the pattern step) or
        that hold ``events/`` and/or ``patterns/`` cross-encoder folders -- e.g. the two model repositories
        of a release. Max lengths default to the ones saved with each model; ``kwargs`` go to the
        constructor."""
        import json

        models: dict[str, Path] = {}
        for path in paths:
            folder = Path(path)
            nested = {step: folder / step for step in ("events", "patterns") if (folder / step / "config.json").is_file()}
            if nested:
                models.update(nested)
                continue
            config = folder / "config.json"
            if not config.is_file():
                raise FileNotFoundError(f"{folder}: neither a cross-encoder folder (config.json) nor one with "
                                        "events/ or patterns/ model folders")
            saved = json.loads(config.read_text(encoding="utf-8"))
            labels = len(saved.get("id2label") or {}) or 2  # transformers leaves out the default 2-label map
            if labels not in (2, 3):
                raise ValueError(f"{config}: {labels} labels; the event model has 2, the pattern model 3")
            models["events" if labels == 2 else "patterns"] = folder
        if not models:
            raise ValueError("from_pretrained needs at least one cross-encoder folder")
        kwargs.setdefault("event_max_length", None)
        kwargs.setdefault("pattern_max_length", None)
        return cls(models.get("events"), models.get("patterns"), **kwargs)

    @staticmethod
    def _classifier(model: Any, max_length: int | None, batch_size: int) -> PairClassifier | None:
        if model is None or hasattr(model, "classify"):
            return model
        return CrossEncoderClassifier(model, max_length=max_length, batch_size=batch_size)

    def _index(self, store: EventStore) -> Any:

        if store not in self._indexes:
            self._indexes[store] = PatternIndex(store)
        return self._indexes[store]

    def retrieve(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> list[str]:
        """The ids the pipeline keeps for ``query``, cached per (store, query). ``check_time`` is called before
        each cross-encoder batch with its estimate (:func:`~convohub.reqap.engine.pace.paced_chunks`)."""
        cached = self._cache.setdefault(store, {})
        if query not in cached:
            cached[query] = self._retrieve(query, store, check_time)
        return list(cached[query])

    def _classify(self, step: str, classifier: PairClassifier, query: str, texts: Sequence[str],
                  check_time: TimeCheck | None) -> list[str]:
        """``classifier``'s labels for (``query``, text) pairs, in chunks started within the time budget."""
        pairs = [(query, text) for text in texts]
        size = getattr(classifier, "batch_size", CLASSIFY_CHUNK)
        return paced_chunks(pairs, size, classifier.classify, self.paces[step], check_time,
                            lambda start, n: f"the {step} cross-encoder of RETRIEVE {query[:60]!r} on {n} "
                                             f"{'more ' if start else ''}of {len(pairs)} {step}s")

    def plan(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> RetrievePlan:
        """Steps 1-3: first-stage candidates, patterns and their labels; what the event step must classify."""
        trace = RetrieveTrace()
        self.traces[query] = trace
        candidates = [i for i, s in self.first_stage.scores(query, store) if s > self.first_stage_threshold]
        trace.candidates = len(candidates)
        if not candidates:
            return RetrievePlan([], set(), [], trace)
        index = self._index(store)
        found = index.detect(candidates, self.pattern_threshold)
        labels = self._classify("pattern", self.patterns, query, [p.text for p in found], check_time) \
            if self.patterns else ["partial"] * len(found)
        trace.patterns = [(p.text, lab) for p, lab in zip(found, labels, strict=True)]
        kept: set[str] = set()
        dropped: set[str] = set()
        dropped_sources: set[str] = set()
        for p, lab in zip(found, labels, strict=True):
            if lab == "relevant":
                kept.update(index.ids(p))
            elif lab == "irrelevant":
                if p.is_source:
                    dropped_sources.add(p.source)
                elif self.drop_irrelevant_patterns:
                    dropped.update(index.ids(p))
        trace.kept_by_patterns = len(kept)
        trace.dropped_sources = sorted(dropped_sources)
        remaining = [i for i in candidates if i not in kept
                     and store.by_id[i].get("source") not in dropped_sources and i not in dropped]
        trace.dropped_by_patterns = len(candidates) - len(remaining) - len(kept.intersection(candidates))
        return RetrievePlan(candidates, kept, remaining, trace)

    def classify_events(self, query: str, store: EventStore, ids: Sequence[str],
                        check_time: TimeCheck | None = None) -> set[str]:
        """Step 4: the ids the event cross-encoder keeps (all of them without an event model)."""
        if self.events is None or not ids:
            return set(ids)
        verdicts = self._classify("event", self.events, query, [event_text(store.by_id[i]) for i in ids], check_time)
        return {i for i, lab in zip(ids, verdicts, strict=True) if lab == "relevant"}

    def rank(self, query: str, store: EventStore, depth: int = 500) -> list[str]:
        """Event ids best first for a raw question (the RAG baseline's ranking): the first stage's ``depth``
        best candidates, re-scored by the event cross-encoder's probability of ``relevant`` (first-stage
        order without an event model)."""
        candidates = [i for i, s in self.first_stage.scores(query, store) if s > self.first_stage_threshold][:depth]
        if self.events is None or not candidates or not hasattr(self.events, "probabilities"):
            return candidates
        scores = self.events.probabilities([(query, event_text(store.by_id[i])) for i in candidates], "relevant")
        order = sorted(range(len(candidates)), key=lambda n: (-scores[n], n))  # ties keep first-stage order
        return [candidates[n] for n in order]

    def _retrieve(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> list[str]:
        plan = self.plan(query, store, check_time)
        accepted = self.classify_events(query, store, plan.remaining, check_time)
        trace = plan.trace
        trace.classified = len(plan.remaining) if self.events is not None else 0
        trace.kept_by_events = len(accepted)
        out = [e["id"] for e in store.events if e["id"] in plan.kept or e["id"] in accepted]
        trace.returned = len(out)
        return out
