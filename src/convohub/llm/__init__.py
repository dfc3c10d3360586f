"""One interface for every LLM-backed step of convohub (labelling, summarising, judging).

Steps build :class:`ChatRequest` objects and hand them to a :class:`ChatBackend`; which model answers --
a local transformers checkpoint, or any OpenAI-compatible endpoint (vLLM, TGI, `transformers serve`,
Inference Providers) -- is a deployment choice made with :func:`make_backend` / :func:`backend_from_env`.
Wrap any backend in :class:`CachedBackend` so interrupted runs resume without repeating paid calls, and
read structured answers with :func:`parse_json_answer`; :func:`ask_until_parsed` re-asks (a bounded number of
times) only the items whose answer did not parse.

Heavy imports (torch, transformers, huggingface_hub's inference client) happen only when the backend
that needs them is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cache import CachedBackend, ResponseCache, cache_key
from .factory import OFFLINE_SPEC, backend_from_env, configured_backend, default_backend, make_backend
from .jsonparse import JsonParse, parse_json_answer
from .runner import Parsed, ask_until_parsed, response_summary, run_chat
from .types import ChatBackend, ChatRequest, ChatResponse, few_shot_messages

if TYPE_CHECKING:
    from .endpoint import EndpointBackend
    from .local import TransformersBackend

__all__ = [
    "CachedBackend",
    "ChatBackend",
    "ChatRequest",
    "ChatResponse",
    "EndpointBackend",
    "JsonParse",
    "OFFLINE_SPEC",
    "Parsed",
    "ResponseCache",
    "TransformersBackend",
    "ask_until_parsed",
    "backend_from_env",
    "configured_backend",
    "cache_key",
    "default_backend",
    "few_shot_messages",
    "make_backend",
    "parse_json_answer",
    "response_summary",
    "run_chat",
]


def __getattr__(name: str) -> Any:
    if name == "EndpointBackend":
        from .endpoint import EndpointBackend

        return EndpointBackend
    if name == "TransformersBackend":
        from .local import TransformersBackend

        return TransformersBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
