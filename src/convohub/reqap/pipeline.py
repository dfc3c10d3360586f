"""ReQAP end to end: QUD proposes operator trees, the engine executes them, the first tree that runs wins.

Why "first that executes": the decomposer yields complete trees best first (greedy decoding, then the
alternatives of a tree of options); a tree can still fail at run time (a key the events lack, a lambda that
raises on every item, a budget overrun), and the paper then falls back to the next tree. A question whose
trees all fail -- or that has no tree -- gets ``answer=None`` and scores 0.

Components plug in through small protocols: :class:`Decomposer` (``candidates(question)``, helper-owned
ICL/SFT implementations live in :mod:`convohub.reqap.qud`), :class:`~convohub.reqap.retrieval.Retriever`
and :class:`~convohub.reqap.extraction.Extractor`. :class:`GoldTreeDecomposer` is an ORACLE: it returns the
hand-written gold tree of the question's template and exists for upper bounds, offline demos and error
attribution, never as a system result.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

from convohub.reqap.events import EventStore
from convohub.reqap.executor import REFERENCE_DATE, Executor
from convohub.reqap.extraction import DirectExtractor, Extractor
from convohub.reqap.retrieval import BM25Retriever, Retriever

__all__ = ["Decomposer", "GoldTreeDecomposer", "PipelineResult", "ReQAP", "StaticDecomposer", "tree_outline"]

#: Trees tried per question at most (the spec's cap on the tree of alternatives).
MAX_TREES = 1000


class Decomposer(Protocol):
    """QUD: complete operator-tree strings for a question, best first (may yield nothing)."""

    def candidates(self, question: str) -> Iterator[str]: ...


class GoldTreeDecomposer:
    """ORACLE decomposer: the gold tree of the question's PerQA template (see :mod:`convohub.reqap.gold_trees`).

    Questions registered with :meth:`add` (dicts with ``question`` and ``template_id``, and ``sql_query``
    when known, which disambiguates the variables) are looked up by text; any other text is matched against
    every gold template's question pattern, so free-text questions in the Space work when they follow a
    template. Yields at most one tree per matching template.
    """

    name = "gold-tree-oracle"

    def __init__(self, questions: Iterable[Mapping[str, Any]] = ()) -> None:
        self._known: dict[str, Mapping[str, Any]] = {}
        for q in questions:
            self.add(q)

    def add(self, question: Mapping[str, Any]) -> None:
        self._known[str(question["question"]).strip()] = question

    def tree_for(self, question: Mapping[str, Any]) -> str | None:
        """The gold tree of one question dict, None when its template has none or does not fit."""
        from convohub.reqap.gold_trees import gold_tree_or_none

        return gold_tree_or_none(question)

    def candidates(self, question: str) -> Iterator[str]:
        from convohub.perqa.templates import TEMPLATES
        from convohub.reqap.gold_trees import GOLD_TREES

        text = question.strip()
        if text in self._known:
            tree = self.tree_for(self._known[text])
            if tree is not None:
                yield tree
            return
        seen: set[str] = set()
        for template in TEMPLATES:
            if template.template_id not in GOLD_TREES:
                continue
            if not template.variables and text.lower() != template.question.lower():
                continue  # gold_tree() checks the text only where there are variables to recover
            tree = self.tree_for({"template_id": template.template_id, "question": text})
            if tree is not None and tree not in seen:
                seen.add(tree)
                yield tree


class StaticDecomposer:
    """Fixed trees per question text (tests, replaying saved predictions)."""

    name = "static"

    def __init__(self, trees: Mapping[str, Iterable[str]]) -> None:
        self.trees = {k.strip(): list(v) for k, v in trees.items()}

    def candidates(self, question: str) -> Iterator[str]:
        yield from self.trees.get(question.strip(), [])


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

    The budget covers decoding and execution of all trees together; each tree runs with what is left.
    """

    def __init__(self, decomposer: Decomposer, retriever: Retriever | None = None,
                 extractor: Extractor | None = None, budget_s: float = 600.0, *, max_trees: int = MAX_TREES,
                 dedup: bool = True) -> None:
        self.decomposer = decomposer
        self.retriever = retriever if retriever is not None else BM25Retriever()
        self.extractor = extractor if extractor is not None else DirectExtractor()
        self.budget_s = budget_s
        self.max_trees = max_trees
        self.dedup = dedup

    def answer(self, question: str, store: EventStore, reference_date: date = REFERENCE_DATE) -> PipelineResult:
        """Try candidate trees in order; the first that executes without error gives the answer."""
        started = time.monotonic()
        deadline = started + self.budget_s
        result = PipelineResult(question)
        candidates = self.decomposer.candidates(question)
        while len(result.tried) < self.max_trees:
            left = deadline - time.monotonic()
            if left <= 0:
                result.error = f"TimeoutError: time budget of {self.budget_s:g} s exceeded"
                break
            try:
                tree = next(candidates)
            except StopIteration:
                break
            except Exception as err:  # a decoder failure ends the search, not the evaluation run
                result.error = f"DecomposerError: {type(err).__name__}: {err}"
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


def tree_outline(node: Any, depth: int = 0) -> list[tuple[int, str]]:
    """(depth, ``OP(arg=value, ...)``) per operator in pre-order: list arguments first, then operators
    nested in lambdas; operator arguments are shown as children, not inline. For drawing trees."""
    from convohub.reqap.executor import _summary
    from convohub.reqap.expr import Function
    from convohub.reqap.parse import OpNode

    if not isinstance(node, OpNode):
        return [(depth, getattr(node, "text", str(node)))]
    args = ", ".join(f"{k}={v}" for k, v in _summary(node).items())
    out = [(depth, f"{node.op}({args})")]
    for v in node.args.values():
        if isinstance(v, OpNode):
            out += tree_outline(v, depth + 1)
    for v in node.args.values():
        if isinstance(v, Function):
            for sub in v.subtrees:
                out += tree_outline(sub, depth + 1)
    return out
