"""WildChat-AQA answerers: each ranks the ten options of every question, with or without a context.

Methods (the paper's section 4.2 and Table 3), by name:

* ``random``: a uniformly random ranking (seeded per question);
* ``bm25`` / ``cosine``: the options ranked by their BM25 score (bm25s, the ten options as the corpus) or by
  the cosine of their all-MiniLM-L6-v2 embeddings to the question, no context;
* ``no-context``, ``rag``, ``probe``, ``oracle``: an LLM ranks the options with no context, with RAG's, with
  PROBE's, or with the gold supports as context (:mod:`convohub.aqa.context`).

An LLM method is read by one of three answerers:

* ``paper``: the paper's prompt and JSON answer, read with the authors' parser
  (:func:`convohub.aqa.answers.parse_ranking`); an unreadable answer scores every option 0, as theirs;
* ``small``: a short prompt asking only for the ranking list (one worked example), read as the first JSON
  list in the answer (the authors' parser cannot read a bare list); unreadable scores every option 0 too;
* ``likelihood``: no generation. The local model scores each option as its reply after the question (and the
  context): the mean log-probability of the option's tokens. With a context, the score is *calibrated*: the
  same option's mean log-probability without the context is subtracted, so an option ranks high when the
  documents make it likelier, not when the model always likes it. Always parses; needs a local model.

SmolLM2-135M-Instruct (the offline LLM) rarely writes a ranking the two generating prompts can read, so a
local model answers with ``likelihood`` by default (:func:`default_answerer`); the release measures the
generating prompts' parse rates on the offline model and puts them in the dataset card beside the NDCG@k
of every method (:func:`convohub.aqa.release_eval.prompt_checks`).

Every LLM answerer packs the context's documents into its prompt, in retrieval order, until the prompt
budget in tokens of the answering model's tokenizer (:mod:`convohub.aqa.tokens`) and records the input
tokens it used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convohub.aqa.answers import parse_ranking
from convohub.aqa.context import Context
from convohub.aqa.prompts import answer_prompt, likelihood_prompt
from convohub.aqa.questions import N_OPTIONS, Question
from convohub.aqa.tokens import TokenCounter, pack
from convohub.llm.choices import local_model

METHODS = ("random", "bm25", "cosine", "no-context", "rag", "probe", "oracle")
TEXT_METHODS = ("random", "bm25", "cosine")
LLM_METHODS = ("no-context", "rag", "probe", "oracle")
ANSWERERS = ("paper", "small", "likelihood")
#: Tokens an answer may use: the paper's JSON carries an explanation first; the list is ~30 tokens.
MAX_NEW_TOKENS = {"paper": 512, "small": 40}


@dataclass
class Answer:
    """One question's answer: the ranking that is scored and what it cost."""

    ranking: list[int]
    parsed: bool | None = None  # None: nothing to parse (text similarity, likelihood)
    complete: bool | None = None  # a permutation of all ten options
    input_tokens: int = 0
    documents: int = 0  # documents that fit into the prompt
    retrieved: list[str] = field(default_factory=list)  # conversation hashes, retrieval order
    doc_ids: list[str] = field(default_factory=list)  # documents in the prompt
    request: dict[str, Any] | None = None  # PROBE's request as used
    text: str = ""  # the model's answer (generating answerers)
    scores: list[float] | None = None  # per-option scores (likelihood, bm25, cosine)


def default_answerer(backend: Any) -> str:
    """``likelihood`` for a local model (it reads no generated text), the paper's prompt for an endpoint."""
    return "likelihood" if local_model(backend) is not None else "paper"


def _order(question: Question, seed: int) -> np.ndarray:
    """A seeded random order of the options of one question, for ties (options carry no gold order)."""
    digest = hashlib.sha256(f"{seed}:{question.hash}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little")).permutation(len(question.options))


def rank_scores(scores: Sequence[float], question: Question, seed: int = 0) -> list[int]:
    """Option indices by descending score; ties in a seeded random order (never in option order)."""
    tie = np.empty(len(scores), dtype=np.int64)
    tie[_order(question, seed)] = np.arange(len(scores))
    return [int(i) for i in np.lexsort((tie, -np.asarray(scores, dtype=np.float64)))]


