"""Interpreter of checked lambda/condition ASTs (see :mod:`convohub.reqap.engine.expr` for the language).

The evaluator walks the AST itself; no code object is ever built. Beyond the static whitelist it bounds
what only shows at run time, because a tree from an LLM can build values of any size out of a few
characters (repeated squaring, string doubling, nested comprehensions):

* every value the interpreter creates is charged, at its ``sys.getsizeof`` size, to a per-question
  budget (``max_alloc``, :data:`MAX_ALLOC`): integers by their size, strings, dates and timedeltas,
  containers and comprehension outputs, plus (through :meth:`Evaluator.charge`) the events operators copy
  and the merged events of JOIN. The count only grows within a question (temporaries are not credited
  back), so it is an upper bound of what the question ever held;
* one value may not exceed :data:`MAX_INT_BITS` bits or :data:`MAX_SEQUENCE` elements, and where the result's
  size follows from the operands (``**``, ``*``, ``+`` on sequences, ``replace``, ``join``) the check, and
  the budget charge, happen *before* the value is computed, so a bomb never gets the memory it asks for;
* comprehension lengths and the time budget.

Those bounds raise :class:`MemoryBudgetExceeded` (a :class:`ResourceLimitError`) or
:class:`BudgetExceeded` and abort the question; any other failure inside a call becomes
:class:`ExpressionError` (the caller usually drops that item).
"""

from __future__ import annotations

import ast
import json
import math
import operator
import sys
import time as _time
from collections.abc import Callable, Iterable
from datetime import date, datetime, time, timedelta
from typing import Any

from dateutil.relativedelta import relativedelta as RelativeDelta

from convohub.reqap.engine.errors import (
    BudgetExceeded,
    ExpressionError,
    MemoryBudgetExceeded,
    ResourceLimitError,
    describe_node,
)
from convohub.reqap.engine.expr import NAMESPACES, Function, SubtreeSlot
from convohub.reqap.engine.pace import refuse_past

__all__ = ["Evaluator", "Group"]

MAX_SEQUENCE = 1_000_000  # elements of one container (or characters of one string) built by an expression
MAX_INT_BITS = 100_000  # bits of one integer (about 30,000 decimal digits)
MAX_COMPREHENSION = 200_000
#: Bytes (as ``sys.getsizeof`` counts them) that one question's values may take in all; far above what any
#: gold tree needs (see benchmarks/bench_engine.py) and far below a worker's 1 GiB memory limit.
MAX_ALLOC = 256 * 2**20
_CHECK_EVERY = 2048
_sizeof = sys.getsizeof
_CONTAINERS = (list, tuple, set, frozenset, dict)
_ALLOC_HINT = ("the tree builds far more data than a question needs: look for values that grow in a loop "
               "(repeated squaring, doubling strings, nested comprehensions) or raise Executor(max_alloc=...)")
_SIZE_HINT = "no answer needs a value this large; rewrite the expression (or its operands) to stay small"


class Group(list):
    """One GROUP_BY partition: the list of its events plus the grouping values in :attr:`keys`.

    ``len(g)`` counts events (so ``MAP(fct=len)`` counts) and ``g["artist"]`` reads a grouping key or
    a value MAP stored on the group.
    """

    def __init__(self, events: Iterable[Any], keys: dict[str, Any]) -> None:
        super().__init__(events)
        self.keys = dict(keys)

    def with_key(self, name: str, value: Any) -> Group:
        return Group(self, {**self.keys, name: value})

    def __repr__(self) -> str:
        return f"Group({self.keys}, {len(self)} events)"


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
# receiver type -> methods callable on it (checked at run time on top of the static name whitelist)
_STR_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith", "split",
                          "rsplit", "replace", "find", "rfind", "count", "title", "capitalize", "casefold",
                          "isdigit", "isnumeric", "isalpha", "isalnum", "join", "splitlines", "index",
                          "partition", "rpartition", "removeprefix", "removesuffix", "zfill", "isspace",
                          "islower", "isupper", "istitle", "swapcase"})
