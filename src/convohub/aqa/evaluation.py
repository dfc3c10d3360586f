"""Run a WildChat-AQA method over a built folder's questions and measure it.

:class:`AQARunner` holds what several methods share (the questions, one retrieval index per context, PROBE's
requests, the answering model and its token counter), so the release and ``convohub aqa evaluate`` build
each once. :meth:`AQARunner.evaluate` returns one flat, JSON-ready result: NDCG@1/3/5/10 (the authors'
scoring, :func:`convohub.metrics.ndcg_at_k`), the parse rate of a generating answerer, the input tokens used
(with the tokenizer that counted them), Recall@k of the retrieval against the gold supports where the
questions have them, PROBE's request statistics, and seconds (wall and CPU).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convohub.aqa.context import (
    Context,
    ProbeStats,
    build_index,
    no_context,
    oracle_context,
    probe_context,
    probe_requests,
    rag_context,
)
from convohub.aqa.methods import (
    ANSWERERS,
    LLM_METHODS,
    METHODS,
    TEXT_METHODS,
    Answer,
    LikelihoodScorer,
    generate_rankings,
    likelihood_rankings,
    text_rankings,
)
from convohub.aqa.questions import CONTEXTS, Question, load_questions
from convohub.aqa.retrieval import RetrievalIndex
from convohub.aqa.tokens import TokenCounter, budget_for, counter_for
from convohub.metrics.ndcg import DEFAULT_NDCG_K, DEFAULT_RECALL_K, ndcg_at_k, recall_at_k

#: Retrieved conversations per question offline, and for a paper-scale model (o4-mini, raw [repo]).
TINY_K = 20
PAPER_K = 100


@dataclass(frozen=True)
class Setting:
    """One row of the results: a method, and for an LLM method its context, answerer and retrieval knobs."""

    method: str
    context: str = "summary"
    answerer: str = "likelihood"
    k: int | None = None
    budget: int | None = None
    pooling: str = "max"
    probe_prompt: str = "paper"
    max_new_tokens: int | None = None  # generating answerers: cap on the answer (default: MAX_NEW_TOKENS)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}: use one of {', '.join(METHODS)}")
        if self.context not in CONTEXTS:
            raise ValueError(f"unknown context {self.context!r}: use 'raw' or 'summary'")
        if self.answerer not in ANSWERERS:
            raise ValueError(f"unknown answerer {self.answerer!r}: use one of {', '.join(ANSWERERS)}")
        if self.pooling not in ("max", "sum"):
            raise ValueError(f"unknown pooling {self.pooling!r}: use 'max' or 'sum'")

    @property
    def label(self) -> str:
        if self.method in TEXT_METHODS:
            return self.method
        parts = [self.method] + ([self.context] if self.method != "no-context" else []) + [self.answerer]
        if self.method == "probe":
            parts.append(f"{self.probe_prompt}-request")
        return " / ".join(parts)


def is_offline_model(backend: Any) -> bool:
    from convohub.models import SMOLLM2_ID

    return getattr(backend, "model_id", "") == SMOLLM2_ID


class AQARunner:
    """Questions, indexes and the answering model of one evaluation (module doc)."""

    def __init__(self, dataset_dir: str | Path, *, backend: Any = None, questions: Sequence[Question] | None = None,
                 config: str = "questions", limit: int | None = None, seed: int = 0, progress: bool = False,
                 indexes: dict[str, RetrievalIndex] | None = None, scorer: LikelihoodScorer | None = None,
                 counter: TokenCounter | None = None) -> None:
        """``indexes``: a dict of retrieval indexes by context to share between runners (filled on use);
        ``scorer``: a likelihood scorer (and its cache of scores) to share; ``counter``: the answering model's
        token counter, to share (default: made on first use, which may load a tokenizer)."""
        self.dataset_dir = Path(dataset_dir)
        self.questions = list(questions) if questions is not None else load_questions(self.dataset_dir, config, limit)
        if not self.questions:
            raise ValueError(f"{self.dataset_dir}: no questions in config {config!r}")
        self.backend, self.seed, self.progress = backend, seed, progress
        self._indexes: dict[str, RetrievalIndex] = {} if indexes is None else indexes
        self._probe: dict[tuple[str, str], list[str | None]] = {}
        self._contexts: dict[tuple[Any, ...], tuple[list[Context], ProbeStats | None]] = {}
        self._counter: TokenCounter | None = counter
        self._scorer: LikelihoodScorer | None = scorer

    # ------------------------------------------------------------------ shared pieces
    def index(self, context: str) -> RetrievalIndex:
        if context not in self._indexes:
            self._indexes[context] = build_index(self.dataset_dir, context)
        return self._indexes[context]

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = counter_for(self.llm)
        return self._counter

    @property
    def llm(self) -> Any:
        if self.backend is None:
            raise ValueError("this method needs an LLM: pass backend= (e.g. convohub.llm.make_backend('smollm2'))")
        return self.backend

    def defaults(self, setting: Setting) -> tuple[int, int]:
        """(k, budget) of a setting: given, else the offline or the paper default for the answering model."""
        offline = is_offline_model(self.llm)
        k = setting.k or (TINY_K if offline else PAPER_K)
        budget = setting.budget or budget_for(self.llm.model_id, tiny=offline)
        return k, budget

    def probe_answers(self, style: str) -> list[str | None]:
        """PROBE's raw requests for every question (asked once per prompt style, shared by all answerers)."""
        key = (style, self.llm.model_id)
        if key not in self._probe:
            self._probe[key] = probe_requests(self.llm, self.questions, style=style, seed=self.seed,
                                              progress=self.progress)
        return self._probe[key]

    def contexts(self, setting: Setting, k: int) -> tuple[list[Context], ProbeStats | None]:
        key = (setting.method, setting.context, k, setting.pooling, setting.probe_prompt)
        if key not in self._contexts:
            stats = None
            if setting.method == "no-context":
                built = no_context(self.questions)
            elif setting.method == "rag":
                built = rag_context(self.index(setting.context), self.questions, k)
            elif setting.method == "oracle":
                built = oracle_context(self.index(setting.context), self.questions)
            else:
                stats = ProbeStats()
                built = probe_context(self.index(setting.context), self.questions,
                                      self.probe_answers(setting.probe_prompt), k, pooling=setting.pooling,
                                      stats=stats, drop_unknown=setting.probe_prompt == "small")
            self._contexts[key] = (built, stats)
        return self._contexts[key]

    # ------------------------------------------------------------------ running
    def answers(self, setting: Setting) -> tuple[list[Answer], dict[str, Any]]:
        """Every question's answer under ``setting`` and what the run used (k, budget, PROBE statistics)."""
        if setting.method in TEXT_METHODS:
            return text_rankings(setting.method, self.questions, self.seed), {}
        k, budget = self.defaults(setting)
        contexts, stats = self.contexts(setting, k)
        common = {"budget": budget, "counter": self.counter, "progress": self.progress}
        if setting.answerer == "likelihood":
            self._scorer = self._scorer or LikelihoodScorer(self.llm)
            answers = likelihood_rankings(self.llm, self.questions, contexts, seed=self.seed, scorer=self._scorer,
                                          **common)
        else:
            answers = generate_rankings(self.llm, self.questions, contexts, style=setting.answerer,
                                        summaries=setting.context == "summary",
                                        max_new_tokens=setting.max_new_tokens, **common)
        info: dict[str, Any] = {"model": self.llm.model_id, "tokenizer": self.counter.name, "budget": budget}
        if setting.method in ("rag", "probe"):
            info["k"] = k
        if stats is not None:
            info["probe"] = stats.as_dict()
        return answers, info

    def evaluate(self, setting: Setting) -> tuple[dict[str, Any], list[Answer]]:
        """Run ``setting`` and measure it (module doc); returns (results, answers)."""
        wall, cpu = time.perf_counter(), time.process_time()
        answers, info = self.answers(setting)
        results: dict[str, Any] = {"method": setting.method, "label": setting.label, "questions": len(answers)}
        if setting.method in LLM_METHODS:
            results |= {"context": setting.context if setting.method != "no-context" else None,
                        "answerer": setting.answerer}
            if setting.method == "probe":
                results |= {"pooling": setting.pooling, "probe_prompt": setting.probe_prompt}
        results |= score_answers(self.questions, answers, retrieval=setting.method in ("rag", "probe", "oracle"))
        results |= info
        results["seconds"] = round(time.perf_counter() - wall, 2)
        results["cpu_seconds"] = round(time.process_time() - cpu, 2)
        return results, answers


