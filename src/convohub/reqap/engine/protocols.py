"""What the engine needs from ReQAP's components: a :class:`Retriever` for RETRIEVE and an :class:`Extractor`
for EXTRACT.

The engine calls nothing else of them, so any implementation plugs in: the stand-ins and the trained
models of :mod:`convohub.reqap.components`, or a test double.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from convohub.reqap.engine.events import EventStore

__all__ = ["Extractor", "Retriever"]


class Extractor(Protocol):
    """Raw values of ``key`` for each event (None where the event does not hold it)."""

    def extract(self, events: Sequence[dict[str, Any]], key: str) -> list[Any]: ...


class Retriever(Protocol):
    """What RETRIEVE needs: the ids of all events that soft-match the query.

    A retriever whose model steps take long sets a class attribute ``checks_time = True`` and takes a keyword
    ``check_time`` (a :data:`~convohub.reqap.engine.pace.TimeCheck`), which it calls before each batch it
    cannot interrupt; RETRIEVE then passes the question's check (the cross-encoder pipeline,
    :class:`convohub.reqap.components.retrieve.CrossEncoderRetriever`, does).
    """

    def retrieve(self, query: str, store: EventStore) -> list[str]: ...
