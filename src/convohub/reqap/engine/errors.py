"""Exceptions of the operator engine.

Three failure kinds are kept apart because they are handled differently: a rejected tree never runs
(:class:`TreeSyntaxError`); an error inside one lambda call only drops that item (:class:`ExpressionError`);
a resource bound or the time budget aborts the whole question (:class:`ResourceLimitError`,
:class:`BudgetExceeded`). :class:`MemoryBudgetExceeded` is the resource bound that says which budget ran
out, where, and by how much, so the person reading a failed run knows what to change;
:class:`WorkerLimitError` is what is left when the operating system stopped a question's worker process
(its address-space limit or its hard time limit) before the engine could say anything itself.
"""

from __future__ import annotations

import ast

__all__ = [
    "BudgetExceeded", "ExecutionError", "ExpressionError", "MemoryBudgetExceeded", "ResourceLimitError",
    "TreeSyntaxError", "WorkerLimitError"
]


def describe_node(node: ast.AST | None, source: str | None) -> str:
    """``Call at line 1, col 4: 'open("x")'`` -- the node type, its position and a short source snippet."""
    if node is None:
        return ""
    parts = [type(node).__name__]
    line = getattr(node, "lineno", None)
    if line is not None:
        parts.append(f"at line {line}, col {getattr(node, 'col_offset', 0) + 1}")
    snippet = ast.get_source_segment(source, node) if source is not None and line is not None else None
    if snippet is None:
        try:
            snippet = ast.unparse(node)
        except Exception:  # an incomplete node cannot always be printed
            snippet = None
    if snippet:
        snippet = " ".join(snippet.split())
        parts.append(repr(snippet if len(snippet) <= 80 else snippet[:77] + "..."))
    return " ".join(parts[:2]) + (": " + parts[2] if len(parts) > 2 else "")


class TreeSyntaxError(ValueError):
    """The tree is malformed or uses something outside the whitelist; nothing was executed."""

    def __init__(self, message: str, node: ast.AST | None = None, source: str | None = None) -> None:
        where = describe_node(node, source)
        super().__init__(f"{message} [{where}]" if where else message)
        self.reason = message
        self.node_type = type(node).__name__ if node is not None else None
        self.lineno = getattr(node, "lineno", None)
        self.col_offset = getattr(node, "col_offset", None)


class ExpressionError(Exception):
    """A lambda or condition failed on one item (missing key, wrong type, ...): that item is skipped."""


class ResourceLimitError(RuntimeError):
    """An expression tried to build something too large (huge power, repetition, allocation)."""


class MemoryBudgetExceeded(ResourceLimitError):
    """A per-question memory budget would be (or was) exceeded; raised before the value is built when its
    size can be estimated from the operands.

    ``budget`` names the limit (``max_alloc``, ``max_int_bits``, ``max_sequence``, ``max_join_output``, ...),
    ``limit`` and ``requested`` are in that budget's unit (``unit``), ``where`` describes the expression node
    and ``operator`` the operator (e.g. ``JOIN(...)``) that was running; the executor fills ``operator`` in
    when the error passes through it. ``hint`` says what to do about it.
    """

    def __init__(self, what: str, *, budget: str, limit: int, requested: int, unit: str = "bytes",
                 where: str = "", hint: str = "", operator: str = "") -> None:
        self.what, self.budget, self.limit, self.requested, self.unit = what, budget, limit, requested, unit
        self.where, self.hint, self.operator = where, hint, operator
        super().__init__(self._message())

    def _message(self) -> str:
        text = (f"{self.what}: {self.requested:,} {self.unit}, over the {self.budget} budget of "
                f"{self.limit:,} {self.unit}")
        if self.operator:
            text += f" in {self.operator}"
        if self.where:
            text += f" [{self.where}]"
        return text + (f"; {self.hint}" if self.hint else "")

    def at_operator(self, operator: str) -> MemoryBudgetExceeded:
        """Record the operator node the error happened in (the innermost one wins)."""
        if not self.operator:
            self.operator = operator
            self.args = (self._message(),)
        return self


class WorkerLimitError(RuntimeError):
    """The worker process running a question was stopped by its OS memory limit (``RLIMIT_AS``), by its hard
    time limit, or died; the question counts as a failed run and the next question gets a fresh worker."""


class ExecutionError(RuntimeError):
    """An operator cannot run (unresolved placeholder, join too large, wrong input kind)."""


class BudgetExceeded(TimeoutError):
    """The per-question time budget ran out, or the next step that cannot be interrupted would run past it
    (``reason`` says which step, and how long it would take)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__("time budget exceeded" + (f": {reason}" if reason else ""))
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str]]:  # rebuilt from the reason, e.g. across a worker process
        return type(self), (self.reason,)

    def message(self, budget_s: float) -> str:
        """The error a question's result records, the one wording of every time-out a run records:
        ``TimeoutError: time budget of 40 s exceeded (reason)``, the reason being the step that would have
        overrun it (none when the budget simply ran out). A tree's budget is what its question's decoding left,
        so it is shown to a tenth of a second."""
        return f"TimeoutError: time budget of {round(budget_s, 1):g} s exceeded" + (
            f" ({self.reason})" if self.reason else "")
