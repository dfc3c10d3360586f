"""A scripted chat backend shared by the WildFeedback tests that stand a model in for an LLM step.

Imported as ``from _replies import Replies`` (like ``_serving``) rather than copied into each module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from convohub.llm import ChatBackend, ChatRequest, ChatResponse


class Replies(ChatBackend):
    """Answers each request with ``reply(text of its last message)``; counts the calls."""

    kind = "scripted"

    def __init__(self, reply: Callable[[str], str], model: str = "scripted") -> None:
        self.reply, self.model, self.calls = reply, model, 0

    @property
    def model_id(self) -> str:
        return self.model

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.calls += len(requests)
        return [ChatResponse(self.reply(r.messages[-1]["content"]), "stop") for r in requests]
