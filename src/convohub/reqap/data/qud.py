"""SFT data for ReQAP's QUD model: one (ancestor dialogue -> operator step) pair per decomposition step.

Two sources, one pair format (:class:`StepPair`):

* **offline** (:func:`offline_pairs`) -- the QUD steps of the hand-written gold trees of the train (+dev)
  questions (:func:`convohub.reqap.data.gold.decompose`) plus the example bank. A transparent stand-in for
  the paper's distillation when no large LLM is available; cards say so (:data:`OFFLINE_SOURCE`).
* **LLM distillation** (:func:`distill_pairs`) -- the paper's path: run :class:`~convohub.reqap.components.qud.ICLDecomposer`
  on train/dev questions, execute each candidate tree (BM25 retriever + lookup extractor by default), keep
  the trees whose answer is correct (:func:`convohub.metrics.is_hit`), falling back to answers within 10 %,
  then 20 %, then any tree that ran; emit the steps of the kept trees. Questions without any usable tree
  are counted, not hidden.

A pair keeps its full ancestor chain; the training script drops the oldest turns to the model's input limit
(:func:`convohub.reqap.components.qud.truncate_chain`) with the model's own tokenizer, as inference does. Pairs are
de-duplicated on (chain, input, output) and come out in a deterministic order.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from convohub.jsonlines import jsonl_records
from convohub.reqap.components.qud import (
    QUDExample,
    RecursiveDecomposer,
    Turn,
    history_messages,
    load_examples,
    step_chains,
)
from convohub.reqap.data.perqa import load_questions

__all__ = [
    "ICL_SOURCE", "OFFLINE_SOURCE", "StepPair", "dedupe", "distill_pairs", "example_pairs", "gold_pairs",
    "gold_steps", "offline_pairs", "read_pairs", "write_pairs"
]

OFFLINE_SOURCE = "gold-tree decompositions (offline stand-in for ICL distillation)"
ICL_SOURCE = "ICL-distilled (trees of an in-context-learning decomposer that gave correct answers)"
#: Distillation tiers, best first: strict hit, within 10 %, within 20 %, ran at all.
TIERS = ("hit", "rlx_10", "rlx_20", "ran")


@dataclass(frozen=True)
class StepPair:
    """One training pair: the step's ancestor ``chain`` and ``input`` -> the operator ``output``."""

    chain: tuple[Turn, ...]
    input: str
    output: str
    source: str  # "gold:<template_id>", "example", "icl:<tier>"

    def prompt(self, chain: Sequence[Turn] | None = None) -> list[dict[str, str]]:
        """Chat messages of the input (optionally with a truncated chain)."""
        return history_messages(self.chain if chain is None else chain, self.input)

    def key(self) -> tuple[Any, ...]:
        return (self.chain, self.input, self.output)

    def to_record(self) -> dict[str, Any]:
        return {"chain": [list(t) for t in self.chain], "input": self.input, "output": self.output,
                "source": self.source}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> StepPair:
        return cls(tuple((str(a), str(b)) for a, b in record["chain"]), str(record["input"]),
                   str(record["output"]), str(record.get("source", "")))


