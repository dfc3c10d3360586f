"""End-to-end PerQA evaluation of ReQAP and the baselines: Hit@1, Rlx-Hit@1, per category, error attribution.

Scores come from :func:`convohub.metrics.hit_at_1` (the function behind ``evaluation/hit_at_1``): every
answer is JSON-encoded, a failed question is ``None`` (never a hit). Rlx-Hit@1 uses 10 % numeric slack, the
20 % variant is reported too. Per-category rows count a question once in each of its categories.

Error attribution (ReQAP only; for questions whose template has a gold tree and that the system misses,
strict Hit@1). With the *oracle* retriever (:func:`convohub.reqap.data.gold.oracle_retriever`) and the
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

Isolation: with ``isolation`` (a :class:`~convohub.reqap.engine.worker.WorkerLimits`) and ``build`` (a picklable
callable returning ``(answerer, on_persona)``, e.g. a ``functools.partial`` of
:func:`convohub.reqap.components.build.build_system`), every question -- its answer and its error attribution,
which runs the predicted tree again -- is handled in a worker process under an OS memory limit and a hard
time limit. A question that blows either ends as a failed run (``WorkerLimitError``) and the evaluation
goes on with the next one in a fresh worker.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from convohub.jsonlines import jsonl_records
from convohub.metrics.hit_at_1 import hit_at_1, is_hit
from convohub.reqap.data.perqa import load_persona, persona_ids
from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.executor import REFERENCE_DATE

if TYPE_CHECKING:  # the worker module is imported only when isolation is asked for
    from convohub.reqap.engine.worker import WorkerLimits

__all__ = ["ATTRIBUTION_LABELS", "PREDICTIONS_FILE", "SYSTEMS", "attribute_error", "compare_runs", "evaluate", "format_comparison",
           "format_results", "mcnemar"]

SYSTEMS = ("reqap", "rag", "codegen")
#: the per-question file of an evaluation folder (beside ``results.json``), one JSON line per question
PREDICTIONS_FILE = "predictions.jsonl"
ATTRIBUTION_LABELS = ("tree", "retrieve", "extract", "gold_tree_misses")


class Answerer(Protocol):
    """Anything with ``answer(question, store, reference_date)`` returning an object with ``answer`` and
    ``error`` (and ``to_dict()``): :class:`~convohub.reqap.components.pipeline.ReQAP` and the baselines."""

    def answer(self, question: str, store: EventStore, reference_date: date) -> Any: ...


def _encode(answer: Any, failed: bool) -> str | None:
    return None if failed else json.dumps(answer, ensure_ascii=False, default=str)


def attribute_error(question: dict[str, Any], predicted_tree: str | None, store: EventStore, index: Any,
                    retriever: Any, reference_date: date) -> str | None:
    """The component blamed for a missed question (see the module docstring); None without a gold tree."""
    from convohub.reqap.components.extract import DirectExtractor
    from convohub.reqap.data.gold import gold_tree_or_none, oracle_retriever
    from convohub.reqap.engine.executor import Executor

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


def _question_fields(q: dict[str, Any], pid: str) -> dict[str, Any]:
    """The fields of a predictions.jsonl line that describe the question, answered or not."""
    return {"id": q["id"], "persona_id": pid, "question": q["question"], "template_id": q.get("template_id"),
            "categories": list(q.get("categories") or []), "gold": q["answers"]}


def _record(system: str, answerer: Answerer, store: EventStore, index: Any, q: dict[str, Any], pid: str,
            attribution: bool) -> dict[str, Any]:
    """One question answered and scored: the line of predictions.jsonl (see :func:`evaluate`)."""
    ref_date = date.fromisoformat(q["reference_date"]) if q.get("reference_date") else REFERENCE_DATE
    res = answerer.answer(q["question"], store, ref_date)
    failed = res.error is not None
    pred = _encode(res.answer, failed)
    refs = [json.dumps(g, ensure_ascii=False) for g in q["answers"]]
    hit = is_hit(pred, refs)
    rec = {**_question_fields(q, pid), "answer": res.answer, "prediction": pred, "hit": hit,
           "rlx_hit": is_hit(pred, refs, relax=0.1), "error": res.error, "seconds": round(getattr(res, "seconds", 0.0), 4)}
    if system == "reqap":
        rec["tree"] = getattr(res, "tree", None)
        rec["tried"] = list(getattr(res, "tried", []))  # each tree with its error: why a question failed
        if attribution and not hit:
            rec["attribution"] = attribute_error(q, rec["tree"], store, index, answerer.retriever,  # type: ignore[attr-defined]
                                                 ref_date)
    else:
        rec["sql"] = getattr(res, "sql", None)
        rec["output"] = getattr(res, "output", "")
    return rec


def _failed_record(system: str, q: dict[str, Any], pid: str, error: str) -> dict[str, Any]:
    """The record of a question whose worker was stopped (memory or time limit): a failed run, no answer."""
    rec = {**_question_fields(q, pid), "answer": None, "prediction": None, "hit": False, "rlx_hit": False,
           "error": error, "seconds": None}
    if system == "reqap":
        rec.update(tree=None, tried=None, attribution=None)
    return rec


def _worker_setup(build: Callable[[], tuple[Answerer, Callable[[str, list[dict[str, Any]]], None]]],
                  dataset_dir: Path, canonical: bool) -> dict[str, Any]:
    """Worker state for isolated evaluation: the system, built once, and the current persona."""
    answerer, on_persona = build()
    return {"answerer": answerer, "on_persona": on_persona, "dataset": dataset_dir, "canonical": canonical,
            "pid": None, "store": None, "index": None}


def _worker_question(state: dict[str, Any], system: str, pid: str, q: dict[str, Any],
                     attribution: bool) -> dict[str, Any]:
    """Task: load the persona when it changes, then :func:`_record` for one question (in the worker)."""
    if state["pid"] != pid:
        state["store"] = state["index"] = None  # drop the previous persona before loading the next
        store, questions, index = load_persona(state["dataset"], pid, canonical=state["canonical"])
        state["on_persona"](pid, questions)
        state.update(pid=pid, store=store, index=index)
    return _record(system, state["answerer"], state["store"], state["index"], q, pid, attribution)


def _worker_llm_name(state: dict[str, Any]) -> str | None:
    """Task: the name of the system's LLM backend (for ``components`` in results.json)."""
    return getattr(getattr(state["answerer"], "backend", None), "name", None)


