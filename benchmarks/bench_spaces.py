"""Load test of every Space: ``--clients`` concurrent gradio_client clients on loopback, one call each.

Each Space is launched in this process (as the tests launch it) on the small data of ``tests/_spaces.py``,
warmed up with one call (loading a dataset or metric module is a one-off, not what a visitor in a queue
waits for), then hit by ``--clients`` threads at once, each with its own ``gradio_client.Client`` making the
call the Space's first button makes. The number of requests is fixed and each Space gets at most
``--deadline`` seconds: a request still running then counts as an error. Goal: 0 errors for 50 clients on
every Space, which the apps' queue settings (one worker, up to 128 waiting) are meant to give.

Printed per Space: errors, p50 and p95 latency of the call (seconds, from the client's view: queueing
included), and the wall time of the burst. Exits non-zero when any request failed.

The ProMISe Space's call (``/start``: four suggestions from SmolLM2) is answered from its disk cache of agent
answers after the warm-up, as a Space answers a repeated question; the burst measures the queue, retrieval and
page data, not SmolLM2's generation (the warm-up's seconds are that).

Run: ``python benchmarks/bench_spaces.py [--clients 50] [--deadline 300] [--only corpus reqap crychic ...]``
(about 80 seconds on two CPU cores for the nine Spaces of 2026-11-25). Measured 2026-11-25 on 2 shared
cores: 0 errors on those nine Spaces, p95 2.9-4.8 s; 2026-11-26, quiet cores, ``--only crychic promise
wildchat_aqa`` (32 s): 0 errors, p50 2.19-2.52 s, p95 2.35-2.72 s; ``--clients 200`` overflows the 128-place queue (67 "Queue is full" errors on ndcg), which
shows the bound holds and that this benchmark can fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # loopback only: nothing leaves the machine
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _spaces import SpaceApp, build_data, serve, space_apps  # noqa: E402


def call_args(space: SpaceApp, app: ModuleType) -> tuple[Any, ...]:
    """The inputs of the Space's first button: its own defaults for a metric Space, which are its example."""
    if space.args:
        return space.args
    args = [c.value for c in app.demo.input_components]
    if space.name == "metric-checklist_judge":  # the example names SmolLM2; 50 clients get the stand-in
        args[2] = json.dumps({**json.loads(args[2]), "judge_model": "lexical"})
    return tuple(args)


def one_request(url: str, api_name: str, args: tuple[Any, ...]) -> float:
    """Seconds one fresh client waits for its answer (queueing included)."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    start = time.perf_counter()
    client.predict(*args, api_name=api_name)
    return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def burst(space: SpaceApp, clients: int, deadline: float) -> dict[str, Any]:
    """Launch the Space, warm it up, fire ``clients`` concurrent requests, and summarise them."""
    with serve(space) as (url, app):
        args = call_args(space, app)
        warm = one_request(url, space.api_name, args)
        pool = ThreadPoolExecutor(max_workers=clients)
        start = time.perf_counter()
        futures = [pool.submit(one_request, url, space.api_name, args) for _ in range(clients)]
        done, pending = wait(futures, timeout=deadline)
        wall = time.perf_counter() - start
        latencies, errors = [], [f"not answered within {deadline:.0f} s" for _ in pending]
        for future in done:
            try:
                latencies.append(future.result())
            except Exception as exc:  # every failure is reported, none stops the burst
                errors.append(f"{type(exc).__name__}: {exc}")
        for future in pending:
            future.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
    return {"space": space.name, "requests": clients, "errors": errors, "warm_up_s": warm, "wall_s": wall,
            "p50_s": percentile(latencies, 50), "p95_s": percentile(latencies, 95)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients per Space (default 50)")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds allowed per Space's burst")
    parser.add_argument("--only", nargs="*", help="Space names (corpus, reqap, wildfeedback, crychic, promise, wildchat_aqa, metric-<name>)")
    args = parser.parse_args(argv)
    if args.clients < 1:
        parser.error("--clients must be >= 1")

    with tempfile.TemporaryDirectory() as tmp:
        spaces = [s for s in space_apps(build_data(Path(tmp))) if not args.only or s.name in args.only]
        results = [burst(space, args.clients, args.deadline) for space in spaces]

    print(f"\n{'space':<30} {'requests':>8} {'errors':>6} {'p50 s':>7} {'p95 s':>7} {'wall s':>7} {'warm-up s':>9}")
    for r in results:
        print(f"{r['space']:<30} {r['requests']:>8} {len(r['errors']):>6} {r['p50_s']:>7.2f} {r['p95_s']:>7.2f} "
              f"{r['wall_s']:>7.1f} {r['warm_up_s']:>9.2f}")
        for error in sorted(set(r["errors"])):
            print(f"    {r['errors'].count(error)} x {error}")
    failed = sum(len(r["errors"]) for r in results)
    print(f"goal: 0 errors with {args.clients} concurrent clients per Space -> {'met' if not failed else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
