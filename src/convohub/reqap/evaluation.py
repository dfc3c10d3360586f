"""End-to-end PerQA evaluation of ReQAP and the baselines: Hit@1, Rlx-Hit@1, per category, error attribution.

Scores come from :func:`convohub.metrics.hit_at_1` (the function behind ``evaluation/hit_at_1``): every
answer is JSON-encoded, a failed question is ``None`` (never a hit). Rlx-Hit@1 uses 10 % numeric slack, the
20 % variant is reported too. Per-category rows count a question once in each of its categories.

Error attribution (ReQAP only; for questions whose template has a gold tree and that the system misses,
strict Hit@1). With the *oracle* retriever (:func:`convohub.reqap.gold_trees.oracle_retriever`) and the
lookup extractor as the reference components:

* ``gold_tree_misses`` -- the gold tree itself misses with oracle + lookup: the engine or the lookup
  extractor cannot reach the gold answer here, so nothing is blamed on the system;
* ``tree`` -- the predicted tree (none ran: also ``tree``) misses with oracle + lookup while the gold tree
  hits. The oracle only knows the gold trees' RETRIEVE phrasings, so a correct tree worded differently is
  counted here too;
* ``retrieve`` -- the predicted tree is fine, but the gold tree with the *system's* retriever (+ lookup)
  misses;
* ``extract`` -- otherwise (tree and retrieval are fine, so the system's extractor loses the answer).

Questions without a gold tree, or that the system answered correctly, are counted apart.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from convohub.metrics.hit_at_1 import hit_at_1, is_hit
from convohub.reqap.events import EventStore
from convohub.reqap.executor import REFERENCE_DATE

__all__ = ["ATTRIBUTION_LABELS", "SYSTEMS", "attribute_error", "evaluate", "format_results", "load_persona",
           "persona_ids"]

SYSTEMS = ("reqap", "rag", "codegen")
ATTRIBUTION_LABELS = ("tree", "retrieve", "extract", "gold_tree_misses")


class Answerer(Protocol):
    """Anything with ``answer(question, store, reference_date)`` returning an object with ``answer`` and
    ``error`` (and ``to_dict()``): :class:`~convohub.reqap.pipeline.ReQAP` and the baselines."""

    def answer(self, question: str, store: EventStore, reference_date: date) -> Any: ...


def persona_ids(dataset_dir: str | Path, split: str) -> list[str]:
    """Persona ids of one split of a built PerQA folder, in numeric order."""
    import pyarrow.parquet as pq

    shards = sorted((Path(dataset_dir) / "data" / "personas").glob(f"{split}-*.parquet"))
    if not shards:
        raise FileNotFoundError(f"{dataset_dir}: no data/personas/{split}-*.parquet (is it a built PerQA "
                                "folder? build one with `convohub datasets build perqa`)")
    ids = [pid for s in shards for pid in pq.read_table(s, columns=["persona_id"]).column(0).to_pylist()]
    return sorted(ids, key=lambda p: (p.rsplit("_", 1)[0], int(p.rsplit("_", 1)[1])))


def load_persona(dataset_dir: str | Path, persona_id: str, *, canonical: bool = True
                 ) -> tuple[EventStore, list[dict[str, Any]], Any]:
    """(event store, questions, OracleIndex or None) of one persona of a built PerQA folder."""
    from convohub.perqa.dataset import events_from_dataset, questions_from_dataset
    from convohub.reqap.gold_trees import OracleIndex

    observable = events_from_dataset(Path(dataset_dir), persona_id)
    if not observable:
        raise KeyError(f"{dataset_dir}: no observable events for persona {persona_id!r} (see `persona_ids`)")
    questions = questions_from_dataset(Path(dataset_dir), persona_id)
    index = None
    if canonical:
        index = OracleIndex(observable, events_from_dataset(Path(dataset_dir), persona_id, "canonical_events"))
    return EventStore.from_records(observable), questions, index


def _encode(answer: Any, failed: bool) -> str | None:
    return None if failed else json.dumps(answer, ensure_ascii=False, default=str)


def attribute_error(question: dict[str, Any], predicted_tree: str | None, store: EventStore, index: Any,
                    retriever: Any, reference_date: date) -> str | None:
    """The component blamed for a missed question (see the module docstring); None without a gold tree."""
    from convohub.reqap.executor import Executor
    from convohub.reqap.extraction import DirectExtractor
    from convohub.reqap.gold_trees import gold_tree_or_none, oracle_retriever

    gold = gold_tree_or_none(question)
    if gold is None or index is None:
        return None
    golds = question["answers"]

    def hits(tree: str, ret: Any) -> bool:
        run = Executor(store, ret, DirectExtractor(), reference_date=reference_date, time_budget=120).execute(tree)
        return run.ok and is_hit(_encode(run.answer, False), [json.dumps(g) for g in golds])

    oracle = oracle_retriever(index)
    if not hits(gold, oracle):
        return "gold_tree_misses"
    if predicted_tree is None or not hits(predicted_tree, oracle):
        return "tree"
    if not hits(gold, retriever):
        return "retrieve"
    return "extract"


def _scores(preds: Sequence[str | None], refs: Sequence[Sequence[str]]) -> dict[str, float]:
    if not preds:
        return {"hit@1": 0.0, "rlx_hit@1": 0.0, "rlx_hit@1_20": 0.0, "n": 0}
    main = hit_at_1(preds, refs, relax=0.1)
    return {"hit@1": main["hit@1"], "rlx_hit@1": main["rlx_hit@1"],
            "rlx_hit@1_20": hit_at_1(preds, refs, relax=0.2)["rlx_hit@1"], "n": len(preds)}


def evaluate(dataset_dir: str | Path, split: str, system: str, answerer: Answerer, *,
             limit: int | None = None, persona: str | None = None, out_dir: str | Path | None = None,
             attribution: bool = True, describe: dict[str, Any] | None = None,
             on_persona: Callable[[str, list[dict[str, Any]]], None] | None = None) -> dict[str, Any]:
    """Answer every question of ``split`` (or of one ``persona``; at most ``limit``) and score them.

    Returns ``{"system", "split", "n", "hit@1", "rlx_hit@1", "rlx_hit@1_20", "per_category", "counts",
    "failures", "error_attribution", "components"}``; with ``out_dir`` also writes ``results.json`` and
    ``predictions.jsonl`` (one line per question: id, question, categories, gold, answer, hit, error,
    tree/sql, attribution). ``on_persona(persona_id, questions)`` lets a caller prepare per-persona state
    (e.g. register the questions with the gold-tree oracle decomposer).
    """
    from tqdm.auto import tqdm

    from convohub.perqa.templates import CATEGORIES

    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; expected one of {SYSTEMS}")
    pids = [persona] if persona else persona_ids(dataset_dir, split)
    records: list[dict[str, Any]] = []
    failures: Counter[str] = Counter()
    attribution_counts: Counter[str] = Counter()
    remaining = limit
    for pid in pids:
        if remaining is not None and remaining <= 0:
            break
        store, questions, index = load_persona(dataset_dir, pid, canonical=attribution and system == "reqap")
        questions = questions[:remaining] if remaining is not None else questions
        if remaining is not None:
            remaining -= len(questions)
        if on_persona is not None:
            on_persona(pid, questions)
        for q in tqdm(questions, desc=f"{system} {pid}", leave=False):
            ref_date = date.fromisoformat(q["reference_date"]) if q.get("reference_date") else REFERENCE_DATE
            res = answerer.answer(q["question"], store, ref_date)
            failed = res.error is not None
            pred = _encode(res.answer, failed)
            refs = [json.dumps(g, ensure_ascii=False) for g in q["answers"]]
            hit = is_hit(pred, refs)
            rec = {"id": q["id"], "persona_id": pid, "question": q["question"], "template_id": q.get("template_id"),
                   "categories": list(q.get("categories") or []), "gold": q["answers"], "answer": res.answer,
                   "prediction": pred, "hit": hit, "rlx_hit": is_hit(pred, refs, relax=0.1), "error": res.error,
                   "seconds": round(getattr(res, "seconds", 0.0), 4)}
            if failed:
                failures[str(res.error).split(":", 1)[0]] += 1
            if system == "reqap":
                rec["tree"] = getattr(res, "tree", None)
                rec["trees_tried"] = len(getattr(res, "tried", []))
                if attribution and not hit:
                    label = attribute_error(q, rec["tree"], store, index, answerer.retriever, ref_date)  # type: ignore[attr-defined]
                    rec["attribution"] = label
                    attribution_counts[label or "no_gold_tree"] += 1
            else:
                rec["sql"] = getattr(res, "sql", None)
                rec["output"] = getattr(res, "output", "")
            records.append(rec)
    if not records:
        raise ValueError(f"{dataset_dir}: no questions for split {split!r}" + (f", persona {persona}" if persona else ""))
    preds = [r["prediction"] for r in records]
    refs = [[json.dumps(g, ensure_ascii=False) for g in r["gold"]] for r in records]
    overall = _scores(preds, refs)
    per_category = {}
    for cat in CATEGORIES:
        idx = [i for i, r in enumerate(records) if cat in r["categories"]]
        if idx:
            per_category[cat] = _scores([preds[i] for i in idx], [refs[i] for i in idx])
    blamed = sum(attribution_counts[k] for k in ("tree", "retrieve", "extract"))
    results: dict[str, Any] = {
        "system": system, "split": split, **overall,
        "per_category": per_category,
        "counts": {"questions": len(records), "personas": len({r["persona_id"] for r in records}),
                   "hits": sum(r["hit"] for r in records), "failed_runs": sum(failures.values())},
        "failures": dict(sorted(failures.items())),
        "error_attribution": ({"counts": dict(sorted(attribution_counts.items())),
                               "shares": {k: attribution_counts[k] / blamed for k in ("tree", "retrieve", "extract")}
                               if blamed else {}} if system == "reqap" and attribution else None),
        "components": describe or {},
    }
    stats = getattr(answerer, "stats", None)
    if stats:
        results["baseline_stats"] = dict(stats)
    if out_dir is not None:
        from convohub.hub import atomic_write_text, dump_json

        out = Path(out_dir)
        atomic_write_text(out / "results.json", dump_json(results))
        atomic_write_text(out / "predictions.jsonl",
                          "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records))
    return results


def format_results(results: dict[str, Any]) -> str:
    """The printed summary: overall and per-category scores, failures, error attribution (Markdown)."""
    from convohub.hub import markdown_table

    rows = [["all", results["n"], results["hit@1"], results["rlx_hit@1"], results["rlx_hit@1_20"]]]
    rows += [[c, s["n"], s["hit@1"], s["rlx_hit@1"], s["rlx_hit@1_20"]] for c, s in results["per_category"].items()]
    parts = [f"{results['system']} on {results['split']} ({results['counts']['questions']} questions, "
             f"{results['counts']['personas']} personas)",
             markdown_table(["category", "n", "Hit@1", "Rlx-Hit@1", "Rlx-Hit@1 (20%)"], rows)]
    if results["failures"]:
        parts.append(markdown_table(["failure", "questions"], sorted(results["failures"].items())))
    att = results.get("error_attribution")
    if att and att["counts"]:
        parts.append(markdown_table(["missed: attributed to", "questions", "share of tree+retrieve+extract"],
                                    [[k, v, att["shares"].get(k, "")] for k, v in att["counts"].items()]))
    return "\n\n".join(parts)
