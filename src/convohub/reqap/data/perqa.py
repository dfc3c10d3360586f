"""Reading a built PerQA dataset folder: persona ids of a split, one persona's events and questions.

Every consumer (evaluation, training-data derivation, the Space, the CLI) reads PerQA through these
functions, so the folder layout (``data/<config>/<split>-*.parquet``, see :mod:`convohub.perqa.dataset`) is
known in one place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from convohub.reqap.engine.events import EventStore

if TYPE_CHECKING:  # the worker module is imported only when isolation is asked for
    pass

__all__ = ["load_persona", "load_questions", "persona_ids", "persona_record"]


def persona_ids(dataset_dir: str | Path, split: str) -> list[str]:
    """Persona ids of one split of a built PerQA folder, in numeric order."""
    import pyarrow.parquet as pq

    shards = sorted((Path(dataset_dir) / "data" / "personas").glob(f"{split}-*.parquet"))
    if not shards:
        raise FileNotFoundError(f"{dataset_dir}: no data/personas/{split}-*.parquet (is it a built PerQA "
                                "folder? build one with `convohub datasets build perqa`)")
    ids = [pid for s in shards for pid in pq.read_table(s, columns=["persona_id"]).column(0).to_pylist()]
    return sorted(ids, key=lambda p: (p.rsplit("_", 1)[0], int(p.rsplit("_", 1)[1])))


def load_persona(dataset_dir: str | Path, persona_id: str, *, canonical: bool = True
                 ) -> tuple[EventStore, list[dict[str, Any]], Any]:
    """(event store, questions, OracleIndex or None) of one persona of a built PerQA folder."""
    from convohub.perqa.dataset import events_from_dataset, questions_from_dataset
    from convohub.reqap.data.gold import OracleIndex

    observable = events_from_dataset(Path(dataset_dir), persona_id)
    if not observable:
        raise KeyError(f"{dataset_dir}: no observable events for persona {persona_id!r} (see `persona_ids`)")
    questions = questions_from_dataset(Path(dataset_dir), persona_id)
    index = None
    if canonical:
        index = OracleIndex(observable, events_from_dataset(Path(dataset_dir), persona_id, "canonical_events"))
    return EventStore.from_records(observable), questions, index


def load_questions(dataset_dir: str | Path, split: str) -> list[dict[str, Any]]:
    """Questions of one split of a built PerQA folder (``answers`` decoded), sorted by persona and id."""
    from convohub.hub import load_local

    rows = list(load_local(dataset_dir, "questions", split))
    for r in rows:
        r["answers"] = json.loads(r["answers"]) if isinstance(r["answers"], str) else r["answers"]
    return sorted(rows, key=lambda r: (r["persona_id"], int(r["q_id"]) if str(r["q_id"]).isdigit() else 0,
                                       r["id"]))


def sample_questions(questions: list[dict[str, Any]], n: int | None, seed: int) -> list[dict[str, Any]]:
    """A seeded sample of ``n`` of ``questions`` in their order (all of them for None or more than there are):
    the QUD card's questions and the end-to-end comparison's come from it."""
    import random

    if n is None or len(questions) <= n:
        return questions
    keep = set(random.Random(seed).sample(range(len(questions)), n))
    return [q for i, q in enumerate(questions) if i in keep]


def persona_record(dataset_dir: str | Path, persona_id: str) -> dict[str, Any] | None:
    """The persona questionnaire of one persona (names of relatives, friends, pets...), None when the folder
    has no ``personas`` config."""
    from convohub.perqa.dataset import _load_split_rows

    try:
        rows = _load_split_rows(Path(dataset_dir), "personas", persona_id)
    except FileNotFoundError:
        return None
    return json.loads(rows[0]["persona"]) if rows else None
