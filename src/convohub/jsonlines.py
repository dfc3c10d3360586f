"""Reading JSON Lines and JSON-list files with errors that name the file and the line at fault.

Every file convohub reads from a user or from an earlier run (released dialogues and conversations, passage
collections, evaluation runs, hand-labelled sets, training pairs) is JSON Lines, or a JSON document holding a
list of records. One reader gives them all the same behaviour: blank lines are skipped, and a line that does
not parse raises the caller's error class with ``path:line``, the parser's reason and what the line should
hold, so the user can open the file at that line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def jsonl_records(path: str | Path, *, text: str | None = None, error: type[Exception] = ValueError,
                  expected: str = "one JSON object") -> list[tuple[str, Any]]:
    """``(where, value)`` for every non-blank line of a JSON Lines file (``text`` when the caller already holds
    the file's content, e.g. a package resource); ``where`` is ``path:line``. A line that is not JSON raises
    ``error`` naming the line and saying that each line must be ``expected``."""
    if text is None:
        text = Path(path).read_text(encoding="utf-8")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"  # editors and terminals open the file at that line
        try:
            out.append((where, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg}); each line must be {expected}") from exc
    return out


def json_document(path: str | Path, *, error: type[Exception] = ValueError) -> Any:
    """The JSON value of a whole file; invalid JSON raises ``error`` with the line and column."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc


def json_records(path: str | Path, *, error: type[Exception] = ValueError, expected: str = "one JSON object",
                 items: str = "records") -> list[tuple[str, Any]]:
    """``(where, value)`` for every record of a ``.jsonl`` file (``where`` = ``path:line``) or of a ``.json``
    file holding a list (``where`` = ``path (item i)``); anything else in a ``.json`` file raises ``error``
    saying it must hold a list of ``items``."""
    if Path(path).suffix == ".jsonl":
        return jsonl_records(path, error=error, expected=expected)
    doc = json_document(path, error=error)
    if not isinstance(doc, list):
        raise error(f"{path}: a .json file must hold a list of {items}, got {type(doc).__name__}")
    return [(f"{path} (item {i})", obj) for i, obj in enumerate(doc)]
