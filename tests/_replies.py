"""A scripted chat backend shared by the tests that stand a scripted model in for an LLM step.

Imported as ``from _replies import Replies`` (like ``_serving``) rather than copied into each module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from convohub.llm import ChatBackend, ChatRequest, ChatResponse


class Replies(ChatBackend):
    """Answers each request with ``reply(text of its last message)``; counts the calls.

    ``whole_request=True`` passes the :class:`ChatRequest` itself instead, for scripts that answer by the
    request's sampling parameters (seed, temperature) or earlier messages.
    """

    kind = "scripted"

    def __init__(self, reply: Callable[[Any], str], model: str = "scripted", *, whole_request: bool = False) -> None:
        self.reply, self.model, self.calls, self.whole_request = reply, model, 0, whole_request

    @property
    def model_id(self) -> str:
        return self.model

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.calls += len(requests)
        return [ChatResponse(self.reply(r if self.whole_request else r.messages[-1]["content"]), "stop")
                for r in requests]
