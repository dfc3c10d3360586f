"""What the engine needs from ReQAP's components: a :class:`Retriever` for RETRIEVE and an :class:`Extractor`
for EXTRACT.

The engine calls nothing else of them, so any implementation plugs in: the stand-ins and the trained
models of :mod:`convohub.reqap.components`, or a test double.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.pace import TimeCheck

__all__ = ["Extractor", "Retriever"]


class Extractor(Protocol):
    """Raw values of ``key`` for each event (None where the event does not hold it).

    EXTRACT passes the question's time check as ``check_time`` (None outside a question's budget). An extractor
    whose model calls take long calls it before each batch it cannot interrupt, with that batch's estimate (the
    model extractor, :class:`convohub.reqap.components.extract.FrozenMappingExtractor`, does); a lookup ignores it.
    """

    def extract(self, events: Sequence[dict[str, Any]], key: str, check_time: TimeCheck | None = None) -> list[Any]: ...


class Retriever(Protocol):
    """What RETRIEVE needs: the ids of all events that soft-match the query.

    RETRIEVE passes the question's time check as ``check_time`` (a :data:`~convohub.reqap.engine.pace.TimeCheck`;
    None outside a question's budget). A retriever whose model steps take long calls it before each batch it
    cannot interrupt (the cross-encoder pipeline,
    :class:`convohub.reqap.components.retrieve.CrossEncoderRetriever`, does); a fast one ignores it.
    """

    def retrieve(self, query: str, store: EventStore, check_time: TimeCheck | None = None) -> list[str]: ...
