"""WildFeedback's user-guided evaluation: an aligned model against its base model on the held-out test split.

Both models answer the prompt of every test instance (greedy); the checklist judge
(:mod:`convohub.metrics.checklist_judge`, WB-Reward layout) compares the two answers with the instance's
summarised user preferences as the checklist, and again without it (the paper's ablation). The judge sees
every pair in both orders and averages (position bias cancels); unparseable judge outputs are counted as
parse failures, never as ties. The result is the paper's Table 2 columns: win/tie/lose of the aligned model.

Judges. A real run uses a strong LLM behind an OpenAI-compatible endpoint (the paper: GPT-4o) or a local
chat model. Offline, :class:`LexicalChecklistJudge` is a transparent stand-in that answers the same prompt
with a rule (the response sharing more content words with the checklist - or, without checklist, with the
query - wins); its numbers check the plumbing, they say nothing about quality, and every output names it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convohub.llm import ChatBackend, ChatRequest, ChatResponse, run_chat

LEXICAL_JUDGE = "convohub-lexical-judge"
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for",
                   "from", "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my", "no",
                   "not", "of", "on", "or", "our", "please", "should", "so", "that", "the", "their",
                   "them", "then", "there", "these", "this", "to", "was", "we", "what", "when", "which",
                   "who", "why", "will", "with", "would", "you", "your", "response", "answer", "user"})


def _section(text: str, name: str) -> str:
    match = re.search(rf"<\|begin_of_{name}\|>\n?(.*?)\n?<\|end_of_{name}\|>", text, re.S)
    return match.group(1) if match else ""


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


class LexicalChecklistJudge(ChatBackend):
    """Offline stand-in judge: reads the checklist-judge prompt, answers its JSON with a lexical rule.

    Score of a response = share of the checklist's content words it contains (query words when the prompt
    has no checklist), plus a small bonus for sharing query words; the higher score wins ("A+"/"B+", "++"
    when the gap exceeds ``strong_gap``), equal scores give "A=B". Deterministic; no model involved.
    """

    kind = "rules"

    def __init__(self, strong_gap: float = 0.25) -> None:
        self.strong_gap = strong_gap

    @property
    def model_id(self) -> str:
        return LEXICAL_JUDGE

    def verdict(self, prompt: str) -> str:
        query, checklist = _words(_section(prompt, "query")), _words(_section(prompt, "checklist"))
        target = checklist or query
        scores = []
        for name in ("response_A", "response_B"):
            words = _words(_section(prompt, name))
            cover = len(words & target) / len(target) if target else 0.0
            scores.append(cover + 0.1 * (len(words & query) / len(query) if query else 0.0))
        gap = scores[0] - scores[1]
        if abs(gap) < 1e-9:
            return "A=B"
        side = "A" if gap > 0 else "B"
        return side + ("++" if abs(gap) > self.strong_gap else "+")

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = []
        for request in requests:
            choice = self.verdict(request.messages[-1]["content"])
            text = ('{"analysis of A": "lexical overlap rule", "analysis of B": "lexical overlap rule", '
                    '"reason of A=B": "", "reason of A>B": "", "reason of B>A": "", "choice": "' + choice + '"}')
            out.append(ChatResponse(text=text, finish_reason="stop"))
        return out


# ------------------------------------------------------------------------------------------------ data
def load_test_rows(dataset: str | Path, config: str = "test", split: str | None = None,
                   limit: int | None = None) -> list[dict[str, Any]]:
    """Test instances (prompt, preferences, ...) from a built dataset folder, a Parquet file or a Hub id."""
    import datasets

    path = Path(dataset)
    if path.is_file():
        ds = datasets.Dataset.from_parquet(str(path))
    elif path.is_dir():
        from convohub.hub import load_local

        splits = load_local(path, config)
        ds = splits[split] if split else splits[next(iter(splits))]
    else:
        ds = datasets.load_dataset(str(dataset), config, split=split or "test")
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
def response_backend(model: str, base_url: str | None = None, batch_size: int = 8) -> ChatBackend:
    """The backend that answers for ``model``: an endpoint when ``base_url`` is given, else a local model
    (a folder, a Hub id in the local cache, or a ``convohub-tiny:`` name)."""
    if base_url:
        from convohub.llm import make_backend

        return make_backend(base_url, model=model)
    from convohub.llm import TransformersBackend
    from convohub.training.models import resolve_model

    return TransformersBackend(resolve_model(model), batch_size=batch_size, model_id=model)


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
def resolve_eval_judge(judge: ChatBackend | None = None, judge_base_url: str | None = None,
                       judge_model: str | None = None, cache_dir: str | Path | None = None) -> ChatBackend:
    """``judge_model == "convohub-lexical-judge"`` (or ``"lexical"``) -> the offline stand-in; anything
    else is :func:`convohub.metrics.checklist_judge.resolve_judge` (endpoint, local model, environment)."""
    if judge is None and judge_base_url is None and judge_model in (LEXICAL_JUDGE, "lexical"):
        return LexicalChecklistJudge()
    from convohub.metrics.checklist_judge import resolve_judge

    return resolve_judge(judge, judge_base_url, judge_model, cache_dir)


def evaluate(model: str, baseline: str, dataset: str | Path, *, config: str = "test", split: str | None = None,
             limit: int | None = None, judge: ChatBackend | None = None, judge_base_url: str | None = None,
             judge_model: str | None = None, model_base_url: str | None = None,
             baseline_base_url: str | None = None, max_new_tokens: int = 256, max_prompt_length: int | None = 3072,
             judge_max_new_tokens: int = 1024, cache_dir: str | Path | None = None,
             examples: int = 3) -> dict[str, Any]:
    """Table 2's checklist and no-checklist win/tie/lose of ``model`` (candidate) against ``baseline``.

    Returns ``{"with_checklist": {...}, "without_checklist": {...}, "n", "model", "baseline", "judge",
    "examples"}`` where each setting holds win/tie/lose (fractions of ``n_judged``), mean_reward,
    parse_failures and n_judged from :func:`convohub.metrics.checklist_judge.summarise_judgements`.
    """
    from convohub.metrics.checklist_judge import judge_pairs, summarise_judgements

    rows = load_test_rows(dataset, config, split, limit)
    if not rows:
        raise ValueError(f"{dataset}: the {config!r} config has no test rows")
    prompts = [_messages(r, i) for i, r in enumerate(rows)]
    judge_backend = resolve_eval_judge(judge, judge_base_url, judge_model, cache_dir)
    answers = {}
    for key, name, url in (("model", model, model_base_url), ("baseline", baseline, baseline_base_url)):
        backend = response_backend(name, url)
        answers[key] = generate_responses(backend, prompts, max_new_tokens=max_new_tokens,
                                          max_prompt_length=max_prompt_length)
        del backend  # free a local model before loading the next one
    histories = [p[:-1] for p in prompts]
    queries = [p[-1]["content"] for p in prompts]
    checklists = [[str(x) for x in (r.get("preferences") or [])] for r in rows]
    results: dict[str, Any] = {"n": len(rows), "model": model, "baseline": baseline,
                               "judge": judge_backend.model_id, "config": config}
    for key, with_checklist in (("with_checklist", True), ("without_checklist", False)):
        judgements = judge_pairs(answers["model"], answers["baseline"], histories, queries, checklists,
                                 judge_backend, with_checklist=with_checklist, max_new_tokens=judge_max_new_tokens)
        results[key] = summarise_judgements(judgements)
        if key == "with_checklist":
            results["examples"] = [
                {"id": rows[i].get("id", i), "query": queries[i], "model": answers["model"][i],
                 "baseline": answers["baseline"][i], "verdicts": list(judgements[i].verdicts),
                 "outcome": judgements[i].outcome} for i in range(min(examples, len(rows)))]
    return results


def _cell(value: float) -> str:
    return "  n/a" if isinstance(value, float) and math.isnan(value) else f"{100 * value:5.1f}"


def format_table(results: Mapping[str, Any]) -> str:
    """Table 2 style: W/T/L (%) with and without checklist, plus judged counts and parse failures."""
    lines = [f"{results['model']} vs {results['baseline']} (judge: {results['judge']}, n={results['n']})",
             "setting            win   tie  lose  judged  parse_failures"]
    for key, label in (("with_checklist", "checklist"), ("without_checklist", "no checklist")):
        r = results[key]
        lines.append(f"{label:<15} {_cell(r['win'])} {_cell(r['tie'])} {_cell(r['lose'])}  {r['n_judged']:6d}  "
                     f"{r['parse_failures']:14d}")
    if results["judge"] == LEXICAL_JUDGE:
        lines.append("note: the lexical stand-in judge checks the plumbing; it is not a quality measurement")
    return "\n".join(lines)
