"""ReQAP operator engine vs DuckDB on the same PerQA questions.

Workload: the largest persona (most observable events) of the default-size PerQA
(``generate_perqa(PerQAConfig())``; a smaller config is used, and said, if generating takes over 30 s).
Questions are instantiated for that persona from every template with a gold tree
(:mod:`convohub.reqap.data.gold`): all bindings of each template's bind query, taken round-robin over
templates so every template is represented, questions with an empty/zero gold answer dropped (as PerQA
does), until there are ``N_QUESTIONS``. If the persona has fewer distinct questions, the list is repeated
(each repeat re-runs the same question; the count of distinct ones is printed).

Engine side: the gold tree of each question run by ``Executor`` (oracle retriever, lookup extractor,
fresh per-question cache) over the persona's observable events. DuckDB side: the question's gold SQL
(``gold_answers``: CURRENT_DATE substitution, LIMIT-1 tie rule) over the canonical tables. Setup (event
store + oracle index vs. DuckDB views) is timed separately. Two passes each: the first is cold (the event
store types events lazily), the second warm. Peak memory: ``tracemalloc`` over one engine pass (Python
allocations) and the process's max RSS. Hit@1 compares engine answers with the DuckDB gold.

The engine runs as ``reqap`` runs it: the per-question memory accounting on (``max_alloc``, every value
charged) and the JOIN output cap. Target: the warm pass within 4x DuckDB (issue 12).

Run: ``python benchmarks/bench_engine.py [--profile]`` (about 1-2 minutes on two CPU cores, most of it
generating PerQA); ``--profile`` adds a cProfile of one engine pass (also done automatically when the engine
is over the target).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import sys
import time
import tracemalloc
from collections import defaultdict
from typing import Any

from convohub.metrics import is_hit
from convohub.perqa import PerQAConfig, connect, generate_perqa, gold_answers
from convohub.perqa.questions import bindings, instantiate, is_empty_answer
from convohub.perqa.templates import TEMPLATES
from convohub.reqap import DirectExtractor, EventStore, Executor
from convohub.reqap.data.gold import GOLD_TREES, OracleIndex, gold_tree, oracle_retriever, visible_canonical

N_QUESTIONS = 200
MAX_GENERATION_SECONDS = 30.0
TARGET_RATIO = 4.0


def load_persona() -> tuple[Any, str]:
    """The largest persona of the default PerQA (or of a smaller one when generation is too slow)."""
    start = time.perf_counter()
    data = generate_perqa(PerQAConfig())
    took = time.perf_counter() - start
    how = f"default PerQAConfig() ({len(data.personas)} personas) generated in {took:.1f} s"
    if took > MAX_GENERATION_SECONDS:
        small = PerQAConfig(n_personas=6)
        data = generate_perqa(small)
        how += f" > {MAX_GENERATION_SECONDS:.0f} s, so using PerQAConfig(n_personas=6) instead"
    persona = max(data.personas, key=lambda p: len(p.observable))
    return persona, how


def make_workload(persona: Any, con: Any, seed: int = 0) -> tuple[list[dict[str, Any]], int]:
    """N_QUESTIONS questions (round-robin over gold templates; repeated if too few) and the distinct count."""
    per_template: list[list[dict[str, Any]]] = []
    for template in TEMPLATES:
        if template.template_id not in GOLD_TREES:
            continue
        qs = []
        for binding in bindings(template, con, seed, persona.persona_id, max_instances=10**6):
            question, sql = instantiate(template, binding)
            answers = gold_answers(con, sql)
            if not is_empty_answer(answers):
                qs.append({"template_id": template.template_id, "question": question, "sql_query": sql,
                           "answers": answers})
        if qs:
            per_template.append(qs)
    distinct: list[dict[str, Any]] = []
    depth = 0
    while len(distinct) < N_QUESTIONS and any(depth < len(qs) for qs in per_template):
        distinct += [qs[depth] for qs in per_template if depth < len(qs)]
        depth += 1
    distinct = distinct[:N_QUESTIONS]
    workload = [distinct[i % len(distinct)] for i in range(N_QUESTIONS)]
    return workload, len(distinct)


def run_engine(store: EventStore, index: OracleIndex, trees: list[str]) -> tuple[list[Any], list[float]]:
    retriever, extractor = oracle_retriever(index), DirectExtractor()
    answers, times = [], []
    for tree in trees:
        executor = Executor(store, retriever=retriever, extractor=extractor)
        start = time.perf_counter()
        res = executor.execute(tree)
        times.append(time.perf_counter() - start)
        answers.append(res.answer if res.ok else None)
    return answers, times


def run_duckdb(con: Any, sqls: list[str]) -> tuple[list[list[Any]], list[float]]:
    answers, times = [], []
    for sql in sqls:
        start = time.perf_counter()
        answers.append(gold_answers(con, sql))
        times.append(time.perf_counter() - start)
    return answers, times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile one engine pass")
    args = parser.parse_args(argv)

    persona, how = load_persona()
    print(f"data: {how}")
    print(f"persona: {persona.persona_id}: {len(persona.observable)} observable, {len(persona.canonical)} "
          "canonical events")

    start = time.perf_counter()
    con = connect(persona.canonical)
    t_setup_db = time.perf_counter() - start
    start = time.perf_counter()
    store = EventStore.from_records(persona.observable)
    index = OracleIndex(persona.observable, persona.canonical)
    t_setup_engine = time.perf_counter() - start

    workload, n_distinct = make_workload(persona, con)
    trees = [gold_tree(q) or "" for q in workload]
    sqls = [q["sql_query"] for q in workload]
    n_templates = len({q["template_id"] for q in workload})
    print(f"workload: {len(workload)} questions ({n_distinct} distinct, {n_templates} of {len(GOLD_TREES)} "
          f"gold templates; repeats: {len(workload) - n_distinct})")

    passes = []
    for _ in range(2):
        eng_answers, eng_times = run_engine(store, index, trees)
        db_answers, db_times = run_duckdb(con, sqls)
        passes.append((sum(eng_times), sum(db_times)))
    print(f"setup: engine (event store + oracle index) {t_setup_engine * 1000:.0f} ms, "
          f"DuckDB (views) {t_setup_db * 1000:.0f} ms")
    for name, (te, td) in zip(("cold", "warm"), passes, strict=True):
        print(f"{name} pass: engine {te:.3f} s, DuckDB {td:.3f} s, ratio engine/DuckDB {te / td:.2f}x")
    ratio = passes[1][0] / passes[1][1]

    visible = connect(visible_canonical(persona.canonical, persona.observable))
    hits = [is_hit(a, q["answers"]) for a, q in zip(eng_answers, workload, strict=True)]
    vis_hits = [h or is_hit(a, gold_answers(visible, q["sql_query"]))
                for h, a, q in zip(hits, eng_answers, workload, strict=True)]
    agree = sum(d == q["answers"] for d, q in zip(db_answers, workload, strict=True))
    print(f"Hit@1 engine vs DuckDB gold: {sum(hits) / len(hits):.3f} ({sum(hits)}/{len(hits)}); "
          f"vs gold over lookup-visible events (verbalised streams/purchases/workouts removed): "
          f"{sum(vis_hits) / len(vis_hits):.3f}; DuckDB re-run agrees with stored gold: {agree}/{len(workload)}")
    misses = defaultdict(int)
    for h, q in zip(hits, workload, strict=True):
        if not h:
            misses[q["template_id"]] += 1
    if misses:
        print("  misses by template (lookup extractor cannot read text-only events):",
              ", ".join(f"{k} {v}" for k, v in sorted(misses.items(), key=lambda kv: -kv[1])))

    by_template: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for q, te, td in zip(workload, eng_times, db_times, strict=True):
        row = by_template[q["template_id"]]
        row[0] += te
        row[1] += td
        row[2] += 1
    print("slowest templates (warm, engine ms/question, DuckDB ms/question):")
    for tid, (te, td, n) in sorted(by_template.items(), key=lambda kv: -kv[1][0] / kv[1][2])[:8]:
        print(f"  {tid:32s} {te / n * 1000:7.2f} {td / n * 1000:7.2f}")

    tracemalloc.start()
    run_engine(store, index, trees)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_mb = rss / 1024 / 1024 if sys.platform == "darwin" else rss / 1024
    print(f"memory: engine pass peak Python allocations {peak / 1e6:.1f} MB (tracemalloc); "
          f"process max RSS {rss_mb:.0f} MB")
    verdict = "within" if ratio <= TARGET_RATIO else "NOT within"
    print(f"result: engine is {ratio:.2f}x DuckDB (warm) - {verdict} the {TARGET_RATIO:.0f}x target")

    if args.profile or ratio > TARGET_RATIO:
        profiler = cProfile.Profile()
        profiler.enable()
        run_engine(store, index, trees)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print("cProfile of one engine pass (by own time):")
        print("\n".join(out.getvalue().splitlines()[:40]))


if __name__ == "__main__":
    main()
