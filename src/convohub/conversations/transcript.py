"""Conversations as people paste or save them: ``User:`` / ``Assistant:`` transcripts and JSON message lists.

Spaces take a pasted conversation and CLIs a saved one; both come down to a list of ``{"role", "content"}``
messages (roles ``user``, ``assistant``, ``system``). :func:`parse_transcript` reads pasted text (a
transcript, or a JSON list of messages), :func:`messages_from_items` a decoded JSON list of
``{"role", "content"}`` or ShareGPT ``{"from", "value"}`` objects, and :func:`exchanges` pairs each user prompt
with the assistant's answer (the last prompt may still be unanswered). Errors are ``ValueError`` naming the
item at fault and what to change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

_SPEAKER = re.compile(r"^\s*(user|human|assistant|ai|gpt|bot|system)\s*:\s?(.*)$", re.I)
_ROLE = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "gpt": "assistant",
         "bot": "assistant", "system": "system"}


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def messages_from_items(items: Any, where: str = "") -> list[dict[str, str]]:
    """Messages from a decoded JSON list of ``{"role", "content"}`` or ``{"from", "value"}`` objects."""
    if not isinstance(items, list):
        raise ValueError(f"{_prefix(where)}expected a list of messages, got {type(items).__name__}")
    messages = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"{_prefix(where)}item {i} is not an object with role/content or from/value")
        role = _ROLE.get(str(item.get("role", item.get("from", ""))).lower())
        content = item.get("content", item.get("value"))
        if role is None or not isinstance(content, str):
            raise ValueError(f"{_prefix(where)}item {i}: need role user/assistant/system (or from human/gpt) and "
                             f"a text in 'content', got role {item.get('role', item.get('from'))!r} and "
                             f"content of type {type(content).__name__}")
        messages.append({"role": role, "content": content})
    return messages


def parse_transcript(text: str) -> list[dict[str, str]]:
    """Messages from pasted text: ``User: ...`` / ``Assistant: ...`` lines (continuation lines join the message
    above; ``Human``/``AI``/``GPT`` accepted), or a JSON list of ``{"role", "content"}`` / ``{"from",
    "value"}`` (ShareGPT)."""
    text = (text or "").strip()
    if not text:
        raise ValueError("paste a conversation: lines starting with 'User:' and 'Assistant:'")
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the text starts with '[' but is not valid JSON: {exc}") from exc
        messages = messages_from_items(items)
    else:
        messages = []
        for line in text.splitlines():
            match = _SPEAKER.match(line)
            if match:
                messages.append({"role": _ROLE[match.group(1).lower()], "content": match.group(2)})
            elif messages:
                messages[-1]["content"] += "\n" + line
            elif line.strip():
                raise ValueError(f"the first line must start with 'User:' (or 'Assistant:'), got {line[:40]!r}")
    messages = [{"role": m["role"], "content": m["content"].strip()} for m in messages]
    if not any(m["role"] == "user" for m in messages):
        raise ValueError("the conversation has no user turn")
    return messages


def exchanges(messages: Sequence[Mapping[str, str]], where: str = "") -> list[tuple[str, str]]:
    """(user prompt, assistant response) per turn; system messages are skipped and the last prompt may have no
    answer yet (its response is ""). Two user or two assistant messages in a row, an answer before any
    prompt, or an empty prompt are refused, naming the message."""
    out: list[tuple[str, str]] = []
    answered = True
    for i, message in enumerate(messages):
        role, content = message["role"], message["content"]
        if role == "system":
            continue
        if role == "user":
            if not answered:
                raise ValueError(f"{_prefix(where)}message {i}: a second user message before the assistant "
                                 "answered the first; merge the two prompts or put the answer between them")
            if not content.strip():
                raise ValueError(f"{_prefix(where)}message {i}: the user prompt is empty")
            out.append((content, ""))
            answered = False
        else:
            if answered:
                what = "before any user prompt" if not out else "right after another assistant message"
                raise ValueError(f"{_prefix(where)}message {i}: an assistant message {what}; every answer "
                                 "must follow the user prompt it answers")
            out[-1] = (out[-1][0], content)
            answered = True
    if not out:
        raise ValueError(f"{_prefix(where)}the conversation has no user prompt")
    return out
