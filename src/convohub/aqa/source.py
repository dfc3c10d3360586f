"""The authors' released WildChat-AQA datasets, read from ``save_to_disk`` folders and checked field by field.

``--source PATH``: PATH holds any of the authors' Hub datasets, each saved with ``Dataset.save_to_disk`` in a
subfolder named after its repository (``data-0000x-of-0000N.arrow``, ``dataset_info.json``, ``state.json``):

* ``wildchat_aqa_with_embedding_and_gpt_generated_query``: every question -> config ``questions``;
* ``wildchat_aqa_sampled_subset_with_embedding_and_gpt_generated_query`` -> ``questions_subset``;
* ``wildchat_aqa_conversations`` -> ``conversations`` (and ``summaries``);
* ``wildchat_aqa_summary_with_embedding`` -> ``summaries`` when the conversations are not given.

(``wildchat_aqa_document_with_embedding`` holds whole-text embeddings only; it is not read.) Field names are
the spec's (``label_level_1`` ids like ``"3"``, ``label_level_2`` like ``"3.5"``); the raw form
``classes_level_1`` (ints) with ``classes_level_2`` (per topic index, the list of its subtopic indices) and
country/state/language on the first turn only are read too. Topic and subtopic ids become names through the
authors' taxonomy files, expected in a ``wildchat_aqa_taxonomy`` subfolder (``..._level_1_...json`` and
``..._level_2_..._<topic index>.json``, each ``{"classes": [{"class_name", "index", ...}]}``).

A missing or malformed field stops the build with :class:`AQASourceError` naming the dataset, the row and the
field. Questions get ``support`` recomputed from their conditions over the conversations when those are given
(with :func:`convohub.aqa.proposal.support_hashes`, the rules the generated questions follow), else an empty
list; ``time_week`` values (the authors write ``YYYY-MM-DD 00:00:00``) become ``YYYY-MM-DD``. Conversation
turns and summaries are PII-scrubbed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from convohub.aqa.combos import ATTRIBUTES

REPOS = {
    "questions": "wildchat_aqa_with_embedding_and_gpt_generated_query",
    "questions_subset": "wildchat_aqa_sampled_subset_with_embedding_and_gpt_generated_query",
    "conversations": "wildchat_aqa_conversations",
    "summaries": "wildchat_aqa_summary_with_embedding",
}
TAXONOMY_FOLDER = "wildchat_aqa_taxonomy"
CONDITION_TYPES = frozenset(ATTRIBUTES.values())
_TOPIC_ID = re.compile(r"^\d+$")
_SUBTOPIC_ID = re.compile(r"^(\d+)\.(\d+)$")


class AQASourceError(ValueError):
    """A released dataset that does not have the expected shape; the message names dataset, row and field."""


@dataclass
class SourceData:
    conversations: list[dict[str, Any]] | None = None
    summaries: list[dict[str, Any]] | None = None
    questions: list[dict[str, Any]] | None = None
    questions_subset: list[dict[str, Any]] | None = None
    read: dict[str, int] = field(default_factory=dict)
    pii: Counter[str] = field(default_factory=Counter)


@dataclass
class Taxonomy:
    topics: dict[str, str]
    subtopics: dict[str, str]

    def topic(self, value: str, where: str) -> str:
        if not _TOPIC_ID.match(value):
            return value
        if value not in self.topics:
            raise AQASourceError(f"{where}: topic id {value!r} is not in the taxonomy "
                                 f"({TAXONOMY_FOLDER}/*level_1*.json)")
        return self.topics[value]

    def subtopic(self, value: str, where: str) -> str:
        if not _SUBTOPIC_ID.match(value):
            return value
        if value not in self.subtopics:
            raise AQASourceError(f"{where}: subtopic id {value!r} is not in the taxonomy "
                                 f"({TAXONOMY_FOLDER}/*level_2*_<topic>.json)")
        return self.subtopics[value]


def _classes(path: Path) -> dict[int, str]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {int(c["index"]): str(c["class_name"]) for c in doc["classes"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AQASourceError(f"{path}: not a taxonomy file ({{\"classes\": [{{\"class_name\", \"index\"}}]}}): "
                             f"{exc}") from exc


def read_taxonomy(root: Path) -> Taxonomy | None:
    folder = root / TAXONOMY_FOLDER
    if not folder.is_dir():
        return None
    level_1 = sorted(folder.glob("*level_1*.json"))
    if len(level_1) != 1:
        raise AQASourceError(f"{folder}: expected one *level_1*.json topic taxonomy, found {len(level_1)}")
    topics = {str(i): name for i, name in _classes(level_1[0]).items()}
    subtopics: dict[str, str] = {}
    for path in sorted(folder.glob("*level_2*.json")):
        found = re.search(r"_(\d+)\.json$", path.name)
        if not found:
            raise AQASourceError(f"{path}: a subtopic taxonomy file name must end with _<topic index>.json")
        for i, name in _classes(path).items():
            subtopics[f"{found.group(1)}.{i}"] = name
    return Taxonomy(topics, subtopics)


def load_saved(folder: Path, name: str) -> Any:
    """A ``save_to_disk`` folder as one ``Dataset`` (a saved ``DatasetDict`` must hold a single split)."""
    import datasets

    try:
        data = datasets.load_from_disk(str(folder))
    except Exception as exc:  # noqa: BLE001 - any unreadable folder becomes a named source error
        raise AQASourceError(f"{name}: {folder} is not a dataset saved with save_to_disk ({exc})") from exc
    if isinstance(data, datasets.DatasetDict):
        if len(data) != 1:
            raise AQASourceError(f"{name}: {folder} holds splits {sorted(data)}; expected one dataset")
        data = next(iter(data.values()))
    return data


# ------------------------------------------------------------------------------------------ field checks
class Row:
    """Field access with errors that name the dataset, the row and the field."""

    def __init__(self, dataset: str, index: int, data: Mapping[str, Any]) -> None:
        self.dataset, self.index, self.data = dataset, index, data

    def where(self, name: str) -> str:
        return f"{self.dataset} row {self.index}: field {name!r}"

    def fail(self, name: str, problem: str) -> AQASourceError:
        return AQASourceError(f"{self.where(name)} {problem}")

    def has(self, name: str) -> bool:
        return name in self.data and self.data[name] is not None

    def get(self, name: str) -> Any:
        if name not in self.data:
            raise self.fail(name, "is missing")
        if self.data[name] is None:
            raise self.fail(name, "is missing (null)")
        return self.data[name]

    def text(self, name: str, allow_empty: bool = False) -> str:
        value = self.get(name)
        if not isinstance(value, str) or (not allow_empty and not value.strip()):
            raise self.fail(name, f"must be a non-empty string, got {value!r:.60}")
        return value

    def strings(self, name: str, value: Any = None) -> list[str]:
        value = self.get(name) if value is None else value
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                           for v in value):
            raise self.fail(name, f"must be a list of strings, got {value!r:.60}")
        return [str(v) for v in value]

    def integer(self, name: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(name, f"must be a non-negative integer, got {value!r:.60}")
        return value

    def timestamp(self, name: str) -> str:
        value = self.get(name)
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError as exc:
                raise self.fail(name, f"is not an ISO 8601 timestamp: {value!r}") from exc
        if not isinstance(value, datetime):
            raise self.fail(name, f"must be a timestamp, got {type(value).__name__}")
        if value.tzinfo is not None:
            from datetime import timezone

            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value.strftime("%Y-%m-%dT%H:%M:%S")

    def records(self, name: str, keys: Sequence[str], optional: Sequence[str] = ()) -> list[dict[str, str]]:
        value = self.get(name)
        if not isinstance(value, (list, tuple)):
            raise self.fail(name, f"must be a list of objects with {', '.join(keys)}, got {value!r:.60}")
        out = []
        for j, item in enumerate(value):
            if not isinstance(item, Mapping):
                raise self.fail(name, f"item {j} must be an object with {', '.join(keys)}, got {item!r:.60}")
            missing = [k for k in keys if not isinstance(item.get(k), str)]
            if missing:
                raise self.fail(name, f"item {j} lacks string {', '.join(repr(k) for k in missing)}")
            out.append({k: item[k] for k in keys} | {k: str(item.get(k) or "") for k in optional})
        return out


def _labels(row: Row, taxonomy: Taxonomy | None) -> tuple[list[str], list[str]]:
    """Topic and subtopic names of a conversation row (ids mapped through the taxonomy)."""
    if row.has("label_level_1"):
        level_1 = row.strings("label_level_1")
        level_2 = row.strings("label_level_2")
    elif row.has("classes_level_1"):
        level_1 = row.strings("classes_level_1")
        raw = row.get("classes_level_2")
        level_2 = []
        for topic in level_1:
            try:
                level_2 += [f"{topic}.{s}" for s in raw[int(topic)]]
            except (IndexError, KeyError, TypeError, ValueError) as exc:
                raise row.fail("classes_level_2", f"has no subtopic list for topic {topic}") from exc
    else:
        raise row.fail("label_level_1", "is missing (nor is the raw classes_level_1 there)")
    ids = [v for v in level_1 + level_2 if _TOPIC_ID.match(v) or _SUBTOPIC_ID.match(v)]
    if ids and taxonomy is None:
        raise row.fail("label_level_1", f"holds topic ids ({ids[0]!r}); put the authors' taxonomy files in a "
                                        f"{TAXONOMY_FOLDER}/ folder of the source to map them to names")
    if taxonomy is not None:
        level_1 = [taxonomy.topic(v, row.where("label_level_1")) for v in level_1]
        level_2 = [taxonomy.subtopic(v, row.where("label_level_2")) for v in level_2]
    return level_1, level_2


def _meta(row: Row, name: str) -> str:
    """country / reigon / language: top-level, else on the first turn (the authors' raw layout)."""
    if row.has(name):
        return str(row.get(name))
    turn_name = "state" if name == "reigon" else name
    turns = row.data.get("conversation") or []
    if turns and isinstance(turns[0], Mapping) and turns[0].get(turn_name) is not None:
        return str(turns[0][turn_name])
    raise row.fail(name, "is missing (and the first turn has none either)")


def conversation_row(row: Row, taxonomy: Taxonomy | None, pii: Counter[str], with_text: bool = True) -> dict[str, Any]:
    """One contract row of the ``conversations`` (or, without text, ``summaries``) config."""
    from convohub.aqa.pipeline import week_start
    from convohub.conversations import scrub_pii_with_counts

    def scrub(text: str) -> str:
        clean, found = scrub_pii_with_counts(text)
        pii.update(found)
        return clean

    timestamp = row.timestamp("timestamp")
    level_1, level_2 = _labels(row, taxonomy)
    out: dict[str, Any] = {
        "conversation_id": row.text("conversation_id"), "hash": row.text("hash"), "user_name": row.text("user_name"),
        "timestamp": timestamp, "time_day": timestamp[:10], "time_week": week_start(timestamp),
        "time_month": timestamp[:7], "country": _meta(row, "country"), "reigon": _meta(row, "reigon"),
        "language": _meta(row, "language"), "token_count": row.integer("token_count"),
    }
    if with_text:
        out["conversation"] = [{"role": t["role"], "content": scrub(t["content"])}
                               for t in row.records("conversation", ("role", "content"))]
    out |= {
        "summary": scrub(row.text("summary")), "intent": scrub(str(row.data.get("intent") or "")),
        "keywords": [k | {"value": k["value"].lower()}
                     for k in row.records("keywords", ("keyword_type", "value"), optional=("description",))],
        "keywords_aggregated": row.records("keywords_aggregated", ("keyword_type", "value")),
        "label_level_1": level_1, "label_level_2": level_2,
        "labeller": "authors (GPT-4o summaries and keywords, TnT-LLM topics with o3-mini verification)",
    }
    return out


def _condition_value(row: Row, kind: str, value: str, taxonomy: Taxonomy | None) -> str:
    if kind == "time_week":
        return value[:10]
    if kind == "label_level_1" and taxonomy is not None:
        return taxonomy.topic(value, row.where("condition_value"))
    if kind == "label_level_2" and taxonomy is not None:
        return taxonomy.subtopic(value, row.where("condition_value"))
    return value


def question_row(row: Row, taxonomy: Taxonomy | None, conversations: Sequence[Mapping[str, Any]] | None,
                 n_options: int = 10) -> dict[str, Any]:
    """One contract row of the ``questions`` config (support recomputed when conversations are given)."""
    from convohub.aqa.proposal import support_hashes

    kinds = row.strings("condition_type")
    unknown = [k for k in kinds if k not in CONDITION_TYPES]
    if unknown:
        raise row.fail("condition_type", f"has {unknown[0]!r}; expected one of {sorted(CONDITION_TYPES)}")
    values = row.strings("condition_value")
    if len(values) != len(kinds):
        raise row.fail("condition_value", f"has {len(values)} values for {len(kinds)} condition types")
    values = [_condition_value(row, k, v, taxonomy) for k, v in zip(kinds, values, strict=True)]
    target = row.text("target_type")
    if target not in CONDITION_TYPES:
        raise row.fail("target_type", f"is {target!r}; expected one of {sorted(CONDITION_TYPES)}")
    options = row.strings("options")
    if len(options) != n_options:
        raise row.fail("options", f"has {len(options)} options, expected {n_options}")
    if target in ("label_level_1", "label_level_2") and taxonomy is not None:
        mapper = taxonomy.topic if target == "label_level_1" else taxonomy.subtopic
        options = [mapper(o, row.where("options")) for o in options]
    if target == "time_week":
        options = [o[:10] for o in options]
    weights = row.get("option_weights")
    if (not isinstance(weights, (list, tuple)) or len(weights) != len(options)
            or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights)):
        raise row.fail("option_weights", f"must be {len(options)} non-negative numbers, got {weights!r:.80}")
    keywords_type = row.data.get("keywords_type")
    if keywords_type is not None and not isinstance(keywords_type, str):
        raise row.fail("keywords_type", f"must be a string or null, got {keywords_type!r:.40}")
    support = [] if conversations is None else support_hashes(conversations, kinds, values, keywords_type or None)
    return {
        "hash": row.text("hash"), "question": row.text("question"), "style": "authors",
        "condition_type": kinds, "condition_value": values, "target_type": target,
        "keywords_type": keywords_type or None, "options": options, "option_weights": [float(w) for w in weights],
        "support": support, "phrased_by": "authors (GPT-4.1)",
    }


