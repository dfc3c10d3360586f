"""Training data for ReQAP's two RETRIEVE cross-encoders, derived per RETRIEVE call of the gold trees.

Why: the paper trains an *event* cross-encoder (keep / drop one candidate event) and a *pattern*
cross-encoder (is a frequent key-value pattern of the candidate pool relevant, irrelevant or partially
relevant?) from the benchmark's ground truth. convohub's gold operator trees
(:mod:`convohub.reqap.data.gold`) name every RETRIEVE query of a question, and :class:`OracleIndex` gives
the gold event ids of each query, so every (persona, query) pair yields labelled examples:

* the first stage (BM25 over verbalised events, :class:`~convohub.reqap.components.retrieve.BM25Retriever`) gives the
  candidate pool; calls whose first-stage recall of the gold events is below ``min_recall`` (0.5) are
  skipped, because the cross-encoders only ever see candidates;
* events: <= 5 positives (gold candidates), <= 5 hard negatives (drawn from the best-scored non-gold
  candidates) and <= 5 random negatives (non-gold events of the whole store, drawn with weights inverse to
  their source's frequency so rare sources are seen);
* patterns (:class:`Pattern`): the frequent non-numeric ``key: value`` pairs of the candidate pool
  (:meth:`PatternIndex.detect`, >= ``pattern_threshold`` candidates) labelled by *all* events of the store they
  match: relevant (all gold), irrelevant (none gold), partial (some); <= 5 positive (relevant/partial) and
  <= 5 negative patterns per call, plus one ``source: ...`` pattern per source of the pool.

Examples are de-duplicated on (query, text); a pattern seen with different labels (two personas) becomes
partial, an event text seen with both labels is dropped. Everything is seeded (:func:`derive_rng`).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.perqa.vocab import derive_rng
from convohub.reqap.components.retrieve import (
    IRRELEVANT,
    PARTIAL,
    RELEVANT,
    BM25Retriever,
    PatternIndex,
    event_text,
)
from convohub.reqap.data.gold import OracleIndex, gold_tree_or_none
from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.expr import Function
from convohub.reqap.engine.parse import OpNode, parse_tree

__all__ = [
    "gold_tree_calls", "sql_calls",
    "Example", "RetrieveData", "RetrieveDataConfig", "decode_events", "derive", "derive_from_dataset",
    "derive_from_perqa", "pattern_label", "personas_with_questions", "retrieve_queries", "to_rows"
]


@dataclass(frozen=True)
class RetrieveDataConfig:
    """Settings of the derivation (paper values by default; ``pattern_threshold`` 100 is paper scale)."""

    seed: int = 0
    min_recall: float = 0.5
    first_stage_threshold: float = 0.0
    max_positives: int = 5
    max_hard_negatives: int = 5
    hard_negative_pool: int = 50
    max_random_negatives: int = 5
    pattern_threshold: int = 100
    max_positive_patterns: int = 5
    max_negative_patterns: int = 5


def retrieve_queries(tree: str | OpNode) -> list[str]:
    """The RETRIEVE queries of an operator tree (lambda-nested operators included), first occurrence order."""
    node = parse_tree(tree) if isinstance(tree, str) else tree
    out: dict[str, None] = {}

    def walk(n: Any) -> None:
        if not isinstance(n, OpNode):
            return
        if n.op == "RETRIEVE" and isinstance(n.args.get("query"), str):
            out.setdefault(n.args["query"])
        for v in n.args.values():
            if isinstance(v, OpNode):
                walk(v)
            elif isinstance(v, Function):
                for s in v.subtrees:
                    walk(s)

    walk(node)
    return list(out)


@dataclass(frozen=True)
class Example:
    """One labelled (query, text) pair; ``kind`` says how it was drawn, ``personas`` where it came from."""

    query: str
    text: str
    label: int
    kind: str
    personas: tuple[str, ...]


@dataclass
class RetrieveData:
    """Both tasks' examples plus counts of what was derived and skipped."""

    events: list[Example] = field(default_factory=list)
    patterns: list[Example] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Collector:
    """De-duplicates (query, text) keys; remembers every label seen."""

    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def add(self, query: str, text: str, label: int, kind: str, persona: str) -> None:
        row = self.rows.setdefault((query, text), {"labels": set(), "kind": kind, "personas": []})
        row["labels"].add(label)
        if persona not in row["personas"]:
            row["personas"].append(persona)

    def examples(self, on_conflict: int | None) -> tuple[list[Example], int]:
        """Examples in first-seen order; conflicting labels become ``on_conflict`` (None: dropped)."""
        out, conflicts = [], 0
        for (query, text), row in self.rows.items():
            labels = row["labels"]
            if len(labels) > 1:
                conflicts += 1
                if on_conflict is None:
                    continue
                label = on_conflict
            else:
                (label,) = labels
            out.append(Example(query, text, label, row["kind"], tuple(row["personas"])))
        return out, conflicts


