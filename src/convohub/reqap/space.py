"""The ReQAP Space: logic behind ``spaces/reqap/app.py`` and its export for a release.

Kept in the package (the Space pins the released convohub) so ``app.py`` stays a thin Gradio layout and
the logic is testable without a browser. Events come from a PerQA persona or an upload: a CSV in the
authors' ``{p}_obs.csv`` layout (id, structured_event_id, start_date, start_time, end_date, end_time,
event_type, event_data as JSON, properties_mentioned) or an iCalendar file (each VEVENT becomes a
``calendar`` event with summary, location and description).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.executor import REFERENCE_DATE

__all__ = [
    "SPEC_ENV", "component_specs", "OBS_COLUMNS", "TRACE_HEADERS", "ask", "events_from_csv", "events_from_ics", "example_questions",
    "EXAMPLES_FILE", "examples_note", "export_space", "read_examples", "space_examples", "tree_markdown",
    "tree_picture"
]

SPACE_NAME = "reqap-demo"
OBS_COLUMNS = ("id", "structured_event_id", "start_date", "start_time", "end_date", "end_time", "event_type",
               "event_data", "properties_mentioned")
TRACE_HEADERS = ["node", "depth", "operator", "arguments", "input sizes", "output size", "output (first items)",
                 "seconds", "cached"]


#: Environment variables naming a component spec, as the CLI's --decomposer/--retriever/--extractor do.
SPEC_ENV = {"decomposer": "CONVOHUB_DECOMPOSER", "retriever": "CONVOHUB_RETRIEVER", "extractor": "CONVOHUB_EXTRACTOR"}


def component_specs(environ: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """(decomposer/retriever/extractor specs, where the trained models came from) for the Space.

    The same defaults as ``convohub reqap ask``: every component not named in :data:`SPEC_ENV` is the
    release's trained model, from the local hub root ``CONVOHUB_HUB`` (default ``hub_release``) or the
    Hub namespace ``CONVOHUB_NAMESPACE`` (default ``convohub`` when running as a Hub Space, where the
    models are downloaded). Raises :class:`~convohub.reqap.release.models.MissingRelease` when a
    trained model is needed and none is found.
    """
    specs = {kind: environ[var] for kind, var in SPEC_ENV.items() if environ.get(var)}
    if len(specs) == len(SPEC_ENV):
        return specs, None
    from convohub.reqap.release.models import DEFAULT_HUB, find_release_models

    namespace = environ.get("CONVOHUB_NAMESPACE") or ("convohub" if environ.get("SPACE_ID") else None)
    release = find_release_models(environ.get("CONVOHUB_HUB") or DEFAULT_HUB, namespace)
    return {**release.specs(), **specs}, f"{release.source} (profile {release.profile})"


def events_from_csv(path: str | Path) -> EventStore:
    """Observable events from a CSV in the authors' ``{p}_obs.csv`` column layout."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("id", "start_date", "event_type", "event_data") if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{Path(path).name}: CSV lacks columns {missing}; expected the {{p}}_obs.csv "
                             f"layout {', '.join(OBS_COLUMNS)}")
        rows = []
        for n, row in enumerate(reader, start=2):
            try:
                data = json.loads(row["event_data"]) if row["event_data"] else {}
            except json.JSONDecodeError as err:
                raise ValueError(f"{Path(path).name} line {n}: event_data is not JSON ({err.msg})") from err
            rows.append({**{k: (row.get(k) or None) for k in OBS_COLUMNS}, "event_data": data})
    if not rows:
        raise ValueError(f"{Path(path).name}: no events")
    return EventStore.from_records(rows)


def _ics_datetime(value: str) -> tuple[str | None, str | None]:
    value = value.strip().rstrip("Z")
    for fmt, has_time in (("%Y%m%dT%H%M%S", True), ("%Y%m%d", False)):
        try:
            dt = datetime.strptime(value, fmt)
        except ValueError:
            continue
        return dt.date().isoformat(), dt.time().isoformat() if has_time else None
    return None, None


