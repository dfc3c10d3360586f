"""The operators' semantics (spec: ReQAP "Operator semantics"), one function each.

Each function receives the executed list arguments and the literal arguments of its node plus an
:class:`OperatorContext`. Input events are never modified (the executor caches subtree results and
shares them), so every operator that adds keys works on copies.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convohub.reqap.engine.convert import convert
from convohub.reqap.engine.errors import ExecutionError, ExpressionError
from convohub.reqap.engine.events import EventStore, deduplicate
from convohub.reqap.engine.expr import Function
from convohub.reqap.engine.interpreter import Evaluator, Group
from convohub.reqap.engine.join import MAX_JOIN_OUTPUT, join, safe_test
from convohub.reqap.engine.protocols import Extractor, Retriever

__all__ = ["IMPLEMENTATIONS", "OperatorContext"]


@dataclass
class OperatorContext:
    """What operators need beyond their arguments."""

    store: EventStore
    retriever: Retriever
    extractor: Extractor
    evaluator: Evaluator
    dedup: bool = True
    join_strategy: str = "auto"
    last_join_strategy: str | None = None
    max_join_output: int = MAX_JOIN_OUTPUT


def _extracted(ctx: OperatorContext, events: list[dict[str, Any]], name: str) -> list[Any]:
    """The extractor's values of ``name`` for ``events``. It gets the question's time check: a model extractor
    starts no batch that would end past the deadline, and only it knows which events need the model (the
    frozen-mapping rule answers the rest by key), so the pacing is its own."""
    return ctx.extractor.extract(events, name, check_time=ctx.evaluator.check_time_for)


def _items(value: Any, op: str) -> list[Any]:
    if not isinstance(value, list):
        raise ExecutionError(f"{op} needs a list input, got {type(value).__name__}")
    return value


def _get(item: Any, name: str) -> Any:
    """A key of an event or of a group (its grouping values and MAP results)."""
    if isinstance(item, Group):
        return item.keys.get(name)
    if isinstance(item, dict):
        return item.get(name)
    raise ExecutionError(f"cannot read {name!r} from a {type(item).__name__}")


def retrieve(ctx: OperatorContext, query: str, l: list[Any] | None = None) -> list[dict[str, Any]]:  # noqa: E741
    """Events matching ``query`` (typed; no start date -> dropped; de-duplicated by time span).

    With ``l``, only events of ``l`` that the retriever also returns are kept (their extra keys stay).
    """
    ids = ctx.retriever.retrieve(query, ctx.store, check_time=ctx.evaluator.check_time_for)
    if l is not None:
        wanted = set(ids)
        return [e for e in _items(l, "RETRIEVE") if isinstance(e, dict)
                and (e.get("id") in wanted or any(i in wanted for i in e.get("merged_ids", ())))]
    events = ctx.store.typed_many(ids)
    return deduplicate(events) if ctx.dedup else events


def extract(ctx: OperatorContext, l: list[Any], attr_names: tuple[str, ...],  # noqa: E741
            attr_types: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Each event with the requested keys added (converted); events missing any of them are dropped.

    Names past the end of a shorter ``attr_types`` list keep the extracted value as it is (no conversion).
    """
    events = _items(l, "EXTRACT")
    if not all(isinstance(e, dict) for e in events):
        raise ExecutionError("EXTRACT needs a list of events")
    given = tuple(attr_types or ())
    types = given + (None,) * (len(attr_names) - len(given))
    columns = [[convert(v, t) for v in _extracted(ctx, events, name)]
               for name, t in zip(attr_names, types, strict=True)]
    out = []
    # an event that already holds the exact values (EXTRACT of a typed span, of an existing key) is passed
    # on as it is; otherwise a copy gets them (inputs are shared through the subtree cache)
    if len(attr_names) == 1:
        name = attr_names[0]
        for e, v in zip(events, columns[0], strict=True):
            if v is not None:
                out.append(e if e.get(name) is v else {**e, name: v})
        return out
    for n, e in enumerate(events):
        values = [c[n] for c in columns]
        if None in values:  # extracted values are None, strings, numbers, dates, lists: == is plain
            continue
        same = True
        for k, v in zip(attr_names, values, strict=True):
            if e.get(k) is not v:
                same = False
                break
        out.append(e if same else {**e, **dict(zip(attr_names, values, strict=True))})
    return out


def filter_(ctx: OperatorContext, l: list[Any], filter: Function) -> list[Any]:  # noqa: E741, A002
    """Items for which the lambda is truthy; an item whose lambda raises is dropped."""
    out = []
    for item in _items(l, "FILTER"):
        try:
            if ctx.evaluator.call(filter, item):
                out.append(item)
        except ExpressionError:
            continue
    return out


def join_(ctx: OperatorContext, l1: list[Any], l2: list[Any], condition: Function) -> list[dict[str, Any]]:
    """Merged pairs satisfying the condition (l2 wins key collisions)."""
    a, b = _items(l1, "JOIN"), _items(l2, "JOIN")
    if not all(isinstance(e, dict) for e in a + b):
        raise ExecutionError("JOIN needs two lists of events")
    test = safe_test(lambda x, y: ctx.evaluator.call(condition, x, y))
    out, used = join(a, b, condition, test, ctx.join_strategy, tick=ctx.evaluator.check_deadline,
                     max_output=ctx.max_join_output, charge=ctx.evaluator.charge)
    ctx.last_join_strategy = used
    return out


