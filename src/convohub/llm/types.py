"""The one request/response vocabulary every LLM-backed step of convohub speaks.

Labelling, summarising and judging all reduce to "send these chats, get these texts back". Keeping the
request and response types tiny and backend-neutral means a step written against a local transformers
model runs unchanged against vLLM, TGI, `transformers serve` or Inference Providers, and the on-disk
cache can key on exactly the fields that change the answer (model id, messages, sampling parameters).

Errors travel *inside* :class:`ChatResponse` (``error`` set, ``text`` empty) instead of being raised:
one bad prompt or one exhausted retry must not throw away the other 9,999 answers of a batch.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Roles accepted in ``ChatRequest.messages`` (the OpenAI chat schema, minus tool plumbing).
ROLES = frozenset({"system", "user", "assistant"})


def _normalise_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError("ChatRequest.messages must be a list of {'role': ..., 'content': ...} dicts")
    if not messages:
        raise ValueError("ChatRequest.messages is empty: give at least one {'role': 'user', 'content': ...}")
    out: list[dict[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(
                f"messages[{i}] is {type(message).__name__}, expected a dict with role and content"
            )
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"messages[{i}]['role'] is {role!r}; expected one of {sorted(ROLES)}")
        if not isinstance(content, str):
            raise TypeError(f"messages[{i}]['content'] must be a str, got {type(content).__name__}")
        out.append({"role": role, "content": content})
    return out


def few_shot_messages(system: str | None, shots: Iterable[tuple[str, str]], prompt: str) -> list[dict[str, str]]:
    """The system message (if any), each worked (user, assistant) exchange in turn, then the prompt: how every
    few-shot step shows a small model the answer format in the chat's own turns."""
    messages = [{"role": "system", "content": system}] if system else []
    for user, assistant in shots:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return [*messages, {"role": "user", "content": prompt}]


@dataclass(frozen=True)
class ChatRequest:
    """A chat to complete plus the sampling parameters that shape the answer.

    ``temperature == 0`` means greedy decoding on every backend. ``seed`` is forwarded where the
    backend honours it (transformers, vLLM, TGI); ``stop`` strings end generation and are not part of
    the returned text.
    """

    messages: list[dict[str, str]]
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _normalise_messages(self.messages))
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {self.max_new_tokens!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise TypeError(f"seed must be an int or None, got {type(self.seed).__name__}")

    @classmethod
    def from_prompt(cls, prompt: str, system: str | None = None, shots: Iterable[tuple[str, str]] = (),
                    **params: Any) -> ChatRequest:
        """A user turn, optionally preceded by a system prompt and worked exchanges (:func:`few_shot_messages`)."""
        return cls(messages=few_shot_messages(system, shots, prompt), **params)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def sampling_params(self) -> dict[str, Any]:
        """The parameters that change the answer, as plain JSON values (used in cache keys)."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": float(self.temperature),
            "top_p": float(self.top_p),
            "seed": self.seed,
            "stop": list(self.stop),
        }


@dataclass(frozen=True)
class ChatResponse:
    """One answer. ``error`` is None on success; on failure ``text`` is empty and ``error`` says why.

    ``finish_reason`` follows the OpenAI vocabulary ("stop", "length"), or "error". ``cached`` is True
    when the answer came from the on-disk cache rather than a fresh model call.
    """

    text: str
    finish_reason: str | None = None
    cached: bool = False
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failure(cls, error: str) -> ChatResponse:
        return cls(text="", finish_reason="error", error=error)


class ChatBackend(abc.ABC):
    """Anything that turns a batch of :class:`ChatRequest` into the same number of :class:`ChatResponse`.

    Implementations must return exactly one response per request, in order, and report per-request
    failures through ``ChatResponse.error`` rather than raising. Configuration mistakes (a missing model
    folder, an unset URL) may raise at construction time, where they are cheap to fix.
    """

    #: Short backend kind used in :attr:`name` ("local", "endpoint", ...).
    kind: str = "backend"

    @property
    @abc.abstractmethod
    def model_id(self) -> str:
        """The model that produces the answers, as it should appear on a dataset card."""

    @property
    def name(self) -> str:
        """``kind:model_id``; what a card records under "generated by"."""
        return f"{self.kind}:{self.model_id}"

    @abc.abstractmethod
    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """Complete every request; never raises for a per-request failure."""

    def complete(self, prompt: str, system: str | None = None, **params: Any) -> ChatResponse:
        """Convenience for one prompt: ``backend.complete("Label this: ...", max_new_tokens=32)``."""
        return self.chat([ChatRequest.from_prompt(prompt, system=system, **params)])[0]

    def describe(self) -> dict[str, Any]:
        """Provenance for cards and run logs (no secrets)."""
        return {"backend": self.kind, "model_id": self.model_id}

    def identity(self) -> dict[str, Any]:
        """Everything that decides *which* model answers, for the response cache key: the model id, and
        where known the server's base URL and the weights' revision (a hash of the weight files of a local
        folder), so a model retrained into the same folder or served elsewhere never replays stale answers."""
        return {"model": self.model_id}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"
