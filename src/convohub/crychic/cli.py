"""``convohub crychic evaluate``: score CRyCHIc (or an ablation, or a baseline) on a WildChatTree folder;
``convohub crychic training-data``: build the three models' training data (:mod:`convohub.crychic.training_data`).

Either the three model folders (``--ifqc``, ``--simplifier``, ``--judge``; ``--ablate ifqc`` or
``--ablate simplifier`` leaves one out, as in the paper's ablations) or ``--baseline``; nothing is chosen
silently, and the report's header names what produced the numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from convohub.crychic.reconstruct import BASELINES, THRESHOLD, WINDOW

ABLATIONS = ("ifqc", "simplifier")


def _builder_factory(args: argparse.Namespace) -> tuple[Any, str, dict[str, Any]]:
    """(make_builder, report header, description for the JSON) from the parsed arguments."""
    if args.baseline is not None:
        if args.ifqc or args.simplifier or args.judge or args.ablate:
            raise SystemExit("--baseline takes no model folders and no --ablate; give one or the other")
        cls = BASELINES[args.baseline]
        return cls, f"baseline: {args.baseline}", {"baseline": args.baseline}
    if args.judge is None:
        raise SystemExit("give --judge (with --ifqc and --simplifier, or --ablate), or --baseline "
                         f"{'|'.join(BASELINES)}")
    for name in ABLATIONS:
        given = getattr(args, name) is not None
        if given == (name in args.ablate):
            raise SystemExit(f"give --{name} PATH or --ablate {name} (exactly one of them)")
    from convohub.crychic.components import load_components
    from convohub.crychic.reconstruct import Crychic

    ifqc, simplifier, judge = load_components(args.ifqc, args.simplifier, args.judge)
    components = {"ifqc": args.ifqc and str(args.ifqc), "simplifier": args.simplifier and str(args.simplifier),
                  "judge": str(args.judge), "judge_architecture": judge.architecture,
                  "window": args.window, "threshold": args.threshold}
    parts = [f"{name}={components[name] or 'left out (ablation)'}" for name in ("ifqc", "simplifier", "judge")]
    header = (f"CRyCHIc{' w/o ' + ', '.join(args.ablate) if args.ablate else ''}: " + ", ".join(parts)
              + f" ({judge.architecture}-encoder judge, window {args.window}, threshold {args.threshold})")

    def make() -> Crychic:
        return Crychic(ifqc=ifqc, simplifier=simplifier, judge=judge, window=args.window, threshold=args.threshold)

    return make, header, components


def run_evaluate(args: argparse.Namespace) -> int:
    from convohub.crychic.evaluate import evaluate_trees, format_report, load_trees

    make, header, described = _builder_factory(args)
    result = evaluate_trees(load_trees(args.dataset), make)
    print(format_report(header, result))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"system": header, **described, "dataset": str(args.dataset), **result}
        args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


def run_training_data(args: argparse.Namespace) -> int:
    from convohub.crychic.ifqc_data import IFQCSettings
    from convohub.crychic.judge_data import JudgeSettings
    from convohub.crychic.simplifier_data import SimplifierSettings
    from convohub.crychic.training_data import build_training_data

    record = build_training_data(
        args.out, args.task or ("ifqc", "simplifier", "judge"), llm=args.llm, labeller=args.labeller,
        ifqc=IFQCSettings(per_cell=args.ifqc_per_cell, seed=args.seed),
        simplifier=SimplifierSettings(n_users=args.n_users, max_prompts=args.max_prompts, seed=args.seed),
        judge=JudgeSettings(n_users=args.n_users, max_positives=args.max_positives, seed=args.seed),
        progress=True)
    for task, entry in record.items():
        print(f"{task}: {entry.get('rows')} rows, produced by {entry.get('produced_by')}")
        for figures in entry.get("agreement", []):
            print(f"  labeller {figures['labeller']}: accuracy {figures['accuracy']}, macro-F1 "
                  f"{figures['f1_macro']} on {figures['sentences']} hand-labelled sentences"
                  f"{' (chosen)' if figures.get('chosen') else ''}")
    print(f"wrote {args.out}")
    return 0


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``crychic`` (with ``evaluate``) to a ``convohub`` subparsers object; returns the ``crychic`` parser."""
    parser = subparsers.add_parser("crychic", help="CRyCHIc chat-tree reconstruction")
    sub = parser.add_subparsers(dest="crychic_command", metavar="ACTION")
    ev = sub.add_parser("evaluate", help="reconstruct WildChatTree's conversations and score the parents",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("--dataset", type=Path, required=True,
                    help="a built wildchat-tree folder (e.g. hub_release/datasets/convohub/wildchat-tree)")
    ev.add_argument("--ifqc", type=Path, default=None, help="IFQC model folder")
    ev.add_argument("--simplifier", type=Path, default=None, help="prompt simplifier model folder")
    ev.add_argument("--judge", type=Path, default=None, help="follow-up judge model folder")
    ev.add_argument("--ablate", choices=ABLATIONS, action="append", default=[],
                    help="leave a component out (repeatable; the paper's w/o IFQC and w/o PS rows)")
    ev.add_argument("--baseline", choices=sorted(BASELINES), default=None,
                    help="score a baseline instead of models")
    ev.add_argument("--window", type=int, default=WINDOW, help="turns the judge considers (default: %(default)s)")
    ev.add_argument("--threshold", type=float, default=THRESHOLD,
                    help="judge probability a parent must exceed (default: %(default)s)")
    ev.add_argument("--out", type=Path, default=None, help="write the results (with every decision) as JSON")
    ev.set_defaults(handler=run_evaluate)
    from convohub.crychic.simplifier_data import AUTO, RULES_NAME

    td = sub.add_parser("training-data", help="build the IFQC, simplifier and judge training data")
    td.add_argument("--out", type=Path, required=True, help="folder the training scripts' --dataset_path names")
    td.add_argument("--task", choices=("ifqc", "simplifier", "judge"), action="append", default=[],
                    help="build only this task (repeatable; default: all three)")
    td.add_argument("--llm", default="smollm2",
                    help="LLM spec that synthesises IFQC sentences and is the simplifier's LLM labeller "
                         "(default: %(default)s, the offline SmolLM2-135M-Instruct)")
    td.add_argument("--labeller", default=AUTO,
                    help=f"simplifier labeller: {AUTO} (the one agreeing best with the hand-labelled sentences), "
                         f"{RULES_NAME}, or an LLM spec (default: %(default)s)")
    td.add_argument("--ifqc-per-cell", type=int, default=2,
                    help="sentences per (template, ending, length band, domain) cell (default: %(default)s)")
    td.add_argument("--n-users", type=int, default=40, help="users of the sample corpus (default: %(default)s)")
    td.add_argument("--max-prompts", type=int, default=400, help="corpus prompts to label (default: %(default)s)")
    td.add_argument("--max-positives", type=int, default=600, help="judge positive pairs (default: %(default)s)")
    td.add_argument("--seed", type=int, default=0)
    td.set_defaults(handler=run_training_data)
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    return parser
