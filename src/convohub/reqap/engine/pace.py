"""How long a unit of model work has taken so far, to estimate the next call against a deadline.

Why: a batched model call (a batch of the EXTRACT model, of a RETRIEVE cross-encoder, a QUD decoding step)
cannot be interrupted, so a call started just before a question's deadline overruns it by all of its length.
The model extractor, the RETRIEVE cross-encoders and the QUD decoder each keep one :class:`Pace` across trees
and questions and start no call whose estimate ends too late (:func:`refuse_past`, through the question's
:data:`TimeCheck`). Each counts only the units its model works on: the extractor's frozen mapping answers most
events by key once its window of answers agrees, and a pace per event handed over would count those as model
work (measured: a question stopped at "extracting 'workout_type' from 32 more of 962 events would take about
24.1 s" with 18 events left before the window of 50 closes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from convohub.reqap.engine.errors import BudgetExceeded

__all__ = ["Pace", "TimeCheck", "paced_chunks", "refuse_past"]

T = TypeVar("T")
R = TypeVar("R")

#: ``check(seconds, what)``: raise :class:`~convohub.reqap.engine.errors.BudgetExceeded` when ``what``,
#: expected to take ``seconds`` (None: not known yet), would end past the question's deadline
#: (:meth:`convohub.reqap.engine.interpreter.Evaluator.check_time_for`).
TimeCheck = Callable[[float | None, str], None]


@dataclass
class Pace:
    """Seconds spent on ``units`` of work (events extracted, pairs classified, requests decoded) so far, and the
    slowest call of each size."""

    seconds: float = 0.0
    units: int = 0
    #: units of a call -> the most seconds a call of that many units took
    slowest: dict[int, float] = field(default_factory=dict)

    def add(self, units: int, seconds: float) -> None:
        self.units += units
        self.seconds += seconds
        self.slowest[units] = max(seconds, self.slowest.get(units, 0.0))

    def per_unit(self) -> float | None:
        """Seconds per unit, or None before the first call."""
        return self.seconds / self.units if self.units else None

    def estimate(self, units: int) -> float | None:
        """Seconds a call of ``units`` would take (None before the first call): the mean seconds per unit times
        ``units``, but at least the slowest earlier call of as many units or fewer. Why the floor: a model call
        has a part that does not shrink with its size (decoding one request runs as many steps as decoding
        eight), so after large calls the mean per unit would let a small call start that ends past the
        deadline."""
        per_unit = self.per_unit()
        if per_unit is None:
            return None
        floor = max((s for u, s in self.slowest.items() if u <= units), default=0.0)
        return max(per_unit * units, floor)


def refuse_past(deadline: float | None, seconds: float | None, what: str) -> None:
    """Raise :class:`BudgetExceeded` when ``what``, expected to take ``seconds``, would end past ``deadline`` (a
    :func:`time.monotonic` time; None: no deadline). With ``seconds`` None (no estimate yet) only the deadline
    itself is checked. The one check of every model call the engine, RETRIEVE and QUD start."""
    if deadline is None:
        return
    left = deadline - time.monotonic()
    if seconds is None:
        if left <= 0:
            raise BudgetExceeded(f"the budget ran out before {what}")
    elif seconds > left:
        raise BudgetExceeded(f"{what} would take about {seconds:.1f} s, {max(left, 0.0):.1f} s are left")


def paced_chunks(items: Sequence[T], size: int, work: Callable[[Sequence[T]], list[R]], pace: Pace,
                 check: TimeCheck | None, what: Callable[[int, int], str]) -> list[R]:
    """``work`` over ``items`` in chunks of ``size``, concatenated. Before each chunk ``check`` gets its
    estimate -- at the pace of this call's chunks so far, for the first chunk at ``pace`` (the work's earlier
    calls) -- and ``what(start, chunk length)``, which says what the chunk is for the error; every chunk's
    seconds are added to ``pace``. With ``check`` None the chunks run unchecked."""
    out: list[R] = []
    this_call = Pace()
    for start in range(0, len(items), size):
        chunk = items[start:start + size]
        if check is not None:
            check((this_call if this_call.units else pace).estimate(len(chunk)), what(start, len(chunk)))
        began = time.monotonic()
        out += work(chunk)
        seconds = time.monotonic() - began
        this_call.add(len(chunk), seconds)
        pace.add(len(chunk), seconds)
    return out
