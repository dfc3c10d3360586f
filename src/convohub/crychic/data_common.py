"""What the three CRyCHIc training-data builders share: resumable stages, held-out splits, the data folder.

Resuming is :mod:`convohub.stages`' (shared with the WildFeedback pipeline): every LLM call goes through
the response cache under ``<work>/llm-cache`` (a killed run repeats no call), and each finished builder
writes ``<work>/<stage>.json`` with a fingerprint of its settings and of the model that answered
(:func:`backend_identity`); the next run with the same fingerprint reads it instead of recomputing. A
changed setting or model changes the fingerprint, so stale rows are never reused.

Splits are by a stable hash of a group key (the text for the IFQC, the source conversation for the
simplifier and the judge), so a conversation never lands on both sides and a rebuild with more data keeps
every earlier row on the side it was on.

The folder the training scripts read (``--dataset_path``) holds ``<task>/train.jsonl``,
``<task>/heldout.jsonl`` and ``record.json`` (who produced the rows, the counts, the labeller agreement).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from convohub.hub import atomic_write_text
from convohub.jsonlines import jsonl_records

if TYPE_CHECKING:  # pragma: no cover
    from convohub.llm import ChatBackend

SPLITS = ("train", "heldout")
RECORD_FILE = "record.json"
#: the sample corpus seed of WildChatTree's offline test set is 0 (construct.generate_trees); training data
#: comes from another draw of the same generator so no test conversation is trained on
TRAIN_CORPUS_SEED = 1


def backend_identity(backend: ChatBackend) -> dict[str, Any]:
    """What decides which model answers (for fingerprints): the backend's name and identity."""
    return {"name": backend.name, **backend.identity()}


def read_gold(file_name: str, keys: Sequence[str], path: str | Path | None = None) -> list[dict[str, Any]]:
    """The rows of a hand-labelled JSON-lines file: ``convohub/data/<file_name>``, or ``path`` when given.
    Every row must have exactly ``keys`` (one of them ``id``) and a unique ``id``; the caller checks labels."""
    from importlib import resources

    name = file_name if path is None else str(path)
    if path is None:
        text = resources.files("convohub").joinpath("data", file_name).read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    items = []
    ids: set[str] = set()
    for where, item in jsonl_records(name, text=text, expected=f"one object with keys {', '.join(keys)}"):
        if not isinstance(item, dict) or set(item) != set(keys):
            got = sorted(item) if isinstance(item, dict) else type(item).__name__
            raise ValueError(f"{where}: keys must be {', '.join(keys)}; got {got}")
        if item["id"] in ids:
            raise ValueError(f"{where}: duplicate id {item['id']!r}")
        ids.add(item["id"])
        items.append(item)
    return items


def split_of(key: str, heldout_fraction: float, seed: int) -> str:
    """``heldout`` for a stable ``heldout_fraction`` share of group keys, else ``train``."""
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
    point = int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "heldout" if point < heldout_fraction else "train"


def write_rows(folder: Path, task: str, rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Write a task's rows (each with a ``split``) to ``<folder>/<task>/<split>.jsonl``; counts per split."""
    by_split: dict[str, list[str]] = {s: [] for s in SPLITS}
    for row in rows:
        if row["split"] not in by_split:
            raise ValueError(f"row has split {row['split']!r}; expected one of {SPLITS}")
        by_split[row["split"]].append(json.dumps(dict(row), ensure_ascii=False))
    for split, lines in by_split.items():
        atomic_write_text(Path(folder) / task / f"{split}.jsonl", "".join(line + "\n" for line in lines))
    return {s: len(lines) for s, lines in by_split.items()}


def read_rows(folder: str | Path, task: str, split: str) -> list[dict[str, Any]]:
    """The rows of one task and split of a built training-data folder."""
    path = Path(folder) / task / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: build the training data first "
                                f"(`convohub crychic training-data --out {folder}`)")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_record(folder: str | Path) -> dict[str, Any]:
    """The ``record.json`` of a built training-data folder (empty when it has none)."""
    path = Path(folder) / RECORD_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def update_record(folder: Path, task: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Merge one task's entry into ``record.json`` (the other tasks' entries stay)."""
    record = read_record(folder)
    record[task] = dict(entry)
    atomic_write_text(Path(folder) / RECORD_FILE, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record


def words(text: str) -> list[str]:
    """Lower-cased words (letters, digits, apostrophes and hyphens inside), for length and lexicon checks."""
    return re.findall(r"[a-z0-9]+(?:['\-][a-z0-9]+)*", text.lower())


def seeded_sample(items: Sequence[Any], k: int, seed: int | str) -> list[Any]:
    """``k`` items (all when fewer), drawn with a seeded generator, in their original order."""
    if k >= len(items):
        return list(items)
    chosen = sorted(random.Random(str(seed)).sample(range(len(items)), k))
    return [items[i] for i in chosen]
