"""``convohub reqap execute|ask|evaluate`` over a built PerQA dataset folder.

* ``execute``: one operator tree. The tree is parsed and checked before any data is read; a rejected tree
  exits with status 2 and a one-line error. Otherwise the JSON ``{"answer": ..., "trace": [...], "error":
  ...}`` goes to stdout (exit 0, or 1 when the run failed).
* ``ask``: one question through QUD -> engine (or a baseline); prints the answer, the operator tree used
  (drawn as a tree) and the per-operator trace; ``--json`` for machine-readable output. Exit 0 when an
  answer came back, 1 when the question failed, 2 for a usage error.
* ``evaluate``: Hit@1 / Rlx-Hit@1 of a system on a split, per category, with failures and error
  attribution; writes results.json and predictions.jsonl under ``--out``. Exit 0, or 2 for a usage error;
  failed questions (a memory bomb included) are recorded as failed runs, and with ``--fail-on-error`` the
  exit status is 1 when any question failed.

* ``distill``: QUD step pairs from a teacher LLM (in-context QUD, trees kept when their answer is right),
  for ``training/reqap_qud --pairs_path``. Exit 0, 1 when no pair was kept, 2 for a usage error.
* ``expand``: new PerQA question templates written by an LLM from the seed templates, each SQL checked
  against a whitelist and run on its split's personas (:mod:`convohub.perqa.expand`); a PerQA build adds
  them with ``CONVOHUB_PERQA_TEMPLATES``. Exit 0, 1 when none was kept, 2 for a usage error.

``execute`` and ``evaluate`` run each tree/question in a worker process (:mod:`convohub.reqap.engine.worker`)
with an OS address-space limit (``--worker-memory`` MiB over the worker's own baseline) and a hard time
limit (``--worker-timeout``), so a tree that escapes the engine's own budgets ends that question only;
``--in-process`` turns this off (debugging, profiling).

LLM steps (ICL QUD, RAG, CodeGen) use ``--llm SPEC`` (``endpoint:http://host:8000/v1#model``, a URL or
``local:/path``; see :func:`convohub.llm.make_backend`), else ``CONVOHUB_LLM_BASE_URL`` /
``CONVOHUB_LLM_MODEL`` / ``CONVOHUB_LLM_CACHE_DIR`` from the environment.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from convohub.reqap.engine.executor import DEFAULT_TIME_BUDGET, PREVIEW_ITEMS, preview
from convohub.reqap.release.models import DEFAULT_HUB

__all__ = ["add_cli", "render_tree", "run_ask", "run_distill", "run_evaluate", "run_execute", "run_expand"]

_EXAMPLE = ('APPLY(l=FILTER(l=RETRIEVE(query="running workouts"), '
            'filter=lambda attr: attr["workout_type"] == "running"), fct=len)')


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``reqap`` (with ``execute``) to a ``convohub`` subparsers object; returns the ``reqap`` parser."""
    reqap = subparsers.add_parser("reqap", help="ReQAP operator trees over PerQA data",
                                  description="Run ReQAP operator trees (RETRIEVE, EXTRACT, FILTER, JOIN, ...).")
    sub = reqap.add_subparsers(dest="reqap_command", metavar="ACTION")
    ex = sub.add_parser("execute", help="execute one operator tree for one persona",
                        description=f"Execute one operator tree, e.g. --tree '{_EXAMPLE}'.")
    ex.add_argument("--dataset", type=Path, required=True, help="built PerQA dataset folder (data/observable_events)")
    ex.add_argument("--persona", required=True, help="persona id, e.g. test_persona_0")
    ex.add_argument("--tree", required=True, help="the whole tree as one nested expression")
    ex.add_argument("--reference-date", type=date.fromisoformat, default=date(2024, 11, 25),
                    help="what date.today() means (default: %(default)s)")
    ex.add_argument("--retriever", choices=["bm25", "all"], default="bm25",
                    help="bm25: sparse retrieval over verbalised events; all: every event (default: %(default)s)")
    ex.add_argument("--time-budget", type=float, default=DEFAULT_TIME_BUDGET, help="seconds per tree (default: %(default)s)")
    ex.add_argument("--no-dedup", action="store_true", help="keep events with overlapping time spans apart")
    ex.add_argument("--compact", action="store_true", help="one-line JSON")
    _add_worker(ex)
    ex.set_defaults(handler=run_execute)
    _add_ask(sub)
    _add_evaluate(sub)
    _add_distill(sub)
    _add_expand(sub)
    reqap.set_defaults(handler=lambda args: (reqap.print_help(), 2)[1])
    return reqap


