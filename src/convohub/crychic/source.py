"""Annotated conversations in WildChatTree's schema, read and validated before anything is built.

A source is a ``.jsonl`` file (one conversation object per line), a ``.json`` file holding a list of
conversation objects, or a folder whose ``*.jsonl`` and ``*.json`` files (read in name order) hold them. One
conversation::

    {"conversation_id": "c1",
     "turns": [{"turn_index": 0, "user_prompt": "...", "assistant_response": "...", "parent": -1},
               {"turn_index": 1, "user_prompt": "...", "assistant_response": "...", "parent": 0,
                "tree_id": 0}]}

``turn_index`` runs 0..n-1 in order; ``parent`` is -1 (a root) or the index of an earlier turn of the same
conversation; ``tree_id`` is optional and, when given, must agree with the parents (a turn is in its parent's
tree, two roots are in different trees); the built dataset renames trees by their root's index. A record that
breaks a rule stops the build with a :class:`WildChatTreeSourceError` naming the file (and line), the
conversation, the turn and the field, so an annotator can fix it; nothing is silently dropped or repaired.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from convohub.jsonlines import json_records

SUFFIXES = (".jsonl", ".json")
TURN_FIELDS = ("turn_index", "user_prompt", "assistant_response", "parent")


class WildChatTreeSourceError(ValueError):
    """A source record that does not follow the schema; the message says where and what to change."""


def source_files(source: Path) -> list[Path]:
    """The files a source names: itself, or the ``.jsonl``/``.json`` files of a folder in name order."""
    source = Path(source)
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise WildChatTreeSourceError(f"{source}: the folder holds no .jsonl or .json file of conversations")
        return files
    if not source.is_file():
        raise WildChatTreeSourceError(f"{source}: no such file or folder")
    if source.suffix not in SUFFIXES:
        raise WildChatTreeSourceError(f"{source}: expected a .jsonl file (one conversation per line), a .json "
                                      "file holding a list of conversations, or a folder of them")
    return [source]


def _objects(path: Path) -> list[tuple[str, Any]]:
    """(where, object) for every conversation object of one file; ``where`` is the file and line or item."""
    return json_records(path, error=WildChatTreeSourceError, expected="one conversation object",
                        items="conversation objects")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_turn(turn: Any, t: int, where: str) -> dict[str, Any]:
    at = f"{where}, turn {t}"
    if not isinstance(turn, Mapping):
        raise WildChatTreeSourceError(f"{at}: expected an object with {', '.join(TURN_FIELDS)}, "
                                      f"got {type(turn).__name__}")
    missing = [name for name in TURN_FIELDS if name not in turn]
    if missing:
        raise WildChatTreeSourceError(f"{at}: field {missing[0]!r} is missing; every turn needs "
                                      f"{', '.join(TURN_FIELDS)}")
    if not _is_int(turn["turn_index"]) or turn["turn_index"] != t:
        raise WildChatTreeSourceError(f"{at}: field 'turn_index' is {turn['turn_index']!r}, expected {t}; turns "
                                      "must be listed in order with turn_index 0, 1, 2, ...")
    prompt = turn["user_prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise WildChatTreeSourceError(f"{at}: field 'user_prompt' must be a non-empty string, got {prompt!r}")
    if not isinstance(turn["assistant_response"], str):
        raise WildChatTreeSourceError(f"{at}: field 'assistant_response' must be a string (it may be empty), "
                                      f"got {type(turn['assistant_response']).__name__}")
    parent = turn["parent"]
    if not _is_int(parent) or not (parent == -1 or 0 <= parent < t):
        earlier = f"the index of an earlier turn of this conversation (0..{t - 1})" if t else \
            "nothing else: the first turn has no earlier turn to build on"
        raise WildChatTreeSourceError(f"{at}: field 'parent' is {parent!r}; it must be -1 (a root) or {earlier}")
    tree_id = turn.get("tree_id")
    if tree_id is not None and (isinstance(tree_id, bool) or not isinstance(tree_id, (int, str))):
        raise WildChatTreeSourceError(f"{at}: field 'tree_id' must be an integer or a string when given, "
                                      f"got {type(tree_id).__name__}")
    return dict(turn)


def _check_tree_ids(turns: list[dict[str, Any]], where: str) -> None:
    """Given tree ids must name the trees the parents make: same as the parent's, new for every root."""
    if all(turn.get("tree_id") is None for turn in turns):
        return
    root_of_label: dict[Any, int] = {}
    for t, turn in enumerate(turns):
        label, parent = turn.get("tree_id"), turn["parent"]
        if label is None:
            raise WildChatTreeSourceError(f"{where}, turn {t}: field 'tree_id' is missing while other turns of "
                                          "the conversation have one; give it for every turn or for none")
        if parent == -1:
            if label in root_of_label:
                raise WildChatTreeSourceError(
                    f"{where}, turn {t}: field 'tree_id' is {label!r}, the tree of root turn {root_of_label[label]}, "
                    f"but turn {t} is a root too (parent -1); give it a tree id of its own or a parent in that tree")
            root_of_label[label] = t
        elif label != turns[parent].get("tree_id"):
            raise WildChatTreeSourceError(f"{where}, turn {t}: field 'tree_id' is {label!r} but its parent, turn "
                                          f"{parent}, is in tree {turns[parent].get('tree_id')!r}; a turn belongs "
                                          "to its parent's tree")


def check_conversation(obj: Any, where: str) -> dict[str, Any]:
    """One conversation object as ``{"conversation_id": str, "turns": [turn dicts]}``, validated; ``where``
    (file and line or item) starts every error message."""
    if not isinstance(obj, Mapping):
        raise WildChatTreeSourceError(f"{where}: expected a conversation object, got {type(obj).__name__}")
    cid = obj.get("conversation_id")
    if isinstance(cid, bool) or not isinstance(cid, (str, int)) or not str(cid).strip():
        raise WildChatTreeSourceError(f"{where}: field 'conversation_id' must be a non-empty string, got {cid!r}")
    cid = str(cid)
    here = f"{where}, conversation {cid!r}"
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise WildChatTreeSourceError(f"{here}: field 'turns' must be a non-empty list of turn objects, "
                                      f"got {turns!r:.60}")
    checked = [_check_turn(turn, t, here) for t, turn in enumerate(turns)]
    _check_tree_ids(checked, here)
    return {"conversation_id": cid, "turns": checked}


def source_objects(source: Path) -> Iterator[tuple[str, Any]]:
    """(where, object) for every conversation object of a source, in file and line order."""
    for path in source_files(Path(source)):
        yield from _objects(path)


def read_annotated(source: Path) -> list[dict[str, Any]]:
    """Every conversation of a source as ``{"conversation_id": str, "turns": [turn dicts]}``, validated."""
    conversations: list[dict[str, Any]] = []
    first_seen: dict[str, str] = {}
    for where, obj in source_objects(source):
        conversation = check_conversation(obj, where)
        cid = conversation["conversation_id"]
        if cid in first_seen:
            raise WildChatTreeSourceError(f"{where}, conversation {cid!r}: field 'conversation_id' repeats the "
                                          f"conversation at {first_seen[cid]}; conversation ids must be unique")
        first_seen[cid] = where
        conversations.append(conversation)
    if not conversations:
        raise WildChatTreeSourceError(f"{source}: no conversations found")
    return conversations
