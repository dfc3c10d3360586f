"""``convohub crychic evaluate``: score CRyCHIc (or an ablation, or a baseline) on a WildChatTree folder;
``convohub crychic training-data``: build the three models' training data (:mod:`convohub.crychic.training_data`);
``convohub tree reconstruct CONVERSATION.json``: one conversation's tree, turn by turn, with the reasons.

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
#: the paper's LLM baseline (convohub.crychic.llm_baseline), scored through an LLM backend
LLM_BASELINE = "llm"


def _builder_factory(args: argparse.Namespace) -> tuple[Any, str, dict[str, Any]]:
    """(make_builder, report header, description for the JSON) from the parsed arguments."""
    if args.baseline is not None:
        if args.ifqc or args.simplifier or args.judge or args.ablate:
            raise SystemExit("--baseline takes no model folders and no --ablate; give one or the other")
        if args.baseline == LLM_BASELINE:
            return _llm_baseline(args)
        if args.llm or args.llm_scoring or args.llm_uncalibrated:
            raise SystemExit(f"--llm, --llm-scoring and --llm-uncalibrated are for --baseline {LLM_BASELINE} only")
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
    from convohub.crychic.reconstruct import Crychic, resolve_implicit_threshold, resolve_threshold

    ifqc, simplifier, judge = load_components(args.ifqc, args.simplifier, args.judge)
    threshold, origin = resolve_threshold(judge, args.threshold)
    implicit, implicit_origin = resolve_implicit_threshold(judge, args.implicit_threshold)
    components = {"ifqc": args.ifqc and str(args.ifqc), "simplifier": args.simplifier and str(args.simplifier),
                  "judge": str(args.judge), "judge_architecture": judge.architecture,
                  "window": args.window, "threshold": threshold, "threshold_origin": origin,
                  "implicit_threshold": implicit if ifqc is not None else None,
                  "implicit_threshold_origin": implicit_origin if ifqc is not None else None}
    parts = [f"{name}={components[name] or 'left out (ablation)'}" for name in ("ifqc", "simplifier", "judge")]
    header = (f"CRyCHIc{' w/o ' + ', '.join(args.ablate) if args.ablate else ''}: " + ", ".join(parts)
              + f" ({judge.architecture}-encoder judge, window {args.window}, threshold {threshold}: {origin}"
              + (f"; IFQC implicit above {implicit}: {implicit_origin}" if ifqc is not None else "") + ")")

    def make() -> Crychic:
        return Crychic(ifqc=ifqc, simplifier=simplifier, judge=judge, window=args.window, threshold=threshold,
                       implicit_threshold=implicit)

    return make, header, components


def _llm_baseline(args: argparse.Namespace) -> tuple[Any, str, dict[str, Any]]:
    """The paper's LLM baseline over the LLM ``--llm`` names (or CONVOHUB_LLM_*); never chosen silently."""
    from convohub.crychic.llm_baseline import LLM_THRESHOLD, LLM_WINDOW, default_scoring, llm_baseline_factory
    from convohub.llm import backend_from_env, make_backend

    llm = make_backend(args.llm) if args.llm else backend_from_env()
    if llm is None:
        raise SystemExit(f"--baseline {LLM_BASELINE} needs an LLM: --llm smollm2 (the offline SmolLM2-135M-Instruct), "
                         "--llm http://host:8000/v1#model, --llm local:/folder, or CONVOHUB_LLM_BASE_URL")
    scoring = args.llm_scoring or default_scoring(llm)
    make = llm_baseline_factory(llm, scoring, calibrate=not args.llm_uncalibrated)
    how = scoring + (", calibrated" if make.calibrated else "")
    header = f"baseline: {LLM_BASELINE} ({llm.model_id}, answers read by {how}, window {LLM_WINDOW}, parent at score >= {LLM_THRESHOLD})"
    return make, header, {"baseline": LLM_BASELINE, "llm": llm.model_id, "scoring": scoring,
                          "calibrated": make.calibrated}


def run_evaluate(args: argparse.Namespace) -> int:
    from convohub.crychic.evaluate import evaluate_trees, format_report, load_trees

    make, header, described = _builder_factory(args)
    trees = load_trees(args.dataset)
    if args.max_conversations:
        trees = trees[: args.max_conversations]
    result = evaluate_trees(trees, make)
    unparsed = getattr(make, "unparsed", None)
    if unparsed is not None:
        described["unparsed_answers"] = dict(unparsed)
        header += f"; answers naming no allowed label / digit: {unparsed['label']} / {unparsed['score']}"
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
        ifqc=IFQCSettings(per_cell=args.ifqc_per_cell, polite_share=args.ifqc_polite_share, seed=args.seed),
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


