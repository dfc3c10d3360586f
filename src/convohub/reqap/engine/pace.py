"""How long a unit of model work has taken so far, to estimate the next call against a deadline.

Why: a batched model call (an EXTRACT chunk, a QUD decoding step) cannot be interrupted, so a call started
just before a question's deadline overruns it by all of its length. Both the engine's extractor and the QUD
decoder keep one :class:`Pace` across trees and questions and start no call whose estimate ends too late.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Pace"]


@dataclass
class Pace:
    """Seconds spent on ``units`` of work (events extracted, requests decoded) so far."""

    seconds: float = 0.0
    units: int = 0

    def add(self, units: int, seconds: float) -> None:
        self.units += units
        self.seconds += seconds

    def per_unit(self) -> float | None:
        """Seconds per unit, or None before the first call."""
        return self.seconds / self.units if self.units else None

    def estimate(self, units: int) -> float | None:
        """Seconds ``units`` more would take at this pace (None before the first call)."""
        per_unit = self.per_unit()
        return None if per_unit is None else per_unit * units
