"""NDCG@k for WildChat-AQA option rankings, and recall@k for its retrieval runs.

WildChat-AQA asks a model to rank ten candidate answers whose gold relevance is graded (``option_weights``).
The authors score a ranking by turning it into option scores and calling scikit-learn's ``ndcg_score``,
whose default averages the gain of tied options. That convention matters: an empty or partial ranking does
not score 0, because the unscored options form one tie group that receives their *mean* weight at every
position they occupy.

Malformed rankings are scored exactly as the authors' evaluation scores them (their ``parse_response_single``
and ``compute_metrics``; see :func:`ranking_scores`), so convohub's numbers are comparable with the paper's:
only the first ten entries count, an index past the last option is skipped, a repeated index takes the
score of its *last* occurrence, a negative index counts from the end as Python indexing does, and an
unparseable answer is an empty ranking (every option scored 0).

``ndcg_at_k`` reproduces ``sklearn.metrics.ndcg_score`` exactly under that convention but is vectorised
over questions: the only ties the option scores can contain are among the options scored 0, so the
tie-averaged DCG reduces to "positively scored options in order, then the mean weight of the rest on the
remaining positions".
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Sequence

import numpy as np

DEFAULT_NDCG_K: tuple[int, ...] = (1, 3, 5, 10)
DEFAULT_RECALL_K: tuple[int, ...] = (5, 10, 20, 50, 100, 200, 500)


def _check_ks(k: int | Iterable[int]) -> list[int]:
    ks = [k] if isinstance(k, (int, np.integer)) else list(k)
    if not ks or any(int(v) != v or v < 1 for v in ks):
        raise ValueError(f"k must be a positive integer or a non-empty list of them, got {k!r}")
    return [int(v) for v in ks]


#: The authors' parser keeps only this many entries of a ranking (their ``TOPK_PRED``).
MAX_RANKED = 10
#: The score of the first ranked option; each later valid entry gets one less (the authors' ``cur_score``).
FIRST_SCORE = 9.0


def _wrap_negative(idx: int, n_options: int, question: int | None) -> int:
    """Python indexing, as in the authors' ``cur_pred_score[item] = ...``: -1 is the last option. Below
    ``-n_options`` their evaluation crashes with an IndexError; here that is a ValueError naming the
    question and the index, since no score would match theirs."""
    if idx < -n_options:
        where = "" if question is None else f"question {question}: "
        raise ValueError(f"{where}ranking index {idx} is below -{n_options} (the authors' evaluation "
                         "fails with an IndexError on it)")
    return idx + n_options if idx < 0 else idx


def ranking_scores(ranking: Sequence[int], n_options: int, question: int | None = None) -> np.ndarray:
    """The option scores (``y_score`` of ``ndcg_score``) the authors derive from one ranking, best first.

    Their rule, reproduced entry by entry: keep the first :data:`MAX_RANKED` entries (their answer parser
    truncates there); walk them with a score starting at 9; an index ``>= n_options`` is skipped without
    using up a score; any other index gets the current score (overwriting an earlier one, so a repeated
    index ends with the score of its last occurrence) and the score drops by 1. Unlisted options score 0,
    so the tenth valid entry ties with them. An empty ranking (also what an unparseable answer becomes)
    scores every option 0. Negative indices wrap as in Python (see :func:`_wrap_negative`)."""
    scores = np.zeros(n_options, dtype=np.float64)
    current = FIRST_SCORE
    for raw in list(ranking)[:MAX_RANKED]:
        idx = int(raw)
        if idx >= n_options:
            continue
        scores[_wrap_negative(idx, n_options, question)] = current
        current -= 1.0
    return scores


def _group_ndcg(rankings: list[Sequence[int]], weights: np.ndarray, ks: list[int],
                question_ids: Sequence[int]) -> np.ndarray:
    """NDCG for questions that all have ``weights.shape[1]`` options; returns an array (len(ks), questions).
    ``question_ids`` are the questions' positions in the caller's input, for error messages."""
    n_q, n = weights.shape
    lengths = np.fromiter((len(r) for r in rankings), dtype=np.int64, count=n_q)
    flat = np.fromiter(itertools.chain.from_iterable(rankings), dtype=np.int64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(n_q), lengths)
    # The authors' parser keeps the first MAX_RANKED raw entries, valid or not.
    raw_pos = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    keep = raw_pos < MAX_RANKED
    flat, rows = flat[keep], rows[keep]
    too_negative = flat < -n
    if too_negative.any():
        first_bad = int(np.argmax(too_negative))
        _wrap_negative(int(flat[first_bad]), n, int(question_ids[rows[first_bad]]))
    flat = np.where(flat < 0, flat + n, flat)
    keep = flat < n  # past-the-end indices are skipped without using up a score
    flat, rows = flat[keep], rows[keep]
    counts = np.bincount(rows, minlength=n_q)
    valid_pos = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
    # A repeated index ends with the score of its last occurrence: unique over the reversed arrays.
    _, last_rev = np.unique((rows * n + flat)[::-1], return_index=True)
    last = np.sort(len(flat) - 1 - last_rev)
    flat, rows, valid_pos = flat[last], rows[last], valid_pos[last]
    # Options whose score is 0 (the tenth valid entry) tie with the unlisted ones.
    positive = FIRST_SCORE - valid_pos > 0
    flat, rows, valid_pos = flat[positive], rows[positive], valid_pos[positive]
    order = np.lexsort((valid_pos, rows))
    flat, rows = flat[order], rows[order]
    n_ranked = np.bincount(rows, minlength=n_q)
    pos = np.arange(len(flat)) - (np.cumsum(n_ranked) - n_ranked)[rows]

    ranked_gain = np.zeros((n_q, n))
    ranked_gain[rows, pos] = weights[rows, flat]
    is_ranked = np.zeros((n_q, n), dtype=bool)
    is_ranked[rows, flat] = True
    n_unranked = n - n_ranked
    unranked_mean = np.where(is_ranked, 0.0, weights).sum(axis=1) / np.maximum(n_unranked, 1)
    positions = np.arange(n)
    gains = np.where(positions[None, :] < n_ranked[:, None], ranked_gain, unranked_mean[:, None])
    ideal = -np.sort(-weights, axis=1)

    discount = 1.0 / np.log2(np.arange(n) + 2.0)
    out = np.empty((len(ks), n_q))
    for i, k in enumerate(ks):
        d = discount[:k]
        dcg = gains[:, :k] @ d
        idcg = ideal[:, :k] @ d
        # scikit-learn scores a question whose weights are all 0 as 0.
        out[i] = np.divide(dcg, idcg, out=np.zeros(n_q), where=idcg > 0)
    return out


def ndcg_per_question(
    predictions: Sequence[Sequence[int]],
    references: Sequence[Sequence[float]],
    k: int | Iterable[int] = DEFAULT_NDCG_K,
) -> dict[int, np.ndarray]:
    """NDCG@k of every question, keyed by k. Questions may have different numbers of options; they are
    processed in groups of equal size so every group is one set of array operations."""
    ks = _check_ks(k)
    if len(predictions) != len(references):
        raise ValueError(f"got {len(predictions)} predictions but {len(references)} references")
    if not references:
        raise ValueError("ndcg needs at least one question")
    groups: dict[int, list[int]] = {}
    for i, ref in enumerate(references):
        if len(ref) < 2:
            raise ValueError(f"question {i}: NDCG needs at least two options, got {len(ref)}")
        groups.setdefault(len(ref), []).append(i)
    result = {kk: np.empty(len(references)) for kk in ks}
    for idx in groups.values():
        weights = np.asarray([references[i] for i in idx], dtype=np.float64)
        if (weights < 0).any() or not np.isfinite(weights).all():
            bad = idx[int(np.argwhere((weights < 0) | ~np.isfinite(weights))[0, 0])]
            raise ValueError(f"question {bad}: option weights must be finite and non-negative")
        scores = _group_ndcg([predictions[i] for i in idx], weights, ks, idx)
        for j, kk in enumerate(ks):
            result[kk][idx] = scores[j]
    return result


def ndcg_at_k(
    predictions: Sequence[Sequence[int]],
    references: Sequence[Sequence[float]],
    k: int | Iterable[int] = DEFAULT_NDCG_K,
) -> dict[str, float]:
    """Mean NDCG@k over questions, as ``{"ndcg@1": ..., "ndcg@3": ...}``.

    ``predictions[i]`` ranks option indices of question ``i`` best first (partial, empty or malformed is
    allowed and scored as the authors score it, see :func:`ranking_scores`); ``references[i]`` holds the
    option weights. Equal to averaging ``sklearn.metrics.ndcg_score([weights], [ranking_scores(ranking, n)],
    k=k)`` over questions.
    """
    per_question = ndcg_per_question(predictions, references, k)
    return {f"ndcg@{kk}": float(v.mean()) for kk, v in per_question.items()}


def recall_at_k(
    retrieved: Sequence[Sequence[Hashable]],
    gold: Sequence[Sequence[Hashable]],
    k: int | Iterable[int] = DEFAULT_RECALL_K,
) -> dict[str, float]:
    """Mean share of a question's gold supporting ids found among its top-k retrieved ids.

    The denominator is the number of distinct gold ids (not ``min(k, |gold|)``), as in the WildChat-AQA
    retrieval tables, so recall@5 stays small when a question has hundreds of supporting conversations.
    Repeated retrieved ids count once, at their first rank. Questions without gold ids have no defined
    recall and are left out of the mean; if no question has gold ids a ValueError is raised.
    """
    ks = _check_ks(k)
    if len(retrieved) != len(gold):
        raise ValueError(f"got {len(retrieved)} retrieved lists but {len(gold)} gold lists")
    totals = dict.fromkeys(ks, 0.0)
    counted = 0
    for ret, gold_ids in zip(retrieved, gold, strict=True):
        gold_set = set(gold_ids)
        if not gold_set:
            continue
        counted += 1
        ranked = list(dict.fromkeys(ret))
        for kk in ks:
            totals[kk] += len(gold_set.intersection(ranked[:kk])) / len(gold_set)
    if counted == 0:
        raise ValueError("recall@k is undefined: no question has gold supporting ids")
    return {f"recall@{kk}": totals[kk] / counted for kk in ks}
