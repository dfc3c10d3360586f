"""Readers for the released WildFeedback files (microsoft/WildFeedback; external, schema verified only on
the third-party descriptions in the spec), streaming so the 1.6 GB ``sat_dsat_annotation.json`` never has
to fit in memory.

* ``wildfeedback.json`` -- ShareGPT rows ``{"conversations": [{"from": "human"|"gpt", "value"}], "chosen":
  {"from": "gpt", "value"}, "rejected": {...}}`` (a JSON array or JSON Lines);
* ``sat_dsat_annotation.json`` -- one row per utterance: ``UtterranceId`` (sic), ``TurnId``, ``Role``
  (User/Agent), ``Content``, ``State``, ``Preceeding`` (sic), ``Satisfaction``, ``Disatisfaction`` (sic;
  booleans or label lists), optional ``Domain``/``Intent`` and a conversation id under one of
  :data:`CONVERSATION_ID_KEYS`; without one, a conversation ends where ``UtterranceId`` restarts;
* ``user_preference.json`` -- rows with a conversation (ShareGPT or role/content list) and preferences.

Every text goes through :func:`convohub.conversations.scrub_pii` before it is kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from convohub.conversations import scrub_pii

FILES = {"wildfeedback": "wildfeedback.json", "sat_dsat_annotation": "sat_dsat_annotation.json",
         "user_preference": "user_preference.json"}
CONVERSATION_ID_KEYS = ("conversation_id", "ConversationId", "conversation_hash", "ConvId", "DialogId")
_ROLE = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "agent": "assistant",
         "system": "system"}
CHUNK_CHARS = 1 << 20


class SourceFormatError(ValueError):
    """A released file that does not have the expected shape; the message names file, record and field."""


def iter_json_records(path: Path, chunk_chars: int = CHUNK_CHARS) -> Iterator[Any]:
    """Values of a top-level JSON array, or of a JSON Lines / concatenated-JSON file, one at a time.

    Reads ``chunk_chars`` at a time and decodes with :meth:`json.JSONDecoder.raw_decode`; memory is bounded
    by the largest single record, not the file.
    """
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as handle:
        buf, pos, consumed, eof = "", 0, 0, False
        in_array: bool | None = None

        def more() -> bool:
            nonlocal buf, pos, consumed, eof
            chunk = handle.read(chunk_chars)
            if not chunk:
                eof = True
                return False
            consumed += pos
            buf, pos = buf[pos:] + chunk, 0
            return True

        while True:
            while pos < len(buf) and (buf[pos].isspace() or buf[pos] == "\ufeff" or (in_array and buf[pos] == ",")):
                pos += 1
            if pos >= len(buf):
                if eof or not more():
                    if in_array:
                        raise SourceFormatError(f"{path}: the JSON array is not closed (file truncated?)")
                    return
                continue
            if in_array is None:
                in_array = buf[pos] == "["
                if in_array:
                    pos += 1
                continue
            if in_array and buf[pos] == "]":
                return
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if not eof and more():
                    continue
                raise SourceFormatError(f"{path}: invalid JSON at character {consumed + exc.pos}: {exc.msg}") from None
            # a bare number/literal may continue in the next chunk
            if end == len(buf) and not eof and not isinstance(value, (dict, list)) and more():
                continue
            yield value
            pos = end


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SourceFormatError(f"{where}: expected a string, got {type(value).__name__}")
    return scrub_pii(value)


def sharegpt_messages(messages: Any, where: str) -> list[dict[str, str]]:
    """ShareGPT ``[{"from", "value"}]`` or ``[{"role", "content"}]`` -> role/content messages."""
    if not isinstance(messages, list):
        raise SourceFormatError(f"{where}: expected a list of messages, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise SourceFormatError(f"{where}[{i}]: expected an object")
        role = _ROLE.get(str(m.get("from", m.get("role", ""))).lower())
        if role is None:
            raise SourceFormatError(f"{where}[{i}]: unknown speaker {m.get('from', m.get('role'))!r}")
        out.append({"role": role, "content": _text(m.get("value", m.get("content")), f"{where}[{i}]")})
    return out


def _conversation_id(messages: list[dict[str, str]]) -> str:
    text = "\x1f".join(m["content"] for m in messages)
    return "wf_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def read_wildfeedback(path: Path, variant: str = "expert") -> Iterator[dict[str, Any]]:
    """Released preference rows -> convohub's pair rows (labels/preferences empty: the file has none)."""
    for index, row in enumerate(iter_json_records(path)):
        where = f"{path.name} row {index}"
        if not isinstance(row, Mapping) or "conversations" not in row:
            raise SourceFormatError(f"{where}: expected an object with 'conversations', 'chosen', 'rejected'")
        prompt = [m for m in sharegpt_messages(row["conversations"], f"{where}.conversations") if m["role"] != "system"]
        if not prompt or prompt[-1]["role"] != "user":
            raise SourceFormatError(f"{where}.conversations: must end with a human turn")
        pick = {}
        for key in ("chosen", "rejected"):
            value = row.get(key)
            if isinstance(value, list):  # some exports wrap the message in a list
                value = value[-1] if value else None
            if not isinstance(value, Mapping):
                raise SourceFormatError(f"{where}.{key}: expected {{'from': 'gpt', 'value': ...}}")
            pick[key] = _text(value.get("value", value.get("content")), f"{where}.{key}")
        cid = _conversation_id(prompt)
        yield {"id": f"{cid}-{index}", "conversation_id": cid, "user_id": "", "variant": variant, "prompt": prompt,
               "preferences": [], "chosen": pick["chosen"], "rejected": pick["rejected"], "sat_labels": [],
               "dsat_labels": [], "domain": "", "intent": ""}


