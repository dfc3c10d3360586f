"""WildChat-AQA's corpus as chats, in the authors' fine-tuning format (method (c) of the paper).

Each conversation becomes one chat: a system line ``Time: <Month DD, YYYY HH:MM:SS>, user <name> is from
<country>.``, then the turns with the user's turns written ``User <name>: ...`` and the assistant's
``Assistant: ...`` (the authors alternate user and assistant by position). The summary variant has one user
turn, ``User <name>: <summary>``. The model is later asked aggregative questions with no context, so the
metadata in the text is all it can learn the aggregates from. The training script
(``training/aqa_causal_lm``) and its evaluation both import this module, so they render rows identically.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from convohub.aqa.questions import CONTEXTS

SYSTEM_TEMPLATE = "Time: {time}, user {user} is from {country}."


def _time(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%B %d, %Y %H:%M:%S")
    from convohub.aqa.questions import parse_timestamp

    return parse_timestamp(value, "conversation").strftime("%B %d, %Y %H:%M:%S")


def aqa_messages(row: Mapping[str, Any], context: str = "raw") -> list[dict[str, str]]:
    """One corpus row (``conversations`` or ``summaries`` config) as chat messages (module doc)."""
    if context not in CONTEXTS:
        raise ValueError(f"unknown context {context!r}: use 'raw' (conversations) or 'summary'")
    field = "conversation" if context == "raw" else "summary"
    missing = [f for f in ("user_name", "country", "timestamp", field) if f not in row]
    if missing:
        raise KeyError(f"conversation {row.get('hash', '?')!r}: missing field(s) {', '.join(missing)}")
    user = str(row["user_name"])
    messages = [{"role": "system", "content": SYSTEM_TEMPLATE.format(time=_time(row["timestamp"]), user=user,
                                                                       country=row["country"] or "unknown")}]
    if context == "summary":
        messages.append({"role": "user", "content": f"User {user}: {row['summary']}"})
        return messages
    for i, turn in enumerate(row["conversation"]):
        if i % 2 == 0:
            messages.append({"role": "user", "content": f"User {user}: {turn['content']}"})
        else:
            messages.append({"role": "assistant", "content": f"Assistant: {turn['content']}"})
    return messages