def score_answers(questions: Sequence[Question], answers: Sequence[Answer], *, retrieval: bool = False) -> dict[str, Any]:
    """NDCG@k, parse and completeness rates, input tokens and (for retrieval) Recall@k of some answers."""
    out: dict[str, Any] = {k: round(v, 4) for k, v in ndcg_at_k([a.ranking for a in answers],
                                                                [list(q.weights) for q in questions],
                                                                DEFAULT_NDCG_K).items()}
    parsed = [a.parsed for a in answers if a.parsed is not None]
    if parsed:
        out["parse_rate"] = round(sum(parsed) / len(parsed), 4)
        out["complete_rate"] = round(sum(bool(a.complete) for a in answers) / len(answers), 4)
    tokens = sum(a.input_tokens for a in answers)
    if tokens:
        out["input_tokens"] = tokens
        out["input_tokens_per_question"] = round(tokens / len(answers), 1)
        out["documents_per_question"] = round(sum(a.documents for a in answers) / len(answers), 2)
    if retrieval and any(q.support for q in questions):
        depth = max((len(a.retrieved) for a in answers), default=0)
        ks = sorted({k for k in DEFAULT_RECALL_K if k <= depth} | ({depth} if depth else set()))
        if ks:
            recall = recall_at_k([a.retrieved for a in answers], [list(q.support) for q in questions], ks)
            out |= {k: round(v, 4) for k, v in recall.items()}
    return out