def _labels(value: Any) -> tuple[bool, list[str]]:
    """(flag, labels) from a boolean flag or a label list/string."""
    if value is None:
        return False, []
    if isinstance(value, bool):
        return value, []
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list):
        labels = [str(v) for v in value if str(v).strip() and str(v).upper() not in ("N/A", "NA")]
        return bool(labels), labels
    return bool(value), []


def read_annotations(path: Path) -> Iterator[dict[str, Any]]:
    """Stream utterance rows as convohub's ``sat_dsat_annotation`` rows (see the module docstring)."""
    conversation, previous_utt = 0, None
    for index, row in enumerate(iter_json_records(path)):
        where = f"{path.name} row {index}"
        if not isinstance(row, Mapping):
            raise SourceFormatError(f"{where}: expected an object")
        cid = next((str(row[k]) for k in CONVERSATION_ID_KEYS if row.get(k) not in (None, "")), None)
        utt = row.get("UtterranceId", row.get("UtteranceId"))
        if cid is None:
            if previous_utt is not None and isinstance(utt, int) and isinstance(previous_utt, int) and utt <= previous_utt:
                conversation += 1
            cid = f"{path.stem}-{conversation}"
        previous_utt = utt
        role = _ROLE.get(str(row.get("Role", "")).lower())
        if role not in ("user", "assistant"):
            raise SourceFormatError(f"{where}.Role: expected 'User' or 'Agent', got {row.get('Role')!r}")
        sat, sat_labels = _labels(row.get("Satisfaction"))
        dsat, dsat_labels = _labels(row.get("Disatisfaction", row.get("Dissatisfaction")))
        yield {"conversation_id": cid, "utterance_id": None if utt is None else int(utt),
               "turn_id": None if row.get("TurnId") is None else int(row["TurnId"]), "role": role,
               "content": _text(row.get("Content") or "", f"{where}.Content"),
               "state": row.get("State"), "preceding_topical_relation": row.get("Preceeding", row.get("Preceding")),
               "domain": row.get("Domain"), "intent": row.get("Intent"), "sat": sat and role == "user",
               "dsat": dsat and role == "user", "satisfaction": sat_labels, "dissatisfaction": dsat_labels,
               "labeller": "released"}


def read_user_preferences(path: Path) -> Iterator[dict[str, Any]]:
    """Released preference summaries -> ``user_preference`` rows."""
    for index, row in enumerate(iter_json_records(path)):
        where = f"{path.name} row {index}"
        if not isinstance(row, Mapping):
            raise SourceFormatError(f"{where}: expected an object")
        conv_key = next((k for k in ("conversations", "conversation", "history", "prompt") if k in row), None)
        prefs = next((row[k] for k in ("preferences", "preference", "user_preference") if k in row), None)
        if conv_key is None or prefs is None:
            raise SourceFormatError(f"{where}: expected a conversation ('conversations') and 'preferences'")
        prompt = sharegpt_messages(row[conv_key], f"{where}.{conv_key}")
        if isinstance(prefs, str):
            prefs = [prefs]
        if not isinstance(prefs, list):
            raise SourceFormatError(f"{where}.preferences: expected a list of sentences")
        query = row.get("query")
        cid = str(next((row[k] for k in CONVERSATION_ID_KEYS if row.get(k)), _conversation_id(prompt)))
        yield {"id": f"{cid}-{index}", "conversation_id": cid, "user_id": str(row.get("user_id") or ""),
               "query": query if isinstance(query, int) and not isinstance(query, bool) else None, "prompt": prompt,
               "preferences": [_text(p, f"{where}.preferences") for p in prefs], "labeller": "released"}
