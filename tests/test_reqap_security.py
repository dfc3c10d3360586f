"""Hostile operator trees: every one is rejected at parse time and nothing is executed.

The retriever records its calls; a rejected tree must leave it untouched. A second group passes the
static check but hits a run-time bound (sizes, allocation, time) and must fail cleanly and quickly.
"""

from __future__ import annotations

import ast
import time
from datetime import date
from pathlib import Path

import pytest

from convohub.reqap import EventStore, Executor, OracleRetriever, TreeSyntaxError, parse_tree
from convohub.reqap.engine.errors import ResourceLimitError
from convohub.reqap.engine.expr import validate_function
from convohub.reqap.engine.interpreter import Evaluator

R = 'RETRIEVE(query="x")'


def _filter(body: str) -> str:
    return f"FILTER(l={R}, filter=lambda attr: {body})"


def _apply(fct: str) -> str:
    return f"APPLY(l={R}, fct={fct})"


HOSTILE = {
    "import_call": '__import__("os").system("id")',
    "import_in_query": 'RETRIEVE(query=__import__("os").system("id"))',
    "import_in_lambda": _filter('__import__("os").system("id")'),
    "class_bases": _filter("().__class__.__bases__[0].__subclasses__()"),
    "dunder_on_event": _filter("attr.__class__"),
    "dunder_method": _filter('attr["x"].__len__()'),
    "int_dunder": _filter("(1).__class__"),
    "getattr": _filter('getattr(attr, "__class__")'),
    "open": _filter('open("/etc/passwd").read()'),
    "eval_name": _filter('eval("1+1")'),
    "exec_name": _filter('exec("x=1")'),
    "globals": _filter("globals()"),
    "type_call": _filter("type(attr)"),
    "unknown_function": _filter("print(attr)"),
    "unknown_module": _filter('os.system("id")'),
    "lambda_default": f'FILTER(l={R}, filter=lambda attr, f=print: f(attr))',
    "lambda_default_single": f"FILTER(l={R}, filter=lambda attr=open: attr)",
    "lambda_varargs": f"FILTER(l={R}, filter=lambda *a: a)",
    "lambda_kwargs": f"FILTER(l={R}, filter=lambda **k: k)",
    "lambda_kwonly": f"FILTER(l={R}, filter=lambda *, a: a)",
    "nested_lambda_returned": _filter("lambda y: y"),
    "nested_lambda_in_body": _filter("(lambda: 1)()"),
    "lambda_as_value": _filter("[lambda: 1]"),
    "function_as_value": _filter("len"),
    "method_as_value": _filter('attr["x"].lower'),
    "four_generators": _filter("[w for x in attr for y in x for z in y for w in z]"),
    "range_as_value": _filter("range"),
    "zip_strict_keyword": _filter("zip(attr, attr, strict=True)"),
    "json_load_file": _filter('json.load(open("/etc/passwd"))'),
    "json_as_value": _filter("json"),
    "fstring_nested_spec": _filter('f"{attr:{attr}}"'),
    "fstring_long_precision": _filter('f"{1.5:.1000f}"'),
    "async_comprehension": _filter("[x async for x in attr]"),
    "pow_tower": _filter("9**9**9"),
    "pow_big_exponent": _filter('attr["x"] ** 100000'),
    "repeat_string": _filter('"a"*10**9'),
    "repeat_list": _filter("[0]*10**8"),
    "repeat_reversed": _filter('10**9 * "a"'),
    "shift": _filter("1 << 10**9"),
    "walrus": _filter("(x := 1)"),
    "fstring_format_spec": _filter('f"{attr:>1000000000}"'),
    "fstring_repr": _filter('f"{attr!r}"'),
    "starred_list": _filter("[*attr]"),
    "dict_unpack": _filter("{**attr}"),
    "starred_call": _filter("len(*attr)"),
    "kwargs_call": _filter("sorted(attr, **{'key': 1})"),
    "bytes_literal": _filter('b"x"'),
    "await": _filter("await attr"),
    "yield": _filter("(yield 1)"),
    "class_method_not_whitelisted": _filter("datetime.utcnow()"),
    "class_method_private": _filter('datetime.strptime.__call__("1", "%d")'),
    "isocalendar_dunder": _filter('attr["d"].isocalendar().__class__'),
    "bad_attr_type_string": f'EXTRACT(l={R}, attr_names=["a"], attr_types=["os.system"])',
    "class_subclasses": _filter("date.__subclasses__()"),
    "str_method_via_class": _filter('str.join("", attr)'),
    "format_method": _filter('"{0.__class__}".format(attr)'),
    "bound_method_self": _filter("attr.get.__self__"),
    "private_binding": f"FILTER(l={R}, filter=lambda __builtins__: 1)",
    "shadow_builtin": f"FILTER(l={R}, filter=lambda len: len)",
    "call_bound_name": _filter("attr()"),
    "sorted_key_print": _apply("lambda l: sorted(l, key=print)"),
    "sorted_bad_keyword": _apply("lambda l: sorted(l, cmp=1)"),
    "fct_print": _apply("print"),
    "fct_eval": _apply("eval"),
    "unknown_operator": 'SYSTEM(query="x")',
    "unknown_argument": 'RETRIEVE(query="x", evil=1)',
    "kwargs_operator": 'RETRIEVE(**{"query": "x"})',
    "query_not_literal": 'RETRIEVE(query="a" + "b")',
    "bad_attr_type": f'EXTRACT(l={R}, attr_names=["a"], attr_types=[os.system])',
    "join_condition_import": f"JOIN(l1={R}, l2={R}, condition=\"__import__('os').system('id')\")",
    "join_condition_dunder": f'JOIN(l1={R}, l2={R}, condition="i1.__class__ == i2")',
    "join_condition_nested_op": f"JOIN(l1={R}, l2={R}, condition='i1.x == RETRIEVE(query=\"y\")')",
    "statement": 'RETRIEVE(query="x"); import os',
    "not_an_operator": '"just a string"',
    "deep_nesting": _filter("(" * 200 + "1" + ")" * 200),
    "deep_unary": _filter("-" * 5000 + "1"),
    "huge_tree": "RETRIEVE(query=\"" + "x" * 200_000 + "\")",
    "subtree_in_attr_type": f'EXTRACT(l={R}, attr_names=["a"], attr_types=[RETRIEVE(query="y")])',
    "lambda_wrong_arity": f"FILTER(l={R}, filter=lambda a, b: a)",
    "matmul": _filter("attr @ attr"),
}


