"""The one JSON Lines / JSON-list reader behind every source, run and hand-labelled file convohub reads: what it
returns, and errors that name the file and line in the caller's error class."""

from __future__ import annotations

from pathlib import Path

import pytest

from convohub.crychic.data_common import read_gold
from convohub.jsonlines import json_document, json_records, jsonl_records
from convohub.promise.retrieval import PassageCollection


class MyError(ValueError):
    pass


def test_jsonl_records_skip_blank_lines_and_name_each_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n   \n[2, 3]\n"text"\n', encoding="utf-8")
    assert jsonl_records(path) == [(f"{path}:1", {"a": 1}), (f"{path}:4", [2, 3]), (f"{path}:5", "text")]
    assert jsonl_records("given.jsonl", text='{"b": 2}') == [("given.jsonl:1", {"b": 2})]  # no file is read


def test_a_broken_line_raises_the_callers_error_with_file_line_and_what_it_should_hold(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": 2,\n', encoding="utf-8")
    with pytest.raises(MyError, match=r"rows\.jsonl:2: not valid JSON \(.+\); each line must be one dialogue"):
        jsonl_records(path, error=MyError, expected="one dialogue")


def test_json_records_read_a_list_document_and_refuse_anything_else(tmp_path: Path) -> None:
    listed = tmp_path / "rows.json"
    listed.write_text('[{"a": 1}, {"a": 2}]', encoding="utf-8")
    assert json_records(listed) == [(f"{listed} (item 0)", {"a": 1}), (f"{listed} (item 1)", {"a": 2})]
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"a": 1}\n', encoding="utf-8")
    assert json_records(lines) == [(f"{lines}:1", {"a": 1})]
    single = tmp_path / "one.json"
    single.write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(MyError, match=r"one\.json: a \.json file must hold a list of dialogues, got dict"):
        json_records(single, error=MyError, items="dialogues")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"a": 1},\n {"a": }]', encoding="utf-8")
    with pytest.raises(MyError, match=r"broken\.json: not valid JSON \(.+ at line 2, column \d+\)"):
        json_document(broken, error=MyError)


def test_readers_built_on_it_name_the_line(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"id": "a", "label": "x"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"gold\.jsonl:2: not valid JSON"):
        read_gold("unused.jsonl", ("id", "label"), path=gold)
    gold.write_text('{"id": "a", "label": "x"}\n["id", "label"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"gold\.jsonl:2: keys must be id, label; got list"):
        read_gold("unused.jsonl", ("id", "label"), path=gold)
    passages = tmp_path / "passages.jsonl"
    passages.write_text('{"id": 1, "text": "Boil the egg."}\n{"id": 2}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"passages\.jsonl:2: each line must be an object with 'id' and 'text'"):
        PassageCollection.read(passages)
