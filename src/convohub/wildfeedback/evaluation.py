"""WildFeedback's user-guided evaluation: an aligned model against baseline models on the held-out test split.

Every model answers the prompt of every test instance (greedy); the checklist judge
(:mod:`convohub.metrics.checklist_judge`) compares the aligned model's answer with each baseline's, with the
instance's summarised user preferences as the checklist, and again without it (the paper's ablation). The
judge sees every pair in both orders and combines them (position bias cancels; a judge that merely
repeats a letter gives a tie); unparseable judge outputs are counted as parse failures, never as ties. The
result is the paper's Table 2 columns per baseline: win/tie/lose of the aligned model.

Judges are always named (:func:`convohub.metrics.checklist_judge.resolve_judge`): a strong LLM behind an
OpenAI-compatible endpoint (the paper: GPT-4o), the offline SmolLM2-135M-Instruct (``"smollm2"``, compact
prompt), a local model folder, or the lexical stand-in (``"lexical"``: word overlap, plumbing checks only).
Every result names its judge and prompt style; compare only numbers made with the same judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convohub.hub import load_split
from convohub.llm import ChatBackend, ChatRequest, run_chat
from convohub.metrics.checklist_judge import LEXICAL_JUDGE, LexicalChecklistJudge
from convohub.metrics.checklist_judge import resolve_judge as resolve_eval_judge  # the Space's name for it

__all__ = ["LEXICAL_JUDGE", "LexicalChecklistJudge", "evaluate", "format_table", "generate_responses",
           "load_test_rows", "resolve_eval_judge", "response_backend"]


# ------------------------------------------------------------------------------------------------ data
def load_test_rows(dataset: str | Path, config: str = "test", split: str | None = None,
                   limit: int | None = None) -> list[dict[str, Any]]:
    """Test instances (prompt, preferences, ...) from a built dataset folder, a Parquet file or a Hub id."""
    ds = load_split(dataset, config, split)
    for column in ("prompt", "preferences"):
        if column not in ds.column_names:
            raise ValueError(f"{dataset} (config {config!r}): test rows lack column {column!r}")
    rows = ds.to_list()
    return rows[:limit] if limit else rows


def _messages(row: Mapping[str, Any], i: int) -> list[dict[str, str]]:
    prompt = [{"role": str(m["role"]), "content": str(m["content"])} for m in row["prompt"] or []]
    if not prompt or prompt[-1]["role"] != "user":
        raise ValueError(f"test row {row.get('id', i)}: the prompt must end with a user turn")
    return prompt


# -------------------------------------------------------------------------------------------- generation
def response_backend(model: str, base_url: str | None = None, batch_size: int | None = None) -> ChatBackend:
    """The backend that answers for ``model``: an endpoint when ``base_url`` is given, else a local model
    (a folder, a Hub id in the local cache, or a ``convohub-tiny:`` name)."""
    if base_url:
        from convohub.llm import make_backend

        return make_backend(base_url, model=model)
    from convohub.llm import TransformersBackend
    from convohub.training.models import resolve_model

    kwargs = {} if batch_size is None else {"batch_size": batch_size}
    return TransformersBackend(resolve_model(model), model_id=model, **kwargs)


def generate_responses(backend: ChatBackend, prompts: Sequence[list[dict[str, str]]], *, max_new_tokens: int = 256,
                       max_prompt_length: int | None = None) -> list[str]:
    """Greedy answers to each prompt; a local model's prompts are fitted by the training truncation policy
    (oldest turns dropped). A failed generation becomes an empty answer (it loses on its merits)."""
    tokenizer = getattr(backend, "tokenizer", None)
    if tokenizer is not None and max_prompt_length:
        from convohub.wildfeedback.alignment import chat_token_counter, truncate_prompt

        count = chat_token_counter(tokenizer)
        fitted = []
        for p in prompts:
            t = truncate_prompt(p, count, max_prompt_length, tokenizer=tokenizer)
            fitted.append(t.messages or [p[-1]])
        prompts = fitted
    requests = [ChatRequest(messages=p, max_new_tokens=max_new_tokens, temperature=0.0) for p in prompts]
    responses = run_chat(backend, requests, desc=f"generate ({backend.model_id})", progress=False)
    return [r.text.strip() if r.ok else "" for r in responses]


# -------------------------------------------------------------------------------------------- evaluation
def evaluate(model: str, baseline: str | Mapping[str, str], dataset: str | Path, *, config: str = "test",
             split: str | None = None, limit: int | None = None, judge: ChatBackend | None = None,
             judge_base_url: str | None = None, judge_model: str | None = None, model_base_url: str | None = None,
             baseline_base_url: str | None = None, max_new_tokens: int = 256, max_prompt_length: int | None = 3072,
             judge_max_new_tokens: int = 1024, cache_dir: str | Path | None = None, examples: int = 3,
             prompt_style: str | None = None) -> dict[str, Any]:
    """Table 2's checklist and no-checklist win/tie/lose of ``model`` (candidate) against each baseline.

    ``baseline`` is one model, or ``{label: model}`` for several (the release: ``{"sft": ..., "base": ...}``);
    every model answers once and the candidate's answers are judged against each baseline's. Returns
    ``{"n", "model", "judge", "prompt_style", "config", "comparisons": {label: {"baseline", "with_checklist",
    "without_checklist", "examples"}}}``; each setting holds win/tie/lose (fractions of ``n_judged``),
    mean_reward, parse_failures and n_judged from
    :func:`convohub.metrics.checklist_judge.summarise_judgements`. The judge must be named (see the module doc).
    """
    from convohub.metrics.checklist_judge import (
        default_prompt_style,
        judge_pairs,
        resolve_judge,
        summarise_judgements,
    )

    baselines = {"baseline": baseline} if isinstance(baseline, str) else dict(baseline)
    if not baselines:
        raise ValueError("evaluate needs at least one baseline model")
    rows = load_test_rows(dataset, config, split, limit)
    if not rows:
        raise ValueError(f"{dataset}: the {config!r} config has no test rows")
    prompts = [_messages(r, i) for i, r in enumerate(rows)]
    judge_backend = resolve_judge(judge, judge_base_url, judge_model, cache_dir)
    style = prompt_style or default_prompt_style(judge_backend)
    answers: dict[str, list[str]] = {}
    for key, name, url in (("model", model, model_base_url),
                           *((label, name, baseline_base_url) for label, name in baselines.items())):
        backend = response_backend(name, url)
        answers[key] = generate_responses(backend, prompts, max_new_tokens=max_new_tokens,
                                          max_prompt_length=max_prompt_length)
        del backend  # free a local model before loading the next one
    histories = [p[:-1] for p in prompts]
    queries = [p[-1]["content"] for p in prompts]
    checklists = [[str(x) for x in (r.get("preferences") or [])] for r in rows]
    results: dict[str, Any] = {"n": len(rows), "model": model, "judge": judge_backend.model_id,
                               "prompt_style": style, "config": config, "max_new_tokens": max_new_tokens,
                               "comparisons": {}}
    for label, name in baselines.items():
        comparison: dict[str, Any] = {"baseline": name}
        for key, with_checklist in (("with_checklist", True), ("without_checklist", False)):
            judgements = judge_pairs(answers["model"], answers[label], histories, queries, checklists,
                                     judge_backend, with_checklist=with_checklist,
                                     max_new_tokens=judge_max_new_tokens, prompt_style=style)
            comparison[key] = summarise_judgements(judgements)
            if with_checklist:
                comparison["examples"] = [
                    {"id": rows[i].get("id", i), "query": queries[i], "model": answers["model"][i],
                     "baseline": answers[label][i], "verdicts": list(judgements[i].verdicts),
                     "outcome": judgements[i].outcome} for i in range(min(examples, len(rows)))]
        results["comparisons"][label] = comparison
    return results


def _cell(value: float) -> str:
    return "  n/a" if isinstance(value, float) and math.isnan(value) else f"{100 * value:5.1f}"


def format_table(results: Mapping[str, Any]) -> str:
    """Table 2 style per baseline: W/T/L (%) with and without checklist, plus judged counts and parse failures."""
    lines = [f"{results['model']} (judge: {results['judge']}, {results.get('prompt_style', 'wb-reward')} prompt, "
             f"n={results['n']})",
             "baseline                  setting          win   tie  lose  judged  parse_failures"]
    for label, comparison in results["comparisons"].items():
        for key, setting in (("with_checklist", "checklist"), ("without_checklist", "no checklist")):
            r = comparison[key]
            lines.append(f"{label + ': ' + str(comparison['baseline']):<25.25} {setting:<14} {_cell(r['win'])} "
                         f"{_cell(r['tie'])} {_cell(r['lose'])}  {r['n_judged']:6d}  {r['parse_failures']:14d}")
    if results["judge"] == LEXICAL_JUDGE:
        lines.append("note: the lexical stand-in judge checks the plumbing; it is not a quality measurement")
    return "\n".join(lines)
