"""More PerQA question templates, written by an LLM from the seed templates (the paper's path to ~2,000).

Why: PerQA's splits are disjoint by template, so what a QUD model can learn is bounded by how many question
patterns train has (convohub's hand-written library has 73 in all, 44 in train) and model selection by how
many dev has (7 templates, 30 questions). The authors grew their seed templates with an LLM that wrote new
questions with their SQL, and kept what ran. Here:

* each request shows the LLM the columns of one canonical table and up to three seed templates of one split
  that read it (as its own earlier answers), and asks for one new question with its DuckDB SQL as JSON
  (``question``, ``sql``, optional ``bind`` for ``{variables}``, ``categories``);
* the SQL is LLM-written code, so it is never trusted: it must parse (DuckDB's own parser) as one SELECT that
  reads only canonical tables and calls only whitelisted functions (:data:`FUNCTIONS`: the seed templates'
  vocabulary plus a few of the same kind); it then runs on each persona of the split with external access
  off, a memory limit and a time limit (:func:`run_bounded`);
* a proposal is kept when it answers (non-empty) for at least ``min_personas`` personas of its split and
  repeats no question or SQL already kept or seeded; every rejection is counted by reason;
* a kept template inherits the split of its seeds, so no pattern of test leaks into train.

What the checks cannot see is whether the SQL answers the question: that needs a strong LLM (the authors'
was GPT-4o) and a reader. SmolLM2-135M, the offline model, passed them on 1 of 24 requests (48 calls, 249 s
on 2 cores; rejections: 17 not JSON, 13 unsafe SQL, 8 missing field, 4 bad template, 3 empty answer, 1
duplicate, 1 SQL error), and that one reads ``product_quantity`` for "What is the most expensive product
purchased online?". The release therefore does not run this step; it is the path for an endpoint.

The output is a JSON-lines file (:func:`write_templates`) that a PerQA build reads
(``CONVOHUB_PERQA_TEMPLATES``). Generated templates have no gold operator tree; ReQAP's QUD learns from them
through ``convohub reqap distill``, as from the authors' questions.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convohub.perqa.canonical import SCHEMAS
from convohub.perqa.db import sql_nodes
from convohub.perqa.questions import (
    REFERENCE_DATE,
    bindings,
    gold_answers,
    instantiate,
    is_empty_answer,
    resolve_sql,
)
from convohub.perqa.templates import CATEGORIES, QuestionTemplate

__all__ = ["FUNCTIONS", "GeneratedTemplate", "expand_templates", "expansion_messages", "read_templates",
           "run_bounded", "sql_tables", "write_templates"]

#: Functions a generated SQL may call: those of the seed templates (operators, aggregates, date parts) and
#: a few of the same kind. Anything else (file readers, settings, catalog functions) is rejected unread.
FUNCTIONS = frozenset({
    "+", "-", "*", "/", "%", "~~", "!~~", "~~*", "avg", "count", "count_star", "sum", "min", "max", "median",
    "round", "trunc", "floor", "ceil", "abs", "len", "length", "lower", "upper", "contains", "list_contains",
    "unnest", "year", "month", "day", "hour", "week", "quarter", "dayname", "monthname", "dayofweek",
    "dayofmonth", "date_diff", "date_trunc", "date_part", "to_days", "to_hours", "to_months",
})
#: Rows a bind query or a question's SQL may return in a check (a person's answers are a few values or a list).
MAX_ROWS = 10_000
#: Bindings tried per persona, as many as a build asks (``PerQAConfig.max_instances``).
MAX_BINDINGS = 3
_SQL_TYPES = {"str": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN", "list": "VARCHAR[]"}
_FIELDS = ("question", "sql")


@dataclass(frozen=True)
class GeneratedTemplate:
    """A kept template, the split it belongs to (its seeds'), the seeds it was written from and by whom."""

    template: QuestionTemplate
    split: str
    seeds: tuple[str, ...]
    made_by: str

    def to_json(self) -> dict[str, Any]:
        t = self.template
        return {"template_id": t.template_id, "question": t.question, "sql": t.sql, "bind": t.bind,
                "categories": list(t.categories), "split": self.split, "seeds": list(self.seeds),
                "made_by": self.made_by}


# ------------------------------------------------------------------------------------------ SQL checks
def _serialized(con: Any, sql: str) -> dict[str, Any]:
    parsed = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    if parsed.get("error"):
        raise ValueError(f"unsafe SQL: {parsed.get('error_message', 'not a SELECT')}"[:160])
    if len(parsed.get("statements", [])) != 1:
        raise ValueError("unsafe SQL: not exactly one statement")
    return parsed["statements"][0]["node"]


def sql_tables(con: Any, sql: str) -> set[str]:
    """The canonical tables one SELECT reads; raises ValueError (``unsafe SQL: ...``) unless the statement
    is a single SELECT over canonical tables that calls only :data:`FUNCTIONS` (no CTEs, table functions,
    window functions or schema-qualified names)."""
    tables: set[str] = set()
    for item in sql_nodes(_serialized(con, sql)):
        if (item.get("cte_map") or {}).get("map"):
            raise ValueError("unsafe SQL: WITH clauses are not in the seed vocabulary")
        kind = item.get("type")
        if kind == "TABLE_FUNCTION":
            raise ValueError("unsafe SQL: table functions are not allowed")
        if kind == "BASE_TABLE":
            name = str(item.get("table_name", ""))
            if item.get("schema_name") or item.get("catalog_name") or name not in SCHEMAS:
                raise ValueError(f"unsafe SQL: table {name!r} is not a canonical table")
            tables.add(name)
        called = str(item.get("function_name", "")).lower()
        if item.get("class") == "WINDOW" or (item.get("class") in ("FUNCTION", "AGGREGATE") and called not in FUNCTIONS):
            raise ValueError(f"unsafe SQL: function {item.get('function_name')!r} is not allowed")
    if not tables:
        raise ValueError("unsafe SQL: reads no canonical table")
    return tables


def _placeholder_sql(template: QuestionTemplate) -> str:
    """The template's SQL with every variable as a string literal, for the structure check."""
    return resolve_sql(template.sql.format(**{v: "'x'" for v in template.variables}))


def normalised_sql(con: Any, sql: str) -> str:
    """DuckDB's own rendering of a SELECT, lower-cased, for duplicate checks (spacing and case differ)."""
    parsed = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    if parsed.get("error"):
        return " ".join(sql.lower().split())
    return " ".join(str(con.execute("SELECT json_deserialize_sql(?)", [json.dumps(parsed)]).fetchone()[0])
                    .lower().split())


def lock_down(con: Any, memory: str = "256MB") -> Any:
    """Make a persona connection fit for LLM-written SQL: no file or network access, bounded memory, and no
    statement can undo either."""
    con.execute("SET enable_external_access = false")
    con.execute(f"SET memory_limit = '{memory}'")
    con.execute("SET lock_configuration = true")
    return con


def run_bounded(con: Any, run: Callable[[], Any], seconds: float) -> Any:
    """``run()`` on ``con``, interrupted after ``seconds`` (ValueError ``time limit``)."""
    import duckdb

    timer = threading.Timer(seconds, con.interrupt)
    timer.start()
    try:
        return run()
    except duckdb.InterruptException as exc:
        raise ValueError(f"time limit: the SQL ran past {seconds:g} s") from exc
    except duckdb.Error as exc:
        raise ValueError(f"SQL error: {str(exc).splitlines()[0][:120]}") from exc
    finally:
        timer.cancel()


# ------------------------------------------------------------------------------------------ prompts
def _columns(table: str) -> str:
    keys = ", ".join(f"{k} {_SQL_TYPES[kind]}" for k, kind in SCHEMAS[table].items())
    return (f"{table}(id VARCHAR, start_date DATE, end_date DATE, start_time TIME, end_time TIME, "
            f"start_datetime TIMESTAMP, end_datetime TIMESTAMP, {keys})")


def _ask(table: str) -> str:
    return (f"Table: {_columns(table)}\nCURRENT_DATE is today. Write one question a person could ask about this "
            "table, with the DuckDB SQL that answers it, as JSON (a {variable} in both is filled from the rows of "
            "the \"bind\" query).")


def expansion_messages(table: str, seeds: Sequence[QuestionTemplate]) -> list[dict[str, str]]:
    """One request as a few-shot chat: each seed is an earlier answer to the same request, then the request
    again, asking for something new. SmolLM2 answered a single-message version of this prompt in prose (47 of
    48 answers not JSON); as earlier turns, the seeds make it answer in their JSON shape."""
    messages: list[dict[str, str]] = []
    for seed in seeds:
        shot = {"question": seed.question, "sql": seed.sql, "bind": seed.bind, "categories": list(seed.categories)}
        messages += [{"role": "user", "content": _ask(table)},
                     {"role": "assistant", "content": json.dumps(shot, ensure_ascii=False)}]
    categories = ", ".join(CATEGORIES)
    messages.append({"role": "user", "content": f"{_ask(table)} Ask something none of your earlier answers asked. "
                                                f"categories: any of {categories}."})
    return messages


# ------------------------------------------------------------------------------------------ validation
@dataclass
class _Pool:
    """What a proposal must not repeat, and the persona databases of each split to run it on."""

    con: Any  # a scratch connection for parsing
    questions: set[str]
    sqls: set[str]
    databases: Mapping[str, Sequence[tuple[str, Any]]]  # split -> (persona_id, locked connection)
    min_personas: int
    seconds: float
    seed: int


def _proposal(text: str) -> dict[str, Any]:
    from convohub.llm import parse_json_answer

    parsed = parse_json_answer(text, expect=dict)
    if not parsed.ok:
        raise ValueError(f"not JSON: {parsed.error}"[:120])
    value = parsed.value
    for key in _FIELDS:
        if not isinstance(value.get(key), str) or not value[key].strip():
            raise ValueError(f"missing field: {key}")
    return value


def _template(value: Mapping[str, Any], split: str) -> QuestionTemplate:
    categories = value.get("categories") or []
    if isinstance(categories, str):
        categories = [categories]
    categories = tuple(dict.fromkeys(str(c).strip().lower() for c in categories if str(c).strip().lower()
                                     in CATEGORIES))
    if not categories:  # per-category scores read them: no guessing
        raise ValueError(f"bad template: no category of {', '.join(CATEGORIES)}")
    bind = value.get("bind")
    bind = bind.strip() if isinstance(bind, str) and bind.strip() else None
    sql = value["sql"].strip().rstrip(";")
    digest = hashlib.sha1(f"{value['question']}\n{sql}".encode()).hexdigest()[:10]
    try:
        return QuestionTemplate(f"gen_{split}_{digest}", value["question"].strip(), sql, categories, bind)
    except (ValueError, KeyError, IndexError) as exc:  # braces that are not variables, a bind missing
        raise ValueError(f"bad template: {exc}"[:120]) from exc


def _answers(template: QuestionTemplate, db: Any, persona_id: str, seed: int) -> bool:
    """Whether the template answers (non-empty) for some binding of this persona, as a build would ask it;
    results over :data:`MAX_ROWS` are refused unread (DuckDB's memory limit does not cover rows handed to
    Python)."""
    for binding in bindings(template, db, seed, persona_id, MAX_BINDINGS, REFERENCE_DATE, max_rows=MAX_ROWS):
        sql = instantiate(template, binding)[1]
        if not is_empty_answer(gold_answers(db, sql, REFERENCE_DATE, max_rows=MAX_ROWS)):
            return True
    return False


def validate(text: str, split: str, pool: _Pool) -> QuestionTemplate:
    """The template of one answer, or ValueError naming why it is rejected (see the module doc)."""
    template = _template(_proposal(text), split)
    try:
        sql_tables(pool.con, _placeholder_sql(template))
        if template.bind:
            sql_tables(pool.con, resolve_sql(template.bind))
    except (ValueError, KeyError, IndexError) as exc:
        raise ValueError(str(exc) if str(exc).startswith("unsafe") else f"bad template: {exc}"[:120]) from exc
    question_key = " ".join(template.question.lower().split())
    sql_key = normalised_sql(pool.con, _placeholder_sql(template))
    if question_key in pool.questions or sql_key in pool.sqls:
        raise ValueError("duplicate: repeats a seed or kept template")
    answered = 0
    for persona_id, db in pool.databases[split]:
        try:
            answered += run_bounded(db, lambda db=db, persona_id=persona_id: _answers(template, db, persona_id,
                                                                                      pool.seed), pool.seconds)
        except (ValueError, KeyError, TypeError) as exc:  # e.g. a bind query without the variables' columns
            if isinstance(exc, ValueError) and str(exc).startswith(("time limit", "SQL error", "too many rows")):
                raise
            raise ValueError(f"bad template: {exc}"[:160]) from exc
        if answered >= pool.min_personas:
            break
    if answered < pool.min_personas:
        raise ValueError(f"empty answer: non-empty for {answered} of {len(pool.databases[split])} personas")
    pool.questions.add(question_key)
    pool.sqls.add(sql_key)
    return template


# ------------------------------------------------------------------------------------------ expansion
def _requests(seeds: Sequence[QuestionTemplate], split_of: Mapping[str, str], splits: Sequence[str],
              per_split: int, con: Any, seed: int) -> list[tuple[str, str, tuple[QuestionTemplate, ...]]]:
    """(split, table, seeds) per request: the tables the split's seeds read, cycled; up to three seeds each."""
    from convohub.perqa.vocab import derive_rng

    out = []
    for split in splits:
        by_table: dict[str, list[QuestionTemplate]] = {}
        for t in seeds:
            if split_of.get(t.template_id) == split:
                for table in sorted(sql_tables(con, _placeholder_sql(t))):
                    by_table.setdefault(table, []).append(t)
        tables = sorted(by_table)
        if not tables:
            continue
        rng = derive_rng(seed, "perqa-expand", split)
        for k in range(per_split):
            table = tables[k % len(tables)]
            group = by_table[table]
            out.append((split, table, tuple(rng.sample(group, min(3, len(group))))))
    return out


def _reason(error: str) -> str:
    return error.split(":", 1)[0] if error else "unknown"


def expand_templates(seeds: Sequence[QuestionTemplate], split_of: Mapping[str, str],
                     databases: Mapping[str, Sequence[tuple[str, Any]]], backend: Any, *, per_split: int,
                     splits: Sequence[str] = ("train", "dev"), attempts: int = 2, min_personas: int = 1,
                     seconds: float = 5.0, seed: int = 0, max_new_tokens: int = 256
                     ) -> tuple[list[GeneratedTemplate], dict[str, Any]]:
    """Ask ``per_split`` requests per split (see the module doc) and keep what validates; returns the kept
    templates and a report (requests, calls, kept per split, rejections by reason). ``databases`` maps a
    split to its personas' connections (:func:`lock_down` is applied here)."""
    import time

    import duckdb

    from convohub.llm import ChatRequest, ask_until_parsed

    started = time.perf_counter()
    scratch = duckdb.connect(":memory:")
    locked = {split: [(pid, lock_down(db)) for pid, db in dbs] for split, dbs in databases.items()}
    missing = [s for s in splits if not locked.get(s)]
    if missing:
        raise ValueError(f"no persona databases for split(s) {missing}: templates are checked on their own split")
    pool = _Pool(scratch, {" ".join(t.question.lower().split()) for t in seeds},
                 {normalised_sql(scratch, _placeholder_sql(t)) for t in seeds}, locked, min_personas, seconds, seed)
    requests = _requests(seeds, split_of, splits, per_split, scratch, seed)

    def build(i: int, attempt: int) -> ChatRequest:
        # sampled from the first try: a greedy answer tends to repeat the last seed shown
        split, table, shown = requests[i]
        return ChatRequest(messages=expansion_messages(table, shown), max_new_tokens=max_new_tokens,
                           temperature=0.8, top_p=0.95, seed=seed * 1000 + attempt + 1)

    results = ask_until_parsed(backend, len(requests), build, lambda i, text: validate(text, requests[i][0], pool),
                               max_attempts=attempts, desc="PerQA template expansion (try {try})")
    kept = [GeneratedTemplate(r.value, requests[i][0], tuple(t.template_id for t in requests[i][2]),
                              str(getattr(backend, "name", backend)))
            for i, r in enumerate(results) if r.value is not None]
    rejections = Counter(_reason(e) for r in results for e in r.errors)
    report = {"made_by": str(getattr(backend, "name", backend)), "requests": len(requests),
              "calls": sum(r.attempts for r in results),
              "kept": dict(Counter(g.split for g in kept)), "kept_total": len(kept),
              "rejections": dict(rejections.most_common()), "seconds": round(time.perf_counter() - started, 1)}
    scratch.close()
    return kept, report


# ------------------------------------------------------------------------------------------ files
def write_templates(path: Path, templates: Sequence[GeneratedTemplate]) -> Path:
    """JSON lines, one template each, written atomically."""
    from convohub.hub import atomic_write_text

    atomic_write_text(Path(path), "".join(json.dumps(g.to_json(), ensure_ascii=False) + "\n" for g in templates))
    return Path(path)


_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def read_templates(path: Path, splits: Sequence[str] = ("train", "dev", "test")) -> list[GeneratedTemplate]:
    """Templates written by :func:`write_templates` (or by hand in the same shape); an error names the line
    and field at fault."""
    import duckdb

    from convohub.jsonlines import jsonl_records

    scratch = duckdb.connect(":memory:")
    out: list[GeneratedTemplate] = []
    seen: set[str] = set()
    for where, row in jsonl_records(path, expected="one template object"):
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected one template object")
        for key in ("template_id", "question", "sql", "split"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise ValueError(f"{where}: field {key!r} must be a non-empty string")
        if not _ID.match(row["template_id"]) or row["template_id"] in seen:
            raise ValueError(f"{where}: template_id {row['template_id']!r} is not a unique plain id")
        if row["split"] not in splits:
            raise ValueError(f"{where}: split {row['split']!r} is not one of {list(splits)}")
        try:
            template = QuestionTemplate(row["template_id"], row["question"], row["sql"],
                                        tuple(row.get("categories") or ()), row.get("bind"))
            sql_tables(scratch, _placeholder_sql(template))  # the same checks as a fresh proposal
            if template.bind:
                sql_tables(scratch, resolve_sql(template.bind))
        except (ValueError, KeyError, IndexError) as exc:
            raise ValueError(f"{where}: {exc}") from exc
        seen.add(row["template_id"])
        out.append(GeneratedTemplate(template, row["split"], tuple(row.get("seeds") or ()),
                                     str(row.get("made_by", "unknown"))))
    scratch.close()
    return out