def group_by(ctx: OperatorContext, l: list[Any], attr_names: tuple[str, ...]) -> list[Group]:  # noqa: E741
    """Partitions by the str() of the grouping values, in order of first appearance.

    Events lacking a grouping key (or holding None) are left out, as their group would be meaningless
    for the "which X the most" questions GROUP_BY serves.
    """
    groups: dict[tuple[str, ...], list[Any]] = {}
    for e in _items(l, "GROUP_BY"):
        values = [_get(e, k) for k in attr_names]
        if any(v is None for v in values):
            continue
        groups.setdefault(tuple(_key_str(v) for v in values), []).append(e)
    return [Group(events, dict(zip(attr_names, key, strict=False))) for key, events in groups.items()]


def _key_str(value: Any) -> str:
    from datetime import date, time

    return value.isoformat() if isinstance(value, (date, time)) else str(value)


def map_(ctx: OperatorContext, l: list[Any], fct: Function, res_name: str | None = None) -> list[Any]:  # noqa: E741
    """``fct`` per item: stored under ``res_name`` (a copy of the event/group), or the bare values.

    An item whose function raises gets None.
    """
    out: list[Any] = []
    for item in _items(l, "MAP"):
        try:
            value = ctx.evaluator.call(fct, item)
        except ExpressionError:
            value = None
        if res_name is None:
            out.append(value)
        elif isinstance(item, Group):
            out.append(item.with_key(res_name, value))
        elif isinstance(item, dict):
            out.append({**item, res_name: value})
        else:
            out.append({"value": item, res_name: value})
    return out


def apply(ctx: OperatorContext, l: list[Any], fct: Function) -> Any:  # noqa: E741
    """``fct`` on the whole list (a scalar); a raising function fails the operator."""
    items = _items(l, "APPLY")
    try:
        return ctx.evaluator.call(fct, items)
    except ExpressionError as err:
        raise ExecutionError(f"APPLY failed: {err}") from err


def unnest(ctx: OperatorContext, l: list[Any], nested_attr_name: str,  # noqa: E741
           unnested_attr_name: str | None = None) -> list[dict[str, Any]]:
    """One event per element of the list under ``nested_attr_name`` (a scalar counts as a 1-list;
    None or an empty list yields nothing)."""
    target = unnested_attr_name or nested_attr_name
    out = []
    for e in _items(l, "UNNEST"):
        if not isinstance(e, dict):
            raise ExecutionError("UNNEST needs a list of events")
        value = e.get(nested_attr_name)
        if value is None:
            continue
        elements = convert(value, "list") if isinstance(value, str) and value.strip().startswith("[") else value
        if not isinstance(elements, (list, tuple, set)):
            elements = [elements]
        if len(elements) > 1:  # one copy of the event per element: charged before they are made
            ctx.evaluator.charge(len(elements) * (sys.getsizeof(e) + 8), f"UNNEST of {len(elements):,} elements")
        out.extend({**e, target: v} for v in elements)
    return out


def _values(items: list[Any], attr_name: str, op: str) -> list[Any]:
    return [v for v in (_get(i, attr_name) for i in _items(items, op)) if v is not None]


def _aggregate(fn: Callable[[list[Any]], Any], op: str) -> Callable[..., Any]:
    def run(ctx: OperatorContext, l: list[Any], attr_name: str) -> Any:  # noqa: E741
        values = _values(l, attr_name, op)
        if not values:
            return 0
        try:
            return fn(values)
        except TypeError as err:
            raise ExecutionError(f"{op} over values of mixed or non-numeric types: {err}") from err

    run.__doc__ = f"{op} of ``attr_name`` over the items, None skipped; empty -> 0."
    return run


def _sum(values: list[Any]) -> Any:
    from datetime import timedelta

    return sum(values, timedelta(0)) if all(isinstance(v, timedelta) for v in values) else sum(values)


def _avg(values: list[Any]) -> Any:
    return _sum(values) / len(values)


def _arg(best: Callable[..., Any], op: str) -> Callable[..., Any]:
    def run(ctx: OperatorContext, l: list[Any], arg_attr_name: str,  # noqa: E741
            val_attr_name: str | None = None) -> list[Any]:
        items = [i for i in _items(l, op) if _get(i, arg_attr_name) is not None]
        if not items:
            return []
        try:
            target = best(_get(i, arg_attr_name) for i in items)
        except TypeError as err:
            raise ExecutionError(f"{op} over values that cannot be compared: {err}") from err
        tied = [i for i in items if _get(i, arg_attr_name) == target]
        if val_attr_name is None:
            return tied
        out: list[Any] = []
        for i in tied:
            v = _get(i, val_attr_name)
            if v not in out:
                out.append(v)
        return out

    run.__doc__ = f"{op}: the ``val_attr_name`` values (or items) of all items tied on the best ``arg_attr_name``."
    return run


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "RETRIEVE": retrieve, "EXTRACT": extract, "FILTER": filter_, "JOIN": join_, "GROUP_BY": group_by,
    "MAP": map_, "APPLY": apply, "UNNEST": unnest,
    "SUM": _aggregate(_sum, "SUM"), "AVG": _aggregate(_avg, "AVG"), "MIN": _aggregate(min, "MIN"),
    "MAX": _aggregate(max, "MAX"), "ARGMIN": _arg(min, "ARGMIN"), "ARGMAX": _arg(max, "ARGMAX"),
}
