"""Training pairs for ReQAP's EXTRACT model, derived from PerQA's parallel observable/canonical events.

EXTRACT reads one attribute off one event: input ``"Attribute: {key}, Event: {k: json(v) lines}"``, output
a short value string or ``"null"``. Every PerQA observable event keeps the canonical event it shows
(``structured_event_id``) and the canonical keys whose value it carries (``properties_mentioned``), so the
supervision is free:

* positives (weight 1.0): the 4 temporal keys; the canonical keys in ``properties_mentioned`` (typed value
  written by :func:`format_value`); the native keys of unstructured sources (calendar, mail, social media:
  the literal string). Where a native key and a canonical key share a name (a calendar ``location``), the
  native value wins: the attribute asked for is literally in the event, and the engine's frozen-mapping
  shortcut (direct lookup) then agrees with the model.
* negatives (output ``"null"``): canonical keys that the observable does not mention, 1 key of another
  source, 3 keys no source has (:data:`ABSENT_KEYS`).
* aliases (weight :attr:`PairConfig.alias_weight`, 0.2): each positive again under a synonym of its key
  from :data:`KEY_ALIASES` (at most 5 per key), so questions that name an attribute loosely still work.

Derivation is a pure function of the events and :class:`PairConfig`: one seeded generator per event (so
adding a persona does not reshuffle the others), de-duplication by input (one answer per input), then a
seeded cap per split. :func:`convert_value` is the inverse of :func:`format_value`: it turns a generated
string into the ``attr_type`` the operator asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from convohub.perqa.canonical import SCHEMAS
from convohub.perqa.observable import OBSERVABLE_KEYS, fmt
from convohub.perqa.vocab import derive_rng
from convohub.reqap.components.extract import NULL, extraction_input, persona_names

TEMPORAL_KEYS = ("start_date", "start_time", "end_date", "end_time")
UNSTRUCTURED_SOURCES = ("calendar", "mail", "social_media")
#: Canonical bookkeeping keys that are not attributes of the event itself.
INTERNAL_KEYS = frozenset({"trip_id"})
#: Pair caps per split (the paper's <= 100K train / 10K dev); the test split is capped like dev.
DEFAULT_CAPS: dict[str, int] = {"train": 100_000, "dev": 10_000, "test": 10_000}

#: Synonyms a question decomposition may use for an attribute (<= 5 per key; written for convohub).
KEY_ALIASES: dict[str, tuple[str, ...]] = {
    "start_date": ("date", "day", "start day", "begin date", "starting date"),
    "start_time": ("time", "start hour", "begin time", "starting time", "time of day"),
    "end_date": ("end day", "finish date", "until date", "last day"),
    "end_time": ("end hour", "finish time", "until time", "stop time"),
    "song_name": ("song", "track", "song title", "track name"),
    "song_artist": ("artist", "artists", "singer", "performer", "band"),
    "movie_title": ("movie", "film", "film title", "movie name"),
    "stream_full_title": ("full title", "title with year"),
    "tvseries_title": ("series", "tv show", "show title", "series name"),
    "tvseries_season": ("season", "season number"),
    "season_name": ("season title",),
    "episode_name": ("episode title", "episode"),
    "episode_number": ("episode no", "episode index"),
    "duration": ("length", "how long", "time spent"),
    "country": ("nation", "country name"),
    "watching_continuation": ("continued watching", "resumed"),
    "order": ("order id", "order number"),
    "product": ("item", "article", "purchased item"),
    "product_quantity": ("quantity", "number of items", "count"),
    "price": ("cost", "amount", "total price", "amount paid"),
    "currency": ("money unit", "currency code"),
    "workout_type": ("sport", "exercise", "kind of workout"),
    "distance": ("covered distance", "distance covered", "how far"),
    "average_heart_rate": ("avg heart rate", "mean heart rate", "heart rate", "pulse"),
    "maximum_heart_rate": ("max heart rate", "peak heart rate"),
    "minimum_heart_rate": ("min heart rate", "lowest heart rate"),
    "average_speed": ("avg speed", "mean speed"),
    "maximum_speed": ("max speed", "top speed"),
    "minimum_speed": ("min speed", "lowest speed"),
    "participants": ("people", "attendees", "with whom", "guests"),
    "companions": ("travel companions", "fellow travellers", "travelling with"),
    "location": ("place", "venue", "where"),
    "city": ("town", "city name"),
    "destination_city": ("destination", "travel destination", "target city"),
    "destination_country": ("destination nation", "country visited"),
    "doctor_type": ("doctor specialty", "kind of doctor", "physician type"),
    "doctor_name": ("doctor", "physician"),
    "patient": ("patient name", "for whom"),
    "reason": ("purpose of visit", "appointment reason"),
    "practice": ("clinic", "doctor's office"),
    "celebration": ("occasion", "holiday", "celebrated event"),
    "honoree": ("celebrated person", "whose celebration"),
    "milestone_type": ("milestone", "life event"),
    "organisation": ("organization", "employer", "institution"),
    "person": ("who", "person name"),
    "activity": ("what was done", "kind of activity"),
    "cuisine": ("food", "kind of food", "type of cuisine"),
    "location_type": ("kind of place", "venue type"),
    "purpose": ("trip purpose", "reason for travel"),
    "transport": ("means of transport", "travel mode"),
    "accommodation": ("lodging", "place to stay"),
    "highlight": ("sightseeing", "what we did"),
    "place": ("sight", "landmark", "spot"),
    "subject": ("mail subject", "email subject"),
    "sender": ("from", "from whom"),
    "recipient": ("to", "addressee"),
    "timestamp": ("sent at", "sending time"),
    "summary": ("calendar title", "entry title"),
}
#: Attribute names no PerQA source has: the "absent key" negatives (written for convohub).
ABSENT_KEYS: tuple[str, ...] = (
    "weather", "mood", "temperature", "calories", "rating", "author", "isbn", "license_plate",
    "blood_pressure", "flight_number", "seat", "gate", "ingredients", "steps", "sleep_duration",
    "battery_level", "phone_number",
    "address", "zip_code", "tip", "tax", "discount", "color", "size", "brand", "director", "album", "lyrics",
    "playlist", "volume", "score", "opponent", "team", "dress_code", "gift", "menu", "language", "publisher",
)


@dataclass(frozen=True)
class PairConfig:
    """How many pairs of each kind to derive; everything random is seeded by ``seed``."""

    seed: int = 0
    n_other_source: int = 1
    n_absent: int = 3
    aliases_per_pair: int = 1
    alias_weight: float = 0.2
    with_persona_names: bool = False
    #: Keep at most this many events per (persona, source), evenly spaced in time (None: all). Music
    #: streams are ~60% of a persona's events; a small budget is better spent across sources.
    max_events_per_source: int | None = None


@dataclass(frozen=True)
class ExtractPair:
    """One training example (a dataset row)."""

    input: str
    output: str
    weight: float
    attribute: str  # as written in the input (an alias for alias pairs)
    key: str  # the event key the pair was derived from
    kind: str  # temporal | mentioned | native | alias | unmentioned | other_source | absent
    source: str
    persona_id: str
    event_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------ values


def format_value(value: Any) -> str:
    """A canonical (typed) value as the model should write it: ``"null"``, numbers without ``.0``,
    ``true``/``false``, lists as JSON (so :func:`convert_value` can read them back unambiguously)."""
    if value is None or value == "" or value == []:
        return NULL
    if isinstance(value, (list, tuple)):
        return json.dumps([v if isinstance(v, str) else fmt(v) for v in value], ensure_ascii=False)
    return fmt(value)


# ------------------------------------------------------------------------------------------ inputs


def event_attributes(event: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes EXTRACT sees: the temporal fields, then ``event_data`` (a dict or its JSON string)."""
    data = event.get("event_data", {})
    if isinstance(data, str):
        data = json.loads(data)
    out = {k: event[k] for k in TEMPORAL_KEYS if event.get(k) is not None}
    out.update(data)
    return out