@pytest.fixture(scope="module")
def store() -> EventStore:
    return EventStore.from_records([{"id": "1", "start_date": "2024-11-01", "event_type": "calendar",
                                     "event_data": {"summary": "x"}}])


def test_hostile_suite_is_large() -> None:
    assert len(HOSTILE) >= 30


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_tree_is_rejected_and_nothing_runs(name: str, store: EventStore) -> None:
    tree = HOSTILE[name]
    with pytest.raises(TreeSyntaxError):
        parse_tree(tree)
    oracle = OracleRetriever({"x": ["1"], "y": ["1"]})
    result = Executor(store, oracle).execute(tree)
    assert result.error is not None and result.error.startswith("TreeSyntaxError")
    assert result.answer is None and result.trace == []
    assert oracle.calls == []


def test_error_names_node_type_position_and_snippet() -> None:
    with pytest.raises(TreeSyntaxError) as info:
        parse_tree(_filter('open("/etc/passwd")'))
    err = info.value
    assert err.node_type == "Call" and err.lineno == 1 and err.col_offset is not None
    assert "open" in str(err) and "line 1" in str(err)
    with pytest.raises(TreeSyntaxError, match=r"Attribute .*__class__"):
        parse_tree(_filter("attr.__class__"))


def test_no_eval_or_exec_in_the_engine() -> None:
    src = Path(__file__).parents[1] / "src" / "convohub" / "reqap"
    paths = sorted(src.rglob("*.py"))
    assert {"executor.py", "interpreter.py", "operators.py"} <= {p.name for p in paths}  # the engine is scanned
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # re.compile is fine
        assert not names & {"eval", "exec", "compile", "__import__"}, path
        # ``model.eval()`` (torch's inference mode) is fine in the components; the engine has no model
        banned = {"eval", "exec", "__import__"} if path.parent.name == "engine" else {"exec", "__import__"}
        assert not attrs & banned, path