def _add_worker(p: argparse.ArgumentParser) -> None:
    from convohub.reqap.engine.worker import DEFAULT_MEMORY_MB

    g = p.add_argument_group("worker limits", "each tree/question runs in a child process under these OS limits; "
                             "a question that exceeds one fails alone and the run goes on")
    g.add_argument("--worker-memory", type=int, default=DEFAULT_MEMORY_MB, metavar="MIB",
                   help="address space (RLIMIT_AS) a question may add to what its worker already holds after "
                        "loading the system and the persona; 0: no OS limit (default: %(default)s)")
    g.add_argument("--worker-timeout", type=float, default=None, metavar="SECONDS",
                   help="hard wall-clock limit per question, after which the worker is killed (default: "
                        "--time-budget plus 30 s, plus 360 s for reqap evaluate's error attribution)")
    g.add_argument("--in-process", action="store_true",
                   help="run in this process without worker or OS limits (debugging, profiling)")


def _limits(args: argparse.Namespace, extra_s: float = 0.0) -> Any:
    """The :class:`WorkerLimits` asked for on the command line, or None with --in-process."""
    if args.in_process:
        return None
    from convohub.reqap.engine.worker import WorkerLimits

    timeout = args.worker_timeout if args.worker_timeout is not None else args.time_budget + 30.0 + extra_s
    return WorkerLimits(memory_mb=args.worker_memory, timeout_s=timeout)


