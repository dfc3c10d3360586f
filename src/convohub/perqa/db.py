"""One in-memory DuckDB database per persona: a table per canonical event type.

Gold answers are SQL over these tables, so building them must be cheap (thousands of questions per
build): each table is a typed Arrow table registered as a view, no copies and no disk. Columns are
``id``, ``start_date``/``end_date`` (DATE), ``start_time``/``end_time`` (TIME), ``start_datetime``/
``end_datetime`` (TIMESTAMP; a missing time counts as 00:00 / 23:59:59, the paper's convention) and one
column per event_data key. Types come from :data:`convohub.perqa.canonical.SCHEMAS` for known event types
and are inferred from the values otherwise (the authors' released tables).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import date, datetime, time
from typing import Any

import duckdb
import pyarrow as pa

from convohub.perqa.canonical import SCHEMAS

_ARROW = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
          "list": pa.list_(pa.string())}


def _infer(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return "str"
    if kinds <= {bool}:
        return "bool"
    if kinds <= {int}:
        return "int"
    if kinds <= {int, float}:
        return "float"
    if kinds <= {list}:
        return "list"
    return "str"


def _column(values: list[Any], kind: str) -> pa.Array:
    if kind == "float":
        values = [None if v is None else float(v) for v in values]
    elif kind == "list":
        values = [None if v is None else [str(x) for x in v] for v in values]
    elif kind == "str":
        values = [None if v is None else str(v) for v in values]
    return pa.array(values, type=_ARROW[kind])


def events_to_arrow(event_type: str, events: list[Mapping[str, Any]]) -> pa.Table:
    """Canonical events of one type -> a typed Arrow table (the SQL view of that type)."""
    keys: list[str] = list(SCHEMAS.get(event_type, {}))
    for e in events:
        keys += [k for k in e["event_data"] if k not in keys]
    start_d = [date.fromisoformat(e["start_date"]) for e in events]
    end_d = [date.fromisoformat(e["end_date"] or e["start_date"]) for e in events]
    start_t = [time.fromisoformat(e["start_time"]) if e.get("start_time") else None for e in events]
    end_t = [time.fromisoformat(e["end_time"]) if e.get("end_time") else None for e in events]
    cols: dict[str, pa.Array] = {
        "id": pa.array([str(e["id"]) for e in events], pa.string()),
        "start_date": pa.array(start_d, pa.date32()), "start_time": pa.array(start_t, pa.time64("us")),
        "end_date": pa.array(end_d, pa.date32()), "end_time": pa.array(end_t, pa.time64("us")),
        "start_datetime": pa.array([datetime.combine(d, t or time(0)) for d, t in zip(start_d, start_t, strict=True)],
                                   pa.timestamp("us")),
        "end_datetime": pa.array([datetime.combine(d, t or time(23, 59, 59)) for d, t in zip(end_d, end_t, strict=True)],
                                 pa.timestamp("us")),
    }
    schema = SCHEMAS.get(event_type, {})
    for key in keys:
        values = [e["event_data"].get(key) for e in events]
        cols[key] = _column(values, schema.get(key) or _infer(values))
    return pa.table(cols)


def connect(canonical: Iterable[Mapping[str, Any]]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with one view per canonical event type (empty types included)."""
    by_type: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for e in canonical:
        by_type[e["event_type"]].append(e)
    con = duckdb.connect(":memory:")
    con.execute("SET threads TO 1")  # questions are tiny; threads only add scheduling overhead
    for event_type in sorted(set(SCHEMAS) | set(by_type)):
        table = events_to_arrow(event_type, by_type.get(event_type, []))
        con.register(f"_arrow_{event_type}", table)
        con.execute(f'CREATE VIEW "{event_type}" AS SELECT * FROM "_arrow_{event_type}"')
    return con


def sql_nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every object below a ``json_serialize_sql`` tree (expressions, table refs, modifiers), in no order."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
