"""The whitelisted expression language of FILTER/MAP/APPLY lambdas and JOIN conditions.

The authors run these lambdas with Python's ``eval`` and unrestricted globals; an operator tree comes from
an LLM, so convohub treats it as untrusted input. A lambda is parsed with :mod:`ast` (parsing only) and
checked here node by node against a whitelist; :mod:`convohub.reqap.engine.interpreter` then interprets the checked
AST itself. Nothing is ever compiled to code.

Checked statically (the tree is rejected before anything runs):

* node types: literals (numbers, strings, lists, tuples, sets, dicts), names bound by the lambda or a
  comprehension, ``attr["k"]`` subscripts and slices, arithmetic (no shifts, no ``@``, no ``~``), boolean
  logic, (chained) comparisons incl. ``in``/``not in``/``is``, conditional expressions, f-strings (constant
  format specs only), comprehensions (list/set/dict/generator) with up to :data:`MAX_GENERATORS` clauses;
* calls only to :data:`FUNCTIONS`, to the class methods in :data:`CLASS_METHODS` (on ``date``, ``time``,
  ``datetime`` and ``json``, the names the authors' engine evaluates lambdas with), and to the methods in
  :data:`METHODS`; attributes only from :data:`DATA_ATTRIBUTES` (anything starting with ``_`` is refused);
* lambdas only as the function argument of an operator or as ``key=`` of sorted/min/max, never with
  defaults, ``*args``, keyword-only arguments or a lambda body;
* constant powers and repetitions whose size is known statically (``9**9**9``, ``"a"*10**9``).

Everything the static check cannot see (sizes of runtime values, the time budget) is bounded by the
evaluator.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from convohub.reqap.engine.errors import TreeSyntaxError

__all__ = [
    "CLASS_METHODS", "DATA_ATTRIBUTES", "FUNCTIONS", "Function", "METHODS", "SubtreeSlot",
    "validate_function"
]

#: Callable names (plain calls). ``date``/``time``/``datetime``/``timedelta``/``relativedelta`` are
#: constructors (``relativedelta(d1, d2)`` is also the difference of two dates); everything else is the
#: builtin of that name, restricted by the evaluator (``range``/``zip``/``enumerate``/``reversed`` return
#: bounded lists).
FUNCTIONS: frozenset[str] = frozenset({
    "len", "min", "max", "sum", "sorted", "abs", "round", "int", "float", "str", "bool", "any", "all",
    "set", "list", "tuple", "date", "time", "datetime", "timedelta", "relativedelta", "range", "zip",
    "enumerate", "reversed", "divmod",
})
#: Functions that may be passed by name (``fct=len``, ``key=len``) rather than called.
FUNCTION_VALUES: frozenset[str] = frozenset({
    "len", "min", "max", "sum", "sorted", "abs", "round", "int", "float", "str", "bool", "any", "all",
    "set", "list", "tuple",
})
#: ``Class.method`` calls on the names the authors' engine puts in scope (``date``, ``time``, ``datetime``,
#: ``json``); ``date.today()``/``datetime.now()`` return the reference date.
CLASS_METHODS: frozenset[tuple[str, str]] = frozenset({
    ("date", "today"), ("date", "fromisoformat"), ("date", "fromtimestamp"), ("time", "fromisoformat"),
    ("datetime", "now"), ("datetime", "today"), ("datetime", "fromisoformat"), ("datetime", "fromtimestamp"),
    ("datetime", "combine"), ("datetime", "strptime"), ("json", "loads"), ("json", "dumps"),
})
#: Names that only prefix a class method (``json.loads(...)``), never values of their own.
NAMESPACES: frozenset[str] = frozenset({cls for cls, _ in CLASS_METHODS})
#: Method names that may be called on values (the evaluator also checks the receiver's type).
METHODS: frozenset[str] = frozenset({
    # str
    "lower", "upper", "strip", "lstrip", "rstrip", "startswith", "endswith", "split", "rsplit", "replace",
    "find", "rfind", "count", "title", "capitalize", "casefold", "isdigit", "isnumeric", "isalpha",
    "isalnum", "join", "splitlines", "index", "partition", "rpartition", "removeprefix", "removesuffix",
    "zfill", "isspace", "islower", "isupper", "istitle", "swapcase",
    # dict / event
    "get", "keys", "values", "items",
    # date / time / datetime / timedelta
    "weekday", "isoweekday", "isoformat", "strftime", "date", "time", "timestamp", "total_seconds",
    "isocalendar", "toordinal",
})
#: Attributes read without a call.
DATA_ATTRIBUTES: frozenset[str] = frozenset({
    "year", "month", "day", "hour", "minute", "second", "microsecond", "days", "seconds", "microseconds",
    # isocalendar() results (``.week``, ``.weekday``) and relativedelta differences (``.years``, ``.months``)
    "week", "weekday", "years", "months", "weeks", "hours", "minutes",
})
#: Keyword arguments each callable accepts (absent: none).
KEYWORDS: dict[str, frozenset[str]] = {
    "sorted": frozenset({"key", "reverse"}),
    "min": frozenset({"key", "default"}),
    "max": frozenset({"key", "default"}),
    "timedelta": frozenset({"days", "seconds", "microseconds", "milliseconds", "minutes", "hours", "weeks"}),
    "relativedelta": frozenset({"years", "months", "weeks", "days", "hours", "minutes", "seconds"}),
    "date": frozenset({"year", "month", "day"}),
    "time": frozenset({"hour", "minute", "second", "microsecond"}),
    "datetime": frozenset({"year", "month", "day", "hour", "minute", "second", "microsecond"}),
    "replace": frozenset({"year", "month", "day", "hour", "minute", "second", "microsecond"}),
    "split": frozenset({"sep", "maxsplit"}),
    "enumerate": frozenset({"start"}),
    "dumps": frozenset({"sort_keys"}),
    "rsplit": frozenset({"sep", "maxsplit"}),
}
#: Names of the operators and of the placeholder calls, which are subtrees rather than functions.
OPERATOR_NAMES: frozenset[str] = frozenset({
    "RETRIEVE", "EXTRACT", "SELECT", "FILTER", "JOIN", "GROUP_BY", "MAP", "APPLY", "UNNEST", "SUM", "AVG",
    "MIN", "MAX", "ARGMIN", "ARGMAX",
})
PLACEHOLDER_NAMES: frozenset[str] = frozenset({"QU", "QUD"})

MAX_CONST_EXPONENT = 1000  # a constant exponent above this is refused outright
MAX_CONST_INT_BITS = 4096  # constant-folded integers stay below this size
MAX_CONST_SEQUENCE = 100_000  # "a" * n with constant n
MAX_STRING_LITERAL = 10_000
MAX_DEPTH = 60  # nesting depth of one expression
MAX_GENERATORS = 3  # ``for`` clauses of one comprehension (each loop is bounded by the evaluator)
#: f-string format specs: constant, one fill/align, sign, width and precision of at most two digits each
#: (``02d``, ``.2f``, ``>10``, ``%Y-%m`` for dates); nothing computed, nothing nested.
_FORMAT_SPEC = re.compile(r"(?:[^{}]?[<>^=])?[+\- ]?#?0?\d{0,2}(?:\.\d{1,2})?[bcdeEfFgGnosxX%]?|(?:%[A-Za-z%][^{}%]{0,3}){1,8}")

_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr,
                   ast.BitXor)
_ALLOWED_UNARY = (ast.Not, ast.USub, ast.UAdd)


class SubtreeSlot(ast.expr):
    """Stands for an operator subtree nested in a lambda (``QU(...).result`` in the paper's notation).

    ``index`` points into :attr:`Function.subtrees`; the evaluator asks the executor for its (cached) value.
    """

    _fields = ("index",)


@dataclass(frozen=True, eq=False)
class Function:
    """A checked function argument: a lambda, a whitelisted function name, or a JOIN condition string.

    ``form`` keeps how it was written so a tree renders back in the same notation.
    """

    params: tuple[str, ...]
    body: ast.expr | None = None  # checked AST (None when ``builtin`` is set)
    builtin: str | None = None
    form: str = "lambda"  # "lambda" | "name" | "string"
    subtrees: tuple[Any, ...] = ()
    text: str = ""  # original condition text for form "string"
    #: ``id``s of the body's largest subexpressions that use none of the function's names (``date.today() -
    #: relativedelta(months=1)``): the same for every item, so the evaluator computes each once per question
    invariant: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.body is not None and not self.invariant:
            object.__setattr__(self, "invariant", invariant_nodes(self.body, self.params))

    def render(self, render_subtree: Callable[[Any], str]) -> str:
        """Source text in the tree notation; nested subtrees are rendered by ``render_subtree``."""
        if self.builtin is not None:
            return self.builtin
        if self.form == "string":
            return _quote(self.text)
        assert self.body is not None
        body = _SlotPrinter([render_subtree(s) for s in self.subtrees]).visit(_copy(self.body))
        return f"lambda {', '.join(self.params)}: {ast.unparse(body)}"

    def with_subtrees(self, subtrees: tuple[Any, ...]) -> Function:
        """The same function with its nested subtrees replaced (placeholder substitution)."""
        return Function(self.params, self.body, self.builtin, self.form, subtrees, self.text, self.invariant)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _copy(node: ast.expr) -> ast.expr:
    import copy

    return copy.deepcopy(node)


class _SlotPrinter(ast.NodeTransformer):
    """Replaces each slot by a Name whose id is the rendered subtree; ``ast.unparse`` prints ids verbatim."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def visit_SubtreeSlot(self, node: SubtreeSlot) -> ast.AST:  # noqa: N802 - ast visitor naming
        return ast.Name(id=self.texts[node.index], ctx=ast.Load())


def _fold(node: ast.AST) -> Any:
    """The value of a constant numeric/sequence expression, or None when not constant (or too big)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _fold(node.operand)
        if isinstance(v, (int, float)):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow)):
        a, b = _fold(node.left), _fold(node.right)
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return None
        if isinstance(node.op, ast.Pow):
            if abs(b) > MAX_CONST_EXPONENT or (isinstance(a, int) and isinstance(b, int)
                                               and a.bit_length() * max(b, 0) > MAX_CONST_INT_BITS):
                return None
            try:
                return a**b
            except (OverflowError, ZeroDivisionError):
                return None
        if isinstance(node.op, ast.Mult) and isinstance(a, int) and isinstance(b, int) \
                and a.bit_length() + b.bit_length() > MAX_CONST_INT_BITS:
            return None
        return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
    return None


def _literal_length(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return len(node.value)
    if isinstance(node, (ast.List, ast.Tuple)):
        return len(node.elts)
    return None


@dataclass
class _Checker:
    """Walks one function body; ``parse_subtree`` turns a nested operator call into a tree node."""

    source: str
    parse_subtree: Callable[[ast.expr], Any]
    attribute_keys: frozenset[str] = frozenset()  # names whose ``.k`` means ``["k"]`` (JOIN condition strings)
    subtrees: list[Any] = field(default_factory=list)

    def reject(self, message: str, node: ast.AST) -> TreeSyntaxError:
        return TreeSyntaxError(message, node, self.source)

    # -- entry points -------------------------------------------------------------------------------
    def lambda_(self, node: ast.Lambda, n_params: int | None, scope: frozenset[str]) -> tuple[tuple[str, ...],
                                                                                                ast.expr]:
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.kw_defaults or a.posonlyargs:
            raise self.reject("lambda with defaults, *args, **kwargs or keyword-only arguments is not allowed",
                              node)
        params = tuple(arg.arg for arg in a.args)
        if n_params is not None and len(params) != n_params:
            raise self.reject(f"expected a lambda of {n_params} argument(s), got {len(params)}", node)
        for p in params:
            self.check_binding(p, node)
        if len(set(params)) != len(params):
            raise self.reject("duplicate lambda argument", node)
        if isinstance(node.body, ast.Lambda):
            raise self.reject("a lambda may not return a function", node.body)
        return params, self.expr(node.body, scope | set(params), 0)

    def check_binding(self, name: str, node: ast.AST) -> None:
        if name.startswith("_") or name in FUNCTIONS or name in OPERATOR_NAMES or name in PLACEHOLDER_NAMES:
            raise self.reject(f"name {name!r} cannot be bound (private or reserved)", node)

    # -- expressions ----------------------------------------------------------------------------------
    def expr(self, node: ast.AST, scope: frozenset[str], depth: int) -> ast.expr:
        """The checked (possibly rewritten) node; raises :class:`TreeSyntaxError` on anything else."""
        if depth > MAX_DEPTH:
            raise self.reject(f"expression nested deeper than {MAX_DEPTH}", node)
        d = depth + 1
        if _is_placeholder_set(node) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                                         and (node.func.id in OPERATOR_NAMES or node.func.id in PLACEHOLDER_NAMES)):
            return self.slot(node)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool) or v is None or isinstance(v, (int, float)):
                if isinstance(v, int) and v.bit_length() > MAX_CONST_INT_BITS:
                    raise self.reject("integer literal too large", node)
                return node
            if isinstance(v, str):
                if len(v) > MAX_STRING_LITERAL:
                    raise self.reject("string literal too long", node)
                return node
            raise self.reject(f"literal of type {type(v).__name__} is not allowed", node)
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                raise self.reject("private or dunder names are not allowed", node)
            if node.id in scope:
                return node
            if node.id in FUNCTIONS:
                raise self.reject(f"function {node.id!r} may only be called here, not passed around", node)
            raise self.reject(f"unknown name {node.id!r}", node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, scope, d, call=False)
        if isinstance(node, ast.Subscript):
            sl = node.slice
            if isinstance(sl, ast.Slice):
                parts = [self.expr(p, scope, d) if p is not None else None for p in (sl.lower, sl.upper, sl.step)]
                new_slice: ast.expr = ast.Slice(*parts)
            else:
                new_slice = self.expr(sl, scope, d)
            return ast.copy_location(ast.Subscript(self.expr(node.value, scope, d), new_slice, ast.Load()), node)
        if isinstance(node, ast.Call):
            return self.call(node, scope, d)
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _ALLOWED_BINOPS):
                raise self.reject(f"operator {type(node.op).__name__} is not allowed", node)
            self.check_size(node)
            return ast.copy_location(ast.BinOp(self.expr(node.left, scope, d), node.op,
                                               self.expr(node.right, scope, d)), node)
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _ALLOWED_UNARY):
                raise self.reject(f"operator {type(node.op).__name__} is not allowed", node)
            return ast.copy_location(ast.UnaryOp(node.op, self.expr(node.operand, scope, d)), node)
        if isinstance(node, ast.BoolOp):
            return ast.copy_location(ast.BoolOp(node.op, [self.expr(v, scope, d) for v in node.values]), node)
        if isinstance(node, ast.Compare):
            return ast.copy_location(ast.Compare(self.expr(node.left, scope, d), node.ops,
                                                 [self.expr(c, scope, d) for c in node.comparators]), node)
        if isinstance(node, ast.IfExp):
            return ast.copy_location(ast.IfExp(self.expr(node.test, scope, d), self.expr(node.body, scope, d),
                                               self.expr(node.orelse, scope, d)), node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise self.reject("starred expressions are not allowed", e)
            elts = [self.expr(e, scope, d) for e in node.elts]
            new = ast.List(elts, ast.Load()) if isinstance(node, ast.List) else \
                ast.Tuple(elts, ast.Load()) if isinstance(node, ast.Tuple) else ast.Set(elts)
            return ast.copy_location(new, node)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise self.reject("dict unpacking (**) is not allowed", node)
            return ast.copy_location(ast.Dict([self.expr(k, scope, d) for k in node.keys if k is not None],
                                              [self.expr(v, scope, d) for v in node.values]), node)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(node, scope, d)
        if isinstance(node, ast.JoinedStr):
            values: list[ast.expr] = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    if v.conversion not in (-1, ord("s")):
                        raise self.reject("f-string conversions other than !s are not allowed", v)
                    values.append(ast.FormattedValue(self.expr(v.value, scope, d), -1, self.format_spec(v)))
                elif isinstance(v, ast.Constant) and isinstance(v.value, str):
                    values.append(v)
                else:
                    raise self.reject("unsupported f-string part", v)
            return ast.copy_location(ast.JoinedStr(values), node)
        if isinstance(node, ast.Lambda):
            raise self.reject("a lambda is only allowed as an operator's function or as key= of sorted/min/max",
                              node)
        raise self.reject(f"{type(node).__name__} is not allowed in an expression", node)

    def format_spec(self, node: ast.FormattedValue) -> ast.expr | None:
        """A constant, short format spec (see :data:`_FORMAT_SPEC`), or None when there is none."""
        spec = node.format_spec
        if spec is None:
            return None
        parts = spec.values if isinstance(spec, ast.JoinedStr) else [spec]
        if not all(isinstance(p, ast.Constant) and isinstance(p.value, str) for p in parts):
            raise self.reject("an f-string format spec must be a constant (no nested fields)", node)
        text = "".join(p.value for p in parts)  # type: ignore[attr-defined]
        if not _FORMAT_SPEC.fullmatch(text):
            raise self.reject(f"f-string format spec {text!r} is not allowed (e.g. 02d, .2f, >10, %Y-%m)", node)
        return ast.JoinedStr([ast.Constant(text)])

    def slot(self, node: ast.expr) -> ast.expr:
        self.subtrees.append(self.parse_subtree(node))
        return ast.copy_location(SubtreeSlot(index=len(self.subtrees) - 1), node)

    def check_size(self, node: ast.BinOp) -> None:
        """Refuse powers and repetitions whose constant operands already make them huge."""
        if isinstance(node.op, ast.Pow):
            exp = _fold(node.right)
            if node.right is not None and exp is None and _is_const_arith(node.right):
                raise self.reject("exponent too large", node)
            if isinstance(exp, (int, float)) and abs(exp) > MAX_CONST_EXPONENT:
                raise self.reject(f"exponent {exp} exceeds {MAX_CONST_EXPONENT}", node)
            if _is_const_arith(node.left) and _is_const_arith(node.right) and _fold(node) is None:
                raise self.reject("constant power too large", node)
        if isinstance(node.op, ast.Mult):
            for seq, count in ((node.left, node.right), (node.right, node.left)):
                n = _fold(count)
                if _is_const_arith(count) and n is None:
                    raise self.reject("repetition count too large", node)
                length = _literal_length(seq)
                too_big = isinstance(n, int) and (abs(n) > MAX_CONST_SEQUENCE
                                                  or (length is not None and length * n > MAX_CONST_SEQUENCE))
                if too_big and length is not None:  # other operands: the evaluator bounds them
                    raise self.reject(f"repetition by {n} is too large", node)
            if _is_const_arith(node) and _fold(node) is None:
                raise self.reject("constant product too large", node)

    def attribute(self, node: ast.Attribute, scope: frozenset[str], depth: int, call: bool) -> ast.expr:
        name = node.attr
        if name.startswith("_"):
            raise self.reject("private or dunder attributes are not allowed", node)
        value = node.value
        if name == "result" and not call and (_is_placeholder_set(value) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and (value.func.id in OPERATOR_NAMES or value.func.id in PLACEHOLDER_NAMES))):
            return self.slot(value)
        if isinstance(value, ast.Name) and value.id in self.attribute_keys and value.id in scope \
                and not (call and name in ("get", "keys", "values", "items")):
            if call:
                raise self.reject(f"{value.id}.{name} is a key, not a method", node)
            key = ast.Subscript(value, ast.Constant(name), ast.Load())
            return ast.copy_location(key, node)
        if isinstance(value, ast.Name) and value.id in NAMESPACES and value.id not in scope:
            if call and (value.id, name) in CLASS_METHODS:
                return node
            raise self.reject(f"{value.id}.{name} is not an allowed class method", node)
        checked = self.expr(value, scope, depth)  # first, so the innermost offence is the one reported
        if call:
            if name not in METHODS:
                raise self.reject(f"method {name!r} is not allowed", node)
        elif name not in DATA_ATTRIBUTES:
            if name in METHODS:
                raise self.reject(f"method {name!r} must be called, not passed around", node)
            raise self.reject(f"attribute {name!r} is not allowed", node)
        return ast.copy_location(ast.Attribute(checked, name, ast.Load()), node)

    def call(self, node: ast.Call, scope: frozenset[str], depth: int) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id.startswith("_"):
                raise self.reject("private or dunder names are not allowed", func)
            if func.id in scope:
                raise self.reject(f"{func.id!r} is a value and cannot be called", node)
            if func.id not in FUNCTIONS:
                raise self.reject(f"call to unknown function {func.id!r}", node)
            new_func: ast.expr = func
            fname = func.id
        elif isinstance(func, ast.Attribute):
            new_func = self.attribute(func, scope, depth, call=True)
            fname = func.attr
        else:
            raise self.reject("only named functions and whitelisted methods can be called", node)
        allowed_kw = KEYWORDS.get(fname, frozenset())
        args: list[ast.expr] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.reject("starred arguments are not allowed", a)
            args.append(self.expr(a, scope, depth))
        keywords: list[ast.keyword] = []
        for kw in node.keywords:
            if kw.arg is None:
                raise self.reject("**kwargs in a call is not allowed", node)
            if kw.arg not in allowed_kw:
                raise self.reject(f"keyword {kw.arg!r} is not allowed for {fname}()", node)
            if kw.arg == "key":
                keywords.append(ast.keyword("key", self.key_function(kw.value, scope, depth)))
            else:
                keywords.append(ast.keyword(kw.arg, self.expr(kw.value, scope, depth)))
        return ast.copy_location(ast.Call(new_func, args, keywords), node)

    def key_function(self, node: ast.expr, scope: frozenset[str], depth: int) -> ast.expr:
        """``key=`` of sorted/min/max: a one-argument lambda or a whitelisted function name."""
        if isinstance(node, ast.Name) and node.id in FUNCTION_VALUES and node.id not in scope:
            return node
        if isinstance(node, ast.Lambda):
            params, body = self.lambda_(node, 1, scope)
            return ast.copy_location(ast.Lambda(ast.arguments([], [ast.arg(p) for p in params], None, [], [],
                                                              None, []), body), node)
        raise self.reject("key= must be a one-argument lambda or a whitelisted function name", node)

    def comprehension(self, node: ast.expr, scope: frozenset[str], depth: int) -> ast.expr:
        gens = node.generators  # type: ignore[attr-defined]
        if len(gens) > MAX_GENERATORS:
            raise self.reject(f"comprehensions with more than {MAX_GENERATORS} 'for' clauses are not allowed",
                              node)
        inner = scope
        new_gens = []
        for gen in gens:  # each clause sees the names bound by the clauses before it
            if gen.is_async:
                raise self.reject("async comprehensions are not allowed", node)
            targets = [gen.target] if isinstance(gen.target, ast.Name) else \
                list(gen.target.elts) if isinstance(gen.target, ast.Tuple) else []
            if not targets or not all(isinstance(t, ast.Name) for t in targets):
                raise self.reject("a comprehension target must be a name or a tuple of names", gen.target)
            for t in targets:
                self.check_binding(t.id, t)  # type: ignore[attr-defined]
            iter_ = self.expr(gen.iter, inner, depth)
            inner = inner | {t.id for t in targets}  # type: ignore[attr-defined]
            new_gens.append(ast.comprehension(gen.target, iter_, [self.expr(i, inner, depth) for i in gen.ifs], 0))
        if isinstance(node, ast.DictComp):
            new: ast.expr = ast.DictComp(self.expr(node.key, inner, depth), self.expr(node.value, inner, depth),
                                         new_gens)
        else:
            elt = self.expr(node.elt, inner, depth)  # type: ignore[attr-defined]
            new = type(node)(elt, new_gens)
        return ast.copy_location(new, node)


#: Node types worth computing once (leaves cost less to evaluate than to look up).
_COMPOUND = (ast.Call, ast.BinOp, ast.Attribute, ast.Subscript, ast.Compare, ast.BoolOp, ast.IfExp, ast.UnaryOp,
             ast.JoinedStr, ast.List, ast.Tuple, ast.Set, ast.Dict)


def invariant_nodes(body: ast.expr, params: tuple[str, ...] = ()) -> frozenset[int]:
    """``id``s of the largest compound subexpressions of a checked body that read no bound name.

    Every name in a checked body is a function or namespace (``len``, ``date``) or a name the function binds
    (its parameters, comprehension targets); a subexpression without the latter -- and without lambdas or
    comprehensions, which bind names -- has the same value for every item, because every whitelisted
    callable is pure and ``date.today()`` is the question's reference date.
    """
    found: set[int] = set()

    def visit(node: ast.AST) -> bool:
        """Whether ``node`` is invariant; records the largest invariant compound nodes below a variant one."""
        if isinstance(node, ast.Name):
            return isinstance(getattr(node, "_role", None), str)  # set below for function/namespace names
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            for child in ast.iter_child_nodes(node):
                visit(child)
            return False
        children = list(ast.iter_child_nodes(node))
        flags = [visit(c) for c in children]
        if all(flags):
            return True
        for child, flag in zip(children, flags, strict=True):
            if flag and isinstance(child, _COMPOUND):
                found.add(id(child))
        return False

    bound = set(params) | {a.arg for n in ast.walk(body) if isinstance(n, ast.Lambda) for a in n.args.args}
    bound |= {t.id for n in ast.walk(body) if isinstance(n, ast.comprehension) for t in ast.walk(n.target)
              if isinstance(t, ast.Name)}
    for node in ast.walk(body):  # function and namespace names are not values: mark them invariant
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            node.func._role = "function"  # type: ignore[attr-defined]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in NAMESPACES \
                and node.value.id not in bound:
            node.value._role = "namespace"  # type: ignore[attr-defined]
    if visit(body) and isinstance(body, _COMPOUND):
        found.add(id(body))
    return frozenset(found)


def _is_const_arith(node: ast.AST) -> bool:
    """True for an expression built only from numeric constants and + - * ** (foldable in principle)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_const_arith(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow)):
        return _is_const_arith(node.left) and _is_const_arith(node.right)
    return False