def is_complete(ranking: Sequence[int], n: int = N_OPTIONS) -> bool:
    return sorted(ranking) == list(range(n))


# ------------------------------------------------------------------------------------------ no context
def random_rankings(questions: Sequence[Question], seed: int = 0) -> list[Answer]:
    return [Answer([int(i) for i in _order(q, seed + 1)]) for q in questions]


def bm25_rankings(questions: Sequence[Question], seed: int = 0) -> list[Answer]:
    """Options ranked by BM25 against the question (the ten options are the corpus; English stopwords)."""
    from convohub.bm25 import english_index, english_query_tokens

    out = []
    for q in questions:
        retriever = english_index(q.options)
        [tokens] = english_query_tokens([q.question])
        scores = np.asarray(retriever.get_scores(tokens)) if tokens else np.zeros(len(q.options))
        out.append(Answer(rank_scores(scores, q, seed), scores=[float(s) for s in scores]))
    return out


def cosine_rankings(questions: Sequence[Question], seed: int = 0) -> list[Answer]:
    """Options ranked by the cosine of their MiniLM embedding to the question's."""
    from convohub.embeddings import embed

    texts = list(dict.fromkeys([t for q in questions for t in (q.question, *q.options)]))
    vectors = dict(zip(texts, embed(texts), strict=True))
    out = []
    for q in questions:
        scores = np.stack([vectors[o] for o in q.options]) @ vectors[q.question]
        out.append(Answer(rank_scores(scores, q, seed), scores=[float(s) for s in scores]))
    return out


def text_rankings(method: str, questions: Sequence[Question], seed: int = 0) -> list[Answer]:
    makers = {"random": random_rankings, "bm25": bm25_rankings, "cosine": cosine_rankings}
    if method not in makers:
        raise ValueError(f"{method!r} is not a text-similarity method: use one of {', '.join(makers)}")
    return makers[method](questions, seed)


# ------------------------------------------------------------------------------------------ LLM answerers
def _packed(context: Context, base_tokens: int, counter: TokenCounter, budget: int) -> int:
    counts = counter.many(context.documents)
    return pack(context.documents, [c + 2 for c in counts], base_tokens, budget)  # + the blank line


def _answer(context: Context, n_docs: int, ranking: list[int], **fields: Any) -> Answer:
    return Answer(ranking, documents=n_docs, retrieved=list(context.retrieved), doc_ids=context.doc_ids[:n_docs],
                  request=context.request, **fields)


def read_list(text: str) -> list[int]:
    """The ``small`` answerer's reading: the first JSON list in the answer as option indices (at most ten),
    or ``[]`` (every option 0) when there is none."""
    from convohub.llm import parse_json_answer

    parsed = parse_json_answer(text, list)
    if not parsed.ok:
        return []
    try:
        return [int(v) for v in parsed.value][:N_OPTIONS]
    except (TypeError, ValueError):
        return []


def generate_rankings(backend: Any, questions: Sequence[Question], contexts: Sequence[Context], *, style: str,
                      budget: int, counter: TokenCounter, summaries: bool = False, progress: bool = False,
                      max_new_tokens: int | None = None) -> list[Answer]:
    """Ask ``backend`` to rank each question's options with the ``paper`` or ``small`` prompt (one call per
    question, all in one batch, greedy), documents packed to ``budget`` prompt tokens."""
    from convohub.llm import ChatRequest, run_chat

    if style not in ("paper", "small"):
        raise ValueError(f"unknown generating answerer {style!r}: use 'paper' or 'small'")
    prompts, packed = [], []
    for q, c in zip(questions, contexts, strict=True):
        base = counter(answer_prompt(q.question, q.options, style=style))
        n = _packed(c, base, counter, budget)
        prompts.append(answer_prompt(q.question, q.options, c.documents[:n], style=style, summaries=summaries))
        packed.append(n)
    tokens = max_new_tokens or MAX_NEW_TOKENS[style]
    responses = run_chat(backend, [ChatRequest.from_prompt(p, max_new_tokens=tokens) for p in prompts],
                         desc=f"answers ({style} prompt)", progress=progress)
    out = []
    for c, prompt, n, response in zip(contexts, prompts, packed, responses, strict=True):
        text = response.text if response.ok else ""
        ranking = parse_ranking(text) if style == "paper" else read_list(text)
        out.append(_answer(c, n, ranking, parsed=bool(ranking), complete=is_complete(ranking),
                           input_tokens=counter(prompt), text=text or (response.error or "")))
    return out


