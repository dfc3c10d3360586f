"""Question quality control (paper Appendix E.8) and the stratified 10% subset.

The rule works on per-question NDCG@10 arrays: ``s_context`` (an answerer given the supporting
conversations), ``s_no_context`` (an answerer given only the question and options) and ``s_random`` with its
Monte Carlo standard deviation ``s_std`` (uniformly random rankings of the question's own options). A
question is removed when the context did not help *and* the context score is not significantly above
chance::

    remove  <=>  s_context - s_no_context <= 0  and  s_context < s_threshold,
    s_threshold = min(1, max(0, s_random + z_0.90 * s_std)),   z_0.90 = 1.2816 (one-sided 90%).

The paper's ``s_context`` is o4-mini's best score with the supporting summaries or raw conversations and
``s_no_context`` o4-mini's without. The answerers the build uses are named per row (``qc_scorers``) and on
the card; :data:`DEFAULT_SCORERS` are the cheap ones that exist without an LLM:

* context, ``support-count``: reads the question's supporting conversations (at most ``qc_retrieve`` of
  them, a seeded sample) as context lines of week, time, user, country, language and summary (what the
  authors' answerers read) and ranks each option by how many lines mention it, ties broken by the option's
  mean MiniLM cosine to those lines: a counting reader of the gold context;
* no context, ``cosine``: ranks options by MiniLM cosine to the question (the paper's Cosine baseline);
* random: ``qc_draws`` uniformly random rankings per question.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from convohub.aqa.settings import Z_090, Settings
from convohub.metrics.ndcg import ndcg_per_question

DEFAULT_SCORERS = {
    "context": "support-count (metadata and summaries of the supporting conversations, MiniLM cosine tie-break)",
    "no_context": "cosine (MiniLM, question vs options)",
    "random": "random rankings (Monte Carlo)",
}


def threshold(s_random: np.ndarray, s_std: np.ndarray, z: float = Z_090) -> np.ndarray:
    """``min(1, max(0, s_random + z * s_std))`` per question."""
    return np.clip(np.asarray(s_random, float) + z * np.asarray(s_std, float), 0.0, 1.0)


def qc_keep(s_context: Sequence[float], s_no_context: Sequence[float], s_random: Sequence[float],
            s_std: Sequence[float], z: float = Z_090) -> np.ndarray:
    """Boolean mask of the questions that survive quality control (see the module doc)."""
    s_context, s_no_context = np.asarray(s_context, float), np.asarray(s_no_context, float)
    if not len(s_context) == len(s_no_context) == len(s_random) == len(s_std):
        raise ValueError("s_context, s_no_context, s_random and s_std must have one score per question")
    remove = (s_context - s_no_context <= 0) & (s_context < threshold(s_random, s_std, z))
    return ~remove


def random_scores(weights: Sequence[Sequence[float]], draws: int, seed: int, k: int = 10
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of NDCG@k over ``draws`` uniformly random rankings, per question."""
    rng = np.random.default_rng(seed)
    means, stds = np.empty(len(weights)), np.empty(len(weights))
    for i, w in enumerate(weights):
        rankings = [list(rng.permutation(len(w))) for _ in range(draws)]
        scores = ndcg_per_question(rankings, [list(w)] * draws, k)[k]
        means[i], stds[i] = scores.mean(), scores.std(ddof=1) if draws > 1 else 0.0
    return means, stds


def read_support(question: Mapping[str, Any], settings: Settings) -> list[str]:
    """The supporting conversations the context scorer reads: all of them, or a seeded sample of
    ``qc_retrieve`` when there are more."""
    support = list(question["support"])
    if len(support) > settings.qc_retrieve:
        support = sorted(random.Random(f"qc/{question['hash']}").sample(support, settings.qc_retrieve))
    return support


