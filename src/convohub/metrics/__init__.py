"""Evaluation metrics of the five convohub systems, as plain functions.

The ``evaluation/<name>/`` folders wrap these for ``evaluate.load``; keeping the logic here means it is
importable, testable and benchmarkable without ``evaluate`` (which is in maintenance mode), and the Hub
modules stay thin adapters that cannot drift from what the release scripts compute.
"""

from __future__ import annotations

from convohub.metrics.checklist_judge import checklist_judge, judge_pairs, parse_verdict
from convohub.metrics.hit_at_1 import hit_at_1, is_hit, parse_answer, values_match
from convohub.metrics.ndcg import ndcg_at_k, ndcg_per_question, ranking_scores, recall_at_k
from convohub.metrics.sq_quality import bertscore, ms_ttr, self_bleu, sq_quality
from convohub.metrics.tree_reconstruction import tree_reconstruction_scores
from convohub.metrics.user_simulation import TASK_LABELS, user_simulation_f1

__all__ = [
    "TASK_LABELS",
    "bertscore",
    "checklist_judge",
    "hit_at_1",
    "is_hit",
    "judge_pairs",
    "ms_ttr",
    "ndcg_at_k",
    "ndcg_per_question",
    "parse_answer",
    "parse_verdict",
    "ranking_scores",
    "recall_at_k",
    "self_bleu",
    "sq_quality",
    "tree_reconstruction_scores",
    "user_simulation_f1",
    "values_match",
]
