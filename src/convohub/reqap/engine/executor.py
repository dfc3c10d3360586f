"""Depth-first execution of operator trees with per-subtree caching, a time budget and a trace.

Children run before their parent; a subtree whose canonical text was already executed in this question
is answered from the cache (and marked ``cached`` in the trace). Operator subtrees nested in lambdas run
before the lambda's operator. A question that runs past its budget stops with a ``TimeoutError`` result;
any failure gives ``answer=None`` and the error text (the benchmark scores it 0).
"""

from __future__ import annotations

import json
import math
import sys
import time as _time
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from convohub.reqap.engine.errors import (
    BudgetExceeded,
    ExecutionError,
    MemoryBudgetExceeded,
    ResourceLimitError,
    TreeSyntaxError,
)
from convohub.reqap.engine.events import EventStore
from convohub.reqap.engine.expr import Function
from convohub.reqap.engine.interpreter import MAX_ALLOC, Evaluator, Group
from convohub.reqap.engine.join import MAX_JOIN_OUTPUT
from convohub.reqap.engine.operators import IMPLEMENTATIONS, OperatorContext
from convohub.reqap.engine.parse import Node, OpNode, Placeholder, arg_summary, parse_tree
from convohub.reqap.engine.protocols import Extractor, Retriever

__all__ = ["ExecutionResult", "Executor", "REFERENCE_DATE", "execute_tree", "to_jsonable"]

#: PerQA's reference date for every question (CURRENT_DATE / "today").
REFERENCE_DATE = date(2024, 11, 25)
DEFAULT_TIME_BUDGET = 600.0


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """JSON-ready copy: dates/times -> ISO strings, timedeltas -> seconds, sets -> sorted lists,
    groups -> ``{**keys, "events": [...]}``, NaN -> None."""
    if _depth > 50:
        return str(value)
    d = _depth + 1
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Group):
        return {**{k: to_jsonable(v, d) for k, v in value.keys.items()}, "events": [to_jsonable(e, d) for e in value]}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, d) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        items = [to_jsonable(v, d) for v in value]
        return sorted(items, key=lambda v: (type(v).__name__, str(v)))
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, d) for v in value]
    return str(value)


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, (list, tuple)) else None


PREVIEW_ITEMS = 3
PREVIEW_CHARS = 300


def preview(value: Any) -> str:
    """A short JSON rendering of a node's output for the trace: a scalar, or the first
    ``PREVIEW_ITEMS`` items of a list, cut at ``PREVIEW_CHARS``; the count of the remaining items is always kept."""
    if isinstance(value, (list, tuple)):
        text = json.dumps([to_jsonable(v) for v in value[:PREVIEW_ITEMS]], ensure_ascii=False, default=str)[:-1]
        rest = f", ... +{len(value) - PREVIEW_ITEMS} more]" if len(value) > PREVIEW_ITEMS else "]"
    else:
        text, rest = json.dumps(to_jsonable(value), ensure_ascii=False, default=str), ""
    room = PREVIEW_CHARS - len(rest)
    return (text if len(text) <= room else text[:room - 3] + "...") + rest


@dataclass
class ExecutionResult:
    """Outcome of one tree: a JSON-ready ``answer``, the ``trace`` and ``error`` (None on success)."""

    answer: Any = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    raw: Any = None  # the answer before JSON conversion (dates stay dates)
    allocated: int = 0  # bytes charged to the question's memory budget (see convohub.reqap.engine.interpreter)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"answer": self.answer, "trace": self.trace, "error": self.error, "seconds": round(self.seconds, 4)}


class Executor:
    """Runs trees over one persona's :class:`EventStore`.

    ``retriever`` defaults to :class:`~convohub.reqap.components.retrieve.BM25Retriever`, ``extractor`` to
    :class:`~convohub.reqap.components.extract.DirectExtractor`.
    ``join_strategy`` forces a JOIN strategy (auto, equi, sweep, nested) -- for tests and benchmarks;
    ``max_alloc`` bounds the bytes a question's values may take (lambda results, copied and merged events;
    see :mod:`convohub.reqap.engine.interpreter`), ``max_join_output`` the merged events of one JOIN.
    """

    def __init__(self, store: EventStore, retriever: Retriever | None = None, extractor: Extractor | None = None,
                 *, reference_date: date = REFERENCE_DATE, time_budget: float = DEFAULT_TIME_BUDGET,
                 dedup: bool = True, join_strategy: str = "auto", max_alloc: int = MAX_ALLOC,
                 max_join_output: int = MAX_JOIN_OUTPUT) -> None:
        self.store = store
        if retriever is None or extractor is None:  # the stand-ins live one layer up (components)
            from convohub.reqap.components.extract import DirectExtractor
            from convohub.reqap.components.retrieve import BM25Retriever

            retriever = retriever if retriever is not None else BM25Retriever()
            extractor = extractor if extractor is not None else DirectExtractor()
        self.retriever: Retriever = retriever
        self.extractor: Extractor = extractor
        self.reference_date = reference_date
        self.time_budget = time_budget
        self.dedup = dedup
        self.join_strategy = join_strategy
        self.max_alloc = max_alloc
        self.max_join_output = max_join_output

    def execute(self, tree: str | Node) -> ExecutionResult:
        """Parse (if text) and run ``tree``; never raises for a bad tree or a failing run."""
        started = _time.monotonic()
        result = ExecutionResult()
        try:
            node = parse_tree(tree) if isinstance(tree, str) else tree
        except TreeSyntaxError as err:
            result.error = f"TreeSyntaxError: {err}"
            return result
        run = _Run(self, started + self.time_budget, result.trace)
        try:
            value = run.node(node, 0)
            result.raw = value
            result.answer = to_jsonable(value)
        except BudgetExceeded as err:
            result.error = err.message(self.time_budget)
        except (ExecutionError, ResourceLimitError) as err:
            result.error = f"{type(err).__name__}: {err}"
        except RecursionError:
            result.error = "ResourceLimitError: recursion too deep"
        except MemoryError:  # the OS limit of a worker process (RLIMIT_AS) came before the engine's budgets
            result.error = (f"MemoryBudgetExceeded: the process ran out of memory in {run.current or 'the tree'} "
                            "(its OS memory limit); the tree builds too much data")
        except Exception as err:  # an operator bug or odd data must not take the caller down
            result.error = f"{type(err).__name__}: {err}"
        result.seconds = _time.monotonic() - started
        result.allocated = run.evaluator.allocated
        return result


