"""Events and the event store: PerQA observable events as flat dicts, typed time spans, de-duplication.

An event is a plain dict. Source records follow PerQA's observable-events schema (id, structured_event_id,
start/end date and time as strings, event_type, event_data as JSON or dict, properties_mentioned); the
store flattens ``event_data`` into the event (``source`` = ``event_type``) so lambdas read
``attr["workout_type"]`` directly, as in the paper's trees.
"""

from __future__ import annotations

import bisect
import json
import operator
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

__all__ = [
    "EventStore", "STRUCTURED_SOURCES", "deduplicate", "normalise_record", "parse_date", "parse_time",
    "typed_event"
]

#: Sources whose events come from structured logs; they win when events with overlapping spans merge.
STRUCTURED_SOURCES = frozenset({"movie_stream", "music_stream", "online_purchase", "tvseries_stream", "workout"})
_META_KEYS = ("properties_mentioned",)
_TOP_KEYS = ("id", "structured_event_id", "start_date", "start_time", "end_date", "end_time", "event_type")
DAY_START = time(0, 0)
DAY_END = time(23, 59)


def parse_date(value: Any) -> date | None:
    """``date`` from a date, datetime or ISO string (a datetime string keeps its date part)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def parse_time(value: Any) -> time | None:
    """``time`` from a time, datetime or string ("12:00", "12:00:00", "2024-01-01T12:00")."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.time()
    if isinstance(value, time):
        return value
    text = str(value).strip()
    if "T" in text:
        text = text.split("T", 1)[1]
    elif " " in text and "-" in text.split(" ", 1)[0]:
        text = text.split(" ", 1)[1]
    try:
        return time.fromisoformat(text)
    except ValueError:
        return None


def normalise_record(record: dict[str, Any]) -> dict[str, Any]:
    """A source record as a flat event: top-level columns, then the keys of ``event_data``.

    Top-level columns win over colliding event_data keys (they carry the time span); ``properties_mentioned``
    is metadata of the benchmark, kept out of the event.
    """
    data = record.get("event_data") or {}
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError:
            data = {"text": data}
    if not isinstance(data, dict):
        data = {"value": data}
    event: dict[str, Any] = {k: v for k, v in data.items() if k not in _TOP_KEYS}
    for k in _TOP_KEYS:
        if k in record:
            event[k] = record[k]
    event["id"] = str(record.get("id"))
    if event.get("event_type") is not None:
        event["source"] = event["event_type"]
    return event


def typed_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """A copy with typed ``start/end_date``, ``start/end_time`` and ``start/end_datetime``.

    Rules (the spec): no start_date -> None (RETRIEVE drops it); a missing start time is 00:00; a missing
    end date copies the start date; a missing end time copies the start time when the whole end was
    missing and a start time exists, otherwise it is 23:59.
    """
    start_d = parse_date(event.get("start_date"))
    if start_d is None:
        return None
    start_t = parse_time(event.get("start_time"))
    end_d = parse_date(event.get("end_date"))
    end_t = parse_time(event.get("end_time"))
    if end_d is None and end_t is None and start_t is not None:
        end_d, end_t = start_d, start_t
    end_d = end_d or start_d
    start_t = start_t or DAY_START
    end_t = end_t or DAY_END
    out = dict(event)
    out.update(start_date=start_d, start_time=start_t, end_date=end_d, end_time=end_t,
               start_datetime=datetime.combine(start_d, start_t), end_datetime=datetime.combine(end_d, end_t))
    return out


_START_AND_ID = operator.itemgetter("start_datetime", "id")


def _merge(base: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any]:
    merged = dict(base)
    for o in others:
        for k, v in o.items():
            merged.setdefault(k, v)
    merged["merged_ids"] = [base["id"], *[o["id"] for o in others]]
    return merged


