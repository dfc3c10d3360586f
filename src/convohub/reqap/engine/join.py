"""JOIN strategies: sort-merge for equality, sorted sweeps for inequality/interval conditions.

The condition's AST is inspected for a top-level conjunction of atoms ``i1[k] OP i2[k']`` (``i1.k`` in
condition strings, ``i1.get("k")`` too). The chosen strategy only narrows the candidate pairs; the whole
condition is still evaluated on every candidate, so each strategy returns exactly what the nested loop
(the reference) returns, in the same order (l1 order, then l2 order):

* ``equi``: both sides sorted by the hash of their equality-key tuple and merged (equal values hash
  equally, so no pair is lost, also across int/float);
* ``sweep``: l2 sorted by one key ``A`` bounded by an i1 value; bisect gives the range, and an interval
  condition (``i2.A <= x and i2.B >= y``) scans only while the running max of ``B`` can still qualify;
* ``nested``: anything else, bounded by :data:`MAX_NESTED_PAIRS`.

Every strategy stops as soon as more than ``max_output`` pairs (:data:`MAX_JOIN_OUTPUT` by default) have
matched, checked after each l1 item (or each run of equal keys), so a self-JOIN on a key that most events
share (5,793 songs: 33 million pairs) fails in a moment instead of growing towards tens of GB. The merged
events are charged to the question's memory budget (``charge``) before they are built.

Items whose key is None or not orderable with the rest fall back to the nested loop for that item.
"""

from __future__ import annotations

import ast
import bisect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convohub.reqap.engine.errors import ExecutionError, ExpressionError, MemoryBudgetExceeded
from convohub.reqap.engine.expr import Function

__all__ = ["Atom", "MAX_JOIN_OUTPUT", "analyse_condition", "join"]

MAX_NESTED_PAIRS = 25_000_000
#: Merged events one JOIN may return; PerQA's gold JOINs return a few hundred at most.
MAX_JOIN_OUTPUT = 100_000
_FLIP = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq}


@dataclass(frozen=True)
class Atom:
    """``i2[key2] op i1[key1]`` (normalised so that the l2 side is on the left)."""

    key2: str
    op: type
    key1: str


def _side(node: ast.AST, params: tuple[str, str]) -> tuple[int, str] | None:
    """(0 for i1 / 1 for i2, key) for ``i[k]`` or ``i.get(k)``; None otherwise."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in params \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return params.index(node.value.id), node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and isinstance(node.func.value, ast.Name) and node.func.value.id in params and len(node.args) == 1 \
            and not node.keywords and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return params.index(node.func.value.id), node.args[0].value
    return None


def analyse_condition(fn: Function) -> list[Atom]:
    """The atoms of the condition's top-level conjunction that compare an i1 key with an i2 key."""
    if fn.body is None or len(fn.params) != 2:
        return []
    params = (fn.params[0], fn.params[1])
    conjuncts: list[ast.AST] = []
    stack: list[ast.AST] = [fn.body]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.And):
            stack.extend(reversed(n.values))
        else:
            conjuncts.append(n)
    atoms = []
    for c in conjuncts:
        if not isinstance(c, ast.Compare):
            continue
        operands = [c.left, *c.comparators]
        for left, op, right in zip(operands, c.ops, operands[1:], strict=False):
            if type(op) not in _FLIP:
                continue
            a, b = _side(left, params), _side(right, params)
            if a is None or b is None or a[0] == b[0]:
                continue
            if a[0] == 1:
                atoms.append(Atom(a[1], type(op), b[1]))
            else:
                atoms.append(Atom(b[1], _FLIP[type(op)], a[1]))
    return atoms


def _orderable(values: list[Any]) -> bool:
    try:
        sorted(values)
        return all(v == v for v in values)  # NaN breaks sorted order
    except TypeError:
        return False