#: Operators whose output events are new copies (charged to the memory budget; JOIN charges itself).
_COPYING = frozenset({"EXTRACT", "MAP", "UNNEST", "GROUP_BY"})


def _label(node: OpNode, entry_id: int) -> str:
    """``JOIN #3 JOIN(l1=..., ...)``: the operator, its trace id and the start of its text, for errors."""
    text = node.text
    return f"{node.op} #{entry_id} {text if len(text) <= 160 else text[:157] + '...'}"


class _Run:
    """State of one question: cache, trace, deadline, evaluator."""

    def __init__(self, executor: Executor, deadline: float, trace: list[dict[str, Any]]) -> None:
        self.x = executor
        self.deadline = deadline
        self.trace = trace
        self.cache: dict[str, Any] = {}
        self.evaluator = Evaluator(executor.reference_date, deadline=deadline,
                                   run_subtree=self._nested_value,
                                   max_alloc=executor.max_alloc)
        self._depth = 0
        self.current = ""  # label of the operator running now, for out-of-memory errors
        self.ctx = OperatorContext(executor.store, executor.retriever, executor.extractor, self.evaluator,
                                   dedup=executor.dedup, join_strategy=executor.join_strategy,
                                   max_join_output=executor.max_join_output)

    def _nested_value(self, sub: Node) -> Any:
        """Value of an operator nested in a lambda: already run before the lambda's operator, so cached."""
        key = sub.text
        return self.cache[key] if key in self.cache else self.node(sub, self._depth + 1)

    def check(self) -> None:
        if _time.monotonic() > self.deadline:
            raise BudgetExceeded()

    def _charge_output(self, op: str, value: list[Any]) -> None:
        """Charge an operator's output list (and, for copying operators, its new items) to the budget."""
        nbytes = sys.getsizeof(value)
        if op in _COPYING and value:
            nbytes += len(value) * sys.getsizeof(value[0])  # the items of one output have the same shape
        self.evaluator.charge(nbytes, f"the output of {op} ({len(value):,} items)")

    def node(self, node: Node, depth: int) -> Any:
        self.check()
        if isinstance(node, Placeholder):
            raise ExecutionError(f"unresolved placeholder {node.text}")
        entry: dict[str, Any] = {"id": len(self.trace), "depth": depth, "operator": node.op, "args": arg_summary(node),
                                 "input_sizes": [], "output_size": None, "output_preview": "", "seconds": 0.0, "cached": False}
        self.trace.append(entry)
        key = node.text
        if key in self.cache:
            entry["cached"] = True
            entry["output_size"] = _size(self.cache[key])
            entry["output_preview"] = preview(self.cache[key])
            return self.cache[key]
        kwargs: dict[str, Any] = {}
        for name, v in node.args.items():
            if isinstance(v, (OpNode, Placeholder)):
                kwargs[name] = self.node(v, depth + 1)
                entry["input_sizes"].append(_size(kwargs[name]))
            else:
                if isinstance(v, Function):
                    for sub in v.subtrees:  # nested operators run first (children before parents)
                        self.node(sub, depth + 1)
                kwargs[name] = v
        started = _time.monotonic()
        saved, self._depth = self._depth, depth
        saved_label, self.current = self.current, _label(node, entry["id"])
        try:
            value = IMPLEMENTATIONS[node.op](self.ctx, **kwargs)
            if isinstance(value, list):
                self._charge_output(node.op, value)
        except MemoryBudgetExceeded as err:
            raise err.at_operator(self.current) from None
        finally:
            self._depth, self.current = saved, saved_label
        self.check()
        entry["seconds"] = round(_time.monotonic() - started, 6)
        entry["output_size"] = _size(value)
        entry["output_preview"] = preview(value)
        if node.op == "JOIN":
            entry["strategy"] = self.ctx.last_join_strategy
        self.cache[key] = value
        return value


def execute_tree(tree: str | Node, store: EventStore, **kwargs: Any) -> ExecutionResult:
    """One-shot helper: ``Executor(store, **kwargs).execute(tree)``."""
    return Executor(store, **kwargs).execute(tree)