def _inverse_frequency_sample(ids: Sequence[str], sources: Sequence[str], k: int, rng: Any) -> list[str]:
    """``k`` of ``ids`` (parallel ``sources``) without replacement, each weighted 1 / (ids of its source)."""
    if k <= 0 or not ids:
        return []
    freq = Counter(sources)
    # Efraimidis-Spirakis: the k largest u ** (1 / w) are a weighted sample without replacement
    keyed = [(rng.random() ** freq[s], i) for i, s in zip(ids, sources, strict=True)]
    keyed.sort(key=lambda p: (-p[0], p[1]))
    return [i for _, i in keyed[:k]]


def _sample(items: Sequence[Any], k: int, rng: Any) -> list[Any]:
    return list(items) if len(items) <= k else rng.sample(list(items), k)


def pattern_label(matched: Iterable[str], gold: set[str]) -> int:
    """relevant when every matched event is gold, irrelevant when none is, else partial."""
    matched = list(matched)
    hits = sum(i in gold for i in matched)
    if matched and hits == len(matched):
        return RELEVANT
    return IRRELEVANT if hits == 0 else PARTIAL


PersonaInput = tuple[str, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]


def decode_events(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of event rows with a JSON-string ``event_data`` decoded (dataset rows -> OracleIndex input)."""
    out = []
    for r in rows:
        r = dict(r)
        if isinstance(r.get("event_data"), str):
            r["event_data"] = json.loads(r["event_data"])
        out.append(r)
    return out


#: ``calls(persona_id, observable, canonical, questions, stats) -> {RETRIEVE query: gold event ids}``
Calls = Callable[[str, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], Counter[str]],
                 dict[str, set[str]]]


def gold_tree_calls(persona_id: str, observable: list[dict[str, Any]], canonical: list[dict[str, Any]],
                    questions: list[dict[str, Any]], stats: Counter[str]) -> dict[str, set[str]]:
    """The RETRIEVE calls of the questions' gold trees, gold events from the oracle (convohub's templates)."""
    queries: dict[str, None] = {}
    for q in questions:
        tree = gold_tree_or_none(q)
        if tree is None:
            stats["questions_without_gold_tree"] += 1
            continue
        stats["questions"] += 1
        for query in retrieve_queries(tree):
            queries.setdefault(query)
    if not queries:
        return {}
    oracle = OracleIndex(observable, decode_events(canonical))
    return {query: set(oracle.ids(query)) for query in queries}


def sql_calls(trees: Mapping[str, Sequence[str]]) -> Calls:
    """The RETRIEVE calls of kept trees (question id -> trees, e.g. distilled ones), gold events from each
    question's SQL (:mod:`convohub.reqap.data.sql`): no template or gold tree needed. Only simple SQL, and
    only trees with one RETRIEVE query (the SQL's table is then that call's source); the rest is counted."""
    from convohub.perqa.db import connect
    from convohub.reqap.data.sql import gold_observable_ids

    def calls(persona_id: str, observable: list[dict[str, Any]], canonical: list[dict[str, Any]],
              questions: list[dict[str, Any]], stats: Counter[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        con = None
        for q in questions:
            kept = trees.get(str(q["id"]), ())
            if not kept:
                continue
            stats["questions"] += 1
            queries = {query for tree in kept for query in retrieve_queries(tree)}
            if len(queries) != 1:
                stats["questions_skipped_several_retrieve_calls"] += 1
                continue
            con = con or connect(decode_events(canonical))
            gold = gold_observable_ids(con, q["sql_query"], observable)
            if gold is None:
                stats["questions_skipped_sql_not_simple"] += 1
                continue
            (query,) = queries
            if query in out and out[query] != gold:
                stats["calls_with_conflicting_sql_gold"] += 1  # the first question's gold stays
                continue
            out[query] = gold
        return out

    return calls


def derive(personas: Iterable[PersonaInput], config: RetrieveDataConfig | None = None,
           calls: Calls = gold_tree_calls) -> RetrieveData:
    """Examples of both tasks from ``(persona_id, observable, canonical, questions)`` tuples; ``calls`` names
    each persona's RETRIEVE calls and their gold events (default: the gold trees and the oracle)."""
    config = config or RetrieveDataConfig()
    events, patterns = _Collector(), _Collector()
    stats: Counter[str] = Counter()
    recalls: list[float] = []
    for persona_id, observable, canonical, questions in personas:
        gold_of = calls(persona_id, observable, canonical, questions, stats)
        if not gold_of:
            continue
        store = EventStore.from_records(observable)
        first_stage = BM25Retriever(threshold=config.first_stage_threshold)
        index = PatternIndex(store)
        for query, gold in gold_of.items():
            stats["calls"] += 1
            ranked = [i for i, s in first_stage.scores(query, store) if s > config.first_stage_threshold]
            if not gold:
                stats["calls_skipped_no_gold"] += 1
                continue
            candidates = set(ranked)
            recall = len(gold & candidates) / len(gold)
            recalls.append(recall)
            if recall < config.min_recall:
                stats["calls_skipped_low_recall"] += 1
                continue
            stats["calls_used"] += 1
            rng = derive_rng(config.seed, "retrieve-data", persona_id, query)
            positives = _sample([i for i in ranked if i in gold], config.max_positives, rng)
            hard_pool = [i for i in ranked if i not in gold][: config.hard_negative_pool]
            hard = _sample(hard_pool, config.max_hard_negatives, rng)
            chosen = set(hard)
            rest = [e for e in store.events if e["id"] not in gold and e["id"] not in chosen]
            random_neg = _inverse_frequency_sample([e["id"] for e in rest], [str(e.get("source")) for e in rest],
                                                   config.max_random_negatives, rng)
            for ids, label, kind in ((positives, 1, "positive"), (hard, 0, "hard_negative"),
                                     (random_neg, 0, "random_negative")):
                for i in ids:
                    events.add(query, event_text(store.by_id[i]), label, kind, persona_id)
            found = index.detect(ranked, config.pattern_threshold)
            labelled = [(p, pattern_label(index.ids(p), gold)) for p in found]
            kv = [(p, lab) for p, lab in labelled if not p.is_source]
            pos = _sample([p for p, lab in kv if lab != IRRELEVANT], config.max_positive_patterns, rng)
            neg = _sample([p for p, lab in kv if lab == IRRELEVANT], config.max_negative_patterns, rng)
            keep = set(pos) | set(neg)
            for p, lab in labelled:
                if p.is_source or p in keep:
                    kind = "source" if p.is_source else ("positive" if lab != IRRELEVANT else "negative")
                    patterns.add(query, p.text, lab, kind, persona_id)
    event_examples, event_conflicts = events.examples(on_conflict=None)
    pattern_examples, pattern_conflicts = patterns.examples(on_conflict=PARTIAL)
    stats["event_conflicts_dropped"] = event_conflicts
    stats["pattern_conflicts_partial"] = pattern_conflicts
    out_stats: dict[str, Any] = dict(sorted(stats.items()))
    out_stats["mean_first_stage_recall"] = round(sum(recalls) / len(recalls), 4) if recalls else 0.0
    return RetrieveData(event_examples, pattern_examples, out_stats)