def dedupe(pairs: Iterable[StepPair]) -> list[StepPair]:
    """First occurrence of each (chain, input, output), order kept."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for p in pairs:
        if p.key() not in seen:
            seen.add(p.key())
            out.append(p)
    return out


def _pairs(chains: Iterable[tuple[tuple[Turn, ...], str, str]], source: str) -> list[StepPair]:
    return [StepPair(chain, inp, out, source) for chain, inp, out in chains]


def example_pairs(examples: Sequence[QUDExample] | None = None) -> list[StepPair]:
    """The steps of the example bank."""
    examples = load_examples() if examples is None else examples
    return [p for e in examples for p in _pairs(e.chains, "example")]


def gold_steps(question: Mapping[str, Any]) -> list[tuple[tuple[Turn, ...], str, str]] | None:
    """(ancestor chain, input, output) of every step of ``question``'s gold tree in dialogue order, or None
    when its template has no gold tree (or the text does not fit it). Evaluation compares a model's steps
    with these; training uses the same steps (:func:`gold_pairs`)."""
    from convohub.reqap.data.gold import decompose, gold_tree_or_none

    tree = gold_tree_or_none(question)
    if tree is None:
        return None
    return step_chains(dict(decompose(tree, question)), question["question"])


def gold_pairs(questions: Iterable[Mapping[str, Any]]) -> tuple[list[StepPair], Counter[str]]:
    """Steps of the gold trees of ``questions`` (those whose template has one); counts what was skipped."""
    from convohub.reqap.data.gold import decompose, gold_tree

    counts: Counter[str] = Counter()
    out: list[StepPair] = []
    for q in questions:
        counts["questions"] += 1
        try:
            tree = gold_tree(q)
        except (KeyError, ValueError):
            counts["unbindable"] += 1
            continue
        if tree is None:
            counts["no_gold_tree"] += 1
            continue
        steps = dict(decompose(tree, q))
        out += _pairs(step_chains(steps, q["question"]), f"gold:{q['template_id']}")
        counts["with_gold_tree"] += 1
    return out, counts


def offline_pairs(dataset_dir: str | Path, splits: Sequence[str] = ("train", "dev"), *,
                  include_examples: bool = True) -> tuple[list[StepPair], dict[str, Any]]:
    """Gold-tree steps of the ``splits`` questions (+ the example bank), de-duplicated; and counts."""
    pairs: list[StepPair] = []
    stats: dict[str, Any] = {"source": OFFLINE_SOURCE, "splits": list(splits)}
    for split in splits:
        got, counts = gold_pairs(load_questions(dataset_dir, split))
        pairs += got
        stats[split] = dict(counts)
    if include_examples:
        ex = example_pairs()
        stats["example_steps"] = len(ex)
        pairs += ex
    out = dedupe(pairs)
    stats |= {"steps_before_dedupe": len(pairs), "pairs": len(out)}
    return out, stats


def _tier(answer: Any, golds: Sequence[Any]) -> int:
    from convohub.metrics import is_hit

    encoded = json.dumps(answer, ensure_ascii=False, default=str)
    refs = [json.dumps(g, ensure_ascii=False, default=str) for g in golds]
    for tier, relax in enumerate((0.0, 0.1, 0.2)):
        if is_hit(encoded, refs, relax=relax):
            return tier
    return 3


def distill_pairs(decomposer: RecursiveDecomposer, dataset_dir: str | Path,
                  splits: Sequence[str] = ("train", "dev"), *, retriever_factory: Callable[[], Any] | None = None,
                  extractor: Any = None, max_trees_per_question: int = 20, max_kept: int = 1,
                  max_questions: int | None = None, time_budget: float = 60.0,
                  kept_trees: dict[str, list[str]] | None = None) -> tuple[list[StepPair], dict[str, Any]]:
    """The paper's distillation: decompose, execute, keep the best tier's trees, emit their steps.

    For each question at most ``max_trees_per_question`` candidates are executed; the trees of the best
    tier reached (:data:`TIERS`) are kept, at most ``max_kept``. ``retriever_factory`` builds one retriever
    (default :class:`~convohub.reqap.components.retrieve.BM25Retriever`); ``extractor`` defaults to lookup.
    ``kept_trees`` (a dict) receives question id -> kept trees, e.g. for RETRIEVE examples
    (:func:`convohub.reqap.data.retrieve.sql_calls`).
    """
    from tqdm.auto import tqdm

    from convohub.reqap.components.extract import DirectExtractor
    from convohub.reqap.components.retrieve import BM25Retriever
    from convohub.reqap.engine.events import EventStore
    from convohub.reqap.engine.executor import Executor

    retriever = (retriever_factory or BM25Retriever)()
    extractor = extractor if extractor is not None else DirectExtractor()
    questions = [q for s in splits for q in load_questions(dataset_dir, s)]
    if max_questions is not None:
        questions = questions[:max_questions]
    counts: Counter[str] = Counter()
    pairs: list[StepPair] = []
    stores: dict[str, EventStore] = {}
    for q in tqdm(questions, desc="distilling QUD steps", unit="question"):
        pid = q["persona_id"]
        if pid not in stores:
            stores.clear()  # one persona at a time keeps memory flat (questions are sorted by persona)
            stores[pid] = EventStore.from_dataset_folder(dataset_dir, pid)
        executor = Executor(stores[pid], retriever, extractor, time_budget=time_budget)
        counts["questions"] += 1
        best: list[tuple[int, Any]] = []
        tried = 0
        for cand in islice(decomposer.candidate_steps(q["question"]), max_trees_per_question):
            tried += 1
            run = executor.execute(cand.tree)
            if not run.ok:
                counts["runs_failed"] += 1
                continue
            tier = _tier(run.answer, q["answers"])
            if not best or tier < best[0][0]:
                best = [(tier, cand)]
            elif tier == best[0][0] and len(best) < max_kept:
                best.append((tier, cand))
            if tier == 0 and len(best) >= max_kept:
                break
        if not tried:
            counts["no_tree"] += 1
            continue
        if not best:
            counts["no_tree_ran"] += 1
            continue
        tier = TIERS[best[0][0]]
        counts[f"kept_{tier}"] += 1
        for _, cand in best:
            pairs += _pairs(cand.steps, f"icl:{tier}")
        if kept_trees is not None:
            kept_trees[str(q["id"])] = [cand.tree for _, cand in best]
    out = dedupe(pairs)
    stats = {"source": ICL_SOURCE, "splits": list(splits), **dict(counts), "steps_before_dedupe": len(pairs),
             "pairs": len(out), "decomposer": decomposer.describe(), "decomposer_stats": decomposer.stats.as_dict()}
    return out, stats


def write_pairs(pairs: Sequence[StepPair], path: str | Path, stats: Mapping[str, Any] | None = None) -> Path:
    """JSONL of pairs (atomic); ``stats`` go to ``<path>.stats.json`` beside it."""
    from convohub.hub import atomic_write_text

    path = Path(path)
    atomic_write_text(path, "".join(json.dumps(p.to_record(), ensure_ascii=False) + "\n" for p in pairs))
    if stats is not None:
        atomic_write_text(path.with_name(path.name + ".stats.json"),
                          json.dumps(dict(stats), indent=2, sort_keys=True, default=str) + "\n")
    return path


def read_pairs(path: str | Path) -> list[StepPair]:
    """Pairs written by :func:`write_pairs` (errors name the file and line)."""
    out = []
    for where, record in jsonl_records(path, expected="one QUD step pair {chain, input, output, source}"):
        try:
            out.append(StepPair.from_record(record))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{where}: not a QUD step pair ({err}); expected "
                             "{chain, input, output, source}") from None
    return out