def deduplicate(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge events that describe the same happening: their time spans overlap (ends inclusive).

    Structured events are never merged with each other (two workouts stay two workouts). Each other event
    joins the structured event it overlaps most (ties: the earlier one), whose keys and times win. Events
    that overlap no structured event are merged among themselves by transitive overlap, keeping the one
    with the tightest span as base. Output is sorted by start, then id.
    """
    structured: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for e in events:
        (structured if e.get("source") in STRUCTURED_SOURCES else others).append(e)
    structured.sort(key=_START_AND_ID)
    if not others:  # nothing to merge (every stream/purchase/workout question): already in output order
        return structured
    starts = [e["start_datetime"] for e in structured]
    max_end: list[datetime] = []
    for e in structured:
        max_end.append(max(max_end[-1], e["end_datetime"]) if max_end else e["end_datetime"])
    attached: dict[int, list[dict[str, Any]]] = {}
    loose: list[dict[str, Any]] = []
    for o in others:
        best, best_overlap = -1, None
        j = bisect.bisect_right(starts, o["end_datetime"]) - 1
        while j >= 0 and max_end[j] >= o["start_datetime"]:
            s = structured[j]
            if s["end_datetime"] >= o["start_datetime"]:
                overlap = min(s["end_datetime"], o["end_datetime"]) - max(s["start_datetime"], o["start_datetime"])
                if best_overlap is None or overlap >= best_overlap:
                    best, best_overlap = j, overlap
            j -= 1
        if best >= 0:
            attached.setdefault(best, []).append(o)
        else:
            loose.append(o)
    out = [_merge(s, attached[i]) if i in attached else s for i, s in enumerate(structured)]
    loose.sort(key=lambda e: (e["start_datetime"], e["end_datetime"], e["id"]))
    cluster: list[dict[str, Any]] = []
    cluster_end: datetime | None = None
    for e in [*loose, None]:
        if e is not None and cluster_end is not None and e["start_datetime"] <= cluster_end:
            cluster.append(e)
            cluster_end = max(cluster_end, e["end_datetime"])
            continue
        if cluster:
            base = min(cluster, key=lambda c: (c["end_datetime"] - c["start_datetime"], c["start_datetime"], c["id"]))
            rest = [c for c in cluster if c is not base]
            out.append(_merge(base, rest) if rest else base)
        if e is not None:
            cluster, cluster_end = [e], e["end_datetime"]
    out.sort(key=_START_AND_ID)
    return out


class EventStore:
    """All events of one persona, by id, plus their typed forms (computed once)."""

    def __init__(self, events: Iterable[dict[str, Any]]) -> None:
        self.events: list[dict[str, Any]] = list(events)
        self.by_id: dict[str, dict[str, Any]] = {e["id"]: e for e in self.events}
        if len(self.by_id) != len(self.events):
            raise ValueError("event ids must be unique")
        self._typed: dict[str, dict[str, Any] | None] = {}

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> EventStore:
        """From source records in the observable-events schema (event_data as JSON string or dict)."""
        return cls(normalise_record(r) for r in records)

    @classmethod
    def from_dataset_folder(cls, folder: str | Path, persona_id: str) -> EventStore:
        """From a built PerQA dataset folder: ``data/observable_events/*.parquet`` rows of ``persona_id``."""
        import pyarrow.parquet as pq

        shards = sorted((Path(folder) / "data" / "observable_events").glob("*.parquet"))
        if not shards:
            raise FileNotFoundError(f"{folder}: no data/observable_events/*.parquet shards")
        rows: list[dict[str, Any]] = []
        for shard in shards:
            rows += pq.read_table(shard, filters=[("persona_id", "=", persona_id)]).to_pylist()
        if not rows:
            raise KeyError(f"{folder}: no observable events for persona {persona_id!r}")
        return cls.from_records(rows)

    def __len__(self) -> int:
        return len(self.events)

    def typed_many(self, event_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The typed events of ``event_ids`` in order, each once; unknown ids and events without a start date
        are left out."""
        cache, by_id = self._typed, self.by_id
        seen: set[str] = set()
        out = []
        for i in event_ids:
            if i in seen or i not in by_id:
                continue
            seen.add(i)
            e = cache[i] if i in cache else self.typed(i)
            if e is not None:
                out.append(e)
        return out

    def typed(self, event_id: str) -> dict[str, Any] | None:
        """The typed event (see :func:`typed_event`), None when it has no start date."""
        if event_id not in self._typed:
            self._typed[event_id] = typed_event(self.by_id[event_id])
        return self._typed[event_id]
