"""How well the offline rule labeller agrees with what the sample generator meant each user turn to be.

:func:`convohub.conversations.generate_wildchat_sample` does not store a per-turn kind, but every feedback
utterance it writes comes from a known phrase pool (praise, thanks, corrections, refinements, negative
replies, and their translations). :func:`reference_kind` recovers the kind by matching a turn against
those pools (templates turned into regular expressions), which gives turn-level reference SAT/DSAT flags
that were *not* derived from the labeller's lexicon. :func:`agreement` then reports the paper's Table 5
numbers (accuracy, precision, recall, F1, Cohen's kappa) for SAT and DSAT over user turns after the first.

Caveat recorded on the card: the generator's own notion differs from SPUR's in places (e.g. "Can you make
it sound more enthusiastic?" is a *follow-up* to the generator but Style/Revision to SPUR), so this is
agreement with the generator's markers, not accuracy against human labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from convohub.wildfeedback.labels import FeedbackResult

SAT_KINDS = ("praise", "thanks")
DSAT_KINDS = ("correction", "refinement", "negative")


def _template_rx(template: str) -> str:
    return re.sub(r"\\\{[a-z0-9_]+\\\}", ".+?", re.escape(template))


@lru_cache(maxsize=1)
def _pools() -> list[tuple[str, re.Pattern[str]]]:
    from convohub.conversations import sample_text as st

    pools: dict[str, list[str]] = {
        "praise": list(st.PRAISE), "thanks": list(st.THANKS), "negative": list(st.NEGATIVE),
        "correction": list(st.GENERIC_CORRECTIONS) + [c for t in st.TOPICS.values() for c in t.corrections],
        "refinement": [request for request, _ in st.REFINEMENTS],
    }
    for table in st.LOCALIZED.values():
        for kind in ("praise", "thanks", "correction", "refinement"):
            pools[kind].extend(table[kind])
    return [(kind, re.compile(rf"\s*(?:{'|'.join(_template_rx(t) for t in texts)})\s*", re.DOTALL))
            for kind, texts in pools.items()]


def reference_kind(text: str) -> str | None:
    """The generator's feedback kind of a user utterance (praise, thanks, correction, refinement,
    negative), or None for a non-feedback turn. A PII sentence appended by the generator is tolerated."""
    for kind, pattern in _pools():
        if pattern.fullmatch(text) or pattern.match(text):
            return kind
    return None


def _binary(gold: Sequence[bool], pred: Sequence[bool]) -> dict[str, float]:
    tp = sum(g and p for g, p in zip(gold, pred, strict=True))
    fp = sum(p and not g for g, p in zip(gold, pred, strict=True))
    fn = sum(g and not p for g, p in zip(gold, pred, strict=True))
    n = len(gold)
    acc = sum(g == p for g, p in zip(gold, pred, strict=True)) / n if n else float("nan")
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    pg, pp = sum(gold) / n if n else 0.0, sum(pred) / n if n else 0.0
    expected = pg * pp + (1 - pg) * (1 - pp)
    kappa = (acc - expected) / (1 - expected) if n and expected < 1 else float("nan")
    return {"accuracy": acc, "precision": precision, "recall": recall, "f1": f1, "kappa": kappa,
            "support": float(sum(gold)), "turns": float(n)}


def agreement(items: Iterable[tuple[Sequence[Mapping[str, str]], FeedbackResult]]) -> dict[str, Any]:
    """Turn-level SAT and DSAT agreement of labelled conversations with :func:`reference_kind`."""
    gold_sat: list[bool] = []
    gold_dsat: list[bool] = []
    pred_sat: list[bool] = []
    pred_dsat: list[bool] = []
    for turns, result in items:
        users = [t["content"] for t in turns if t["role"] == "user"]
        for text, label in list(zip(users, result.turns, strict=True))[1:]:
            kind = reference_kind(text)
            gold_sat.append(kind in SAT_KINDS)
            gold_dsat.append(kind in DSAT_KINDS)
            pred_sat.append(label.sat)
            pred_dsat.append(label.dsat)
    return {"SAT": _binary(gold_sat, pred_sat), "DSAT": _binary(gold_dsat, pred_dsat)}
