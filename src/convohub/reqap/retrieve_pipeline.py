"""ReQAP's RETRIEVE pipeline: sparse first stage, pattern detection, pattern and event cross-encoders.

:class:`CrossEncoderRetriever` implements the :class:`~convohub.reqap.retrieval.Retriever` protocol:

1. first stage: every event whose sparse score is above ``first_stage_threshold`` (recall first). The
   default is :class:`~convohub.reqap.retrieval.BM25Retriever` (bm25s over ``key: json(value)`` lines);
   the paper's SPLADE (``naver/splade-cocondenser-ensembledistil``, threshold 0.1) plugs in as
   ``first_stage=SpladeFirstStage(path)`` - any object with ``scores(query, store) -> [(id, score)]`` works;
2. pattern detection (:meth:`~convohub.reqap.retrieve_data.PatternIndex.detect`): non-numeric key-value pairs
   shared by >= ``pattern_threshold`` candidates, plus one ``source: ...`` pattern per candidate source;
3. the pattern cross-encoder labels each pattern relevant / irrelevant / partial: a relevant pattern keeps
   *every* event of the whole store it matches (also those the first stage missed); an irrelevant source
   pattern drops that source's candidates, an irrelevant key-value pattern drops the candidates it matches
   (a relevant pattern wins over an irrelevant one: recall first); partial patterns decide nothing;
4. the event cross-encoder classifies the remaining candidates (batched; input
   :func:`~convohub.reqap.retrieve_data.event_text`: the source line, then the verbalised event), keeping
   the relevant ones.

Step 5 of the paper (merging events with overlapping time spans) is not done here: the RETRIEVE operator
(:func:`convohub.reqap.operators.retrieve`) de-duplicates whatever ids a retriever returns.
Results are cached per (store, query); :attr:`CrossEncoderRetriever.traces` says what each step decided.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from convohub.reqap.events import EventStore
from convohub.reqap.retrieval import BM25Retriever, verbalise_event

__all__ = ["CrossEncoderClassifier", "CrossEncoderRetriever", "PairClassifier", "RetrievePlan", "RetrieveTrace",
           "SpladeFirstStage"]


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

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> CrossEncoderRetriever:
        """From a folder holding ``events/`` and/or ``patterns/`` cross-encoder folders, or from one
        cross-encoder folder (2 labels: the event step, 3 labels: the pattern step). Max lengths default to
        the ones saved with each model; other ``kwargs`` go to the constructor."""
        import json

        folder = Path(path)
        models: dict[str, Path] = {}
        for step in ("events", "patterns"):
            if (folder / step / "config.json").is_file():
                models[step] = folder / step
        if not models:
            config = folder / "config.json"
            if not config.is_file():
                raise FileNotFoundError(f"{folder}: neither a cross-encoder folder (config.json) nor one with "
                                        "events/ or patterns/ model folders")
            labels = len(json.loads(config.read_text(encoding="utf-8")).get("id2label", {}))
            if labels not in (2, 3):
                raise ValueError(f"{config}: {labels} labels; the event model has 2, the pattern model 3")
            models["events" if labels == 2 else "patterns"] = folder
        kwargs.setdefault("event_max_length", None)
        kwargs.setdefault("pattern_max_length", None)
        return cls(models.get("events"), models.get("patterns"), **kwargs)

    @staticmethod
    def _classifier(model: Any, max_length: int | None, batch_size: int) -> PairClassifier | None:
        if model is None or hasattr(model, "classify"):
            return model
        return CrossEncoderClassifier(model, max_length=max_length, batch_size=batch_size)

    def _index(self, store: EventStore) -> Any:
        from convohub.reqap.retrieve_data import PatternIndex

        if store not in self._indexes:
            self._indexes[store] = PatternIndex(store)
        return self._indexes[store]

    def retrieve(self, query: str, store: EventStore) -> list[str]:
        cached = self._cache.setdefault(store, {})
        if query not in cached:
            cached[query] = self._retrieve(query, store)
        return list(cached[query])

    def plan(self, query: str, store: EventStore) -> RetrievePlan:
        """Steps 1-3: first-stage candidates, patterns and their labels; what the event step must classify."""
        trace = RetrieveTrace()
        self.traces[query] = trace
        candidates = [i for i, s in self.first_stage.scores(query, store) if s > self.first_stage_threshold]
        trace.candidates = len(candidates)
        if not candidates:
            return RetrievePlan([], set(), [], trace)
        index = self._index(store)
        found = index.detect(candidates, self.pattern_threshold)
        labels = self.patterns.classify([(query, p.text) for p in found]) if self.patterns else \
            ["partial"] * len(found)
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

    def classify_events(self, query: str, store: EventStore, ids: Sequence[str]) -> set[str]:
        """Step 4: the ids the event cross-encoder keeps (all of them without an event model)."""
        from convohub.reqap.retrieve_data import event_text

        if self.events is None or not ids:
            return set(ids)
        verdicts = self.events.classify([(query, event_text(store.by_id[i])) for i in ids])
        return {i for i, lab in zip(ids, verdicts, strict=True) if lab == "relevant"}

    def _retrieve(self, query: str, store: EventStore) -> list[str]:
        plan = self.plan(query, store)
        accepted = self.classify_events(query, store, plan.remaining)
        trace = plan.trace
        trace.classified = len(plan.remaining) if self.events is not None else 0
        trace.kept_by_events = len(accepted)
        out = [e["id"] for e in store.events if e["id"] in plan.kept or e["id"] in accepted]
        trace.returned = len(out)
        return out
