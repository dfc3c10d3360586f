"""Reading a built WildChat-AQA folder (the contract the dataset builder and the answerers share).

A question row has ``hash``, ``question``, exactly 10 ``options`` with 10 graded ``option_weights``, and
``support`` (the hashes of the conversations matching its conditions: the oracle's context and the gold of
Recall@k). A conversation row has ``hash``, ``timestamp`` (ISO 8601, UTC), ``country``, ``user_name``,
``summary`` and ``conversation``. Everything here reads a folder written by :mod:`convohub.hub` with
:func:`convohub.hub.load_local` (no stale ``datasets`` cache), whether it was generated or built from
``--source``; a row that breaks the contract is an error naming the row and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DATASET_NAME = "wildchat-aqa"
N_OPTIONS = 10
QUESTION_CONFIGS = ("questions", "questions_subset")
CONTEXTS = ("raw", "summary")


@dataclass(frozen=True)
class Question:
    """One aggregative question: its id (``hash``), text, ten options and their gold weights, gold supports."""

    hash: str
    question: str
    options: tuple[str, ...]
    weights: tuple[float, ...]
    support: tuple[str, ...] = ()
    target_type: str = ""

    @classmethod
    def from_row(cls, row: Mapping[str, Any], where: str = "question") -> Question:
        missing = [f for f in ("hash", "question", "options", "option_weights") if f not in row]
        if missing:
            raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
        options, weights = list(row["options"]), [float(w) for w in row["option_weights"]]
        if len(options) != N_OPTIONS or len(weights) != N_OPTIONS:
            raise ValueError(f"{where} ({row['hash']}): needs exactly {N_OPTIONS} options and option_weights, "
                             f"got {len(options)} and {len(weights)}")
        if any(w < 0 for w in weights):
            raise ValueError(f"{where} ({row['hash']}): option_weights must be non-negative")
        return cls(str(row["hash"]), str(row["question"]), tuple(str(o) for o in options), tuple(weights),
                   tuple(str(h) for h in (row.get("support") or ())), str(row.get("target_type") or ""))


def load_questions(dataset_dir: str | Path, config: str = "questions", limit: int | None = None) -> list[Question]:
    """The questions of a built folder (``config``: ``questions`` or ``questions_subset``, split ``test``)."""
    from convohub.hub import load_local

    if config not in QUESTION_CONFIGS:
        raise ValueError(f"unknown question config {config!r}: use one of {', '.join(QUESTION_CONFIGS)}")
    rows = load_local(dataset_dir, config, "test")
    count = len(rows) if limit is None else min(limit, len(rows))
    return [Question.from_row(rows[i], f"{config}/test row {i}") for i in range(count)]


def parse_timestamp(value: Any, where: str) -> datetime:
    """A contract timestamp (ISO 8601 string, UTC, or a datetime) as an aware UTC datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as err:
        raise ValueError(f"{where}: timestamp {value!r} is not ISO 8601 (YYYY-MM-DDTHH:MM:SS)") from err
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def corpus_config(context: str) -> str:
    """The dataset config an answerer's ``context`` searches: ``conversations`` (raw) or ``summaries``."""
    if context not in CONTEXTS:
        raise ValueError(f"unknown context {context!r}: use 'raw' (conversations) or 'summary'")
    return "conversations" if context == "raw" else "summaries"


def load_corpus(dataset_dir: str | Path, context: str = "summary") -> list[dict[str, Any]]:
    """The corpus rows an answerer searches: config ``conversations`` (raw) or ``summaries``, with
    ``timestamp`` parsed to a UTC datetime."""
    from convohub.hub import load_local

    config = corpus_config(context)
    rows = load_local(dataset_dir, config, "train").to_list()
    for i, row in enumerate(rows):
        if "timestamp" not in row:
            raise ValueError(f"{config}/train row {i}: missing field 'timestamp'")
        row["timestamp"] = parse_timestamp(row["timestamp"], f"{config}/train row {i} ({row.get('hash')})")
    return rows