def add_threshold_flags(parser: argparse.ArgumentParser) -> None:
    """``--threshold`` and ``--implicit-threshold`` (the judge's root threshold and the IFQC's), shared by
    ``tree reconstruct`` and ``crychic evaluate``; None means the values tuned for the judge, else the paper's."""
    parser.add_argument("--threshold", type=float, default=None,
                        help="judge probability the best candidate must exceed to become the parent (default: the "
                             f"root_threshold tuned for the judge when its config has one, else the paper's "
                             f"{THRESHOLD})")
    parser.add_argument("--implicit-threshold", type=float, default=None,
                        help="IFQC probability above which a prompt is an implicit follow-up of the most recent "
                             "turn (default: the implicit_threshold tuned for the pipeline when the judge's config "
                             "has one, else 0.5, the classifier's argmax)")


TREE_HELP = """Reconstruct one conversation's tree with the release's CRyCHIc models and say, per turn, which
earlier turn it builds on (its parent; "root" when none) and why: the module that decided (history,
ifqc, simplifier or judge) and its score (IFQC: probability of an implicit follow-up; simplifier: the
deciding label's probability; judge: the best candidate's parent probability). A prompt the judge decides
becomes a root when no candidate's probability exceeds the root threshold: the one tuned for the judge
when its config has one (a release's judge does), else the paper's 0.4; --threshold sets another. The
header names both thresholds in use and where they came from.

CONVERSATION.json is a WildChat-style list of {"role", "content"} messages (the last prompt may be
unanswered), a WildChat row ({"conversation": [...]}), or one WildChatTree record ({"conversation_id",
"turns": [{turn_index, user_prompt, assistant_response, parent}]}), whose gold parents are then shown
beside the reconstructed ones; a .jsonl file or list of records needs --id.

Models: the crychic-{ifqc,simplifier,judge}-<profile> folders of a local release (--hub, default
./hub_release, made by `convohub release --only crychic`), or downloaded from the Hub with --namespace ORG
(and no --hub).

Examples:
  convohub tree reconstruct chat.json
  convohub tree reconstruct chat.json --json
  convohub tree reconstruct chat.json --history 5
  convohub tree reconstruct chat.json --threshold 0.4
  convohub tree reconstruct trees.jsonl --id mixmc-0003 --hub /data/hub_release
"""


def _models(args: argparse.Namespace) -> dict[str, Path]:
    from convohub.crychic.published import hub_models, local_models
    from convohub.hub import DEFAULT_NAMESPACE

    if args.hub is None and args.namespace:
        return hub_models(args.namespace, args.profile)
    from convohub.cli import DEFAULT_OUT

    return local_models(args.hub or DEFAULT_OUT, args.namespace or DEFAULT_NAMESPACE, args.profile)


def run_tree_reconstruct(args: argparse.Namespace) -> int:
    from convohub.crychic.conversation_input import ConversationInputError, read_conversation_file
    from convohub.crychic.display import format_decisions, format_history
    from convohub.crychic.published import ModelsNotFound

    try:
        conversation = read_conversation_file(args.conversation, args.id)
    except ConversationInputError as exc:
        raise SystemExit(f"convohub tree reconstruct: {exc}") from None
    n = len(conversation.exchanges)
    if args.history is not None and not 0 <= args.history < n:
        raise SystemExit(f"convohub tree reconstruct: --history {args.history}: {args.conversation} has {n} turn(s), "
                         f"numbered 0..{n - 1}")
    try:
        folders = _models(args)
    except ModelsNotFound as exc:
        raise SystemExit(f"convohub tree reconstruct: {exc}") from None
    from convohub.crychic.components import pipeline_factory
    from convohub.crychic.reconstruct import reconstruct

    if args.threshold is not None and not 0 <= args.threshold < 1:
        raise SystemExit(f"convohub tree reconstruct: --threshold {args.threshold}: give a probability in [0, 1)")
    try:
        make_builder = pipeline_factory(folders, threshold=args.threshold, implicit_threshold=args.implicit_threshold)
        builder = reconstruct(conversation.exchanges, make_builder)
    except ValueError as exc:
        raise SystemExit(f"convohub tree reconstruct: {exc}") from None
    if args.history is not None:
        if args.json:
            turn = builder.turns[args.history]
            payload = {"turn_index": args.history, "parent": turn.parent, "prompt": turn.prompt,
                       "history": [{"turn_index": t.index, "user_prompt": t.prompt, "assistant_response": t.response}
                                   for t in builder.filtered_history(args.history)]}
            print(json.dumps(payload, indent=2, ensure_ascii=False))
        else:
            print(format_history(builder, args.history))
        return 0
    if args.json:
        print(json.dumps([d.summary() for d in builder.decisions], indent=2, ensure_ascii=False))
        return 0
    print(f"conversation {conversation.conversation_id}: {n} turn(s)"
          + (", gold parents from the record" if conversation.gold else ""))
    print("models: " + ", ".join(f"{task}={folder}" for task, folder in folders.items()))
    print(f"root threshold {builder.threshold:g} ({builder.threshold_origin}), implicit threshold "
          f"{builder.implicit_threshold:g} ({builder.implicit_threshold_origin})")
    print()
    print(format_decisions(builder, conversation.gold))
    if conversation.gold:
        right = sum(g == p for g, p in zip(conversation.gold, builder.parents, strict=True))
        print(f"\n{right} of {n} parents match the gold tree")
    return 0


