"""Gold events of a question from its SQL: what a RETRIEVE call of its tree should find, without gold trees.

PerQA's questions come with DuckDB SQL over the canonical tables, not with operator trees, so on the
authors' data (no convohub template ids) the only ground truth for RETRIEVE is the SQL. For *simple* SQL --
one SELECT over one table, no joins, subqueries, CTEs or set operations (the spec's restriction) -- the
events a RETRIEVE call must find are the rows of that table that pass the query's non-temporal
conditions: ``WHERE workout_type = 'running' AND year(start_date) = 2023`` keeps every run, because the
tree narrows time itself (EXTRACT the date, then FILTER). The rewrite goes through DuckDB's own parser
(``json_serialize_sql``) and printer (``json_deserialize_sql``): select the ``id`` column, drop the
conjuncts that read a temporal column, drop aggregation, ordering and limits, and run it. The canonical ids
found map to the observable events that show them (``structured_event_id``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from convohub.perqa.db import sql_nodes

__all__ = ["TEMPORAL_COLUMNS", "gold_canonical_ids", "gold_observable_ids", "retrieval_sql"]

#: Columns a tree handles with its own FILTERs: conditions on them are not RETRIEVE's business.
TEMPORAL_COLUMNS = frozenset({"start_date", "start_time", "end_date", "end_time", "start_day", "end_day",
                              "entity_start_date", "entity_end_date", "entity_birth_date", "stream_end_time",
                              "timestamp"})


def _columns(node: Any) -> set[str]:
    """Every column name referenced below a serialized expression."""
    return {str(c) for item in sql_nodes(node) if item.get("class") == "COLUMN_REF"
            for c in item.get("column_names", [])}


def _has_subquery(node: Any) -> bool:
    return any(item.get("class") == "SUBQUERY" for item in sql_nodes(node))


def _conjuncts(where: Any) -> list[Any]:
    if where is None:
        return []
    if where.get("class") == "CONJUNCTION" and where.get("type") == "CONJUNCTION_AND":
        return [c for child in where["children"] for c in _conjuncts(child)]
    return [where]


def retrieval_sql(con: Any, sql: str) -> str | None:
    """``SELECT id FROM <table> WHERE <non-temporal conditions>`` of a simple question SQL; None when the
    SQL is not simple (joins, subqueries, CTEs, set operations, several statements)."""
    parsed = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    if parsed.get("error") or len(parsed.get("statements", [])) != 1:
        return None
    node = parsed["statements"][0]["node"]
    table = node.get("from_table") or {}
    if node.get("type") != "SELECT_NODE" or table.get("type") != "BASE_TABLE" \
            or (node.get("cte_map") or {}).get("map") or _has_subquery(node):
        return None
    kept = [c for c in _conjuncts(node.get("where_clause")) if not (_columns(c) & TEMPORAL_COLUMNS)]
    where: Any = None
    if len(kept) == 1:
        where = kept[0]
    elif kept:
        where = {"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "", "query_location": 0,
                 "children": kept}
    node.update(select_list=[{"class": "COLUMN_REF", "type": "COLUMN_REF", "alias": "", "query_location": 0,
                              "column_names": ["id"]}],
                where_clause=where, group_expressions=[], group_sets=[], having=None, qualify=None, modifiers=[],
                aggregate_handling="STANDARD_HANDLING")
    return str(con.execute("SELECT json_deserialize_sql(?)", [json.dumps(parsed)]).fetchone()[0])


def gold_canonical_ids(con: Any, sql: str) -> set[str] | None:
    """Ids of the canonical events a simple question SQL reads (see the module docstring); None when the SQL
    is not simple or does not run."""
    import duckdb

    from convohub.perqa.questions import resolve_sql

    try:
        rewritten = retrieval_sql(con, resolve_sql(sql))
        if rewritten is None:
            return None
        return {str(row[0]) for row in con.execute(rewritten).fetchall()}
    except duckdb.Error:
        return None


def gold_observable_ids(con: Any, sql: str, observable: Iterable[Mapping[str, Any]]) -> set[str] | None:
    """The observable events showing the canonical events of :func:`gold_canonical_ids`."""
    canonical = gold_canonical_ids(con, sql)
    if canonical is None:
        return None
    return {str(e["id"]) for e in observable if str(e.get("structured_event_id")) in canonical}