_ISO_CALENDAR = type(date(2024, 1, 1).isocalendar())  # datetime.IsoCalendarDate: a tuple with names
_TYPE_METHODS: tuple[tuple[type | tuple[type, ...], frozenset[str]], ...] = (
    (str, _STR_METHODS),
    (datetime, frozenset({"weekday", "isoweekday", "isoformat", "strftime", "date", "time", "timestamp",
                          "replace", "isocalendar", "toordinal"})),
    (date, frozenset({"weekday", "isoweekday", "isoformat", "strftime", "replace", "isocalendar", "toordinal"})),
    (time, frozenset({"isoformat", "strftime", "replace"})),
    (timedelta, frozenset({"total_seconds"})),
    ((list, tuple), frozenset({"count", "index"})),
)
_TYPE_ATTRS: tuple[tuple[type | tuple[type, ...], frozenset[str]], ...] = (
    (datetime, frozenset({"year", "month", "day", "hour", "minute", "second", "microsecond"})),
    (date, frozenset({"year", "month", "day"})),
    (time, frozenset({"hour", "minute", "second", "microsecond"})),
    (timedelta, frozenset({"days", "seconds", "microseconds"})),
    (_ISO_CALENDAR, frozenset({"year", "week", "weekday"})),
    (RelativeDelta, frozenset({"years", "months", "weeks", "days", "hours", "minutes", "seconds"})),
)
_SAFE_SCALARS = (str, int, float, bool, type(None), date, time, timedelta)
#: :data:`_TYPE_ATTRS` by exact type (the common case; subclasses go through the tuple)
_ATTRS_BY_TYPE: dict[type, frozenset[str]] = {t: names for t, names in _TYPE_ATTRS if isinstance(t, type)}


def _relativedelta(*args: Any, **kw: Any) -> Any:
    """``relativedelta(months=6)`` (an offset) or ``relativedelta(d1, d2)`` (the difference of two dates)."""
    if args:
        if kw or len(args) != 2 or not all(isinstance(a, date) for a in args):
            raise ExpressionError("relativedelta() takes two dates, or keyword offsets")
        return RelativeDelta(*args)
    for k, v in kw.items():
        if not isinstance(v, (int, float)) or abs(v) > 100_000:
            raise ExpressionError(f"relativedelta({k}=...) must be a number of modest size")
    return RelativeDelta(**kw)