# ------------------------------------------------------------------------------------------ pairs

_ALL_KEYS_BY_SOURCE: dict[str, frozenset[str]] = {
    **{s: frozenset(k) for s, k in OBSERVABLE_KEYS.items()},
    **{f"canonical:{t}": frozenset(k) for t, k in SCHEMAS.items()},
}


def _thin(events: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """At most ``limit`` events per source, evenly spaced over each source's timeline (deterministic)."""
    if limit is None:
        return events
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_source[e["event_type"]].append(e)
    keep: set[int] = set()
    for group in by_source.values():
        step = max(len(group) / limit, 1.0)
        keep |= {id(group[int(i * step)]) for i in range(min(limit, len(group)))}
    return [e for e in events if id(e) in keep]


def event_pairs(event: Mapping[str, Any], canonical: Mapping[str, Any] | None, persona_id: str,
                config: PairConfig, names: str = "") -> list[ExtractPair]:
    """All pairs of one observable event (``canonical``: the event it shows, typed ``event_data``)."""
    source = str(event["event_type"])
    attrs = event_attributes(event)
    native = {k: v for k, v in attrs.items() if k not in TEMPORAL_KEYS}
    can_data = event_attributes({"event_data": canonical["event_data"]}) if canonical else {}
    can_data = {k: v for k, v in can_data.items() if k not in INTERNAL_KEYS}
    mentioned = event.get("properties_mentioned") or []
    if isinstance(mentioned, str):
        mentioned = json.loads(mentioned)
    rng = derive_rng(config.seed, "extract", persona_id, event["id"])
    targets: list[tuple[str, str, str]] = []  # (key, output, kind)
    for k in TEMPORAL_KEYS:
        targets.append((k, format_value(event.get(k)), "temporal"))
    if source in UNSTRUCTURED_SOURCES:
        targets += [(k, format_value(v), "native") for k, v in native.items()]
    targets += [(k, format_value(can_data[k]), "mentioned") for k in mentioned
                if k in can_data and not (source in UNSTRUCTURED_SOURCES and k in native)]
    done = {k for k, _, _ in targets}
    targets += [(k, NULL, "unmentioned") for k in can_data if k not in done]
    own = set(attrs) | set(can_data) | set(TEMPORAL_KEYS)
    canonical_type = f"canonical:{canonical['event_type']}" if canonical else ""
    others = sorted({k for s, keys in _ALL_KEYS_BY_SOURCE.items() if s not in (source, canonical_type)
                     for k in keys} - own - INTERNAL_KEYS)
    n_other = min(config.n_other_source, len(others))
    targets += [(k, NULL, "other_source") for k in rng.sample(others, n_other)]
    absent = [k for k in ABSENT_KEYS if k not in own]
    targets += [(k, NULL, "absent") for k in rng.sample(absent, min(config.n_absent, len(absent)))]

    def pair(attribute: str, key: str, output: str, kind: str, weight: float) -> ExtractPair:
        return ExtractPair(extraction_input(attribute, attrs, names), output, weight, attribute, key, kind,
                           source, persona_id, str(event["id"]))

    out = [pair(k, k, value, kind, 1.0) for k, value, kind in targets]
    for k, value, kind in targets:
        if kind in ("temporal", "native", "mentioned") and config.aliases_per_pair > 0:
            aliases = [a for a in KEY_ALIASES.get(k, ()) if a not in own]
            for alias in rng.sample(aliases, min(config.aliases_per_pair, len(aliases))):
                out.append(pair(alias, k, value, "alias", config.alias_weight))
    return out


def derive_pairs(personas: Iterable[tuple[str, Mapping[str, Any] | None, list[dict[str, Any]],
                                          list[dict[str, Any]]]],
                 config: PairConfig | None = None, max_pairs: int | None = None) -> list[ExtractPair]:
    """Pairs of several personas, given as ``(persona_id, persona or None, observable, canonical)``:
    de-duplicated by input (first wins), then capped to ``max_pairs`` by seeded reservoir sampling kept in
    derivation order. Streaming keeps memory at the cap: the release-size PerQA has ~2M candidate pairs."""
    config = config or PairConfig()
    rng = derive_rng(config.seed, "extract-cap")
    seen: set[bytes] = set()
    kept: list[tuple[int, ExtractPair]] = []
    n = 0
    for persona_id, persona, observable, canonical in personas:
        by_id = {str(c["id"]): c for c in canonical}
        names = persona_names(persona) if config.with_persona_names and persona else ""
        for event in _thin(observable, config.max_events_per_source):
            for p in event_pairs(event, by_id.get(str(event.get("structured_event_id"))), persona_id, config,
                                 names):
                digest = hashlib.blake2b(p.input.encode("utf-8"), digest_size=12).digest()
                if digest in seen:
                    continue
                seen.add(digest)
                if max_pairs is None or len(kept) < max_pairs:
                    kept.append((n, p))
                elif (j := rng.randrange(n + 1)) < max_pairs:
                    kept[j] = (n, p)
                n += 1
    return [p for _, p in sorted(kept, key=lambda item: item[0])]


def pairs_from_perqa(data: Any, split: str, config: PairConfig | None = None,
                     max_pairs: int | None = -1) -> list[ExtractPair]:
    """Pairs of one split of a :class:`~convohub.perqa.PerQAData` (``max_pairs=-1``: the split's cap)."""
    cap = DEFAULT_CAPS.get(split) if max_pairs == -1 else max_pairs
    return derive_pairs(((p.persona_id, p.persona, p.observable, p.canonical) for p in data.split(split)),
                        config, cap)


def _rows_by_persona(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows.to_list() if hasattr(rows, "to_list") else rows:  # Arrow -> rows at once: 10x faster
        out[r["persona_id"]].append(dict(r))
    return out


def personas_from_dataset(dataset_path: str | Path, split: str) -> Iterator[
        tuple[str, dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]]:
    """``(persona_id, persona, observable, canonical)`` of one split of a built PerQA dataset (a local
    folder written by convohub, read without the ``datasets`` cache, or a Hub dataset id)."""
    from convohub.hub import load_split

    observable = _rows_by_persona(load_split(dataset_path, "observable_events", split))
    canonical = _rows_by_persona(load_split(dataset_path, "canonical_events", split))
    try:
        personas = {r["persona_id"]: json.loads(r["persona"]) for r in load_split(dataset_path, "personas", split)}
    except (KeyError, ValueError, FileNotFoundError):  # no personas config: names are optional
        personas = {}
    for persona_id in sorted(observable, key=_persona_order):
        yield persona_id, personas.get(persona_id), observable[persona_id], canonical.get(persona_id, [])


def _persona_order(persona_id: str) -> tuple[str, int]:
    head, _, index = persona_id.rpartition("_")
    return (head, int(index)) if index.isdigit() else (persona_id, 0)


def pairs_from_dataset(dataset_path: str | Path, split: str, config: PairConfig | None = None,
                       max_pairs: int | None = -1) -> list[ExtractPair]:
    """Pairs of one split of a built PerQA dataset (``max_pairs=-1``: the split's default cap)."""
    cap = DEFAULT_CAPS.get(split) if max_pairs == -1 else max_pairs
    return derive_pairs(personas_from_dataset(dataset_path, split), config, cap)


def to_columns(pairs: Sequence[ExtractPair]) -> dict[str, list[Any]]:
    """Column-wise pairs for ``datasets.Dataset.from_dict``."""
    fields = list(ExtractPair.__dataclass_fields__)
    return {f: [getattr(p, f) for p in pairs] for f in fields}
