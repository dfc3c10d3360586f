"""Latency of CRyCHIc per inserted turn, beside the paper's LLM baseline on the local model, run side by side.

A chat assistant runs CRyCHIc once per new prompt: decide the prompt's parent (IFQC, prompt simplifier,
follow-up judge over the 20 most recent stored turns) and, once the answer is there, store the turn with its
embedding. This benchmark replays a 40-turn conversation (WildChatTree test conversations joined end to end,
so the judge's window fills up) one turn at a time and times each insertion (decide + store), ``--repeats``
times; the LLM baseline (``convohub.crychic.llm_baseline``, SmolLM2-135M-Instruct through the local backend,
answers read by likelihood unless ``--llm-scoring generate``) replays the same turns once, each insertion
asking its label and scoring up to 10 candidate turns, with no response cache. Torch runs on ``--threads``
threads (default 2: the 2 cores of the goal).

Models: the release's (``--hub DIR``, default ``hub_release`` when it holds them), else models of the tiny
recipes' shape built untrained from the bundled all-MiniLM-L6-v2 (latency does not depend on training; the
output says which).

Printed: per system, insertions, p50 / p95 / mean wall milliseconds and mean CPU milliseconds per insertion
(CPU time tells contention apart: wall >> CPU means the cores were shared), and the ratio of the LLM
baseline's p50 to CRyCHIc's. Goal: CRyCHIc p50 < 50 ms per inserted turn; exits non-zero when missed.

Offline reconstruction (a logged conversation, every turn known: ``convohub tree reconstruct``, the release's
evaluation) is timed apart, side by side with the turn-by-turn replay as its baseline: ``reconstruct()``
lets the pipeline batch everything that depends on a prompt alone (``Crychic.prepare``: IFQC
probabilities, simplifier labels, the judge's prompt and turn embeddings); the two must give the same
parents. Printed: both wall times per conversation (best of ``--repeats``) and their ratio.

Run: ``python benchmarks/bench_crychic.py [--hub hub_release] [--turns 40] [--repeats 3] [--threads 2]
[--llm-scoring likelihood|generate] [--no-llm]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_MS = 50.0


def conversation(turns: int, root: Path) -> list[tuple[str, str]]:
    """``turns`` (prompt, response) pairs: WildChatTree's test conversations joined end to end."""
    from convohub.crychic.dataset import build_wildchat_tree
    from convohub.crychic.evaluate import load_trees
    from convohub.hub import HubTarget

    folder = build_wildchat_tree(HubTarget(root), ROOT)
    exchanges = [(t["user_prompt"], t["assistant_response"]) for row in load_trees(folder) for t in row["turns"]]
    if len(exchanges) < turns:
        raise SystemExit(f"the test split has only {len(exchanges)} turns; ask for fewer with --turns")
    return exchanges[:turns]


def model_folders(hub: Path | None, scratch: Path) -> tuple[dict[str, Path], str]:
    """(task -> folder, what they are): the release's models, or untrained tiny-shaped MiniLM models."""
    from convohub.crychic.published import ModelsNotFound, local_models

    if hub is not None:
        try:
            return local_models(hub), f"the release's models under {hub}"
        except ModelsNotFound as exc:
            print(f"({exc.args[0].split('.')[0]}; building untrained tiny-shaped models instead)", file=sys.stderr)
    import yaml

    from convohub.crychic.training import CrychicArguments, build_model

    known = set(CrychicArguments.__dataclass_fields__)
    folders = {}
    for task in ("ifqc", "simplifier", "judge"):
        recipe = yaml.safe_load((ROOT / "training" / f"crychic_{task}" / "tiny.yaml").read_text(encoding="utf-8"))
        model, tokenizer = build_model(task, CrychicArguments(**{k: v for k, v in recipe.items() if k in known}))
        folders[task] = scratch / task
        model.save_pretrained(folders[task])
        tokenizer.save_pretrained(folders[task])
    return folders, "untrained models of the tiny recipes' shape (all-MiniLM-L6-v2 + MLP heads)"