def _is_placeholder_set(node: ast.AST) -> bool:
    """``{{ QU(question="...") }}`` parses as a set holding a set holding the call."""
    return (isinstance(node, ast.Set) and len(node.elts) == 1 and isinstance(node.elts[0], ast.Set)
            and len(node.elts[0].elts) == 1 and isinstance(node.elts[0].elts[0], ast.Call)
            and isinstance(node.elts[0].elts[0].func, ast.Name)
            and node.elts[0].elts[0].func.id in PLACEHOLDER_NAMES)


def is_placeholder_set(node: ast.AST) -> bool:
    """Public alias used by the tree parser."""
    return _is_placeholder_set(node)


def validate_function(node: ast.expr, source: str, n_params: int, parse_subtree: Callable[[ast.expr], Any],
                      *, allow_condition_string: bool = False, condition_params: tuple[str, ...] = ("i1", "i2"),
                      ) -> Function:
    """Check an operator's function argument and return it as a :class:`Function`.

    Accepted: ``lambda ...: expr`` with ``n_params`` plain arguments, a name from
    :data:`FUNCTION_VALUES` (``fct=len``), and -- for JOIN -- a string holding a condition over
    ``i1``/``i2`` in which ``i1.key`` means ``i1["key"]``.
    """
    if isinstance(node, ast.Lambda):
        checker = _Checker(source, parse_subtree)
        params, body = checker.lambda_(node, n_params, frozenset())
        return Function(params, body, form="lambda", subtrees=tuple(checker.subtrees))
    if isinstance(node, ast.Name) and node.id in FUNCTION_VALUES and n_params == 1:
        return Function(("x",), builtin=node.id, form="name")
    if allow_condition_string and isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        if len(text) > MAX_STRING_LITERAL:
            raise TreeSyntaxError("condition string too long", node, source)
        try:
            inner = ast.parse(text.strip(), mode="eval")
        except SyntaxError as err:
            raise TreeSyntaxError(f"condition string is not an expression: {err.msg}", node, source) from None
        checker = _Checker(text.strip(), parse_subtree, attribute_keys=frozenset(condition_params))
        try:
            body = checker.expr(inner.body, frozenset(condition_params), 0)
        except TreeSyntaxError as err:
            raise TreeSyntaxError(f"in the condition string: {err}", node, source) from None
        if checker.subtrees:
            raise TreeSyntaxError("a condition string cannot hold nested operators", node, source)
        return Function(condition_params, body, form="string", text=text)
    kind = "a lambda, a function name" + (" or a condition string" if allow_condition_string else "")
    raise TreeSyntaxError(f"expected {kind}", node, source)
