"""How a WildChat-format conversation becomes the chat a language model is trained and evaluated on.

WildChat-AQA's corpus fine-tuning baseline (method (c)) trains a causal LM on every conversation with the
conversation's metadata in a system line, so that aggregative questions ("what did users from France ask
about in May 2023?") can later be put to the model with no retrieved context. The training script and the
evaluation must render a row identically (otherwise the held-out perplexity measures a different format
from the one trained on), so the conversion lives here, in the library, and both import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: The system line of every chat: the conversation's day, its (hashed) user id and the user's country.
SYSTEM_TEMPLATE = "Time: {day}, user {user} is from {country}."
UNKNOWN = "unknown"


def system_line(row: Mapping[str, Any]) -> str:
    """The system message for one dataset row; missing metadata reads ``unknown``."""
    day = str(row.get("timestamp") or "")[:10] or UNKNOWN
    return SYSTEM_TEMPLATE.format(day=day, user=row.get("user_id") or UNKNOWN, country=row.get("country") or UNKNOWN)


def conversation_to_messages(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """One ``conversations`` row -> chat messages: the system line, then the turns in order.

    Any role other than ``assistant`` is treated as the user's (WildChat has only these two).
    Raises ``KeyError`` naming the row when it has no ``turns`` field.
    """
    if "turns" not in row:
        raise KeyError(f"conversation {row.get('conversation_id', '?')!r} has no 'turns' field; "
                       "expected a row of the wildchat-sample 'conversations' config")
    messages = [{"role": "system", "content": system_line(row)}]
    for turn in row["turns"]:
        role = "assistant" if turn["role"] == "assistant" else "user"
        messages.append({"role": role, "content": str(turn["content"])})
    return messages


def chat_texts(tokenizer: Any, rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each row rendered with the tokenizer's chat template (no generation prompt): the texts whose
    perplexity the evaluation measures, token for token what the trainer sees."""
    return [tokenizer.apply_chat_template(conversation_to_messages(r), tokenize=False) for r in rows]
