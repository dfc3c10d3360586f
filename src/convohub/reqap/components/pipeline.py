"""ReQAP end to end: QUD proposes operator trees, the engine executes them, the first tree that runs wins.

Why "first that executes": the decomposer yields complete trees best first (greedy decoding, then the
alternatives of a tree of options); a tree can still fail at run time (a key the events lack, a lambda that
raises on every item, a budget overrun), and the paper then falls back to the next tree. A question whose
trees all fail -- or that has no tree -- gets ``answer=None`` and scores 0.

Components plug in through small protocols: :class:`~convohub.reqap.components.qud.Decomposer`
(``candidates(question)``), :class:`~convohub.reqap.engine.protocols.Retriever` and
:class:`~convohub.reqap.engine.protocols.Extractor`. The gold-tree decomposer
(:class:`~convohub.reqap.data.gold.GoldTreeDecomposer`) is an ORACLE for upper bounds, offline demos and
error attribution, never a system result.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date
from functools import partial
from typing import Any

from convohub.reqap.components.extract import DirectExtractor
from convohub.reqap.components.qud import Decomposer
from convohub.reqap.components.retrieve import BM25Retriever
from convohub.reqap.engine.errors import BudgetExceeded
from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.executor import DEFAULT_TIME_BUDGET, REFERENCE_DATE, Executor
from convohub.reqap.engine.pace import refuse_past
from convohub.reqap.engine.protocols import Extractor, Retriever

__all__ = ["PipelineResult", "ReQAP"]

#: Trees tried per question at most (the spec's cap on the tree of alternatives).
MAX_TREES = 1000


@dataclass
class PipelineResult:
    """One question's outcome. ``tree`` is the tree whose answer counts (None when none ran);
    ``tried`` lists every tree attempted with its error (None for the winner)."""

    question: str
    answer: Any = None
    tree: str | None = None
    tried: list[dict[str, Any]] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "tree": self.tree, "tried": self.tried,
                "trace": self.trace, "error": self.error, "seconds": round(self.seconds, 4)}


class ReQAP:
    """Decomposer + retriever + extractor + engine, with a time budget per question (600 s in the paper).

    The budget covers decoding and execution of all trees together; each tree runs with what is left, and the
    decomposer gets the question's time check (a generating one starts no model call that would end past the
    deadline).
    """

    def __init__(self, decomposer: Decomposer, retriever: Retriever | None = None,
                 extractor: Extractor | None = None, budget_s: float = DEFAULT_TIME_BUDGET, *, max_trees: int = MAX_TREES,
                 dedup: bool = True) -> None:
        self.decomposer = decomposer
        self.retriever = retriever if retriever is not None else BM25Retriever()
        self.extractor = extractor if extractor is not None else DirectExtractor()
        self.budget_s = budget_s
        self.max_trees = max_trees
        self.dedup = dedup

    def _out_of_time(self, result: PipelineResult) -> str:
        """The time-out of a question whose budget ran out between trees, with the last tree's error, which says
        what step it stopped in."""
        message = BudgetExceeded().message(self.budget_s)
        return f"{message}; the last tree's error: {result.tried[-1]['error']}" if result.tried else message

    def answer(self, question: str, store: EventStore, reference_date: date = REFERENCE_DATE) -> PipelineResult:
        """Try candidate trees in order; the first that executes without error gives the answer."""
        started = time.monotonic()
        deadline = started + self.budget_s
        result = PipelineResult(question)
        candidates = self.decomposer.candidates(question, check_time=partial(refuse_past, deadline))
        while len(result.tried) < self.max_trees:
            if deadline - time.monotonic() <= 0:
                result.error = self._out_of_time(result)
                break
            try:
                tree = next(candidates)
            except StopIteration:
                break
            except BudgetExceeded as err:  # the decomposer's next model call would have ended past the deadline
                result.error = err.message(self.budget_s)
                break
            except Exception as err:  # a decoder failure ends the search, not the evaluation run
                result.error = f"DecomposerError: {type(err).__name__}: {err}"
                break
            left = deadline - time.monotonic()  # after decoding the tree, which took its share of the budget
            if left <= 0:
                result.error = self._out_of_time(result)
                break
            run = Executor(store, self.retriever, self.extractor, reference_date=reference_date,
                           time_budget=left, dedup=self.dedup).execute(tree)
            result.tried.append({"tree": tree, "error": run.error, "seconds": round(run.seconds, 4)})
            if run.ok:
                result.answer, result.tree, result.trace, result.error = run.answer, tree, run.trace, None
                break
            result.trace = run.trace  # the last failure's trace, for debugging
        if result.tree is None and result.error is None:
            result.error = (f"NoTreeExecuted: all {len(result.tried)} trees failed; last: {result.tried[-1]['error']}"
                            if result.tried else "NoTree: the decomposer proposed no operator tree")
        result.seconds = time.monotonic() - started
        return result
