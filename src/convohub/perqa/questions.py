"""Question instantiation and gold answers.

Templates are bound per persona (values from the persona's own tables), the SQL is run in DuckDB with
``CURRENT_DATE`` replaced by the reference date, and the gold answer follows the authors' rules: a query
ending in ``LIMIT 1`` is re-run without the limit and every row tied with the first on the *last* column
is kept (so "which series did I watch most" keeps all series sharing the top count); the answer list is
the first column of the kept rows. Questions whose answer is empty or zero are dropped, as the paper
drops "misinformed" questions (a question about kids for a persona without kids).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import duckdb

from convohub.perqa.templates import QuestionTemplate
from convohub.perqa.vocab import derive_rng

REFERENCE_DATE = "2024-11-25"
SPLITS = ("train", "dev", "test")
SPLIT_FRACTIONS = (0.6, 0.1, 0.3)
_CURRENT_DATE = re.compile(r"\bCURRENT_DATE\b", re.IGNORECASE)
_LIMIT_1 = re.compile(r"\s+LIMIT\s+1\s*;?\s*$", re.IGNORECASE)


def resolve_sql(sql: str, reference_date: str = REFERENCE_DATE) -> str:
    """``CURRENT_DATE`` -> ``DATE '<reference date>'``: answers must not depend on the build day."""
    date.fromisoformat(reference_date)  # reject anything that is not a date before it reaches SQL
    return _CURRENT_DATE.sub(f"DATE '{reference_date}'", sql)


def json_value(value: Any) -> Any:
    """A DuckDB result value as a JSON value: dates/times as ISO strings, numbers rounded to 2 decimals."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        value = float(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        rounded = round(value, 2)
        return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def fetch_rows(cursor: Any, max_rows: int | None) -> list[Any]:
    """Every row of an executed query; with ``max_rows``, ValueError ``too many rows`` past that many, read
    without holding more than one row over the bound (a query someone else wrote may return millions)."""
    if max_rows is None:
        return cursor.fetchall()
    rows = cursor.fetchmany(max_rows + 1)
    if len(rows) > max_rows:
        raise ValueError(f"too many rows: more than {max_rows:,}")
    return rows


def gold_answers(con: duckdb.DuckDBPyConnection, sql: str, reference_date: str = REFERENCE_DATE,
                 max_rows: int | None = None) -> list[Any]:
    """Run ``sql`` and apply the LIMIT 1 tie rule; returns the de-duplicated first-column values
    (``max_rows``: see :func:`fetch_rows`)."""
    query = resolve_sql(sql, reference_date)
    tied = _LIMIT_1.search(query) is not None
    rows = fetch_rows(con.execute(_LIMIT_1.sub("", query) if tied else query), max_rows)
    if tied and rows:
        top = rows[0][-1]
        rows = [r for r in rows if r[-1] == top]
    answers: list[Any] = []
    for row in rows:
        value = json_value(row[0])
        if value is not None and value not in answers:
            answers.append(value)
    return answers


def is_empty_answer(answers: Sequence[Any]) -> bool:
    """No answer, or a single zero (a count or sum over nothing): the question does not fit the persona."""
    if not answers:
        return True
    return len(answers) == 1 and not isinstance(answers[0], bool) and answers[0] == 0


def sql_literal(value: Any) -> str:
    """A bound template variable as a SQL literal (strings quoted with '' escaping)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


def bindings(template: QuestionTemplate, con: duckdb.DuckDBPyConnection, seed: int, persona_id: str,
             max_instances: int, reference_date: str = REFERENCE_DATE, max_rows: int | None = None
             ) -> list[dict[str, Any]]:
    """Up to ``max_instances`` variable bindings for one persona, drawn reproducibly from the bind query
    (``max_rows``: see :func:`fetch_rows`)."""
    if not template.variables:
        return [{}]
    cursor = con.execute(resolve_sql(template.bind or "", reference_date))
    names = [d[0] for d in cursor.description]
    missing = set(template.variables) - set(names)
    if missing:
        raise ValueError(f"template {template.template_id}: bind query lacks columns {sorted(missing)}")
    rows = [dict(zip(names, r, strict=True)) for r in fetch_rows(cursor, max_rows)]
    rows = [r for r in rows if all(r[v] is not None and r[v] != "" for v in template.variables)]
    rng = derive_rng(seed, persona_id, template.template_id)
    return rng.sample(rows, min(max_instances, len(rows)))


def instantiate(template: QuestionTemplate, binding: dict[str, Any]) -> tuple[str, str]:
    """(question text, SQL) for one binding."""
    question = template.question.format(**{k: str(v) for k, v in binding.items()})
    sql = template.sql.format(**{k: sql_literal(v) for k, v in binding.items()})
    return question, sql


def split_templates(templates: Iterable[QuestionTemplate], seed: int,
                    fractions: Sequence[float] = SPLIT_FRACTIONS) -> dict[str, str]:
    """template_id -> split; a seeded partition, so no template's pattern leaks from train into test."""
    ids = sorted(t.template_id for t in templates)
    derive_rng(seed, "template-split").shuffle(ids)
    counts = split_counts(len(ids), fractions)
    out, start = {}, 0
    for split, n in zip(SPLITS, counts, strict=True):
        out.update({tid: split for tid in ids[start:start + n]})
        start += n
    return out


def split_counts(n: int, fractions: Sequence[float] = SPLIT_FRACTIONS) -> tuple[int, int, int]:
    """(train, dev, test) sizes; dev and test get at least one item once there are three."""
    if n < 3:
        return (n, 0, 0)
    dev = max(1, round(n * fractions[1]))
    test = max(1, round(n * fractions[2]))
    return (n - dev - test, dev, test)


def make_questions(persona_id: str, con: duckdb.DuckDBPyConnection, templates: Iterable[QuestionTemplate],
                   seed: int, max_instances: int = 3, reference_date: str = REFERENCE_DATE) -> list[dict[str, Any]]:
    """All kept questions of one persona over ``templates`` (already restricted to the persona's split)."""
    out: list[dict[str, Any]] = []
    for template in templates:
        for binding in bindings(template, con, seed, persona_id, max_instances, reference_date):
            question, sql = instantiate(template, binding)
            answers = gold_answers(con, sql, reference_date)
            if is_empty_answer(answers):
                continue
            n = len(out)
            out.append({"id": f"{persona_id}-question_{n}", "q_id": str(n), "persona_id": persona_id,
                        "question": question, "sql_query": sql, "answers": answers,
                        "reference_date": reference_date, "template_id": template.template_id,
                        "categories": list(template.categories)})
    return out