def insertions(make_builder: Callable[[], Any], exchanges: list[tuple[str, str]], repeats: int) -> dict[str, Any]:
    """Wall and CPU milliseconds of every insertion (decide + store) of ``repeats`` replays."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(repeats):
        builder = make_builder()
        for prompt, response in exchanges:
            started, started_cpu = time.perf_counter(), time.process_time()
            builder.add_turn(prompt, response)
            wall.append(1000 * (time.perf_counter() - started))
            cpu.append(1000 * (time.process_time() - started_cpu))
    quantiles = statistics.quantiles(wall, n=100, method="inclusive") if len(wall) > 1 else wall * 99
    return {"insertions": len(wall), "p50_ms": statistics.median(wall), "p95_ms": quantiles[94],
            "mean_ms": statistics.fmean(wall), "cpu_mean_ms": statistics.fmean(cpu)}


def offline(make_builder: Callable[[], Any], exchanges: list[tuple[str, str]], repeats: int) -> dict[str, Any]:
    """Best-of-``repeats`` wall seconds of the whole conversation: turn by turn (the baseline) and through
    ``reconstruct`` (batched ``prepare``), with both parent lists."""
    from convohub.crychic.reconstruct import reconstruct

    def replay() -> Any:
        builder = make_builder()
        for prompt, response in exchanges:
            builder.add_turn(prompt, response)
        return builder

    out: dict[str, Any] = {}
    for name, run in (("turn by turn", replay), ("batched", lambda: reconstruct(exchanges, make_builder))):
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            builder = run()
            best = min(best, time.perf_counter() - started)
        out[name] = {"seconds": best, "parents": builder.parents}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub", type=Path, default=ROOT / "hub_release",
                        help="local hub root with the release's crychic-*-tiny models (default: %(default)s)")
    parser.add_argument("--turns", type=int, default=40, help="turns of the replayed conversation (default 40)")
    parser.add_argument("--repeats", type=int, default=3, help="replays of the conversation for CRyCHIc (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2: the goal's 2 cores)")
    parser.add_argument("--llm-scoring", choices=("likelihood", "generate"), default="likelihood",
                        help="how the LLM baseline's answers are read (default: %(default)s)")
    parser.add_argument("--no-llm", action="store_true", help="skip the LLM baseline (it takes minutes)")
    args = parser.parse_args(argv)
    if args.turns < 2 or args.repeats < 1 or args.threads < 1:
        parser.error("--turns must be >= 2, --repeats and --threads >= 1")

    import torch

    from convohub.crychic.components import pipeline_factory

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        exchanges = conversation(args.turns, Path(tmp) / "hub")
        folders, described = model_folders(args.hub if args.hub.is_dir() else None, Path(tmp))
        crychic = pipeline_factory(folders)
        insertions(crychic, exchanges[:3], 1)  # warm-up: first calls pay for lazy initialisation
        results = {"CRyCHIc": insertions(crychic, exchanges, args.repeats)}
        whole = offline(crychic, exchanges, args.repeats)
        if not args.no_llm:
            from convohub.crychic.llm_baseline import llm_baseline_factory
            from convohub.llm import OFFLINE_SPEC, make_backend

            make = llm_baseline_factory(make_backend(OFFLINE_SPEC), args.llm_scoring)
            insertions(make, exchanges[:2], 1)  # warm-up, and the calibration answers asked once
            results[f"LLM baseline (SmolLM2-135M-Instruct, {args.llm_scoring})"] = insertions(make, exchanges, 1)

    print(f"\n{args.turns}-turn conversation, torch on {args.threads} thread(s); CRyCHIc: {described}")
    print(f"{'system':<52} {'inserts':>7} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'CPU ms':>8}")
    for name, r in results.items():
        print(f"{name:<52} {r['insertions']:>7} {r['p50_ms']:>8.1f} {r['p95_ms']:>8.1f} {r['mean_ms']:>8.1f} "
              f"{r['cpu_mean_ms']:>8.1f}")
    plain, batched = whole["turn by turn"], whole["batched"]
    same = "same parents" if plain["parents"] == batched["parents"] else "PARENTS DIFFER"
    print(f"offline reconstruction of the {args.turns} turns: turn by turn {plain['seconds']:.3f} s, batched "
          f"{batched['seconds']:.3f} s -> {plain['seconds'] / batched['seconds']:.2f}x ({same})")
    p50 = results["CRyCHIc"]["p50_ms"]
    if len(results) > 1:
        llm = next(r for name, r in results.items() if name != "CRyCHIc")
        print(f"LLM baseline / CRyCHIc, p50: {llm['p50_ms'] / p50:.0f}x")
    met = p50 < GOAL_MS
    print(f"goal: CRyCHIc p50 < {GOAL_MS:.0f} ms per inserted turn -> {'met' if met else 'MISSED'} ({p50:.1f} ms)")
    return 0 if met and plain["parents"] == batched["parents"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
