"""``convohub promise evaluate --simulator S``: score a user simulator on ProMISe's two user-behaviour tasks
and print micro-F1, macro-F1 and per-class F1 beside the majority baselines (the paper's Table 4 layout).

Simulators: ``majority``; ``zero-shot`` (the offline SmolLM2) or ``zero-shot:SPEC`` (any LLM spec: an endpoint
``http://host:8000/v1#model``, ``local:/folder``); ``encoder:TASK1_DIR,TASK2_DIR`` (the trained classifiers);
``generative:FOLDER`` (a trained LoRA simulator). Generative simulators reply with an action: a reply that
parses to none is invalid on both tasks, and ``done`` on a Task 2 item is invalid on Task 2; invalid
predictions are always wrong. With ``--decode likelihood`` (a local model) the answer is the most likely of the
six replies instead: Task 1 is ``done`` when ``done`` is the most likely, Task 2 the most likely of the other
five, and no prediction is invalid. ``--decode calibrated`` subtracts from those log-likelihoods the ones the
model gives a content-free prompt ("N/A" for every text), which removes the reply it prefers whatever the turn.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from convohub.promise.simulators import DECODES, GENERATE, SPEC_HELP


def _dataset(args: argparse.Namespace) -> Path:
    from convohub.hub import DEFAULT_NAMESPACE
    from convohub.promise.dataset import DATASET_NAME

    folder = args.dataset or args.out / "datasets" / (args.namespace or DEFAULT_NAMESPACE) / DATASET_NAME
    if not Path(folder).is_dir():
        raise FileNotFoundError(f"dataset folder {folder} not found; build it with `convohub datasets build promise` "
                                "or pass --dataset DIR")
    return Path(folder)


def run_evaluate(args: argparse.Namespace) -> int:
    from convohub.promise.records import label_names
    from convohub.promise.simulators import MajorityBaseline, load_items, resolve, score, score_table

    folder = _dataset(args)
    validation, items = load_items(folder, "validation"), load_items(folder, args.split)
    simulator = resolve(args.simulator, validation, progress=True, decode=args.decode)
    results = {"majority (validation)": score(MajorityBaseline(validation), items),
               simulator.name: score(simulator, items)}
    print(f"ProMISe user simulation on {folder} ({args.split}: {len(items['task1'])} Task 1 items, "
          f"{len(items['task2'])} Task 2 items), x100\n")
    print(score_table(results))
    mine = results[simulator.name]
    for task in ("task1", "task2"):
        per_class = ", ".join(f"{name} {100 * mine[task]['f1_' + name]:.2f}" for name in label_names(task))
        print(f"\n{simulator.name}, {task} per-class F1: {per_class}")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"dataset": str(folder), "split": args.split, "results": results},
                                          indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"\nwrote {args.output}")
    return 0


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``promise`` (with ``evaluate``) to a ``convohub`` subparsers object."""
    parser = subparsers.add_parser("promise", help="ProMISe user simulators")
    sub = parser.add_subparsers(dest="promise_command", metavar="ACTION")
    ev = sub.add_parser("evaluate", help="score a user simulator on Task 1 and Task 2 beside the majority baseline",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("--simulator", required=True, help=SPEC_HELP)
    ev.add_argument("--decode", choices=DECODES, default=GENERATE,
                    help="how a zero-shot or generative simulator answers: its greedy reply, parsed (the paper); "
                         "the most likely of the six replies (likelihood, a local model only); or the same after "
                         "subtracting each reply's likelihood on a content-free prompt (calibrated; default: "
                         "%(default)s)")
    ev.add_argument("--dataset", type=Path, default=None,
                    help="a built promise folder (default: <out>/datasets/<namespace>/promise)")
    ev.add_argument("--out", type=Path, default=Path("hub_release"), help="local hub root (default: %(default)s)")
    ev.add_argument("--namespace", default=None)
    ev.add_argument("--split", choices=("validation", "test"), default="test")
    ev.add_argument("--output", type=Path, default=None, help="also write the scores as JSON")
    ev.set_defaults(handler=run_evaluate)
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    return parser