def join(l1: list[dict[str, Any]], l2: list[dict[str, Any]], fn: Function,
         test: Callable[[dict[str, Any], dict[str, Any]], bool], strategy: str = "auto",
         tick: Callable[[], None] = lambda: None, *, max_output: int = MAX_JOIN_OUTPUT,
         charge: Callable[[int, str], None] | None = None) -> tuple[list[dict[str, Any]], str]:
    """Merged pairs ``{**e1, **e2}`` satisfying ``test`` and the strategy used.

    ``test(e1, e2)`` evaluates the whole condition (False when it raises). ``strategy``: auto, equi,
    sweep or nested (a forced strategy that does not fit the condition falls back to nested). More than
    ``max_output`` matching pairs raise :class:`MemoryBudgetExceeded` (budget ``max_join_output``);
    ``charge(nbytes, what)`` is called with the estimated size of the merged events before they are built.
    """
    atoms = analyse_condition(fn)
    eq = [a for a in atoms if a.op is ast.Eq]
    ineq = [a for a in atoms if a.op is not ast.Eq]
    if strategy in ("auto", "equi") and eq:
        used = "equi"
    elif strategy in ("auto", "sweep") and ineq:
        used = "sweep"
    else:
        used = "nested"
    check = _OutputCheck(max_output, used, len(l1), len(l2))
    if used == "equi":
        pairs = _equi(l1, l2, eq, test, tick, check)
    elif used == "sweep":
        pairs = _sweep(l1, l2, ineq, test, tick, check)
    else:
        pairs = _nested(l1, l2, test, tick, check=check)
    check(pairs)
    pairs.sort()
    if charge is not None and pairs:
        i, j = pairs[0]  # merged events of one join have about the same keys: one measures them all
        charge(len(pairs) * (sys.getsizeof({**l1[i], **l2[j]}) + 8), f"{len(pairs):,} merged JOIN events")
    return [{**l1[i], **l2[j]} for i, j in pairs], used


@dataclass(frozen=True)
class _OutputCheck:
    """Raises once a strategy has collected more than ``limit`` pairs (called after each l1 item or run)."""

    limit: int
    strategy: str
    n1: int
    n2: int

    def __call__(self, out: list[Any]) -> None:
        if len(out) > self.limit:
            raise MemoryBudgetExceeded(
                f"a JOIN ({self.strategy} strategy) of {self.n1:,} x {self.n2:,} events matched at least",
                budget="max_join_output", limit=self.limit, requested=len(out), unit="merged events",
                hint="the condition matches too many pairs (e.g. a key most events share): FILTER l1/l2 first, "
                     "add a more selective condition, or raise Executor(max_join_output=...)")


def _check_size(n1: int, n2: int) -> None:
    if n1 * n2 > MAX_NESTED_PAIRS:
        raise ExecutionError(f"JOIN of {n1} x {n2} items needs a nested loop; too large")


