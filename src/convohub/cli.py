"""The ``convohub`` command: release, datasets, train, evaluate, space.

Heavy libraries are imported inside the handlers so that ``convohub --help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

DEFAULT_OUT = Path("hub_release")

_EPILOG = """\
examples:
  convohub release                                 # every system, tiny profile, into ./hub_release
  convohub release --only corpus --out /tmp/hub    # one system
  convohub release --profile paper --push --namespace my-org   # paper scale, pushed (needs HF_TOKEN)
  convohub datasets build wildchat-sample --out /tmp/hub
  convohub train training/chat_lm/tiny.yaml --output_dir /tmp/chat-lm
  convohub evaluate perqa submission.jsonl --model-index results.json
  convohub evaluate ndcg inputs.json
  convohub space corpus --out /tmp/hub

LLM-backed steps use the endpoint in CONVOHUB_LLM_BASE_URL / CONVOHUB_LLM_MODEL when set (any
OpenAI-compatible server: vLLM, TGI, `transformers serve`, Inference Providers); otherwise the offline
stand-ins named in each dataset card produce the data.
"""


def _add_target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help="local hub root: datasets/, models/, spaces/ are written under it (default: %(default)s)")
    p.add_argument("--namespace", default=None,
                   help="Hub user or organisation the repos belong to (default: convohub)")
    p.add_argument("--push", action="store_true",
                   help="also upload every written folder to the Hub (needs --namespace and a token)")
    p.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the cached login)")
    p.add_argument("--llm", default=None, metavar="SPEC",
                   help="the LLM of the LLM steps: 'smollm2' (the offline model), an endpoint "
                        "'http://host:8000/v1#model', 'local:/folder', or 'rules' for the named rule/lexical "
                        "stand-ins (default: the endpoint of CONVOHUB_LLM_BASE_URL/CONVOHUB_LLM_MODEL, else "
                        "each step's measured offline default, named on its card)")
    p.add_argument("--llm-concurrency", type=int, default=None, metavar="N",
                   help="requests an LLM endpoint keeps in flight (default: CONVOHUB_LLM_CONCURRENCY or 8)")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convohub",
        description="Build, train, evaluate and publish the convohub systems as Hugging Face datasets, "
                    "models, metrics and Spaces.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from convohub import __version__

    parser.add_argument("--version", action="version", version=f"convohub {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    rel = sub.add_parser("release", help="build -> train -> evaluate -> cards -> Spaces for every system",
                         description="Run the whole release. Offline by default: everything is written "
                                     "into a local folder laid out like the Hub.")
    rel.add_argument("--profile", choices=["tiny", "paper"], default="tiny",
                     help="tiny: small local models, runs on a laptop CPU; paper: the papers' base models "
                          "and hyperparameters (GPU, network) (default: %(default)s)")
    rel.add_argument("--only", nargs="+", metavar="NAME", help="run only these systems")
    rel.add_argument("--seed", type=int, default=0, help="seed of every generator and trainer")
    rel.add_argument("--force", action="store_true", help="ignore finished steps of an earlier run")
    rel.add_argument("--list", action="store_true", help="list the registered systems and their steps")
    rel.add_argument("--max-train-steps", type=int, default=None, metavar="N",
                     help="stop every training run after N optimiser steps: a smoke run of the whole "
                          "pipeline (the cards report the steps run; the numbers are not the recipe's)")
    rel.add_argument("--jobs", type=int, default=None, metavar="N",
                     help="run N systems side by side, each in a process of its own on its share of the cores "
                          "(its steps and training runs alike). Default: 2 for the tiny profile on two or more "
                          "cores, where most LLM steps decode one sequence at a time and leave a core idle; 1 "
                          "for the paper profile, whose training runs take every GPU")
    _add_target_args(rel)

    ds = sub.add_parser("datasets", help="build one dataset repository folder")
    ds_sub = ds.add_subparsers(dest="datasets_command", metavar="ACTION")
    ds_sub.add_parser("list", help="list the datasets convohub can build")
    b = ds_sub.add_parser("build", help="build a dataset (from a source folder/file, or generated)")
    b.add_argument("name", help="dataset name (see `convohub datasets list`)")
    b.add_argument("--source", type=Path, default=None,
                   help="released data to normalise instead of generating (format in the dataset's card)")
    b.add_argument("--seed", type=int, default=0)
    _add_target_args(b)

    tr = sub.add_parser("train", help="run a training recipe (training/<model>/<recipe>.yaml)",
                        description="Runs the script that sits next to the recipe under `accelerate launch` "
                                    "(training/accelerate/cpu.yaml for tiny.yaml recipes, multi_gpu_ddp.yaml "
                                    "for the others). Any further flags override recipe keys, e.g. "
                                    "--learning_rate 1e-4.")
    tr.add_argument("recipe", type=Path, help="path of a YAML recipe")
    tr.add_argument("--launch-config", default=None, metavar="FILE",
                    help="accelerate config: a file name under training/accelerate/ or a path "
                         "(default: CONVOHUB_ACCELERATE_CONFIG, else by recipe as above)")

    ev = sub.add_parser(
        "evaluate", help="score a leaderboard submission, or any predictions with a metric of evaluation/",
        description="convohub evaluate BENCHMARK SUBMISSION.jsonl scores a submission (one "
                    '{"id": ..., "prediction": ...} per line) against the built dataset, prints a table and '
                    "can write a model-index fragment. convohub evaluate METRIC INPUTS.json runs a metric of "
                    "evaluation/ on a JSON object of its compute() arguments.")
    ev.add_argument("name", nargs="?", help="benchmark name (see --list) or metric folder under evaluation/")
    ev.add_argument("inputs", type=Path, nargs="?", help="SUBMISSION.jsonl, or INPUTS.json for a metric")
    ev.add_argument("--list", action="store_true", help="list the benchmarks")
    ev.add_argument("--dataset", type=Path, default=None,
                    help="built dataset folder with the gold (default: <out>/datasets/<namespace>/<dataset>)")
    ev.add_argument("--out", type=Path, default=DEFAULT_OUT, help="local hub root (default: %(default)s)")
    ev.add_argument("--namespace", default=None, help="namespace of the dataset (default: convohub)")
    ev.add_argument("--model-index", type=Path, default=None,
                    help="write the scores as a model-index results fragment (JSON) to this file")
    ev.add_argument("--judge", default=None, metavar="SPEC",
                    help="judge of a judged benchmark (wildfeedback), required unless CONVOHUB_LLM_BASE_URL names "
                         "an endpoint: 'smollm2' (the offline SmolLM2-135M-Instruct), 'lexical' (word-overlap "
                         "stand-in, plumbing checks only), an endpoint 'http://host:8000/v1#model', or a local "
                         "model folder; its name goes into the model-index metric names")

    sp = sub.add_parser("space", help="export a system's Space folder (or launch it locally)")
    sp.add_argument("name", help="system (or its folder under spaces/) whose Space to export")
    sp.add_argument("--launch", action="store_true", help="run the app locally instead of exporting")
    _add_target_args(sp)

    from convohub.registry import load_systems

    for system in load_systems().values():  # systems add their own subcommands (convohub reqap ...)
        if system.add_cli is not None:
            system.add_cli(sub)
    return parser


def _target(args: argparse.Namespace):
    from convohub.hub import DEFAULT_NAMESPACE, HubTarget

    if args.push and not args.namespace:
        raise SystemExit("convohub: --push needs --namespace ORG (the Hub user or organisation to push to)")
    token = args.token or os.environ.get("HF_TOKEN")
    return HubTarget(root=args.out.resolve(), namespace=args.namespace or DEFAULT_NAMESPACE, push=args.push,
                     token=token)


def _cmd_release(args: argparse.Namespace) -> int:
    from convohub.registry import load_systems
    from convohub.release import run_release, summary_table

    if args.list:
        for name, system in load_systems().items():
            steps = ", ".join(f"{s.kind}:{s.name}" for s in system.steps)
            print(f"{name:16s} {system.title}\n{'':16s} {steps}")
        return 0
    from convohub.release_parallel import default_jobs

    target = _target(args)
    llm, use_rules = _llm_choice(args)
    jobs = default_jobs(args.profile) if args.jobs is None else args.jobs
    if jobs < 1:
        raise SystemExit(f"convohub release: --jobs must be >= 1, got {jobs}")
    records, failure = run_release(out=target.root, profile=args.profile, only=args.only,
                                   namespace=target.namespace, push=target.push, token=target.token,
                                   seed=args.seed, force=args.force, llm=llm, use_rules=use_rules,
                                   max_train_steps=args.max_train_steps, jobs=jobs,
                                   llm_spec=None if use_rules else getattr(args, "llm", None))
    print("\n" + summary_table(records))
    if failure is not None:
        print(f"\nconvohub release: FAILED at {failure.system}/{failure.step}: {failure.cause}", file=sys.stderr)
        return 1
    print(f"\nrelease written to {target.root}" + (f" and pushed to {target.namespace}" if target.push else ""))
    return 0


def _llm_choice(args: argparse.Namespace) -> tuple[object, bool]:
    """(configured backend or None, use the rule stand-ins) from ``--llm`` and ``CONVOHUB_LLM_*``."""
    from convohub.llm import configured_backend

    spec = getattr(args, "llm", None)
    if spec == "rules":
        return None, True
    concurrency = getattr(args, "llm_concurrency", None)
    if concurrency is not None and concurrency < 1:
        raise SystemExit(f"convohub: --llm-concurrency must be >= 1, got {concurrency}")
    if concurrency is not None:
        os.environ["CONVOHUB_LLM_CONCURRENCY"] = str(concurrency)  # read by make_backend for endpoints
    return configured_backend(spec), False


def _cmd_datasets(args: argparse.Namespace) -> int:
    from convohub.registry import find_dataset, load_systems

    if args.datasets_command == "list" or args.datasets_command is None:
        for system in load_systems().values():
            for builder in system.datasets:
                print(f"{builder.name:24s} {builder.description}")
        return 0
    from convohub.release import ReleaseContext

    target = _target(args)
    _, builder = find_dataset(args.name)
    if args.source is not None and not args.source.exists():
        raise SystemExit(f"convohub: --source {args.source} does not exist")
    llm, use_rules = _llm_choice(args)
    ctx = ReleaseContext(profile="tiny", target=target, work_dir=target.root / ".convohub-work", seed=args.seed,
                         llm=llm, use_rules=use_rules)
    path = builder.build(ctx, args.source)
    print(f"wrote {path}")
    return 0


def load_script(path: Path) -> ModuleType:
    """Import a training script by file path (scripts live in training/<model>/, outside the package)."""
    spec = importlib.util.spec_from_file_location(f"convohub_script_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module


def script_for_recipe(recipe: Path) -> Path:
    """The training script next to a recipe: the folder's single ``train_*.py``."""
    scripts = sorted(recipe.resolve().parent.glob("train_*.py"))
    if len(scripts) != 1:
        raise SystemExit(f"convohub: expected one train_*.py next to {recipe}, found {[s.name for s in scripts]}")
    return scripts[0]