def _worker_stats(state: dict[str, Any]) -> dict[str, Any]:
    """Task: the baseline's counters (RAG/CodeGen ``stats``), read before the worker closes."""
    return dict(getattr(state["answerer"], "stats", None) or {})


def evaluate(dataset_dir: str | Path, split: str, system: str, answerer: Answerer | None, *,
             limit: int | None = None, persona: str | None = None, question_ids: Collection[str] | None = None,
             out_dir: str | Path | None = None, attribution: bool = True, describe: dict[str, Any] | None = None,
             on_persona: Callable[[str, list[dict[str, Any]]], None] | None = None,
             build: Callable[[], tuple[Answerer, Callable[[str, list[dict[str, Any]]], None]]] | None = None,
             isolation: WorkerLimits | None = None) -> dict[str, Any]:
    """Answer every question of ``split`` (or of one ``persona``, or those in ``question_ids``; at most
    ``limit``) and score them.

    Returns ``{"system", "split", "n", "hit@1", "rlx_hit@1", "rlx_hit@1_20", "per_category", "counts",
    "failures", "error_attribution", "components"}``; with ``out_dir`` also writes ``results.json`` and
    ``predictions.jsonl`` (one line per question: id, question, categories, gold, answer, hit, error,
    tree/sql, attribution). ``on_persona(persona_id, questions)`` lets a caller prepare per-persona state
    (e.g. register the questions with the gold-tree oracle decomposer). With ``isolation`` the questions
    run in a worker that builds its own system with ``build`` (``answerer`` and ``on_persona`` are then
    unused; see the module docstring).
    """
    from contextlib import nullcontext

    from tqdm.auto import tqdm

    from convohub.perqa.templates import CATEGORIES

    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; expected one of {SYSTEMS}")
    if isolation is not None and build is None:
        raise ValueError("isolation needs build, the callable that makes the system inside the worker")
    if isolation is None and answerer is None:
        raise ValueError("evaluate needs an answerer (or build with isolation)")
    wanted = None if question_ids is None else set(question_ids)
    if wanted is not None:  # only the personas that hold a wanted question are loaded
        from convohub.reqap.data.perqa import load_questions

        known = {q["id"]: q["persona_id"] for q in load_questions(dataset_dir, split)}
        if missing := wanted - known.keys():
            raise ValueError(f"{dataset_dir}: split {split!r} has no question ids {sorted(missing)[:5]} (ids come "
                             "from the questions config)")
        holders = {known[i] for i in wanted}
        pids = [p for p in persona_ids(dataset_dir, split) if p in holders and (persona is None or p == persona)]
    else:
        pids = [persona] if persona else persona_ids(dataset_dir, split)
    canonical = attribution and system == "reqap"
    worker: Any = None
    if isolation is not None:
        from functools import partial

        from convohub.reqap.engine.errors import WorkerLimitError
        from convohub.reqap.engine.worker import Worker

        worker = Worker(partial(_worker_setup, build, Path(dataset_dir), canonical), isolation)
    records: list[dict[str, Any]] = []
    remaining = limit
    with worker if worker is not None else nullcontext():
        if worker is not None and describe is not None and describe.get("llm") is None:
            describe = {**describe, "llm": worker.run(_worker_llm_name)}
        for pid in pids:
            if remaining is not None and remaining <= 0:
                break
            if worker is not None:  # the worker loads the events; here only the questions are needed
                from convohub.perqa.dataset import questions_from_dataset

                questions = questions_from_dataset(Path(dataset_dir), pid)
            else:
                store, questions, index = load_persona(dataset_dir, pid, canonical=canonical)
            if wanted is not None:
                questions = [q for q in questions if q["id"] in wanted]
            questions = questions[:remaining] if remaining is not None else questions
            if remaining is not None:
                remaining -= len(questions)
            if worker is None and on_persona is not None:
                on_persona(pid, questions)
            for q in tqdm(questions, desc=f"{system} {pid}", leave=False):
                if worker is None:
                    records.append(_record(system, answerer, store, index, q, pid, attribution))  # type: ignore[arg-type]
                    continue
                try:
                    records.append(worker.run(_worker_question, system, pid, q, attribution))
                except WorkerLimitError as err:
                    records.append(_failed_record(system, q, pid, f"WorkerLimitError: {err}"))
        stats = worker.run(_worker_stats) if worker is not None else getattr(answerer, "stats", None)
    if not records:
        raise ValueError(f"{dataset_dir}: no questions for split {split!r}" + (f", persona {persona}" if persona else ""))
    failures = Counter(str(r["error"]).split(":", 1)[0] for r in records if r["error"] is not None)
    attribution_counts = Counter((r.get("attribution") or "no_gold_tree") for r in records
                                 if system == "reqap" and attribution and not r["hit"]
                                 and not str(r["error"] or "").startswith("WorkerLimitError"))
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
        "oracle": bool((describe or {}).get("oracle")),
    }
    if wanted is not None:
        results["question_ids"] = sorted(wanted)
    if isolation is not None:
        results["isolation"] = {"worker_memory_mb": isolation.memory_mb, "worker_timeout_s": isolation.timeout_s}
    if stats:
        results["baseline_stats"] = dict(stats)
    if out_dir is not None:
        from convohub.hub import atomic_write_text, dump_json

        out = Path(out_dir)
        atomic_write_text(out / "results.json", dump_json(results))
        atomic_write_text(out / PREDICTIONS_FILE,
                          "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records))
    return results


def format_results(results: dict[str, Any]) -> str:
    """The printed summary: overall and per-category scores, failures, error attribution (Markdown)."""
    from convohub.hub import markdown_table
    from convohub.reqap.components.build import header

    rows = [["all", results["n"], results["hit@1"], results["rlx_hit@1"], results["rlx_hit@1_20"]]]
    rows += [[c, s["n"], s["hit@1"], s["rlx_hit@1"], s["rlx_hit@1_20"]] for c, s in results["per_category"].items()]
    components = results.get("components") or {}
    title = (f"{'ORACLE ' if components.get('oracle') else ''}{results['system']} on {results['split']} "
             f"({results['counts']['questions']} questions, {results['counts']['personas']} personas)")
    parts = [title + ("\n" + header(components) if components.get("labels") or components.get("llm") else ""),
             markdown_table(["category", "n", "Hit@1", "Rlx-Hit@1", "Rlx-Hit@1 (20%)"], rows)]
    if results["failures"]:
        parts.append(markdown_table(["failure", "questions"], sorted(results["failures"].items())))
    att = results.get("error_attribution")
    if att and att["counts"]:
        parts.append(markdown_table(["missed: attributed to", "questions", "share of tree+retrieve+extract"],
                                    [[k, v, att["shares"].get(k, "")] for k, v in att["counts"].items()]))
    return "\n\n".join(parts)


# -- significance -------------------------------------------------------------------------------------------
def mcnemar(hits_a: Sequence[bool], hits_b: Sequence[bool]) -> dict[str, Any]:
    """McNemar's test of two systems' per-question hits on the same questions (the paper's significance test).

    Only discordant questions count: ``only_a`` (A hit, B missed) and ``only_b``. ``p_value`` is the exact
    two-sided binomial test of ``only_a`` among ``only_a + only_b`` at 0.5 (scipy), right for the few hundred
    questions of PerQA; ``chi2``/``chi2_p_value`` are the continuity-corrected chi-square variant. No
    discordant question gives p = 1.

    >>> r = mcnemar([True, True, True, False, True, True], [False, False, True, False, False, False])
    >>> (r["only_a"], r["only_b"], round(r["p_value"], 4))
    (4, 0, 0.125)
    """
    from scipy.stats import binomtest, chi2

    if len(hits_a) != len(hits_b):
        raise ValueError(f"McNemar needs the same questions: {len(hits_a)} vs {len(hits_b)} results")
    pairs = list(zip(map(bool, hits_a), map(bool, hits_b), strict=True))
    only_a = sum(a and not b for a, b in pairs)
    only_b = sum(b and not a for a, b in pairs)
    discordant = only_a + only_b
    stat = (abs(only_a - only_b) - 1) ** 2 / discordant if discordant else 0.0
    return {"n": len(pairs), "both": sum(a and b for a, b in pairs), "only_a": only_a, "only_b": only_b,
            "neither": sum(not a and not b for a, b in pairs),
            "p_value": float(binomtest(only_a, discordant, 0.5).pvalue) if discordant else 1.0,
            "chi2": float(stat), "chi2_p_value": float(chi2.sf(stat, 1)) if discordant else 1.0,
            "method": "exact binomial (two-sided) on discordant questions"}


def _predictions(path: str | Path) -> tuple[dict[str, Any], dict[str, bool]]:
    """(results.json, question id -> hit) of an evaluation folder, its results.json or its predictions.jsonl."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    predictions = folder / PREDICTIONS_FILE
    if not predictions.is_file():
        raise FileNotFoundError(f"{predictions} not found: give the --out folder of a `reqap evaluate` run (or "
                                "its results.json)")
    results_file = folder / "results.json"
    results = json.loads(results_file.read_text(encoding="utf-8")) if results_file.is_file() else {}
    hits = {}
    for where, record in jsonl_records(predictions, expected="one prediction of `reqap evaluate`"):
        if not isinstance(record, dict) or "id" not in record or "hit" not in record:
            raise ValueError(f"{where}: no 'id'/'hit' (not written by `reqap evaluate`)")
        hits[str(record["id"])] = bool(record["hit"])
    return results, hits


def compare_runs(run_a: str | Path, run_b: str | Path) -> dict[str, Any]:
    """McNemar's test between two ``reqap evaluate`` runs, paired by question id (questions of one run only
    are left out and counted)."""
    results_a, hits_a = _predictions(run_a)
    results_b, hits_b = _predictions(run_b)
    shared = sorted(set(hits_a) & set(hits_b))
    if not shared:
        raise ValueError(f"{run_a} and {run_b} share no question ids: were they run on the same split?")

    def name(results: dict[str, Any], run: str | Path) -> str:
        components = results.get("components") or {}
        return f"{'ORACLE ' if components.get('oracle') else ''}{results.get('system', Path(run).name)}"

    test = mcnemar([hits_a[i] for i in shared], [hits_b[i] for i in shared])
    return {"a": {"run": str(run_a), "system": name(results_a, run_a),
                  "hit@1": sum(hits_a[i] for i in shared) / len(shared)},
            "b": {"run": str(run_b), "system": name(results_b, run_b),
                  "hit@1": sum(hits_b[i] for i in shared) / len(shared)},
            "only_in_one_run": len(set(hits_a) ^ set(hits_b)), **test}


def format_comparison(comparison: dict[str, Any]) -> str:
    """The printed McNemar table of :func:`compare_runs`."""
    from convohub.hub import markdown_table

    a, b = comparison["a"], comparison["b"]
    rows = [[f"A: {a['system']}", a["hit@1"]], [f"B: {b['system']}", b["hit@1"]]]
    return "\n\n".join([
        f"McNemar's test on {comparison['n']} shared questions ({comparison['method']})",
        markdown_table(["run", "Hit@1"], rows),
        markdown_table(["both hit", "only A", "only B", "neither", "p-value", "chi2 (corrected)", "chi2 p-value"],
                       [[comparison["both"], comparison["only_a"], comparison["only_b"], comparison["neither"],
                         comparison["p_value"], comparison["chi2"], comparison["chi2_p_value"]]])])