def _nested(l1: list[Any], l2: list[Any], test: Callable[[Any, Any], bool], tick: Callable[[], None],
            rows: range | list[int] | None = None, check: Callable[[list[Any]], None] = lambda out: None,
            out: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    rows = rows if rows is not None else range(len(l1))
    _check_size(len(rows), len(l2))
    out = [] if out is None else out
    for i in rows:
        tick()
        out.extend((i, j) for j, e2 in enumerate(l2) if test(l1[i], e2))
        check(out)
    return out


def _key(event: dict[str, Any], keys: list[str]) -> tuple[Any, ...]:
    """The equality key; a missing key reads as None (the full condition decides later)."""
    return tuple(event.get(k) for k in keys)


def _equi(l1: list[Any], l2: list[Any], atoms: list[Atom], test: Callable[[Any, Any], bool],
          tick: Callable[[], None], check: Callable[[list[Any]], None]) -> list[tuple[int, int]]:
    k1, k2 = [a.key1 for a in atoms], [a.key2 for a in atoms]

    def hashed(items: list[Any], keys: list[str]) -> tuple[list[tuple[int, int]], list[int]]:
        ok, unhashable = [], []
        for idx, e in enumerate(items):
            k = _key(e, keys)
            try:
                ok.append((hash(k), idx))
            except TypeError:
                unhashable.append(idx)
        ok.sort()
        return ok, unhashable

    left, bad1 = hashed(l1, k1)
    right, bad2 = hashed(l2, k2)
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(left) and j < len(right):  # merge equal-hash runs
        tick()
        if left[i][0] < right[j][0]:
            i += 1
        elif left[i][0] > right[j][0]:
            j += 1
        else:
            h = left[i][0]
            i_end, j_end = i, j
            while i_end < len(left) and left[i_end][0] == h:
                i_end += 1
            while j_end < len(right) and right[j_end][0] == h:
                j_end += 1
            run = right[j:j_end]
            for _, a in left[i:i_end]:  # row by row, so a run of one shared key is stopped early
                tick()
                out.extend((a, b) for _, b in run if test(l1[a], l2[b]))
                check(out)
            i, j = i_end, j_end
    if bad1:  # unhashable keys (lists): compare against everything
        _nested(l1, l2, test, tick, rows=bad1, check=check, out=out)
    if bad2:
        done = set(bad1)
        _check_size(len(bad2), len(l1))
        for b in bad2:
            tick()
            out.extend((a, b) for a in range(len(l1)) if a not in done and test(l1[a], l2[b]))
            check(out)
    return out


def _bounds(atoms: list[Atom]) -> tuple[dict[str, list[Atom]], dict[str, list[Atom]]]:
    lower: dict[str, list[Atom]] = {}
    upper: dict[str, list[Atom]] = {}
    for a in atoms:
        if a.op in (ast.Gt, ast.GtE):
            lower.setdefault(a.key2, []).append(a)
        else:
            upper.setdefault(a.key2, []).append(a)
    return lower, upper


def _sweep(l1: list[Any], l2: list[Any], atoms: list[Atom], test: Callable[[Any, Any], bool],
           tick: Callable[[], None], check: Callable[[list[Any]], None]) -> list[tuple[int, int]]:
    """Range scans over l2 sorted by one bounded key (see the module docstring)."""
    lower, upper = _bounds(atoms)
    # prefer a key bounded on both sides, then an interval pair (upper on A, lower on B), then one bound
    both = [k for k in upper if k in lower]
    if both:
        sort_key, lo, hi, extra = both[0], lower[both[0]][0], upper[both[0]][0], None
    elif upper and lower:
        a_key, b_key = next(iter(upper)), next(iter(lower))
        sort_key, lo, hi, extra = a_key, None, upper[a_key][0], lower[b_key][0]
    elif upper:
        sort_key = next(iter(upper))
        lo, hi, extra = None, upper[sort_key][0], None
    else:
        sort_key = next(iter(lower))
        lo, hi, extra = lower[sort_key][0], None, None

    keyed = [(e.get(sort_key) if isinstance(e, dict) else None, j) for j, e in enumerate(l2)]
    usable = [(v, j) for v, j in keyed if v is not None]
    if not _orderable([v for v, _ in usable]):
        return _nested(l1, l2, test, tick, check=check)
    usable.sort(key=lambda p: (p[0], p[1]))
    values = [v for v, _ in usable]
    extra_vals: list[Any] = []
    if extra is not None:
        running: Any = None
        try:
            for _, j in usable:
                v = l2[j].get(extra.key2)
                running = v if running is None else (running if v is None or running >= v else v)
                extra_vals.append(running)
        except TypeError:
            extra = None

    out: list[tuple[int, int]] = []
    fallback: list[int] = []
    for i, e1 in enumerate(l1):
        tick()
        try:
            start, end = 0, len(values)
            if lo is not None:
                x = e1[lo.key1]
                start = bisect.bisect_left(values, x) if lo.op is ast.GtE else bisect.bisect_right(values, x)
            if hi is not None:
                x = e1[hi.key1]
                end = bisect.bisect_right(values, x) if hi.op is ast.LtE else bisect.bisect_left(values, x)
            if extra is not None:
                y = e1[extra.key1]
                cands = []
                j = end - 1
                while j >= start and extra_vals[j] is not None and extra_vals[j] >= y:
                    cands.append(usable[j][1])
                    j -= 1
            else:
                cands = [usable[j][1] for j in range(start, end)]
        except (KeyError, TypeError):
            fallback.append(i)  # not comparable with the sorted keys: check against everything
            continue
        out.extend((i, j) for j in cands if test(e1, l2[j]))
        check(out)
    if fallback:
        _nested(l1, l2, test, tick, rows=fallback, check=check, out=out)
    return out


def safe_test(call: Callable[[Any, Any], Any]) -> Callable[[Any, Any], bool]:
    """A pair test that treats a failing condition as False (like FILTER drops failing items)."""

    def test(a: Any, b: Any) -> bool:
        try:
            return bool(call(a, b))
        except ExpressionError:
            return False

    return test