def read_source(root: Path) -> SourceData:
    """Every dataset of the authors' release found under ``root`` (see the module doc)."""
    root = Path(root)
    if not root.is_dir():
        raise AQASourceError(f"{root}: --source must be a folder holding the authors' datasets in subfolders "
                             f"named {', '.join(REPOS.values())}")
    present = {config: root / repo for config, repo in REPOS.items() if (root / repo).is_dir()}
    if not present:
        raise AQASourceError(f"{root}: none of the expected subfolders ({', '.join(REPOS.values())}) is there")
    taxonomy = read_taxonomy(root)
    out = SourceData()
    if "conversations" in present:
        data = load_saved(present["conversations"], REPOS["conversations"])
        out.conversations = [conversation_row(Row(REPOS["conversations"], i, r), taxonomy, out.pii)
                             for i, r in enumerate(data)]
        out.summaries = [{k: v for k, v in r.items() if k != "conversation"} for r in out.conversations]
        out.read["conversations"] = len(out.conversations)
    elif "summaries" in present:
        data = load_saved(present["summaries"], REPOS["summaries"])
        out.summaries = [conversation_row(Row(REPOS["summaries"], i, r), taxonomy, out.pii, with_text=False)
                         for i, r in enumerate(data)]
        out.read["summaries"] = len(out.summaries)
    hashes = [r["hash"] for r in out.conversations or out.summaries or []]
    if len(set(hashes)) != len(hashes):
        repeated = next(h for h, n in Counter(hashes).items() if n > 1)
        raise AQASourceError(f"{REPOS['conversations' if out.conversations else 'summaries']}: hash {repeated!r} "
                             "appears in more than one row; hashes must be unique")
    matchable = out.conversations or out.summaries
    for config in ("questions", "questions_subset"):
        if config in present:
            data = load_saved(present[config], REPOS[config])
            rows = [question_row(Row(REPOS[config], i, r), taxonomy, matchable) for i, r in enumerate(data)]
            setattr(out, config, rows)
            out.read[config] = len(rows)
    return out
