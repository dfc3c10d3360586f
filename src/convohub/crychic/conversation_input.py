"""One conversation to reconstruct, as a user hands it over: a file for ``convohub tree reconstruct`` or
pasted text in the Space.

Accepted shapes (JSON):

* a WildChat-style list of ``{"role", "content"}`` messages (ShareGPT ``{"from", "value"}`` too; system
  messages are skipped; the last prompt may be unanswered);
* a WildChat row, ``{"conversation_hash": ..., "conversation": [messages]}``;
* one record of WildChatTree's schema, ``{"conversation_id", "turns": [{turn_index, user_prompt,
  assistant_response, parent}]}``, whose gold parents are then known; a ``.jsonl`` file or a JSON list of
  such records (a source or an export of the dataset) when ``conversation_id`` picks one of them.

Pasted text may also be a ``User:`` / ``Assistant:`` transcript. Every error names the file (and line or
item), the message or turn and the field at fault, and what to change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convohub.conversations.transcript import exchanges, messages_from_items, parse_transcript
from convohub.crychic.source import WildChatTreeSourceError, check_conversation
from convohub.jsonlines import json_document, jsonl_records


class ConversationInputError(ValueError):
    """Input that is not one conversation in an accepted shape; the message says where and what to do."""


@dataclass(frozen=True)
class ConversationInput:
    """(user prompt, assistant response) per turn, and the gold parents when the input carried them."""

    conversation_id: str
    exchanges: list[tuple[str, str]]
    gold: list[int] | None = None

    @property
    def prompts(self) -> list[str]:
        return [prompt for prompt, _ in self.exchanges]


def _is_message(item: Any) -> bool:
    return isinstance(item, Mapping) and any(key in item for key in ("role", "from"))


def _is_record(item: Any) -> bool:
    return isinstance(item, Mapping) and "turns" in item


def _from_record(obj: Any, where: str) -> ConversationInput:
    try:
        record = check_conversation(obj, where)
    except WildChatTreeSourceError as exc:
        raise ConversationInputError(str(exc)) from exc
    turns = record["turns"]
    return ConversationInput(record["conversation_id"], [(t["user_prompt"], t["assistant_response"]) for t in turns],
                             [int(t["parent"]) for t in turns])


def _from_messages(items: Any, where: str, conversation_id: str) -> ConversationInput:
    try:
        return ConversationInput(conversation_id, exchanges(messages_from_items(items, where), where))
    except ValueError as exc:
        raise ConversationInputError(str(exc)) from exc


def _pick(records: Sequence[tuple[str, Any]], conversation_id: str | None, source: str) -> ConversationInput:
    """The record ``conversation_id`` names among several (or the only one)."""
    if conversation_id is None:
        if len(records) == 1:
            return _from_record(records[0][1], records[0][0])
        ids = [str(obj.get("conversation_id")) for _, obj in records if isinstance(obj, Mapping)]
        raise ConversationInputError(
            f"{source} holds {len(records)} conversations ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}); "
            "name one with --id CONVERSATION_ID")
    for where, obj in records:
        if isinstance(obj, Mapping) and str(obj.get("conversation_id")) == str(conversation_id):
            return _from_record(obj, where)
    raise ConversationInputError(f"{source}: no conversation with conversation_id {conversation_id!r}")


def conversation_from_json(doc: Any, where: str, conversation_id: str | None = None) -> ConversationInput:
    """The conversation a decoded JSON document holds (module docstring: the accepted shapes)."""
    if isinstance(doc, list):
        if not doc:
            raise ConversationInputError(f"{where}: the list is empty; give a list of messages or of conversations")
        if all(_is_record(item) for item in doc):
            return _pick([(f"{where} (item {i})", item) for i, item in enumerate(doc)], conversation_id, where)
        if _is_message(doc[0]):
            return _from_messages(doc, where, conversation_id or "conversation")
        raise ConversationInputError(f"{where}: item 0 is neither a message ({{'role', 'content'}}) nor a "
                                     "conversation record ({'conversation_id', 'turns'})")
    if isinstance(doc, Mapping):
        if conversation_id is not None and "conversation_id" in doc and str(doc["conversation_id"]) != conversation_id:
            raise ConversationInputError(f"{where}: the record is conversation {doc['conversation_id']!r}, "
                                         f"not {conversation_id!r}")
        if "turns" in doc:
            return _from_record(doc, where)
        if "conversation" in doc:  # a WildChat row
            name = str(doc.get("conversation_hash") or doc.get("conversation_id") or "conversation")
            return _from_messages(doc["conversation"], f"{where}, field 'conversation'", name)
        raise ConversationInputError(f"{where}: an object needs 'turns' (a WildChatTree record) or "
                                     "'conversation' (a WildChat row); or give a list of {role, content} messages")
    raise ConversationInputError(f"{where}: expected a list of messages or a conversation object, "
                                 f"got {type(doc).__name__}")


def read_conversation_file(path: Path, conversation_id: str | None = None) -> ConversationInput:
    """The conversation of a ``.json`` file (any accepted shape) or a ``.jsonl`` file of records."""
    path = Path(path)
    if not path.is_file():
        raise ConversationInputError(f"{path}: no such file; give a .json file with a list of "
                                     "{role, content} messages or one WildChatTree record")
    if path.suffix == ".jsonl":
        records = jsonl_records(path, error=ConversationInputError, expected="one conversation record")
        if not records:
            raise ConversationInputError(f"{path}: the file is empty")
        return _pick(records, conversation_id, str(path))
    return conversation_from_json(json_document(path, error=ConversationInputError), str(path), conversation_id)


def conversation_from_text(text: str) -> ConversationInput:
    """Pasted text: JSON in any accepted shape, or a ``User:`` / ``Assistant:`` transcript."""
    stripped = (text or "").strip()
    if stripped.startswith(("[", "{")):
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ConversationInputError(f"the text looks like JSON but does not parse: {exc}") from exc
        return conversation_from_json(doc, "pasted JSON")
    try:
        return ConversationInput("pasted conversation", exchanges(parse_transcript(stripped)))
    except ValueError as exc:
        raise ConversationInputError(str(exc)) from exc
