"""Released ProMISe dialogues (``convohub datasets build promise --source PATH``), read and validated.

The authors announced their code and data at github.com/amazon-science/promise, which is not reachable here,
so the file format is not known. convohub assumes the shape of its own ``dialogues`` config
(:mod:`convohub.promise.records`) and rejects anything else, naming the file, the line or item, the
dialogue, the turn and the field:

* PATH is a folder holding ``validation.jsonl`` and ``test.jsonl`` (one dialogue object per line), or
  ``validation.json`` and ``test.json`` (a JSON list of dialogue objects); the paper has no train split;
* a dialogue has ``dialogue_id``, ``topic``, ``intent``, ``initial_question`` (non-empty strings),
  ``outcome`` (``intent_satisfied``, ``preemptive_termination`` or ``incomplete``; it must agree with the
  actions), ``num_turns`` (= the number of turns) and ``turns``; optionally ``agent_llm``,
  ``retrieval_backend`` and ``user_simulator`` (strings; absent, they read "not given by the source"); no
  other field;
* a turn has ``turn_index`` (0, 1, ... in order), ``retrieval_query`` (a string), ``web_snippets`` (a list of
  strings), ``suggested_qas`` (exactly four ``{"question", "answer"}`` objects, optionally with
  ``snippet_index``, the snippet the SQA is grounded in) and ``action`` (``sq1``..``sq4`` for the picked
  suggestion, ``none`` or ``done``, spelled exactly so).

The loop's rules hold for every dialogue: ``done`` only at the last turn, at most eight turns, a stop at the
second ``none``. Dialogue ids are unique across both splits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.jsonlines import json_records
from convohub.promise.records import ACTIONS, N_SQS, OUTCOMES, SPLITS, outcome_of

DIALOGUE_FIELDS = ("dialogue_id", "topic", "intent", "initial_question", "outcome", "num_turns", "turns")
OPTIONAL_FIELDS = ("agent_llm", "retrieval_backend", "user_simulator")
TURN_FIELDS = ("turn_index", "retrieval_query", "web_snippets", "suggested_qas", "action")
NOT_GIVEN = "not given by the source"


class PromiseSourceError(ValueError):
    """A source record that does not have the assumed shape; the message says where and what to change."""


def split_files(source: Path) -> dict[str, Path]:
    """``{split: file}`` of a source folder: ``<split>.jsonl`` or ``<split>.json`` for both splits."""
    source = Path(source)
    if not source.is_dir():
        raise PromiseSourceError(f"{source}: expected a folder holding validation.jsonl and test.jsonl (or .json "
                                 "lists of dialogues)")
    files = {}
    for split in SPLITS:
        found = [source / f"{split}{suffix}" for suffix in (".jsonl", ".json") if (source / f"{split}{suffix}").is_file()]
        if not found:
            raise PromiseSourceError(f"{source}: no {split}.jsonl or {split}.json; ProMISe has a validation and a "
                                     "test split (no train split)")
        if len(found) > 1:
            raise PromiseSourceError(f"{source}: both {found[0].name} and {found[1].name}; keep one file per split")
        files[split] = found[0]
    return files


def _objects(path: Path) -> list[tuple[str, Any]]:
    return json_records(path, error=PromiseSourceError, expected="one dialogue object", items="dialogue objects")


def _text(value: Any, at: str, field: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise PromiseSourceError(f"{at}: field {field!r} must be a{'' if empty else ' non-empty'} string, "
                                 f"got {value!r:.80}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_fields(obj: Mapping[str, Any], at: str, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    missing = [f for f in required if f not in obj]
    if missing:
        raise PromiseSourceError(f"{at}: field {missing[0]!r} is missing; required: {', '.join(required)}")
    extra = sorted(set(obj) - set(required) - set(optional))
    if extra:
        raise PromiseSourceError(f"{at}: field {extra[0]!r} is not part of the assumed format (fields: "
                                 f"{', '.join(required + optional)}); see convohub.promise.source")


def _check_qa(qa: Any, at: str, n_snippets: int) -> dict[str, Any]:
    if not isinstance(qa, Mapping):
        raise PromiseSourceError(f"{at}: expected an object with question and answer, got {type(qa).__name__}")
    _check_fields(qa, at, ("question", "answer"), ("snippet_index",))
    index = qa.get("snippet_index", -1)
    if not _is_int(index) or not -1 <= index < n_snippets:
        raise PromiseSourceError(f"{at}: field 'snippet_index' must be -1 (unknown) or the index of one of the "
                                 f"turn's {n_snippets} web_snippets, got {index!r}")
    return {"question": _text(qa["question"], at, "question"), "answer": _text(qa["answer"], at, "answer"),
            "snippet_index": index}


def _check_turn(turn: Any, t: int, at: str) -> dict[str, Any]:
    at = f"{at}, turn {t}"
    if not isinstance(turn, Mapping):
        raise PromiseSourceError(f"{at}: expected a turn object with {', '.join(TURN_FIELDS)}, got "
                                 f"{type(turn).__name__}")
    _check_fields(turn, at, TURN_FIELDS, ())
    if not _is_int(turn["turn_index"]) or turn["turn_index"] != t:
        raise PromiseSourceError(f"{at}: field 'turn_index' is {turn['turn_index']!r}, expected {t}; list turns in "
                                 "order with turn_index 0, 1, 2, ...")
    snippets = turn["web_snippets"]
    if not isinstance(snippets, list) or not all(isinstance(s, str) for s in snippets):
        raise PromiseSourceError(f"{at}: field 'web_snippets' must be a list of strings")
    qas = turn["suggested_qas"]
    if not isinstance(qas, list) or len(qas) != N_SQS:
        raise PromiseSourceError(f"{at}: field 'suggested_qas' must be a list of exactly {N_SQS} question-answer "
                                 f"objects, got {len(qas) if isinstance(qas, list) else type(qas).__name__}")
    action = turn["action"]
    if action not in ACTIONS:
        raise PromiseSourceError(f"{at}: field 'action' is {action!r}; spell it as one of {', '.join(ACTIONS)} "
                                 "(sq1..sq4 = the suggestion picked, none = none helps, done = intent satisfied)")
    return {"turn_index": t, "retrieval_query": _text(turn["retrieval_query"], at, "retrieval_query"),
            "web_snippets": list(snippets),
            "suggested_qas": [_check_qa(qa, f"{at}, suggested_qas[{k}]", len(snippets)) for k, qa in enumerate(qas)],
            "action": action}


def check_dialogue(obj: Any, where: str) -> dict[str, Any]:
    """One dialogue object validated (module docstring) and normalised; raises :class:`PromiseSourceError`."""
    if not isinstance(obj, Mapping):
        raise PromiseSourceError(f"{where}: expected a dialogue object, got {type(obj).__name__}")
    did = obj.get("dialogue_id")
    at = f"{where}, dialogue {did!r}" if isinstance(did, (str, int)) and not isinstance(did, bool) else where
    _check_fields(obj, at, DIALOGUE_FIELDS, OPTIONAL_FIELDS)
    if not (isinstance(did, str) and did.strip()) and not _is_int(did):
        raise PromiseSourceError(f"{at}: field 'dialogue_id' must be a non-empty string, got {did!r}")
    turns = obj["turns"]
    if not isinstance(turns, list) or not turns:
        raise PromiseSourceError(f"{at}: field 'turns' must be a non-empty list of turn objects")
    checked = [_check_turn(turn, t, at) for t, turn in enumerate(turns)]
    if not _is_int(obj["num_turns"]) or obj["num_turns"] != len(checked):
        raise PromiseSourceError(f"{at}: field 'num_turns' is {obj['num_turns']!r} but the dialogue has "
                                 f"{len(checked)} turns")
    try:
        implied = outcome_of([t["action"] for t in checked])
    except ValueError as exc:
        raise PromiseSourceError(f"{at}: field 'turns' breaks the loop's rules: {exc}") from None
    if obj["outcome"] not in OUTCOMES:
        raise PromiseSourceError(f"{at}: field 'outcome' is {obj['outcome']!r}; expected one of {', '.join(OUTCOMES)}")
    if obj["outcome"] != implied:
        raise PromiseSourceError(f"{at}: field 'outcome' is {obj['outcome']!r} but the actions imply {implied!r}")
    record = {name: _text(obj[name], at, name) for name in ("topic", "intent", "initial_question")}
    for name in OPTIONAL_FIELDS:
        record[name] = _text(obj[name], at, name) if name in obj else NOT_GIVEN
    return {"dialogue_id": str(did), **record, "outcome": implied, "num_turns": len(checked), "turns": checked}


def read_source(source: Path) -> dict[str, list[dict[str, Any]]]:
    """``{split: [dialogue, ...]}`` of a source folder, every record validated (module docstring)."""
    out: dict[str, list[dict[str, Any]]] = {}
    seen: dict[str, str] = {}
    for split, path in split_files(Path(source)).items():
        dialogues = []
        for where, obj in _objects(path):
            dialogue = check_dialogue(obj, where)
            did = dialogue["dialogue_id"]
            if did in seen:
                raise PromiseSourceError(f"{where}: field 'dialogue_id' {did!r} repeats the dialogue at {seen[did]}; "
                                         "ids must be unique across both splits")
            seen[did] = where
            dialogues.append(dialogue)
        if not dialogues:
            raise PromiseSourceError(f"{path}: no dialogues")
        out[split] = dialogues
    return out