def derive_from_perqa(data: Any, split: str, config: RetrieveDataConfig | None = None) -> RetrieveData:
    """Examples of one split of a :class:`~convohub.perqa.PerQAData` (generated in memory)."""
    return derive(((p.persona_id, p.observable, p.canonical, p.questions) for p in data.split(split)), config)


def personas_with_questions(dataset_path: str | Path, split: str) -> Iterator[PersonaInput]:
    """``(persona_id, observable, canonical, questions)`` of one split of a built PerQA dataset."""
    from convohub.hub import load_split
    from convohub.reqap.data.extract import personas_from_dataset

    rows = load_split(dataset_path, "questions", split)
    by_persona: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows.to_list():
        by_persona[r["persona_id"]].append(r)
    for persona_id, _persona, observable, canonical in personas_from_dataset(dataset_path, split):
        yield persona_id, observable, canonical, by_persona.get(persona_id, [])


def derive_from_dataset(dataset_path: str | Path, split: str, config: RetrieveDataConfig | None = None,
                        max_personas: int | None = None) -> RetrieveData:
    """Examples of one split of a built PerQA dataset folder (or Hub id); ``max_personas`` keeps the first
    personas of the split only (small offline runs)."""
    return derive(itertools.islice(personas_with_questions(dataset_path, split), max_personas), config)


def to_rows(examples: Sequence[Example]) -> dict[str, list[Any]]:
    """Columns ``query``, ``text``, ``label`` for ``datasets.Dataset.from_dict`` (the CrossEncoder layout:
    the two inputs first, then the label)."""
    return {"query": [e.query for e in examples], "text": [e.text for e in examples],
            "label": [e.label for e in examples]}