def events_from_ics(path: str | Path) -> EventStore:
    """``calendar`` events from an iCalendar file (DTSTART/DTEND/SUMMARY/LOCATION/DESCRIPTION)."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    text = re.sub(r"\r?\n[ \t]", "", text)  # unfold continuation lines
    rows: list[dict[str, Any]] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith("BEGIN:VEVENT"):
            current = {}
        elif line.startswith("END:VEVENT") and current is not None:
            sd, st = _ics_datetime(current.get("DTSTART", ""))
            ed, et = _ics_datetime(current.get("DTEND", ""))
            data = {k.lower(): current[k].replace("\\n", "\n").replace("\\,", ",")
                    for k in ("SUMMARY", "LOCATION", "DESCRIPTION") if current.get(k)}
            rows.append({"id": str(len(rows)), "start_date": sd, "start_time": st, "end_date": ed, "end_time": et,
                         "event_type": "calendar", "event_data": data})
            current = None
        elif current is not None and ":" in line:
            key, value = line.split(":", 1)
            current[key.split(";", 1)[0].upper()] = value
    if not rows:
        raise ValueError(f"{Path(path).name}: no VEVENT entries")
    return EventStore.from_records(rows)


def tree_markdown(tree: str | None) -> str:
    """The operator tree as an indented outline in a Markdown code block."""
    from convohub.reqap.cli import render_tree

    return f"```\n{render_tree(tree)}\n```"


def tree_picture(tree: str | None) -> str:
    """The operator tree drawn as an SVG graph (boxes and edges), for the Space's picture next to the outline."""
    from convohub.charts import tree_svg

    if not tree:
        return tree_svg([])
    from convohub.reqap.engine.parse import parse_tree, tree_outline

    return tree_svg(tree_outline(parse_tree(tree)))


def trace_rows(trace: list[Mapping[str, Any]]) -> list[list[Any]]:
    """One row per executed node: inputs (arguments and sizes of the child outputs), output size and its first
    items, time."""
    return [[t["id"], t["depth"], t["operator"], "; ".join(f"{k}={v}" for k, v in t["args"].items()),
             ", ".join("-" if s is None else str(s) for s in t["input_sizes"]),
             "scalar" if t["output_size"] is None else t["output_size"], t.get("output_preview", ""),
             t["seconds"], t["cached"]]
            for t in trace]


#: A list answer longer than this is shown as its size and first items: a tree that stops at RETRIEVE or
#: EXTRACT answers with thousands of events, a page of JSON no visitor reads.
ANSWER_ITEMS = 10


def answer_text(answer: Any, max_items: int = ANSWER_ITEMS) -> str:
    """An answer as JSON text; a list of more than ``max_items`` items as its length and its first items."""
    if isinstance(answer, list | tuple) and len(answer) > max_items:
        head = json.dumps(list(answer[:max_items]), ensure_ascii=False, default=str)
        return f"{len(answer):,} items, the first {max_items}: {head}"
    return json.dumps(answer, ensure_ascii=False, default=str)


def ask(system: Any, question: str, store: EventStore, reference_date: date = REFERENCE_DATE
        ) -> tuple[str, str, list[list[Any]], dict[str, Any]]:
    """(answer text (:func:`answer_text`), tree Markdown, trace rows, full result dict) for one question."""
    if not question or not question.strip():
        raise ValueError("type a question")
    result = system.answer(question.strip(), store, reference_date)
    answer = answer_text(result.answer)
    if result.error:
        answer += f"\n(failed: {result.error})"
    return answer, tree_markdown(result.tree), trace_rows(result.trace), result.to_dict()


def example_questions(dataset_dir: Path, split: str = "test", n: int = 6) -> list[tuple[str, str]]:
    """(persona, question) examples that the gold-tree oracle can decompose, one per template."""
    from convohub.reqap.data.gold import gold_tree_or_none
    from convohub.reqap.data.perqa import load_questions

    out: list[tuple[str, str]] = []
    templates: set[str] = set()
    for q in load_questions(dataset_dir, split):  # questions only: no persona's events are loaded
        if q.get("template_id") not in templates and gold_tree_or_none(q) is not None:
            templates.add(q["template_id"])
            out.append((q["persona_id"], q["question"]))
            if len(out) >= n:
                break
    return out


#: The Space folder's file of example questions picked by :func:`space_examples` at release time.
EXAMPLES_FILE = "examples.json"


