"""Run thousands of chat requests with a progress bar and resumable granularity.

Backends take a whole batch at once; for long jobs that hides progress and, with a
:class:`CachedBackend`, delays persistence until the batch ends. :func:`run_chat` feeds the backend in
chunks, so a crash loses at most one chunk and the bar shows throughput and the failure count.
:func:`ask_until_parsed` adds the bounded re-asking every labelling step needs on top of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

from .types import ChatBackend, ChatRequest, ChatResponse


def run_chat(
    backend: ChatBackend,
    requests: Sequence[ChatRequest],
    chunk_size: int = 64,
    desc: str | None = None,
    progress: bool = True,
) -> list[ChatResponse]:
    """``backend.chat`` over ``requests`` in chunks of ``chunk_size``, with a tqdm bar; same order out."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    responses: list[ChatResponse] = []
    failures = cached = 0
    with tqdm(total=len(requests), desc=desc or backend.name, unit="req", disable=not progress) as bar:
        for start in range(0, len(requests), chunk_size):
            chunk = list(requests[start : start + chunk_size])
            out = backend.chat(chunk)
            if len(out) != len(chunk):
                raise RuntimeError(f"{backend!r} returned {len(out)} responses for {len(chunk)} requests")
            responses.extend(out)
            failures += sum(not r.ok for r in out)
            cached += sum(r.cached for r in out)
            bar.update(len(chunk))
            bar.set_postfix(failed=failures, cached=cached, refresh=False)
    return responses


T = TypeVar("T")


@dataclass
class Parsed(Generic[T]):
    """One item of :func:`ask_until_parsed`: the parsed ``value`` (None when no answer was usable), one
    error per unusable call in call order, and the number of calls made for it."""

    value: T | None = None
    errors: list[str] = field(default_factory=list)
    attempts: int = 0


def ask_until_parsed(
    backend: ChatBackend,
    n_items: int,
    request: Callable[[int, int], ChatRequest],
    parse: Callable[[int, str], T | None],
    *,
    max_attempts: int,
    desc: str,
    progress: bool = True,
    chunk_size: int | None = None,
) -> list[Parsed[T]]:
    """Ask about ``n_items`` items, re-asking only those whose answer could not be used, ``max_attempts``
    calls per item at most; one :class:`Parsed` per item, in item order.

    Why it exists: LLM answers are parsed, never trusted, and a bad one is neither repaired by guessing nor
    allowed to sink the batch. Each try sends every still-unparsed item in one :func:`run_chat` call
    (``request(i, attempt)``, ``attempt`` counting from 0, so a step can answer greedily first and sample
    with a fresh seed later) and hands each successful answer's text to ``parse(i, text)``, in item order
    (so a stateful ``parse`` sees the answers accepted earlier in the same try). ``parse`` returns the value,
    or raises :class:`ValueError` (its message is the error) or returns None (error ``"unparseable answer
    '<first 80 characters>'"``) for an unusable answer; a failed request is recorded as ``"request failed:
    <error>"``. Items still unusable after ``max_attempts`` keep ``value=None``. ``{try}`` in ``desc``
    becomes the try number (1, 2, ...) on the progress bar.
    """
    out: list[Parsed[T]] = [Parsed() for _ in range(n_items)]
    chunking: dict[str, int] = {} if chunk_size is None else {"chunk_size": chunk_size}
    todo = list(range(n_items))
    for attempt in range(max_attempts):
        if not todo:
            break
        responses = run_chat(backend, [request(i, attempt) for i in todo],
                             desc=desc.replace("{try}", str(attempt + 1)), progress=progress, **chunking)
        still = []
        for i, response in zip(todo, responses, strict=True):
            item = out[i]
            item.attempts += 1
            if not response.ok:
                item.errors.append(f"request failed: {response.error}")
                still.append(i)
                continue
            try:
                value = parse(i, response.text)
            except ValueError as exc:
                item.errors.append(str(exc))
                still.append(i)
                continue
            if value is None:
                item.errors.append(f"unparseable answer {response.text.strip()[:80]!r}")
                still.append(i)
            else:
                item.value = value
        todo = still
    return out


def response_summary(responses: Sequence[ChatResponse]) -> dict[str, Any]:
    """Counts for logs and cards: total, ok, failed, cached, finish reasons and the commonest errors."""
    reasons: dict[str, int] = {}
    errors: dict[str, int] = {}
    for r in responses:
        reasons[r.finish_reason or "unknown"] = reasons.get(r.finish_reason or "unknown", 0) + 1
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
    top_errors = dict(sorted(errors.items(), key=lambda kv: -kv[1])[:5])
    return {
        "total": len(responses),
        "ok": sum(r.ok for r in responses),
        "failed": sum(not r.ok for r in responses),
        "cached": sum(r.cached for r in responses),
        "finish_reasons": reasons,
        "top_errors": top_errors,
    }
