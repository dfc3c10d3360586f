"""``convohub aqa evaluate``: run one WildChat-AQA method over a built folder and print its scores.

Examples:

  convohub aqa evaluate --method cosine
  convohub aqa evaluate --method rag --context summary --k 20 --answerer likelihood
  convohub aqa evaluate --method probe --context raw --llm http://localhost:8000/v1#Qwen/Qwen3-32B
  convohub aqa evaluate --method oracle --answerer paper --predictions oracle.jsonl

Prints NDCG@1/3/5/10, the input tokens used (counted with the answering model's tokenizer), the parse rate of
a generating answerer, Recall@k of the retrieval when the questions carry gold supports, and PROBE's request
statistics (how many requests were valid JSON, every fallback taken). ``--predictions`` writes the rankings as
a leaderboard submission for ``convohub evaluate wildchat-aqa``. The LLM is ``--llm``, else the endpoint of
``CONVOHUB_LLM_BASE_URL``, else the offline SmolLM2-135M-Instruct; with SmolLM2 the offline defaults apply
(k 20, a 192-token prompt budget), otherwise the paper's (k 100, the paper's budget for the model).

The retrieval index of a folder's corpus is built once (embedding every document with all-MiniLM-L6-v2) and
kept under ``$CONVOHUB_CACHE/aqa-index`` (default ``~/.cache/convohub/aqa-index``), keyed by the corpus
files' bytes and the encoder; a rebuilt dataset gets a new index. The 8 most recently used indexes are kept
(``CONVOHUB_AQA_INDEX_KEEP=N`` for another number); delete the folder to reclaim all of the space.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DEFAULT_DATASET = Path("hub_release") / "datasets" / "convohub" / "wildchat-aqa"


def _backend(args: argparse.Namespace) -> Any:
    from convohub.llm import default_backend, make_backend

    cache = {"cache_dir": args.llm_cache} if args.llm_cache else {}
    return make_backend(args.llm, **cache) if args.llm else default_backend(**cache)


def run_evaluate(args: argparse.Namespace) -> int:
    from convohub.aqa.evaluation import AQARunner, Setting, format_results, submission_lines
    from convohub.aqa.methods import LLM_METHODS, default_answerer
    from convohub.hub import atomic_write_text, dump_json

    if not args.dataset.is_dir():
        raise SystemExit(f"convohub aqa: dataset folder {args.dataset} not found; build it with `convohub datasets "
                         "build wildchat-aqa` or pass --dataset DIR")
    backend = _backend(args) if args.method in LLM_METHODS else None
    answerer = args.answerer or (default_answerer(backend) if backend is not None else "paper")
    setting = Setting(args.method, context=args.context, answerer=answerer, k=args.k, budget=args.budget,
                      pooling=args.pooling, probe_prompt=args.probe_prompt)
    runner = AQARunner(args.dataset, backend=backend, config=args.questions, limit=args.limit, seed=args.seed,
                       progress=True)
    results, answers = runner.evaluate(setting)
    print(format_results(results))
    if args.out is not None:
        atomic_write_text(args.out, dump_json(results))
        print(f"wrote {args.out}")
    if args.predictions is not None:
        atomic_write_text(args.predictions, submission_lines(runner.questions, answers))
        print(f"wrote {args.predictions} (score it with `convohub evaluate wildchat-aqa {args.predictions}`)")
    if args.answers is not None:
        rows = [{"id": q.hash, "question": q.question, "ranking": a.ranking, "text": a.text, "request": a.request,
                 "doc_ids": a.doc_ids, "input_tokens": a.input_tokens}
                for q, a in zip(runner.questions, answers, strict=True)]
        atomic_write_text(args.answers, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        print(f"wrote {args.answers}")
    return 0


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``aqa`` (with ``evaluate``) to a ``convohub`` subparsers object; returns the ``aqa`` parser."""
    from convohub.aqa.methods import ANSWERERS, METHODS
    from convohub.aqa.prompts import PROBE_STYLES
    from convohub.aqa.questions import CONTEXTS, QUESTION_CONFIGS

    parser = subparsers.add_parser("aqa", help="WildChat-AQA aggregative question answering")
    sub = parser.add_subparsers(dest="aqa_command", metavar="ACTION")
    ev = sub.add_parser("evaluate", help="run one method over the questions and print NDCG@k, tokens, recall",
                        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("--method", choices=METHODS, required=True,
                    help="random/bm25/cosine rank the options without an LLM; no-context, rag, probe and oracle "
                         "ask the LLM (oracle: the gold supporting conversations as context)")
    ev.add_argument("--context", choices=CONTEXTS, default="summary",
                    help="what is retrieved: raw conversations (chunked) or their summaries (default: %(default)s)")
    ev.add_argument("--k", type=int, default=None,
                    help="conversations retrieved by rag/probe (default: 20 offline, 100 with another model)")
    ev.add_argument("--budget", type=int, default=None,
                    help="prompt budget in tokens (default: 192 offline, else the paper's budget for the model)")
    ev.add_argument("--answerer", choices=ANSWERERS, default=None,
                    help="paper: the paper's JSON prompt; small: ask only for the ranking list; likelihood: score "
                         "each option by log-likelihood with a local model (default: likelihood for a local model, "
                         "which does not follow the JSON prompts, paper for an endpoint)")
    ev.add_argument("--pooling", choices=("max", "sum"), default="max",
                    help="PROBE's merge of per-query scores: max (paper) or sum (authors' code)")
    ev.add_argument("--probe-prompt", choices=PROBE_STYLES, default="paper",
                    help="PROBE's request prompt: the paper's, or the small model's (default: %(default)s)")
    ev.add_argument("--dataset", type=Path, default=DEFAULT_DATASET,
                    help="built wildchat-aqa folder (default: %(default)s)")
    ev.add_argument("--questions", choices=QUESTION_CONFIGS, default="questions",
                    help="all questions, or the stratified 10%% subset (default: %(default)s)")
    ev.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ev.add_argument("--llm", default=None, metavar="SPEC",
                    help="'smollm2', 'local:/folder' or an endpoint 'http://host:8000/v1#model' (default: "
                         "CONVOHUB_LLM_BASE_URL, else smollm2)")
    ev.add_argument("--llm-cache", type=Path, default=None, help="folder caching the LLM's answers")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    ev.add_argument("--predictions", type=Path, default=None, help="write the rankings as a submission (JSONL)")
    ev.add_argument("--answers", type=Path, default=None,
                    help="write every answer (ranking, model text, PROBE request, documents) as JSONL")
    ev.set_defaults(handler=run_evaluate)
    parser.set_defaults(handler=lambda args: (parser.print_help(), 2)[1])
    return parser