def space_examples(chain_rows: Sequence[Mapping[str, Any]], qud_rows: Sequence[Mapping[str, Any]], n: int = 6
                   ) -> list[dict[str, Any]]:
    """Examples for the Space, one question per template, at most ``n``: first the questions the trained chain
    answered in the release's end-to-end run (``chain_rows``: its ``predictions.jsonl``; right answers first,
    then the fastest), then questions for which the trained QUD wrote a complete tree in its evaluation
    (``qud_rows``: right answers first, then answered ones).

    Why: the Space runs the trained chain, and a visitor's first question should come back with a tree within
    the page's time budget. Questions the gold-tree oracle can decompose (:func:`example_questions`) often get
    no tree from a small trained QUD, and a tree the QUD writes may still run the EXTRACT model over thousands
    of events for minutes; only the end-to-end run shows which questions the chain finishes, and how fast.
    """
    ranked = {
        "chain": sorted((r for r in chain_rows if r.get("tree") and not r.get("error")),
                        key=lambda r: (not r.get("hit"), float(r.get("seconds") or 0.0))),
        "qud": sorted((r for r in qud_rows if r.get("tree")),
                      key=lambda r: (not r.get("hit"), r.get("answer") is None)),
    }
    out: list[dict[str, Any]] = []
    templates: set[Any] = set()
    for source, rows in ranked.items():
        for row in rows:
            if row.get("template_id") in templates:
                continue
            templates.add(row.get("template_id"))
            item = {"persona_id": row.get("persona_id"), "question": row.get("question"),
                    "hit": bool(row.get("hit")), "source": source}
            if source == "chain":
                item["seconds"] = round(float(row.get("seconds") or 0.0), 1)
            out.append(item)
            if len(out) >= n:
                return out
    return out


def examples_note(examples: Sequence[Mapping[str, Any]]) -> str:
    """The line the page shows above :func:`space_examples`' questions: where they come from, how many were
    right there."""
    chain = [e for e in examples if e.get("source") == "chain"]
    qud = [e for e in examples if e.get("source") != "chain"]
    parts = []
    if chain:
        slowest = max(float(e.get("seconds") or 0.0) for e in chain)
        parts.append(f"the first {len(chain)} were answered by this trained chain in the release's end-to-end run "
                     f"({sum(bool(e.get('hit')) for e in chain)} right, {slowest:.0f} s at most)")
    if qud:
        parts.append(f"{'the other' if chain else 'the'} {len(qud)} are questions for which the trained QUD wrote a "
                     f"complete tree ({sum(bool(e.get('hit')) for e in qud)} right with BM25 and key lookup; the "
                     "trained chain may take longer or time out on them)")
    return "Examples: " + "; ".join(parts) + "." if parts else ""


def read_examples(folder: Path) -> list[dict[str, Any]] | None:
    """The examples a release wrote beside the app (:data:`EXAMPLES_FILE`), or None when there are none."""
    path = Path(folder) / EXAMPLES_FILE
    if not path.is_file():
        return None
    from convohub.jsonlines import json_document

    rows = json_document(path)
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"persona_id", "question"} <= set(r)
                                             for r in rows):
        raise ValueError(f"{path}: expected a list of {{persona_id, question, ...}} objects; "
                         "delete it to fall back to the dataset's examples")
    return rows


def export_space(target: Any, repo: Path, *, dataset_id: str | None = None, models: list[str] | None = None,
                 examples: list[dict[str, Any]] | None = None, name: str = SPACE_NAME) -> Path:
    """Write ``spaces/reqap`` as a Space folder under ``target`` (pushed when the target pushes).

    ``dataset_id`` (the released PerQA) and ``models`` (EXTRACT / QUD / RETRIEVE model ids) go into the
    README front matter, merged with what is there; ``examples`` (:func:`space_examples`) become
    :data:`EXAMPLES_FILE`, the app's example questions.
    """
    from convohub.hub import write_space

    front: dict[str, Any] = {}
    if dataset_id:
        front["datasets"] = [dataset_id]
    if models:
        front["models"] = list(models)
    files = {EXAMPLES_FILE: json.dumps(examples, ensure_ascii=False, indent=1) + "\n"} if examples else None
    return write_space(target, name, Path(repo) / "spaces" / "reqap", extra_front_matter=front, extra_files=files)