def add_tree_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``tree`` (with ``reconstruct``) to a ``convohub`` subparsers object."""
    from convohub.cli import DEFAULT_OUT

    parser = subparsers.add_parser("tree", help="chat trees: reconstruct a conversation's parents with CRyCHIc")
    sub = parser.add_subparsers(dest="tree_command", metavar="ACTION")
    rc = sub.add_parser("reconstruct", help="each turn's parent and the reason, for one conversation",
                        description=TREE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    rc.add_argument("conversation", type=Path, metavar="CONVERSATION.json",
                    help="messages, a WildChat row, or a WildChatTree record (.json), or records (.jsonl, with --id)")
    rc.add_argument("--json", action="store_true",
                    help="print a JSON list of {turn_index, parent, module, score} (parent -1 = root)")
    rc.add_argument("--history", type=int, default=None, metavar="N",
                    help="print the filtered history of turn N (its ancestors): what an LLM would receive")
    rc.add_argument("--id", default=None, metavar="CONVERSATION_ID", help="which record of a file holding several")
    rc.add_argument("--hub", type=Path, default=None,
                    help=f"local hub root a release wrote (default: {DEFAULT_OUT}, unless --namespace alone "
                         "asks for the Hub)")
    rc.add_argument("--namespace", default=None,
                    help="Hub user or organisation whose published models to download (alone), or the namespace "
                         "folder under --hub (default: convohub)")
    rc.add_argument("--profile", choices=("tiny", "paper"), default="tiny",
                    help="which release's models: crychic-*-tiny or the paper profile's (default: %(default)s)")
    add_threshold_flags(rc)
    rc.set_defaults(handler=run_tree_reconstruct)
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    return parser


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
    ev.add_argument("--baseline", choices=sorted([*BASELINES, LLM_BASELINE]), default=None,
                    help="score a baseline instead of models (llm: the paper's LLM baseline, needs --llm)")
    ev.add_argument("--llm", default=None, metavar="SPEC",
                    help="--baseline llm: 'smollm2' (offline SmolLM2-135M-Instruct), 'http://host:8000/v1#model', "
                         "'local:/folder' (default: CONVOHUB_LLM_BASE_URL/CONVOHUB_LLM_MODEL)")
    ev.add_argument("--llm-scoring", choices=("generate", "likelihood"), default=None,
                    help="--baseline llm: read the model's written answers, or a local model's probability of each "
                         "allowed label / digit (default: likelihood for a local model, generate otherwise)")
    ev.add_argument("--llm-uncalibrated", action="store_true",
                    help="--baseline llm with likelihood: read the raw probabilities (default: calibrated against "
                         "the model's answer to a content-free 'N/A' request)")
    ev.add_argument("--max-conversations", type=int, default=None, metavar="N",
                    help="score only the first N test conversations (the LLM baseline is slow)")
    ev.add_argument("--window", type=int, default=WINDOW, help="turns the judge considers (default: %(default)s)")
    add_threshold_flags(ev)
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
    td.add_argument("--ifqc-polite-share", type=float, default=0.0,
                    help="polite sentences (thanks that ask for nothing, class explicit) per explicit sentence; 0 "
                         "is the paper's three templates, the tiny release uses 1/3 (default: %(default)s)")
    td.add_argument("--n-users", type=int, default=40, help="users of the sample corpus (default: %(default)s)")
    td.add_argument("--max-prompts", type=int, default=400, help="corpus prompts to label (default: %(default)s)")
    td.add_argument("--max-positives", type=int, default=600, help="judge positive pairs (default: %(default)s)")
    td.add_argument("--seed", type=int, default=0)
    td.set_defaults(handler=run_training_data)
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    add_tree_cli(subparsers)
    return parser