def support_count_rankings(questions: Sequence[Mapping[str, Any]], contexts: Mapping[str, tuple[str, str]],
                           embed: Callable[[Sequence[str]], np.ndarray], settings: Settings) -> list[list[int]]:
    """The ``support-count`` context answerer (module doc): one ranking of option indices per question.
    ``contexts`` maps a conversation hash to its (context line, summary); the cosine tie-break compares an
    option with the summaries."""
    out = []
    for q in questions:
        support = read_support(q, settings)
        lines = [contexts[h][0].lower() for h in support if h in contexts]
        patterns = [re.compile(r"(?<![\w-])" + re.escape(o.lower()) + r"(?![\w-])") for o in q["options"]]
        counts = Counter({j: sum(1 for t in lines if p.search(t)) for j, p in enumerate(patterns)})
        if lines:
            sims = embed(list(q["options"])) @ embed([contexts[h][1] for h in support if h in contexts]).T
            closeness = sims.mean(axis=1)
        else:
            closeness = np.zeros(len(q["options"]))
        out.append(sorted(range(len(q["options"])), key=lambda j: (-counts[j], -closeness[j], j)))
    return out


def cosine_rankings(questions: Sequence[Mapping[str, Any]], embed: Callable[[Sequence[str]], np.ndarray]
                    ) -> list[list[int]]:
    """The ``cosine`` no-context answerer: options by MiniLM cosine to the question."""
    out = []
    for q in questions:
        sims = (embed(list(q["options"])) @ embed([q["question"]]).T)[:, 0]
        out.append(sorted(range(len(q["options"])), key=lambda j: (-sims[j], j)))
    return out


def quality_control(questions: Sequence[Mapping[str, Any]], contexts: Mapping[str, tuple[str, str]], settings: Settings,
                    embed: Callable[[Sequence[str]], np.ndarray] | None = None
                    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score every question with :data:`DEFAULT_SCORERS` (``contexts``: hash -> (context line, summary)),
    apply :func:`qc_keep`, and return the kept questions (each with its scores and ``qc_scorers``) and a
    report (counts, mean scores)."""
    from convohub.aqa.embedding import Memo

    embed = embed if isinstance(embed, Memo) else Memo(embed)
    if not questions:
        return [], {"before": 0, "after": 0, "scorers": DEFAULT_SCORERS}
    embed.warm([o for q in questions for o in q["options"]] + [q["question"] for q in questions]
               + [contexts[h][1] for q in questions for h in read_support(q, settings) if h in contexts])
    weights = [q["option_weights"] for q in questions]
    k = settings.qc_k
    s_context = ndcg_per_question(support_count_rankings(questions, contexts, embed, settings), weights, k)[k]
    s_no_context = ndcg_per_question(cosine_rankings(questions, embed), weights, k)[k]
    s_random, s_std = random_scores(weights, settings.qc_draws, settings.seed, k)
    keep = qc_keep(s_context, s_no_context, s_random, s_std, settings.qc_z)
    bar = threshold(s_random, s_std, settings.qc_z)
    label = "; ".join(f"{role}={name}" for role, name in DEFAULT_SCORERS.items())
    kept = []
    for i, q in enumerate(questions):
        if keep[i]:
            kept.append({**q, "qc_scorers": label, "qc_scores": {
                "s_context": round(float(s_context[i]), 4), "s_no_context": round(float(s_no_context[i]), 4),
                "s_random": round(float(s_random[i]), 4), "s_threshold": round(float(bar[i]), 4)}})
    report = {"before": len(questions), "after": len(kept), "removed": len(questions) - len(kept),
              "scorers": DEFAULT_SCORERS, "z": settings.qc_z, "k": k,
              "mean": {"s_context": float(s_context.mean()), "s_no_context": float(s_no_context.mean()),
                       "s_random": float(s_random.mean()), "s_threshold": float(bar.mean())}}
    return kept, report


def stratum(question: Mapping[str, Any]) -> str:
    """The subset's stratum: condition types (sorted) and target type."""
    return ",".join(sorted(question["condition_type"])) + " -> " + question["target_type"]


def stratified_subset(questions: Sequence[Mapping[str, Any]], fraction: float, seed: int) -> list[dict[str, Any]]:
    """``fraction`` of the questions of every stratum (rounded up, so every stratum keeps at least one),
    drawn with a seed, in the questions' original order."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    by_stratum: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_stratum.setdefault(stratum(q), []).append(i)
    chosen: set[int] = set()
    for name, members in sorted(by_stratum.items()):
        n = max(1, int(np.ceil(fraction * len(members))))
        chosen.update(random.Random(f"subset/{seed}/{name}").sample(members, n))
    return [dict(questions[i]) for i in sorted(chosen)]