def format_results(results: dict[str, Any]) -> str:
    """A few lines for the terminal: NDCG@k, then parse rate, tokens, recall, PROBE fallbacks, time."""
    lines = [f"{results['label']} on {results['questions']} questions"
             + (f" ({results['model']}, prompt budget {results['budget']} tokens)" if "model" in results else "")]
    lines.append("  " + "  ".join(f"NDCG@{k} {results[f'ndcg@{k}']:.4f}" for k in DEFAULT_NDCG_K))
    if "parse_rate" in results:
        lines.append(f"  parse rate {results['parse_rate']:.2%} (complete rankings {results['complete_rate']:.2%})")
    if "input_tokens" in results:
        lines.append(f"  input tokens {results['input_tokens']:,} ({results['input_tokens_per_question']:,} per "
                     f"question, {results['documents_per_question']} documents; counted with {results['tokenizer']})")
    recalls = [k for k in results if k.startswith("recall@")]
    if recalls:
        lines.append("  " + "  ".join(f"Recall@{k.split('@')[1]} {results[k]:.4f}" for k in recalls))
    if "probe" in results:
        stats = results["probe"]
        lines.append(f"  PROBE requests: {stats['json_valid']}/{stats['requests']} JSON-valid; fallbacks: "
                     f"{stats['request_fallbacks']} whole request -> question, {stats['query_fallbacks']} queries "
                     f"-> question, {stats['date_fallbacks']} dates -> default; {stats['unknown_filter_values']} "
                     f"filter values unknown to the corpus ({'dropped' if results.get('probe_prompt') == 'small' else 'matching nothing'}), "
                     f"{stats['empty_results']} empty results")
    lines.append(f"  {results['seconds']} s ({results['cpu_seconds']} CPU s)")
    return "\n".join(lines)


def submission_lines(questions: Sequence[Question], answers: Sequence[Answer]) -> str:
    """The answers as a leaderboard submission (``convohub evaluate wildchat-aqa``): JSON Lines."""
    import json

    return "".join(json.dumps({"id": q.hash, "prediction": a.ranking}) + "\n"
                   for q, a in zip(questions, answers, strict=True))
