"""``convohub wildfeedback evaluate``: an aligned model against its base model with the checklist judge.

Prints the paper's Table 2 columns (win/tie/lose % with and without the checklist) plus judged counts and
parse failures, and writes the full results (with a few example answers) as JSON when ``--out`` is given.
Exit status 0, or 2 for a usage error (missing dataset, or no judge named).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_evaluate_cli", "run_evaluate"]


def add_evaluate_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``evaluate`` to the ``wildfeedback`` subcommand's subparsers; returns its parser."""
    p = subparsers.add_parser(
        "evaluate", help="win/tie/lose of a model against a baseline with the checklist judge (Table 2)",
        description="Generate answers of --model and --baseline on the test split and compare them with the "
                    "checklist judge (both orders, with and without the checklist).")
    p.add_argument("--model", required=True, help="candidate: a model folder, Hub id, or model name at --model-base-url")
    p.add_argument("--baseline", required=True, help="baseline (usually the base model), same forms as --model")
    p.add_argument("--dataset", default="convohub/wildfeedback",
                   help="built WildFeedback folder, Parquet file of test rows, or Hub id (default: %(default)s)")
    p.add_argument("--config", default="test", help="config of the test instances (default: %(default)s)")
    p.add_argument("--split", default=None, help="split of that config (default: its only/first split)")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N instances")
    p.add_argument("--judge-base-url", default=None, help="OpenAI-compatible endpoint of the judge (paper: GPT-4o)")
    p.add_argument("--judge-model", default=None,
                   help="judge model name at --judge-base-url; without it 'smollm2' (the offline SmolLM2-135M-"
                        "Instruct, pointwise yes/no log-odds), 'lexical' (word-overlap stand-in, plumbing checks "
                        "only) or a local chat model folder; default: the CONVOHUB_LLM_* endpoint, and without one "
                        "the command refuses (a judge is always named)")
    p.add_argument("--model-base-url", default=None, help="serve --model from this endpoint instead of loading it")
    p.add_argument("--baseline-base-url", default=None, help="serve --baseline from this endpoint")
    p.add_argument("--max-new-tokens", type=int, default=256, help="answer length (default: %(default)s)")
    p.add_argument("--max-prompt-length", type=int, default=3072,
                   help="local models: prompt budget in tokens, oldest turns dropped first (default: %(default)s)")
    p.add_argument("--judge-max-new-tokens", type=int, default=1024, help="judge answer budget (default: %(default)s)")
    p.add_argument("--cache-dir", type=Path, default=None, help="cache judge answers on disk (resumable runs)")
    p.add_argument("--out", type=Path, default=None, help="write the results JSON here")
    p.set_defaults(handler=run_evaluate)
    return p


def run_evaluate(args: argparse.Namespace) -> int:
    """Handler of ``wildfeedback evaluate``."""
    from convohub.wildfeedback.evaluation import evaluate, format_table

    try:
        results = evaluate(args.model, args.baseline, args.dataset, config=args.config, split=args.split,
                           limit=args.limit, judge_base_url=args.judge_base_url, judge_model=args.judge_model,
                           model_base_url=args.model_base_url, baseline_base_url=args.baseline_base_url,
                           max_new_tokens=args.max_new_tokens, max_prompt_length=args.max_prompt_length,
                           judge_max_new_tokens=args.judge_max_new_tokens, cache_dir=args.cache_dir)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        print(f"convohub wildfeedback evaluate: {exc}", file=sys.stderr)
        return 2
    print(format_table(results))
    if args.out is not None:
        from convohub.hub import atomic_write_text, dump_json

        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, dump_json(results))
        print(f"results: {args.out}")
    else:
        print(json.dumps(results["comparisons"], sort_keys=True, default=str))
    return 0