# -- run-time bounds: trees that pass the static check ---------------------------------------------------

RUNTIME = {
    "dynamic_power": _apply("lambda l: (len(l) + 10) ** (len(l) * 100000)"),
    "dynamic_repeat": _apply('lambda l: "ab" * (len(l) * 10**6)'),
    "dynamic_concat": _apply("lambda l: [0] * 100000 + [1] * (len(l) * 999999)"),
    "sum_of_lists": _apply("lambda l: sum([[1] * 100000] * 100000, [])"),
    "replace_blowup": _apply('lambda l: ("x" * 100000).replace("", "yyyyyyyyyy")'),
    "join_blowup": _apply('lambda l: "-".join(["x" * 100000] * 100000)'),
    "str_of_aliased": _apply("lambda l: str([[0] * 100000] * 100000)"),
    "round_huge_digits": _apply("lambda l: round(5, -10**9)"),
    "percent_format": _apply('lambda l: "%999999999s" % "a"'),
    "big_comprehension": _apply("lambda l: len([x for x in [0] * 100000 + [1] * 100000 + [2] * 100000])"),
    "range_in_comprehension": _apply("lambda l: [x for x in range(10**9)]"),
    "range_huge": _apply("lambda l: len(range(10**12))"),
    "nested_generators": _apply('lambda l: len(["x" * 10000 for a in [0] * 1000 for b in [0] * 1000 for c in l])'),
    "zfill_huge": _apply('lambda l: "7".zfill(10**9)'),
    "json_nested_deep": _apply('lambda l: json.loads("[" * 90000 + "]" * 90000)'),
    "strptime_long": _apply('lambda l: datetime.strptime("1" * 100000, "%Y")'),
    "format_repeat": _apply('lambda l: f"{len(l):>99}" * 10**5'),
}


@pytest.mark.parametrize("name", sorted(RUNTIME))
def test_runtime_bounds_fail_cleanly(name: str, store: EventStore) -> None:
    started = time.monotonic()
    result = Executor(store, OracleRetriever({"x": ["1"]}), time_budget=10).execute(RUNTIME[name])
    assert result.answer is None and result.error is not None
    assert result.error.split(":")[0] in ("MemoryBudgetExceeded", "ResourceLimitError", "ExecutionError",
                                          "TimeoutError")
    assert time.monotonic() - started < 5


def test_allocation_budget_per_question() -> None:
    node = parse_tree(_apply('lambda l: len([("x" * (len(l) + 99999)) for i in [0] * 100000])'))
    fn = node.args["fct"]
    ev = Evaluator(date(2024, 11, 25), max_alloc=10_000_000)
    with pytest.raises(ResourceLimitError, match="allocated"):
        ev.call(fn, [1])


def test_condition_string_attribute_means_key() -> None:
    fn = validate_function(ast.parse('"i1.start_date < i2.start_date"', mode="eval").body, "", 2, lambda n: n,
                           allow_condition_string=True)
    ev = Evaluator(date(2024, 11, 25))
    assert ev.call(fn, {"start_date": 1}, {"start_date": 2}) is True
    # dict methods stay methods; nothing else of the event object is reachable
    fn2 = validate_function(ast.parse('"i1.get(\'a\') == i2.a"', mode="eval").body, "", 2, lambda n: n,
                            allow_condition_string=True)
    assert ev.call(fn2, {"a": 1}, {"a": 1}) is True