def run_execute(args: argparse.Namespace) -> int:
    """Handler of ``reqap execute``."""
    from convohub.reqap.engine.errors import TreeSyntaxError
    from convohub.reqap.engine.parse import parse_tree

    try:
        tree = parse_tree(args.tree)
    except TreeSyntaxError as err:
        print(f"error: rejected tree: {err}".replace("\n", " "), file=sys.stderr)
        return 2
    from functools import partial

    from convohub.reqap.components.build import execute_setup, execute_tree_task

    setup = partial(execute_setup, args.dataset, args.persona, args.retriever, args.reference_date,
                    args.time_budget, not args.no_dedup)
    limits = _limits(args)
    try:
        if limits is None:
            result = execute_tree_task(setup(), args.tree)
        else:
            from convohub.reqap.engine.errors import WorkerLimitError
            from convohub.reqap.engine.worker import Worker

            with Worker(setup, limits) as worker:
                try:
                    result = worker.run(execute_tree_task, args.tree)
                except WorkerLimitError as err:
                    result = {"answer": None, "trace": [], "error": f"WorkerLimitError: {err}", "seconds": None}
    except (FileNotFoundError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    del tree  # parsed above only to reject a bad tree before any data is read
    print(json.dumps(result, ensure_ascii=False, indent=None if args.compact else 2))
    return 0 if result["error"] is None else 1


_SYSTEM_HELP = ("reqap: QUD -> operator tree -> engine; rag: retrieve + rank, top-N events as JSON to the LLM; "
                "codegen: question + schema -> one DuckDB query over the persona's event tables (default: %(default)s)")


def _add_components(p: argparse.ArgumentParser, dataset_required: bool = True) -> None:
    p.add_argument("--dataset", type=Path, required=dataset_required,
                   help="built PerQA dataset folder (data/observable_events)")
    p.add_argument("--system", choices=["reqap", "rag", "codegen"], default="reqap", help=_SYSTEM_HELP)
    g = p.add_argument_group("components", "without these flags the trained chain runs: QUD (SFT) -> RETRIEVE "
                             "(BM25, then the patterns and events cross-encoders) -> EXTRACT, with the models of "
                             "the release in --hub")
    g.add_argument("--decomposer", default=None, metavar="SPEC",
                   help="sft:DIR (trained QUD model), icl (ICL QUD over --llm), trees:FILE (fixed trees) or gold "
                        "(ORACLE: the gold tree of the question's template) (default: the release's QUD model)")
    g.add_argument("--resample", type=int, default=0, metavar="N",
                   help="QUD (sft/icl): re-ask a step whose every answer repeats a step above it up to N more "
                        "times, sampled (the release's SFT QUD on its test sample: trees for 72%% of the questions "
                        "with 0, 81%% with 1, 91%% with 3, at 1.9x and 4x the generation time) (default: 0, the "
                        "paper's guard alone)")
    g.add_argument("--retriever", default=None, metavar="SPEC",
                   help="ce:DIR[,DIR] (trained cross-encoders), bm25, all, or oracle (ORACLE: gold-tree query "
                        "oracle); also ranks RAG's events (default: the release's two cross-encoders)")
    g.add_argument("--extractor", default=None, metavar="SPEC",
                   help="model:DIR (trained EXTRACT model) or lookup (stand-in: reads the attribute by key) "
                        "(default: the release's EXTRACT model)")
    g.add_argument("--hub", type=Path, default=DEFAULT_HUB,
                   help="local hub root of a release (`convohub release --out`) holding the trained models "
                        "(default: %(default)s)")
    g.add_argument("--namespace", default=None,
                   help="namespace of the release's models (default: convohub); when --hub lacks them they are "
                        "downloaded from the Hub repositories NAMESPACE/reqap-*")
    g.add_argument("--profile", choices=["tiny", "paper"], default=None,
                   help="which release profile's models (default: tiny if present, else paper)")
    p.add_argument("--llm", metavar="SPEC", help="LLM for icl/rag/codegen: endpoint:URL#MODEL, URL#MODEL, "
                   "local:PATH or smollm2 (the offline local model) (default: $CONVOHUB_LLM_BASE_URL)")
    p.add_argument("--llm-model", help="model name for an endpoint spec without #MODEL ($CONVOHUB_LLM_MODEL)")
    p.add_argument("--llm-cache", type=Path, help="response cache folder ($CONVOHUB_LLM_CACHE_DIR)")
    p.add_argument("--top-n", type=int, default=100,
                   help="RAG: events given to the LLM (paper: 100 for large LLMs, 10 for a 1B model)")
    p.add_argument("--icl-split", default="train", help="CodeGen: split whose gold SQL gives the 8 ICL examples")
    p.add_argument("--time-budget", type=float, default=DEFAULT_TIME_BUDGET, help="seconds per question (default: %(default)s)")


def _add_ask(sub: Any) -> None:
    p = sub.add_parser("ask", help="answer one question for one persona (answer, operator tree, trace)",
                       description="Answer one question: QUD proposes operator trees, the first that executes "
                                   "gives the answer. Example: convohub reqap ask --dataset DIR --persona "
                                   "test_persona_0 'How many hours have I spent watching TV series altogether?'")
    p.add_argument("question", help="the question, in natural language")
    p.add_argument("--persona", required=True, help="persona id, e.g. test_persona_0")
    _add_components(p)
    p.add_argument("--reference-date", type=date.fromisoformat, default=date(2024, 11, 25),
                   help="what 'today' means (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.set_defaults(handler=run_ask)


def _add_evaluate(sub: Any) -> None:
    p = sub.add_parser("evaluate", help="Hit@1 / Rlx-Hit@1 of a system on a PerQA split",
                       description="Score a system on a PerQA split with the hit_at_1 metric: overall, per "
                                   "category (ordering, grouping, temporal, aggregation, join, multi-source), "
                                   "failure counts and (reqap) error attribution to tree / retrieve / extract. "
                                   "With --compare, McNemar's test between two earlier runs instead.")
    _add_components(p, dataset_required=False)
    p.add_argument("--compare", nargs=2, type=Path, metavar=("RUN_A", "RUN_B"),
                   help="McNemar's test between two runs' per-question hits (their --out folders or "
                        "results.json files), e.g. ReQAP against a baseline; nothing is evaluated")
    p.add_argument("--split", default="test", help="split to evaluate (default: %(default)s)")
    p.add_argument("--persona", help="only this persona")
    p.add_argument("--limit", type=int, help="at most N questions")
    p.add_argument("--out", type=Path, help="folder for results.json and predictions.jsonl")
    p.add_argument("--no-attribution", action="store_true", help="skip error attribution (faster)")
    p.add_argument("--fail-on-error", action="store_true",
                   help="exit with status 1 when any question failed (a failed run is always recorded in "
                        "results.json under failures)")
    _add_worker(p)
    p.set_defaults(handler=run_evaluate)


def _resolve(args: argparse.Namespace) -> str | None:
    """Fill the component flags left out with the trained models of the release (``--hub``/``--namespace``);
    returns where they came from (None when every component was named). Raises
    :class:`~convohub.reqap.release.models.MissingRelease` saying what to build or pass."""
    used = {"reqap": ("decomposer", "retriever", "extractor"), "rag": ("retriever",)}.get(args.system, ())
    if all(getattr(args, k) is not None for k in used):
        return None
    from convohub.reqap.release.models import find_release_models

    release = find_release_models(args.hub, args.namespace, args.profile)
    for kind, spec in release.specs().items():
        if kind in used and getattr(args, kind) is None:
            setattr(args, kind, spec)
    return f"{release.source} (profile {release.profile})"


def _add_distill(sub: Any) -> None:
    p = sub.add_parser("distill", help="QUD training pairs distilled from an LLM (the paper's path)",
                       description="In-context QUD with a teacher LLM over the train/dev questions; each question's "
                                   "candidate trees are executed (BM25 + key lookup) and the trees whose answer "
                                   "matches the gold answer are kept (else within 10%%, then 20%%, then any tree "
                                   "that ran); one training pair per decomposition step, de-duplicated. The JSONL "
                                   "feeds training/reqap_qud (--pairs_path); counts go to OUT.stats.json; LLM answers "
                                   "are cached in OUT.work/llm-cache unless --llm-cache names a folder.")
    p.add_argument("--dataset", type=Path, required=True, help="built PerQA dataset folder")
    p.add_argument("--out", type=Path, required=True, help="JSONL of step pairs to write")
    p.add_argument("--splits", nargs="+", default=["train", "dev"], help="question splits (default: %(default)s)")
    _add_llm(p, "teacher LLM")
    p.add_argument("--options", type=int, default=3, help="alternatives sampled per step (default: %(default)s)")
    p.add_argument("--max-trees", type=int, default=20, help="candidate trees executed per question (default: "
                   "%(default)s)")
    p.add_argument("--max-questions", type=int, help="at most N questions (default: all)")
    p.add_argument("--time-budget", type=float, default=60.0, help="seconds per tree (default: %(default)s)")
    p.add_argument("--retrieve-out", type=Path, metavar="DIR",
                   help="also write RETRIEVE cross-encoder examples (events.jsonl, patterns.jsonl) from the kept "
                        "trees' RETRIEVE calls, gold events found by running each question's SQL (simple SQL "
                        "only) over the canonical tables")
    p.set_defaults(handler=run_distill)


def _add_llm(p: argparse.ArgumentParser, role: str) -> None:
    p.add_argument("--llm", metavar="SPEC", help=f"{role}: endpoint:URL#MODEL, URL#MODEL, local:PATH or smollm2 "
                   "(the offline local model) (default: $CONVOHUB_LLM_BASE_URL)")
    p.add_argument("--llm-model", help="model name for an endpoint spec without #MODEL ($CONVOHUB_LLM_MODEL)")
    p.add_argument("--llm-cache", type=Path, help="response cache folder ($CONVOHUB_LLM_CACHE_DIR)")


def _teacher(args: argparse.Namespace, command: str) -> Any:
    """The LLM of ``--llm`` (else the environment's endpoint); a ValueError saying what to pass when none."""
    from convohub.llm import backend_from_env, make_backend

    if args.llm:
        return make_backend(args.llm, model=args.llm_model, cache_dir=args.llm_cache)
    backend = backend_from_env(**({"cache_dir": args.llm_cache} if args.llm_cache else {}))
    if backend is None:
        raise ValueError(f"{command} needs an LLM: --llm endpoint:URL#MODEL (or CONVOHUB_LLM_BASE_URL), "
                         "or --llm smollm2 for the offline local model")
    return backend


def _cached_teacher(args: argparse.Namespace, command: str) -> Any:
    """:func:`_teacher` behind a response cache: ``--llm-cache`` (or ``$CONVOHUB_LLM_CACHE_DIR``) when named,
    else ``OUT.work/llm-cache`` beside the output, so a killed run repeats no finished LLM call."""
    from convohub.stages import cached

    return cached(_teacher(args, command), args.out.with_name(args.out.name + ".work"))


def _add_expand(sub: Any) -> None:
    p = sub.add_parser("expand", help="new PerQA question templates written by an LLM (the paper's path)",
                       description="Show an LLM the columns of one canonical table and up to three seed templates of "
                                   "one split that read it, and ask for a new question with its DuckDB SQL. A "
                                   "proposal is kept when its SQL is one SELECT over canonical tables calling only "
                                   "whitelisted functions, runs within its time and memory limits with external "
                                   "access off, answers (non-empty) on the split's personas of a default PerQA "
                                   "build, and repeats no question or SQL; it joins its seeds' split. Add the "
                                   "kept templates to a build with CONVOHUB_PERQA_TEMPLATES=OUT convohub datasets "
                                   "build perqa. Rejections are counted by reason in OUT.report.json; LLM answers "
                                   "are cached in OUT.work/llm-cache unless --llm-cache names a folder, so a killed "
                                   "run repeats no finished call.")
    p.add_argument("--out", type=Path, required=True, help="JSONL of kept templates to write")
    p.add_argument("--per-split", type=int, default=40, help="requests per split (default: %(default)s)")
    p.add_argument("--splits", nargs="+", default=["train", "dev"], choices=["train", "dev", "test"],
                   help="splits to grow (default: %(default)s)")
    p.add_argument("--attempts", type=int, default=2, help="LLM calls per request at most (default: %(default)s)")
    p.add_argument("--personas", type=int, default=2, help="personas per split a proposal runs on (default: "
                   "%(default)s)")
    p.add_argument("--seconds", type=float, default=5.0, help="time limit of one SQL run (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="PerQA build seed the checks use (default: %(default)s)")
    _add_llm(p, "LLM that writes the templates")
    p.set_defaults(handler=run_expand)


def run_expand(args: argparse.Namespace) -> int:
    """Handler of ``reqap expand``."""
    from convohub.perqa.expand import expand_templates, write_templates
    from convohub.perqa.generate import PerQAConfig, persona_databases
    from convohub.perqa.questions import split_templates
    from convohub.perqa.templates import TEMPLATES

    if args.per_split < 1 or args.attempts < 1 or args.personas < 1:
        print("error: --per-split, --attempts and --personas must be at least 1", file=sys.stderr)
        return 2
    databases: dict[str, list[tuple[str, Any]]] = {}
    try:
        backend = _cached_teacher(args, "reqap expand")
        databases = persona_databases(PerQAConfig(seed=args.seed), tuple(args.splits), args.personas)
        kept, report = expand_templates(TEMPLATES, split_templates(TEMPLATES, args.seed), databases, backend,
                                        per_split=args.per_split, splits=tuple(args.splits), attempts=args.attempts,
                                        seconds=args.seconds, seed=args.seed)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        for db in (db for dbs in databases.values() for _, db in dbs):
            db.close()
    from convohub.hub import atomic_write_text

    write_templates(args.out, kept)
    atomic_write_text(args.out.with_suffix(".report.json"), json.dumps(report, indent=2) + "\n")
    print(f"{report['requests']} requests, {report['calls']} calls: kept {report['kept_total']} "
          f"({report['kept'] or 'none'}); rejected {report['rejections'] or 'none'}; {report['seconds']} s -> "
          f"{args.out} (LLM: {report['made_by']})")
    return 0 if kept else 1


def run_distill(args: argparse.Namespace) -> int:
    """Handler of ``reqap distill``."""
    from convohub.reqap.components.qud import ICLDecomposer
    from convohub.reqap.data.qud import distill_pairs, write_pairs

    try:
        backend = _cached_teacher(args, "reqap distill")
        decomposer = ICLDecomposer(backend, n_options=args.options)
        kept: dict[str, list[str]] = {}
        pairs, stats = distill_pairs(decomposer, args.dataset, tuple(args.splits), max_questions=args.max_questions,
                                     max_trees_per_question=args.max_trees, time_budget=args.time_budget,
                                     kept_trees=kept)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    path = write_pairs(pairs, args.out, stats)
    if args.retrieve_out:
        print(_write_retrieve_examples(args.dataset, tuple(args.splits), kept, args.retrieve_out))
    kept = {k: v for k, v in stats.items() if k.startswith("kept_")}
    print(f"{stats.get('questions', 0)} questions: kept {kept or 'none'}, no tree {stats.get('no_tree', 0)}, "
          f"no tree ran {stats.get('no_tree_ran', 0)}; {len(pairs)} step pairs -> {path} (teacher: "
          f"{getattr(backend, 'name', type(backend).__name__)})")
    return 0 if pairs else 1


def _write_retrieve_examples(dataset: Path, splits: tuple[str, ...], kept: dict[str, list[str]], out: Path) -> str:
    """RETRIEVE examples of the distilled trees (:func:`convohub.reqap.data.retrieve.sql_calls`) as JSONL."""
    import itertools

    from convohub.hub import atomic_write_text, dump_json
    from convohub.reqap.data.retrieve import derive, personas_with_questions, sql_calls

    personas = itertools.chain.from_iterable(personas_with_questions(dataset, s) for s in splits)
    data = derive(personas, calls=sql_calls(kept))
    for name, examples in (("events", data.events), ("patterns", data.patterns)):
        atomic_write_text(out / f"{name}.jsonl", "".join(
            json.dumps({"query": e.query, "text": e.text, "label": e.label, "kind": e.kind}, ensure_ascii=False)
            + "\n" for e in examples))
    atomic_write_text(out / "stats.json", dump_json(data.stats))
    return (f"RETRIEVE examples: {len(data.events)} event, {len(data.patterns)} pattern examples from "
            f"{data.stats.get('calls_used', 0)} calls -> {out}")


def _system_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`convohub.reqap.components.build.build_system` from the parsed flags."""
    return {"system": args.system, "dataset": args.dataset, "decomposer": args.decomposer,
            "retriever": args.retriever, "extractor": args.extractor, "llm": args.llm, "llm_model": args.llm_model,
            "llm_cache": args.llm_cache, "top_n": args.top_n, "icl_split": args.icl_split,
            "time_budget": args.time_budget, "resample": args.resample}


def _components(args: argparse.Namespace, source: str | None, llm: str | None = None) -> dict[str, Any]:
    from convohub.reqap.components.build import describe_components

    return describe_components(args.system, decomposer=args.decomposer, retriever=args.retriever,
                               extractor=args.extractor, llm=llm, source=source)


def _build(args: argparse.Namespace) -> tuple[Any, Any]:
    """(system, on_persona callback) from the parsed flags; raises ValueError/FileNotFoundError on bad specs."""
    from convohub.reqap.components.build import build_system

    return build_system(**_system_options(args))


def render_tree(tree: str | None) -> str:
    """An operator tree as an indented outline, one operator per line (children below their parent)."""
    if not tree:
        return "(no tree)"
    from convohub.reqap.engine.parse import parse_tree, tree_outline

    return "\n".join("  " * depth + line for depth, line in tree_outline(parse_tree(tree)))


def answer_line(answer: Any) -> str:
    """The printed answer: whole when short, else a list's first items and how many more (a bare RETRIEVE
    answers with every event it found; ``--json`` prints all of it)."""
    if isinstance(answer, list) and len(answer) > PREVIEW_ITEMS:
        return f"answer: {preview(answer)} (the first {PREVIEW_ITEMS} of {len(answer)}; --json prints all)"
    return f"answer: {json.dumps(answer, ensure_ascii=False, default=str)}"


def run_ask(args: argparse.Namespace) -> int:
    """Handler of ``reqap ask``."""
    from convohub.reqap.components.build import header
    from convohub.reqap.data.perqa import load_persona

    try:
        source = _resolve(args)
        system, on_persona = _build(args)
        store, questions, _ = load_persona(args.dataset, args.persona, canonical=False)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    on_persona(args.persona, questions)
    result = system.answer(args.question, store, args.reference_date)
    components = _components(args, source, getattr(getattr(system, "backend", None), "name", None))
    if args.json:
        print(json.dumps({**result.to_dict(), "components": components}, ensure_ascii=False, indent=2, default=str))
        return 0 if result.error is None else 1
    print(answer_line(result.answer))
    if result.error:
        print(f"error: {result.error}")
    if args.system == "reqap":
        print(f"trees tried: {len(result.tried)}\noperator tree:\n{render_tree(result.tree)}\ntrace:")
        for t in result.trace:
            print(f"  {'  ' * t['depth']}{t['operator']:10s} in={t['input_sizes']} out={t['output_size']} "
                  f"{t['seconds']:.4f}s{' (cached)' if t['cached'] else ''}")
            if t.get("output_preview"):
                print(f"  {'  ' * t['depth']}{'':10s} -> {t['output_preview'][:160]}")
    else:
        print(f"sql: {result.sql}" if args.system == "codegen" else f"events given: {len(result.event_ids)}")
        print(f"llm output: {result.output.strip()[:500]}")
    print(f"components:\n  {header(components).replace(chr(10), chr(10) + '  ')}")
    return 0 if result.error is None else 1


def run_evaluate(args: argparse.Namespace) -> int:
    """Handler of ``reqap evaluate``."""
    from functools import partial

    from convohub.reqap.components.build import build_system, header
    from convohub.reqap.release.evaluation import compare_runs, evaluate, format_comparison, format_results

    if args.compare:
        try:
            print(format_comparison(compare_runs(*args.compare)))
        except (ValueError, FileNotFoundError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    if args.dataset is None:
        print("error: reqap evaluate needs --dataset (or --compare RUN_A RUN_B)", file=sys.stderr)
        return 2
    attribution = not args.no_attribution and args.system == "reqap"
    limits = _limits(args, extra_s=360.0 if attribution else 0.0)
    try:
        source = _resolve(args)
        describe = _components(args, source)
        print(f"{'ORACLE ' if describe['oracle'] else ''}{args.system} on {args.split}\n{header(describe)}\n",
              flush=True)
        if limits is None:
            system, on_persona = _build(args)
            describe["llm"] = getattr(getattr(system, "backend", None), "name", None)
            results = evaluate(args.dataset, args.split, args.system, system, limit=args.limit,
                               persona=args.persona, out_dir=args.out, attribution=not args.no_attribution,
                               describe=describe, on_persona=on_persona)
        else:
            results = evaluate(args.dataset, args.split, args.system, None, limit=args.limit, persona=args.persona,
                               out_dir=args.out, attribution=not args.no_attribution, describe=describe,
                               build=partial(build_system, **_system_options(args)), isolation=limits)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(format_results(results))
    if args.out:
        print(f"\nwrote {args.out / 'results.json'} and {args.out / 'predictions.jsonl'}")
    return 1 if args.fail_on_error and results["counts"]["failed_runs"] else 0