def _cmd_train(args: argparse.Namespace, rest: Sequence[str]) -> int:
    if not args.recipe.is_file():
        raise SystemExit(f"convohub: recipe {args.recipe} not found")
    from convohub.training.launch import TrainingFailed, run_script

    profile = "tiny" if args.recipe.stem == "tiny" else "paper"
    try:
        run_script(script_for_recipe(args.recipe), args.recipe, rest, profile=profile, config=args.launch_config)
    except (TrainingFailed, FileNotFoundError) as exc:
        print(f"convohub train: {exc}", file=sys.stderr)
        return 1
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from convohub.scoring import registered_benchmarks

    benchmarks = registered_benchmarks()
    if args.name is None and not args.list:
        print("convohub evaluate: give a benchmark or metric name, or --list to see the benchmarks", file=sys.stderr)
        return 2
    if args.list or args.inputs is None:
        for bench in benchmarks.values():
            print(f"{bench.name:20s} {bench.description}")
        return 0
    if args.name in benchmarks:
        return _score_benchmark(args, benchmarks[args.name])
    return _run_metric(args)


def _score_benchmark(args: argparse.Namespace, bench) -> int:
    from convohub.hub import DEFAULT_NAMESPACE, atomic_write_text, dump_json
    from convohub.scoring import ScoringError, model_index_fragment, score_submission

    namespace = args.namespace or DEFAULT_NAMESPACE
    dataset_dir = args.dataset or args.out / "datasets" / namespace / bench.dataset
    try:
        scores = score_submission(bench, dataset_dir, args.inputs, judge=args.judge)
    except ScoringError as exc:
        print(f"convohub evaluate: {exc}", file=sys.stderr)
        return 2
    width = max(len(k) for k in scores)
    print(f"{bench.name} ({bench.config}/{bench.split})")
    for key, value in scores.items():
        print(f"  {key:{width}s}  {value:.4f}" if isinstance(value, float) else f"  {key:{width}s}  {value}")
    if args.model_index:
        fragment = model_index_fragment(bench, scores, f"{namespace}/{bench.dataset}")
        atomic_write_text(args.model_index, dump_json(fragment))
        print(f"model-index fragment written to {args.model_index}")
    return 0


