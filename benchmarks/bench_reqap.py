"""Seconds per question of ReQAP's trained chain on CPU: QUD (SFT) -> RETRIEVE (BM25, patterns and events
cross-encoders) -> EXTRACT, exactly what ``convohub reqap evaluate`` runs by default.

The models come from a release folder (a local hub root); make one with

    convohub release --only perqa reqap --out DIR

(about 10 minutes on two CPU cores for the tiny profile) and run

    python benchmarks/bench_reqap.py --hub DIR [--questions 30] [--split test]

The PerQA folder defaults to the release's own (``DIR/datasets/convohub/perqa``). Questions are taken in
persona order, the first ``--questions`` of the split; each is answered once, after one warm-up question
(model loading is timed apart). Reported: p50/p95/mean wall seconds per question, the same split into the
QUD share (decoding the trees) and the engine share (executing them, RETRIEVE and EXTRACT models
included), CPU seconds of the whole run, Hit@1 of the timed questions, model loading time and the
process's peak RSS. Torch runs on this machine's CPU threads (``--threads`` to pin the count).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation, as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def questions_of(dataset: Path, split: str, limit: int) -> list[tuple[str, dict[str, Any]]]:
    from convohub.reqap.data.perqa import load_questions

    out = [(q["persona_id"], q) for q in load_questions(dataset, split)]
    return out[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hub", type=Path, required=True, help="release folder (`convohub release --out DIR`)")
    parser.add_argument("--namespace", default=None, help="namespace of the models (default: convohub)")
    parser.add_argument("--dataset", type=Path, default=None, help="PerQA folder (default: the release's)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--questions", type=int, default=30, help="questions timed (default: %(default)s)")
    parser.add_argument("--time-budget", type=float, default=600.0, help="seconds per question (the paper's)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from convohub.hub import DEFAULT_NAMESPACE, markdown_table
    from convohub.metrics import is_hit
    from convohub.reqap.components.build import build_system, describe_components, header
    from convohub.reqap.data.perqa import load_persona
    from convohub.reqap.release.models import MissingRelease, find_release_models

    try:
        release = find_release_models(args.hub, args.namespace)
    except MissingRelease as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    dataset = args.dataset or args.hub / "datasets" / (args.namespace or DEFAULT_NAMESPACE) / "perqa"
    specs = release.specs()
    print(header(describe_components("reqap", **specs, source=f"{release.source} (profile {release.profile})")))
    cpu_start = time.process_time()
    start = time.perf_counter()
    system, _ = build_system("reqap", dataset=dataset, time_budget=args.time_budget, **specs)
    loading = time.perf_counter() - start
    todo = questions_of(dataset, args.split, args.questions + 1)
    if len(todo) < 2:
        print(f"error: {dataset}: fewer than 2 questions in split {args.split!r}", file=sys.stderr)
        return 2
    stores: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for n, (pid, q) in enumerate(todo):
        if pid not in stores:
            stores.clear()  # one persona's events at a time
            stores[pid] = load_persona(dataset, pid, canonical=False)[0]
        ref = date.fromisoformat(q["reference_date"]) if q.get("reference_date") else date(2024, 11, 25)
        t0 = time.perf_counter()
        result = system.answer(q["question"], stores[pid], ref)
        wall = time.perf_counter() - t0
        if n == 0:
            continue  # warm-up: first calls pay for lazy set-up (tokenizers, BM25 index of the persona)
        engine = sum(t["seconds"] for t in result.tried)
        pred = None if result.error else json.dumps(result.answer, ensure_ascii=False, default=str)
        rows.append({"wall": wall, "engine": engine, "qud": max(wall - engine, 0.0),
                     "hit": is_hit(pred, [json.dumps(g, ensure_ascii=False) for g in q["answers"]]),
                     "failed": result.error is not None})
    cpu = time.process_time() - cpu_start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)

    def stats(key: str) -> list[Any]:
        values = [r[key] for r in rows]
        return [key, percentile(values, 50), percentile(values, 95), statistics.fmean(values)]

    print(f"\n{len(rows)} questions of {dataset.name}/{args.split} (after 1 warm-up), torch threads "
          f"{torch.get_num_threads()}; models loaded in {loading:.1f} s")
    print(markdown_table(["seconds per question", "p50", "p95", "mean"],
                         [stats("wall"), stats("qud"), stats("engine")]))
    print(f"Hit@1 {sum(r['hit'] for r in rows) / len(rows):.3f}; failed runs {sum(r['failed'] for r in rows)}; "
          f"CPU seconds (whole run, loading included) {cpu:.1f}; peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