class LikelihoodScorer:
    """Mean log-probability of each option as the model's reply to a prompt, on a local causal LM.

    The log-probabilities are :func:`convohub.llm.choices.continuation_logprobs`, the forward code the closed
    answers of :class:`convohub.llm.choices.ChoiceBackend` use too: each prompt runs once for its options, and
    the instructions every prompt of a call shares run once for the call. Scores are cached by (prompt,
    options): the calibration prior of a question recurs in every method."""

    def __init__(self, backend: Any) -> None:
        local = local_model(backend)
        if local is None:
            raise ValueError(f"the likelihood answerer scores options with a local model, and {backend!r} is an "
                             "endpoint: use --llm smollm2 or --llm local:/folder, or the paper/small answerer")
        self.local, self.tokenizer, self.model_id = local, local.tokenizer, local.model_id
        self._scores: dict[tuple[str, tuple[str, ...]], list[float]] = {}

    def __call__(self, prompt: str, options: Sequence[str]) -> list[float]:
        """The options' mean log-probabilities after ``prompt``."""
        self.prefetch([(prompt, options)])
        return self._scores[(prompt, tuple(options))]

    def prefetch(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> None:
        """Score every (prompt, options) pair not scored yet."""
        todo = list(dict.fromkeys((p, tuple(o)) for p, o in pairs if (p, tuple(o)) not in self._scores))
        if todo:
            scores = self.score([(self.prompt_ids(p), self.option_ids(o)) for p, o in todo])
            self._scores.update(zip(todo, scores, strict=True))

    def prompt_ids(self, prompt: str) -> list[int]:
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def option_ids(self, options: Sequence[str]) -> list[list[int]]:
        ids = self.tokenizer(list(options), add_special_tokens=False)["input_ids"]
        eos = self.tokenizer.eos_token_id
        return [i or [eos] for i in ids]

    def score(self, items: Sequence[tuple[list[int], list[list[int]]]]) -> list[list[float]]:
        """Mean option log-probabilities for each (prompt ids, option ids) item."""
        from convohub.llm.choices import continuation_logprobs

        sums = continuation_logprobs(self.local, [p for p, _ in items], [o for _, o in items])
        return [[total / len(option) for total, option in zip(row, options, strict=True)]
                for row, (_, options) in zip(sums, items, strict=True)]


def likelihood_rankings(backend: Any, questions: Sequence[Question], contexts: Sequence[Context], *, budget: int,
                        counter: TokenCounter, seed: int = 0, calibrate: bool = True, progress: bool = False,
                        scorer: LikelihoodScorer | None = None) -> list[Answer]:
    """Rank options by their (calibrated, see module doc) mean log-probability under the local model.
    Input tokens count the prompt, the ten options, and the calibration prompt when there is a context."""
    scorer = scorer or LikelihoodScorer(backend)
    plans = []
    for q, c in zip(questions, contexts, strict=True):
        base_prompt = likelihood_prompt(q.question)
        n = _packed(c, counter(base_prompt), counter, budget)
        plans.append((base_prompt, likelihood_prompt(q.question, c.documents[:n]), n))
    pairs = [(prompt, q.options) for q, (_, prompt, _) in zip(questions, plans, strict=True)]
    pairs += [(base, q.options) for q, (base, _, n) in zip(questions, plans, strict=True) if calibrate and n]
    scorer.prefetch(pairs)
    out = []
    for q, c, (base_prompt, prompt, n) in zip(questions, contexts, plans, strict=True):
        option_tokens = sum(counter.many(list(q.options)))
        scores = scorer(prompt, q.options)
        used = counter(prompt) + option_tokens
        if calibrate and n:
            scores = [s - p for s, p in zip(scores, scorer(base_prompt, q.options), strict=True)]
            used += counter(base_prompt) + option_tokens
        out.append(_answer(c, n, rank_scores(scores, q, seed), input_tokens=used, scores=scores))
    return out
