"""The value conversions of EXTRACT's ``attr_types`` (``float``, ``int``, ``date.fromisoformat``, ...).

:func:`convert` turns an extractor's raw value into the requested type; a value that cannot be converted
becomes None, and EXTRACT drops the event. Numbers take the first number in the text, so trailing units go.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime, time, timezone
from typing import Any

from convohub.reqap.engine.events import parse_date, parse_time

__all__ = ["TYPE_NAMES", "convert", "is_null"]

#: The conversions ``attr_types`` may name: the authors' notation (Python callables their engine applies
#: to the extracted value), written as names (``float``, ``date.fromisoformat``) or as strings (``"float"``).
TYPE_NAMES: frozenset[str] = frozenset({
    "str", "int", "float", "bool", "list", "tuple", "set", "dict", "json.loads", "date.fromisoformat",
    "date.fromtimestamp", "time.fromisoformat", "datetime.fromisoformat", "datetime.fromtimestamp",
})
MAX_JSON_CHARS = 100_000  # a longer string is no attribute value; json.loads refuses it
_NULLS = frozenset({"", "null", "none", "nan", "n/a"})
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


def is_null(value: Any) -> bool:
    """None, NaN, or a string that says nothing ("", "null", "None", " n/a ")."""
    if value is None:
        return True
    kind = type(value)
    if kind is str:
        return len(value) < 16 and value.strip().lower() in _NULLS
    return kind is float and math.isnan(value)


def _number(value: Any) -> float | None:
    """A number from ``5.99``, ``"5.99 EUR"``, ``"42 min"``, ``"EUR 1,299.50"``; None if there is none."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    m = _NUMBER.search(str(value))
    return float(m.group(0).replace(",", "")) if m else None


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple, set)):
        return list(value)
    text = str(value).strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
            if isinstance(parsed, list):
                return parsed
        except json.JSONDecodeError:
            pass
    return [p.strip() for p in re.split(r"[;,]", text) if p.strip()]


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime.combine(value, time(0, 0))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, tz=timezone.utc).replace(tzinfo=None)
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return datetime.fromtimestamp(float(text), tz=timezone.utc).replace(tzinfo=None)
    return datetime.fromisoformat(text)


def _json(value: Any) -> Any:
    """A JSON string parsed (a value that is already a list/dict/number stays as it is)."""
    if not isinstance(value, str):
        return value
    if len(value) > MAX_JSON_CHARS:
        raise ValueError("JSON value too long")
    return json.loads(value)


def convert(value: Any, type_name: str | None) -> Any:
    """``value`` as ``type_name`` (EXTRACT's ``attr_types`` entry); None when empty or not convertible.

    Numbers take the first number in the string, so trailing units go (``"5.99 EUR"`` -> 5.99,
    ``"42 min"`` -> 42); ``int`` rounds. Lists accept lists, JSON lists and comma/semicolon separated text.
    ``datetime.fromtimestamp`` also accepts datetimes and ISO strings (UTC for numeric timestamps).
    ``json.loads`` parses JSON text (``dict`` too, keeping objects only); ``tuple``/``set`` read like lists.
    """
    if is_null(value):
        return None
    if type_name is None:
        return value
    kind = type(value)  # already of the requested type: nothing to convert (typed spans, lists)
    if (kind is date and type_name == "date.fromisoformat") or (kind is time and type_name == "time.fromisoformat") \
            or (kind is datetime and type_name in ("datetime.fromisoformat", "datetime.fromtimestamp")) \
            or (kind is str and type_name == "str") or (kind is list and type_name == "list"):
        return value  # shared, not copied: no whitelisted method mutates a value
    try:
        if type_name in ("float", "int"):
            n = _number(value)
            if n is None or not math.isfinite(n):
                return None
            return float(n) if type_name == "float" else int(round(n))
        if type_name == "str":
            if isinstance(value, (list, tuple)):
                return ", ".join(str(v) for v in value)
            return value.isoformat() if isinstance(value, (date, time)) else str(value)
        if type_name in ("list", "tuple", "set"):
            items = _as_list(value)
            return items if type_name == "list" else tuple(items) if type_name == "tuple" else set(items)
        if type_name in ("dict", "json.loads"):
            loaded = _json(value)
            return loaded if type_name == "json.loads" or isinstance(loaded, dict) else None
        if type_name == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            return True if text in ("true", "yes", "1") else False if text in ("false", "no", "0") else None
        if type_name == "date.fromisoformat":
            return parse_date(value)
        if type_name == "time.fromisoformat":
            return parse_time(value)
        if type_name in ("datetime.fromisoformat", "datetime.fromtimestamp"):
            return _as_datetime(value)
        if type_name == "date.fromtimestamp":
            moment = _as_datetime(value)
            return moment.date() if moment is not None else None
    except (ValueError, OverflowError, OSError, RecursionError):
        return None
    raise ValueError(f"unknown attr_type {type_name!r}")