class Evaluator:
    """Evaluates :class:`Function` objects; one instance per question (it carries the budgets).

    ``run_subtree`` executes an operator subtree nested in a lambda (the executor passes its cached
    runner); ``reference_date`` is what ``date.today()`` and ``datetime.now()`` return.
    """

    def __init__(self, reference_date: date, *, deadline: float | None = None,
                 run_subtree: Callable[[Any], Any] | None = None, max_alloc: int = MAX_ALLOC) -> None:
        self.reference_date = reference_date
        self.deadline = deadline
        self.run_subtree = run_subtree
        self.max_alloc = max_alloc
        self.allocated = 0
        self._steps = 0
        self._invariants: dict[int, Any] = {}  # value of each invariant subexpression (see Function.invariant)

    # -- public ----------------------------------------------------------------------------------
    def call(self, fn: Function, *args: Any) -> Any:
        """Apply ``fn``; errors other than budgets/limits come back as :class:`ExpressionError`."""
        try:
            if fn.builtin is not None:
                return self._call_function(fn.builtin, list(args), {})
            params = fn.params
            if len(args) != len(params):
                raise ExpressionError(f"function expects {len(params)} argument(s), got {len(args)}")
            assert fn.body is not None
            env = {params[0]: args[0]} if len(params) == 1 else dict(zip(params, args, strict=True))
            return self._evaluate(fn.body, env, fn)
        except (ExpressionError, ResourceLimitError, BudgetExceeded):
            raise
        except RecursionError as err:
            raise ResourceLimitError("expression recursion too deep") from err
        except MemoryError as err:
            raise ResourceLimitError("the process ran out of memory (its OS memory limit) while evaluating an "
                                     "expression; the tree builds too much data") from err
        except Exception as err:  # a wrong type, a missing key, a division by zero: the item's problem
            raise ExpressionError(f"{type(err).__name__}: {err}") from err

    def check_deadline(self) -> None:
        if self.deadline is not None and _time.monotonic() > self.deadline:
            raise BudgetExceeded()

    def check_time_for(self, seconds: float | None, what: str) -> None:
        """Stop now when ``what``, expected to take ``seconds``, would end past the deadline: a step that cannot
        be interrupted (a model batch) would otherwise overrun the budget by its whole length. With
        ``seconds`` None (no estimate yet) only the deadline itself is checked (:func:`~convohub.reqap.engine.
        pace.refuse_past`)."""
        refuse_past(self.deadline, seconds, what)

    def python_callable(self, fn: Function) -> Callable[..., Any]:
        """A plain callable (for sorted(key=...) and the like) that goes through :meth:`call`."""
        return lambda *a: self.call(fn, *a)

    # -- bounds -------------------------------------------------------------------------------------
    def charge(self, nbytes: int, what: str, where: str = "") -> None:
        """Count ``nbytes`` against the question's ``max_alloc`` budget; raise when it is spent.

        Callers charge *before* building a value whenever its size can be estimated, so an over-budget
        value is refused rather than built.
        """
        self.allocated += nbytes
        if self.allocated > self.max_alloc:
            raise MemoryBudgetExceeded(f"values allocated by this question (last: {what})", budget="max_alloc",
                                       limit=self.max_alloc, requested=self.allocated, where=where,
                                       hint=_ALLOC_HINT)

    def _alloc(self, value: Any, node: ast.AST | None = None) -> Any:
        """Check one created value against the per-value caps and charge its size; returns the value."""
        t = type(value)
        if t is int:
            if value.bit_length() > MAX_INT_BITS:
                raise MemoryBudgetExceeded("an integer", budget="max_int_bits", limit=MAX_INT_BITS,
                                           requested=value.bit_length(), unit="bits", where=_where(node),
                                           hint=_SIZE_HINT)
        elif t is str:
            if len(value) > MAX_SEQUENCE:
                raise MemoryBudgetExceeded("a string", budget="max_sequence", limit=MAX_SEQUENCE,
                                           requested=len(value), unit="characters",
                                           where=_where(node), hint=_SIZE_HINT)
        elif isinstance(value, _CONTAINERS) and len(value) > MAX_SEQUENCE:
            raise MemoryBudgetExceeded(f"a {t.__name__}", budget="max_sequence", limit=MAX_SEQUENCE,
                                       requested=len(value), unit="elements", where=_where(node), hint=_SIZE_HINT)
        self.allocated += _sizeof(value)
        if self.allocated > self.max_alloc:
            self.charge(0, f"a {t.__name__} of {_sizeof(value):,} bytes", _where(node))
        return value

    def _alloc_deep(self, value: Any, node: ast.AST | None = None) -> Any:
        """Like :meth:`_alloc` for a container whose elements are new objects too (``split()``, ``items()``)."""
        self._alloc(value, node)
        if isinstance(value, list):
            self.charge(sum(map(_sizeof, value)), "the elements of a new list", _where(node))
        return value

    def _refuse_int(self, bits: int, what: str, node: ast.AST | None) -> None:
        """Refuse (before computing it) an integer result estimated at ``bits`` bits, or charge its size."""
        if bits > MAX_INT_BITS:
            raise MemoryBudgetExceeded(what, budget="max_int_bits", limit=MAX_INT_BITS, requested=bits,
                                       unit="bits", where=_where(node), hint=_SIZE_HINT)
        self.charge(bits // 8, what, _where(node))

    def _refuse_sequence(self, length: int, seq: Any, what: str, node: ast.AST | None) -> None:
        """Refuse (before building it) a string/list/tuple estimated at ``length`` elements, or charge it."""
        if length > MAX_SEQUENCE:
            raise MemoryBudgetExceeded(what, budget="max_sequence", limit=MAX_SEQUENCE, requested=length,
                                       unit="characters" if isinstance(seq, str) else "elements",
                                       where=_where(node), hint=_SIZE_HINT)
        self.charge(length if isinstance(seq, str) else 8 * length, what, _where(node))

    # -- evaluation -------------------------------------------------------------------------------
    def _evaluate(self, node: ast.AST, env: dict[str, Any], fn: Function) -> Any:
        # the hottest function of the engine (every lambda node of every item): the tick is inlined and
        # the handler comes from a per-class table instead of a getattr on a built name
        self._steps += 1
        if self._steps % _CHECK_EVERY == 0:
            self.check_deadline()
        if fn.invariant and id(node) in fn.invariant:  # the same for every item: computed once per question
            memo = self._invariants
            key = id(node)
            if key not in memo:
                memo[key] = _HANDLERS[type(node)](self, node, env, fn)
            return memo[key]
        handler = _HANDLERS.get(type(node))
        if handler is None:  # the checker guarantees this cannot happen; refuse rather than guess
            raise ResourceLimitError(f"unexpected node {type(node).__name__}")
        return handler(self, node, env, fn)

    def _node_Constant(self, node: ast.Constant, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return node.value

    def _node_Name(self, node: ast.Name, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return env[node.id]

    def _node_SubtreeSlot(self, node: SubtreeSlot, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        if self.run_subtree is None:
            raise ExpressionError("nested operator without an executor")
        return self.run_subtree(fn.subtrees[node.index])

    def _node_Subscript(self, node: ast.Subscript, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        target = node.value  # attr["key"]: the receiver is nearly always the lambda's argument
        value = env[target.id] if type(target) is ast.Name else self._evaluate(target, env, fn)
        if isinstance(node.slice, ast.Slice):
            if not isinstance(value, (list, tuple, str)):
                raise ExpressionError(f"cannot slice {type(value).__name__}")
            parts = [self._evaluate(p, env, fn) if p is not None else None
                     for p in (node.slice.lower, node.slice.upper, node.slice.step)]
            if not all(p is None or isinstance(p, int) for p in parts):
                raise ExpressionError("slice bounds must be integers")
            return self._alloc(value[slice(*parts)], node)
        sl = node.slice  # attr["key"] is most of what lambdas do: read a constant key without a dispatch
        key = sl.value if type(sl) is ast.Constant else self._evaluate(sl, env, fn)
        if isinstance(value, Group) and isinstance(key, str):
            return value.keys[key]
        if isinstance(value, dict):
            return value[key]
        if isinstance(value, (list, tuple, str)):
            if not isinstance(key, int) or isinstance(key, bool):
                raise ExpressionError("sequence index must be an integer")
            return value[key]
        raise ExpressionError(f"cannot subscript {type(value).__name__}")

    def _node_Attribute(self, node: ast.Attribute, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        value = self._evaluate(node.value, env, fn)
        names = _ATTRS_BY_TYPE.get(type(value))
        if names is not None and node.attr in names:
            return getattr(value, node.attr)
        for types, names in _TYPE_ATTRS:  # subclasses
            if isinstance(value, types) and node.attr in names:
                return getattr(value, node.attr)
        raise ExpressionError(f"{type(value).__name__} has no attribute {node.attr!r} here")

    def _node_BinOp(self, node: ast.BinOp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        a = self._evaluate(node.left, env, fn)
        b = self._evaluate(node.right, env, fn)
        op = type(node.op)
        # sizes that follow from the operands are refused or charged before the result is computed
        if op is ast.Pow:
            if type(a) is int and type(b) is int and b > 0 and a not in (-1, 0, 1):
                # |a|**b has floor(b * log2|a|) + 1 bits: known to within a bit before computing anything
                self._refuse_int(int(b * math.log2(abs(a))) + 1, "a power", node)
        elif op is ast.Mult:
            if isinstance(a, int) and isinstance(b, int):
                if a.bit_length() + b.bit_length() > 64:
                    self._refuse_int(a.bit_length() + b.bit_length(), "a product", node)
            else:
                for seq, n in ((a, b), (b, a)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and n > 0:
                        self._refuse_sequence(len(seq) * n, seq, "a repetition", node)
        elif op is ast.Add:
            if isinstance(a, (str, list, tuple)) and isinstance(b, (str, list, tuple)):
                self._refuse_sequence(len(a) + len(b), a, "a concatenation", node)
        elif op is ast.Mod and isinstance(a, str):
            raise ExpressionError("%-formatting of strings is not supported")
        return self._alloc(_BINOPS[op](a, b), node)

    def _node_UnaryOp(self, node: ast.UnaryOp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        v = self._evaluate(node.operand, env, fn)
        if isinstance(node.op, ast.Not):
            return not v
        return -v if isinstance(node.op, ast.USub) else +v

    def _node_BoolOp(self, node: ast.BoolOp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        is_and = isinstance(node.op, ast.And)
        v: Any = None
        for sub in node.values:
            v = self._evaluate(sub, env, fn)
            if (not v) if is_and else v:
                return v
        return v

    def _node_Compare(self, node: ast.Compare, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        left = self._evaluate(node.left, env, fn)
        if len(node.ops) == 1:  # the common case: one comparison, often against a literal
            comp = node.comparators[0]
            right = comp.value if type(comp) is ast.Constant else self._evaluate(comp, env, fn)
            return _CMPOPS[type(node.ops[0])](left, right)
        for op, comp in zip(node.ops, node.comparators, strict=False):
            right = self._evaluate(comp, env, fn)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True

    def _node_IfExp(self, node: ast.IfExp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._evaluate(node.body if self._evaluate(node.test, env, fn) else node.orelse, env, fn)

    def _node_List(self, node: ast.List, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc([self._evaluate(e, env, fn) for e in node.elts], node)

    def _node_Tuple(self, node: ast.Tuple, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc(tuple(self._evaluate(e, env, fn) for e in node.elts), node)

    def _node_Set(self, node: ast.Set, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc({self._evaluate(e, env, fn) for e in node.elts}, node)

    def _node_Dict(self, node: ast.Dict, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc({self._evaluate(k, env, fn): self._evaluate(v, env, fn)  # type: ignore[arg-type]
                            for k, v in zip(node.keys, node.values, strict=False)}, node)

    def _node_JoinedStr(self, node: ast.JoinedStr, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        parts = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                value = self._evaluate(v.value, env, fn)
                if v.format_spec is None:
                    parts.append(self._to_str(value))
                elif isinstance(value, (*_SAFE_SCALARS, datetime)):  # the spec is checked and short
                    parts.append(format(value, v.format_spec.values[0].value))  # type: ignore[attr-defined]
                else:
                    raise ExpressionError(f"cannot format {type(value).__name__} with a format spec")
            else:
                parts.append(v.value)  # type: ignore[attr-defined]
        self._refuse_sequence(sum(map(len, parts)), "", "an f-string", node)
        return self._alloc("".join(parts), node)

    def _iterate(self, node: ast.expr, env: dict[str, Any], fn: Function, level: int = 0
                 ) -> Iterable[dict[str, Any]]:
        """The environments of a comprehension's items, clause by clause (each loop bounded)."""
        gens = node.generators  # type: ignore[attr-defined]
        for inner in self._clause(gens[level], env, fn):
            if level + 1 == len(gens):
                yield inner
            else:
                yield from self._iterate(node, inner, fn, level + 1)

    def _clause(self, gen: ast.comprehension, env: dict[str, Any], fn: Function) -> Iterable[dict[str, Any]]:
        source = self._evaluate(gen.iter, env, fn)
        if not isinstance(source, (list, tuple, set, frozenset, dict, str)):
            raise ExpressionError(f"cannot iterate over {type(source).__name__}")
        for n, item in enumerate(source):
            if n >= MAX_COMPREHENSION:
                raise ResourceLimitError(f"comprehension over more than {MAX_COMPREHENSION} items")
            inner = dict(env)
            if isinstance(gen.target, ast.Name):
                inner[gen.target.id] = item
            else:
                values = list(item) if isinstance(item, (list, tuple)) else None
                if values is None or len(values) != len(gen.target.elts):
                    raise ExpressionError("cannot unpack comprehension item")
                for t, v in zip(gen.target.elts, values, strict=False):
                    inner[t.id] = v
            if all(self._evaluate(cond, inner, fn) for cond in gen.ifs):
                yield inner

    def _node_ListComp(self, node: ast.ListComp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc([self._evaluate(node.elt, e, fn) for e in self._iterate(node, env, fn)], node)

    def _node_SetComp(self, node: ast.SetComp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc({self._evaluate(node.elt, e, fn) for e in self._iterate(node, env, fn)}, node)

    def _node_GeneratorExp(self, node: ast.GeneratorExp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        # materialised: the only consumers are whitelisted functions, and this keeps errors inside call()
        return self._alloc([self._evaluate(node.elt, e, fn) for e in self._iterate(node, env, fn)], node)

    def _node_DictComp(self, node: ast.DictComp, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        return self._alloc({self._evaluate(node.key, e, fn): self._evaluate(node.value, e, fn)
                            for e in self._iterate(node, env, fn)}, node)

    def _node_Call(self, node: ast.Call, env: dict[str, Any], fn: Function) -> Any:  # noqa: N802
        args = [self._evaluate(a, env, fn) for a in node.args]
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg == "key":
                kwargs["key"] = self._key_callable(kw.value, env, fn)
            else:
                kwargs[kw.arg] = self._evaluate(kw.value, env, fn)  # type: ignore[index]
        func = node.func
        if isinstance(func, ast.Name):
            return self._alloc(self._call_function(func.id, args, kwargs), node)
        assert isinstance(func, ast.Attribute)
        if isinstance(func.value, ast.Name) and func.value.id in NAMESPACES and func.value.id not in env:
            return self._alloc(self._class_method(func.value.id, func.attr, args, kwargs), node)
        receiver = self._evaluate(func.value, env, fn)
        value = self._method(receiver, func.attr, args, kwargs, node)
        if func.attr in _NEW_ELEMENTS:  # split() and items() build new strings / tuples, not just slots
            return self._alloc_deep(value, node)
        return self._alloc(value, node)

    def _key_callable(self, node: ast.expr, env: dict[str, Any], fn: Function) -> Callable[[Any], Any]:
        if isinstance(node, ast.Name):
            return lambda v: self._call_function(node.id, [v], {})
        assert isinstance(node, ast.Lambda)
        name = node.args.args[0].arg
        return lambda v: self._evaluate(node.body, {**env, name: v}, fn)

    # -- whitelisted callables -----------------------------------------------------------------------
    def _to_str(self, value: Any) -> str:
        if isinstance(value, _SAFE_SCALARS):
            return str(value)
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            size = _deep_size(value, MAX_SEQUENCE)
            if size > MAX_SEQUENCE:
                raise MemoryBudgetExceeded("str() of a structure", budget="max_sequence", limit=MAX_SEQUENCE,
                                           requested=size, unit="elements and characters", hint=_SIZE_HINT)
            return str(value)
        raise ExpressionError(f"cannot convert {type(value).__name__} to str")

    def _call_function(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if name == "str":
            if kwargs or len(args) > 1:
                raise ExpressionError("str() takes one argument")
            return self._to_str(args[0]) if args else ""
        if name in ("list", "set", "tuple", "sorted") and args \
                and not isinstance(args[0], (list, tuple, set, frozenset, dict, str)):
            raise ExpressionError(f"{name}() needs a list, set, dict or string")
        if name == "sum":
            if len(args) == 2 and not isinstance(args[1], (int, float, timedelta)):
                raise ExpressionError("sum() start must be a number or timedelta")
            items = args[0] if args else []
            if not isinstance(items, (list, tuple, set, frozenset)):
                raise ExpressionError("sum() needs a list")
            start = args[1] if len(args) == 2 else (timedelta(0) if items and all(
                isinstance(i, timedelta) for i in items) else 0)
            return sum(items, start)
        if name == "round":
            if len(args) == 2 and (not isinstance(args[1], int) or abs(args[1]) > 100):
                raise ExpressionError("round() ndigits must be an integer in [-100, 100]")
            return round(*args)
        if name == "int" and len(args) > 1:
            raise ExpressionError("int() takes one argument")
        if name == "relativedelta":
            return _relativedelta(*args, **kwargs)
        if name in _SEQUENCE_FUNCTIONS:
            return self._sequence_function(name, args, kwargs)
        if name == "divmod":
            if len(args) != 2 or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
                raise ExpressionError("divmod() takes two numbers")
            return divmod(args[0], args[1])
        if name in ("timedelta", "date", "time", "datetime"):
            for v in list(args) + list(kwargs.values()):
                if not isinstance(v, (int, float)) or isinstance(v, bool) or abs(v) > 10**9:
                    raise ExpressionError(f"{name}() takes numbers only")
        if name not in _BUILTINS:
            raise ExpressionError(f"unknown function {name}")
        for a in args:
            if callable(a) and not isinstance(a, type):
                raise ExpressionError("functions cannot be passed as values")
        return _BUILTINS[name](*args, **kwargs)

    def _class_method(self, cls: str, name: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> Any:
        if cls == "json":
            return self._json(name, args, kwargs or {})
        if (cls, name) == ("date", "today"):
            return self.reference_date
        if (cls, name) in (("datetime", "now"), ("datetime", "today")):
            return datetime.combine(self.reference_date, time(0, 0))
        if name == "fromisoformat":
            if len(args) != 1 or not isinstance(args[0], str) or len(args[0]) > 64:
                raise ExpressionError(f"{cls}.fromisoformat() takes one short string")
            return {"date": date, "time": time, "datetime": datetime}[cls].fromisoformat(args[0])
        if name == "fromtimestamp":
            if len(args) != 1 or not isinstance(args[0], (int, float)) or isinstance(args[0], bool):
                raise ExpressionError(f"{cls}.fromtimestamp() takes one number")
            moment = _from_timestamp(args[0])
            return moment.date() if cls == "date" else moment
        if name == "strptime":
            if len(args) != 2 or not all(isinstance(a, str) for a in args) or len(args[0]) > 64 \
                    or len(args[1]) > 100:
                raise ExpressionError("datetime.strptime() takes a short string and a short format")
            return datetime.strptime(args[0], args[1])
        if name == "combine":
            if len(args) != 2 or not isinstance(args[0], date) or not isinstance(args[1], time):
                raise ExpressionError("datetime.combine() takes a date and a time")
            return datetime.combine(args[0], args[1])
        raise ExpressionError(f"{cls}.{name}() is not supported")

    def _sequence_function(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        """``range``/``zip``/``enumerate``/``reversed`` as lists, refused before they are built when too long."""
        if name == "range":
            if kwargs or not 1 <= len(args) <= 3 or not all(type(a) is int for a in args):
                raise ExpressionError("range() takes one to three integers")
            numbers = range(*args)
            self._refuse_sequence(len(numbers), [], "a range()", None)
            return list(numbers)
        if not args or not all(isinstance(a, (list, tuple, set, frozenset, dict, str)) for a in args):
            raise ExpressionError(f"{name}() takes lists, sets, dicts or strings")
        if name == "zip":
            self._refuse_sequence(min(len(a) for a in args) * (len(args) + 1), [], "a zip()", None)
            return list(zip(*args, strict=False))
        if len(args) != 1:
            raise ExpressionError(f"{name}() takes one list")
        self._refuse_sequence(3 * len(args[0]), [], f"an {name}()", None)
        if name == "reversed":
            if isinstance(args[0], (set, frozenset, dict)):
                raise ExpressionError("reversed() needs a list or a string")
            return list(reversed(args[0]))
        start = kwargs.get("start", 0)
        if type(start) is not int:
            raise ExpressionError("enumerate(start=...) must be an integer")
        return list(enumerate(args[0], start))

    def _json(self, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """``json.loads`` of a bounded string (its value charged element by element) / ``json.dumps``."""
        if len(args) != 1:
            raise ExpressionError(f"json.{name}() takes one argument")
        if name == "loads":
            if not isinstance(args[0], str) or len(args[0]) > MAX_SEQUENCE:
                raise ExpressionError("json.loads() takes a string")
            value = json.loads(args[0])
            self.charge(8 * _deep_size(value, MAX_SEQUENCE), "the elements of a json.loads() value")
            return value
        text = self._to_str(args[0])  # bounds the structure's size before it is serialised
        self._refuse_sequence(2 * len(text), "", "a json.dumps() result", None)
        return json.dumps(args[0], ensure_ascii=False, default=str, sort_keys=bool(kwargs.get("sort_keys")))

    def _method(self, receiver: Any, name: str, args: list[Any], kwargs: dict[str, Any],
                node: ast.AST | None = None) -> Any:
        if isinstance(receiver, (dict, Group)) and name in ("get", "keys", "values", "items"):
            d = receiver.keys if isinstance(receiver, Group) else receiver
            if name == "get":
                if kwargs or not 1 <= len(args) <= 2:
                    raise ExpressionError("get() takes a key and an optional default")
                return d.get(*args)
            if args or kwargs:
                raise ExpressionError(f"{name}() takes no arguments")
            return list(getattr(d, name)())
        for types, names in _TYPE_METHODS:
            if isinstance(receiver, types) and name in names:
                break
        else:
            raise ExpressionError(f"{type(receiver).__name__} has no method {name!r} here")
        if isinstance(receiver, str):
            if name == "replace":
                if len(args) < 2 or not all(isinstance(a, str) for a in args[:2]):
                    raise ExpressionError("replace() takes two strings")
                hits = receiver.count(args[0]) if args[0] else len(receiver) + 1
                self._refuse_sequence(len(receiver) + hits * len(args[1]), receiver, "a replace() result",
                                      node)
            if name == "zfill":
                if len(args) != 1 or not isinstance(args[0], int) or isinstance(args[0], bool):
                    raise ExpressionError("zfill() takes one integer")
                self._refuse_sequence(max(len(receiver), args[0]), receiver, "a zfill() result", node)
            if name == "join":
                items = args[0] if args else None
                if not isinstance(items, (list, tuple, set)) or not all(isinstance(i, str) for i in items):
                    raise ExpressionError("join() takes a list of strings")
                self._refuse_sequence(sum(len(i) for i in items) + len(receiver) * len(items), receiver,
                                      "a join() result", node or ast.Constant(None))
        if name == "strftime" and (len(args) != 1 or not isinstance(args[0], str) or len(args[0]) > 100):
            raise ExpressionError("strftime() takes one short format string")
        return getattr(receiver, name)(*args, **kwargs)


#: AST node class -> Evaluator handler (``_node_<ClassName>``), built once instead of a getattr per node.
_HANDLERS: dict[type, Callable[[Evaluator, Any, dict[str, Any], Function], Any]] = {
    (SubtreeSlot if name == "_node_SubtreeSlot" else getattr(ast, name[len("_node_"):])): handler
    for name, handler in vars(Evaluator).items() if name.startswith("_node_")
}
#: The plain builtins behind whitelisted function names (checked arguments first, see _call_function).
_BUILTINS: dict[str, Callable[..., Any]] = {
    "len": len, "min": min, "max": max, "sorted": sorted, "abs": abs, "int": int, "float": float,
    "bool": bool, "any": any, "all": all, "set": set, "list": list, "tuple": tuple, "date": date,
    "time": time, "datetime": datetime, "timedelta": timedelta,
}


#: Methods whose result holds objects created by the call itself (charged element by element).
_NEW_ELEMENTS = frozenset({"split", "rsplit", "splitlines", "items", "partition", "rpartition"})
#: Builtins that return a new list (bounded in :meth:`Evaluator._sequence_function`).
_SEQUENCE_FUNCTIONS = frozenset({"range", "zip", "enumerate", "reversed"})


def _where(node: ast.AST | None) -> str:
    """The expression node an error is about, as :func:`describe_node` prints it ('' when unknown)."""
    return describe_node(node, None) if node is not None and hasattr(node, "lineno") else ""


def _from_timestamp(value: float) -> datetime:
    """``datetime.fromtimestamp`` without the machine's timezone (UTC, naive), so results are stable."""
    from datetime import timezone

    if not math.isfinite(value):
        raise ValueError("timestamp is not finite")
    return datetime.fromtimestamp(value, tz=timezone.utc).replace(tzinfo=None)


def _deep_size(value: Any, cap: int) -> int:
    """Number of elements reachable (with repetition), stopping early once above ``cap``."""
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        total += 1
        if total > cap:
            return total
        if isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, str):
            total += len(v)
    return total