def _run_metric(args: argparse.Namespace) -> int:
    from convohub.paths import repo_path

    folder = repo_path("evaluation", args.name)
    try:
        kwargs = json.loads(args.inputs.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"convohub: cannot read {args.inputs}: {exc}") from exc
    if not isinstance(kwargs, dict) or "predictions" not in kwargs or "references" not in kwargs:
        raise SystemExit(f"convohub: {args.inputs} must be a JSON object with 'predictions' and 'references'")
    import evaluate

    metric = evaluate.load(str(folder))
    scores = metric.compute(**kwargs)
    print(json.dumps(scores, indent=2, sort_keys=True))
    return 0


def _cmd_space(args: argparse.Namespace) -> int:
    from convohub.registry import load_systems

    systems = {s.space or s.name: s for s in load_systems().values() if s.space}
    systems.update({s.name: s for s in load_systems().values() if s.space})
    if args.name not in systems:
        raise KeyError(f"no Space named {args.name!r}; known: {', '.join(sorted(systems)) or 'none'}")
    system = systems[args.name]
    if args.launch:
        from convohub.paths import repo_path

        module = load_script(repo_path("spaces", system.space, "app.py"))
        module.demo.launch()
        return 0
    from convohub.release import ReleaseContext

    target = _target(args)
    ctx = ReleaseContext(profile="tiny", target=target, work_dir=target.root / ".convohub-work")
    for step in system.steps:
        if step.kind == "space":  # systems name their artifact <system>_space_dir (the corpus: space_dir)
            for key, folder in step.run(ctx).items():
                if key.endswith("space_dir"):
                    print(f"wrote {folder}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "train":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command is None:
        parser.print_help()
        return 0
    handlers = {"release": _cmd_release, "datasets": _cmd_datasets, "evaluate": _cmd_evaluate,
                "space": _cmd_space}
    try:
        if args.command == "train":
            return _cmd_train(args, rest)
        if args.command not in handlers:
            return int(args.handler(args))
        return handlers[args.command](args)
    except (KeyError, FileNotFoundError, ValueError) as exc:
        print(f"convohub {args.command}: {exc}", file=sys.stderr)
        return 2


def run() -> None:
    """The ``convohub`` command."""
    from convohub.training.launch import exit_on_sigterm

    exit_on_sigterm()
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
