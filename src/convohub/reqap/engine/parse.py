"""Operator trees: parsing (``ast.parse`` only), rendering, placeholder substitution and assembly.

A tree is written as one nested Python-like expression, e.g.
``APPLY(l=FILTER(l=RETRIEVE(query="running"), filter=lambda attr: attr["workout_type"] == "running"), fct=len)``.
A QUD step is the same notation with placeholders for its list arguments, ``{{ QU(question="...") }}``
(also accepted: ``QU(question="...")``, ``QU("...")``, ``QUD("...")``, the paper's tables). Placeholders
may also sit inside lambdas (``QUD("...").result``): they are operator subtrees whose value the lambda
reads. :func:`substitute` and :func:`assemble` turn steps into a whole tree; :func:`tree_outline` and
:func:`arg_summary` draw a parsed tree (CLI, trace, Space).

Only the whitelisted operators of :data:`OPERATORS` with their declared arguments are accepted; function
arguments go through :func:`convohub.reqap.engine.expr.validate_function`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from convohub.reqap.engine.convert import TYPE_NAMES
from convohub.reqap.engine.errors import (
    TreeSyntaxError,
)
from convohub.reqap.engine.expr import (
    OPERATOR_NAMES,
    PLACEHOLDER_NAMES,
    Function,
    is_placeholder_set,
    validate_function,
)

__all__ = [
    "ArgSpec", "Node", "OPERATORS", "OpNode", "Placeholder", "arg_summary", "assemble", "parse_tree",
    "placeholders", "substitute", "tree_outline"
]

MAX_TREE_CHARS = 100_000


MAX_TREE_DEPTH = 40


@dataclass(frozen=True)
class ArgSpec:
    """One operator argument: its name, kind and whether it must be given."""

    name: str
    kind: str  # list | str | strlist | types | fn1 | condition
    required: bool = True


#: The whitelisted operators and their arguments, in positional order.
OPERATORS: dict[str, tuple[ArgSpec, ...]] = {
    "RETRIEVE": (ArgSpec("query", "str"), ArgSpec("l", "list", False)),
    "EXTRACT": (ArgSpec("l", "list"), ArgSpec("attr_names", "strlist"), ArgSpec("attr_types", "types", False)),
    "FILTER": (ArgSpec("l", "list"), ArgSpec("filter", "fn1")),
    "JOIN": (ArgSpec("l1", "list"), ArgSpec("l2", "list"), ArgSpec("condition", "condition")),
    "GROUP_BY": (ArgSpec("l", "list"), ArgSpec("attr_names", "strlist")),
    "MAP": (ArgSpec("l", "list"), ArgSpec("fct", "fn1"), ArgSpec("res_name", "str", False)),
    "APPLY": (ArgSpec("l", "list"), ArgSpec("fct", "fn1")),
    "UNNEST": (ArgSpec("l", "list"), ArgSpec("nested_attr_name", "str"), ArgSpec("unnested_attr_name", "str", False)),
    **{op: (ArgSpec("l", "list"), ArgSpec("attr_name", "str")) for op in ("SUM", "AVG", "MIN", "MAX")},
    **{op: (ArgSpec("l", "list"), ArgSpec("arg_attr_name", "str"), ArgSpec("val_attr_name", "str", False))
       for op in ("ARGMIN", "ARGMAX")},
}
OPERATORS["SELECT"] = OPERATORS["EXTRACT"]
assert set(OPERATORS) == OPERATOR_NAMES


@dataclass(frozen=True, eq=False)
class Placeholder:
    """A sub-question still to be decomposed (``{{ QU(question="...") }}``)."""

    question: str

    @cached_property
    def text(self) -> str:
        return "{{ QU(question=" + json.dumps(self.question, ensure_ascii=False) + ") }}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placeholder) and other.question == self.question

    def __hash__(self) -> int:
        return hash(self.text)


@dataclass(frozen=True, eq=False)
class OpNode:
    """One operator with its (checked) arguments; children are :class:`OpNode`/:class:`Placeholder`.

    Argument values: ``str``, ``tuple[str, ...]`` (attr_names, attr_types), :class:`Function`, or a child.
    Two nodes are equal when their canonical text is, which is also the execution cache key.
    """

    op: str
    args: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def text(self) -> str:
        return render(self)

    def children(self) -> list[Node]:
        """List-argument children in argument order (nested subtrees in lambdas not included)."""
        return [v for v in self.args.values() if isinstance(v, (OpNode, Placeholder))]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpNode) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text


Node = OpNode | Placeholder


def render(node: Node) -> str:
    """Canonical text: keyword arguments in declared order, ``"`` quotes, placeholders as ``{{ QU(...) }}``."""
    if isinstance(node, Placeholder):
        return node.text
    parts = []
    for spec in OPERATORS[node.op]:
        if spec.name not in node.args:
            continue
        v = node.args[spec.name]
        if isinstance(v, (OpNode, Placeholder)):
            s = v.text
        elif isinstance(v, Function):
            s = v.render(lambda sub: sub.text)
        elif spec.kind == "types":
            s = "[" + ", ".join(v) + "]"
        elif isinstance(v, tuple):
            s = "[" + ", ".join(json.dumps(x, ensure_ascii=False) for x in v) + "]"
        else:
            s = json.dumps(v, ensure_ascii=False)
        parts.append(f"{spec.name}={s}")
    return f"{node.op}({', '.join(parts)})"


def parse_tree(text: str) -> Node:
    """Parse and check a tree or a QUD step; raises :class:`TreeSyntaxError` (nothing is executed)."""
    if not isinstance(text, str):
        raise TreeSyntaxError(f"a tree must be a string, got {type(text).__name__}")
    if len(text) > MAX_TREE_CHARS:
        raise TreeSyntaxError(f"tree longer than {MAX_TREE_CHARS} characters")
    source = text.strip()
    try:
        module = ast.parse(source, mode="eval")
    except SyntaxError as err:
        raise TreeSyntaxError(f"not a valid expression: {err.msg} (line {err.lineno}, col {err.offset})") from None
    except (RecursionError, MemoryError, ValueError) as err:
        raise TreeSyntaxError(f"tree cannot be parsed: {type(err).__name__}") from None
    return _Parser(source).node(module.body, 0)


@dataclass
class _Parser:
    source: str

    def reject(self, message: str, node: ast.AST | None) -> TreeSyntaxError:
        return TreeSyntaxError(message, node, self.source)

    def node(self, node: ast.expr, depth: int) -> Node:
        if depth > MAX_TREE_DEPTH:
            raise self.reject(f"tree nested deeper than {MAX_TREE_DEPTH}", node)
        if is_placeholder_set(node):
            return self.placeholder(node.elts[0].elts[0])  # type: ignore[attr-defined]
        if isinstance(node, ast.Attribute) and node.attr == "result":
            return self.node(node.value, depth)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise self.reject("expected an operator call like RETRIEVE(query=...)", node)
        name = node.func.id
        if name in PLACEHOLDER_NAMES:
            return self.placeholder(node)
        if name not in OPERATORS:
            raise self.reject(f"unknown operator {name!r}", node)
        specs = OPERATORS[name]
        if len(node.args) > len(specs):
            raise self.reject(f"{name} takes at most {len(specs)} arguments", node)
        given: dict[str, ast.expr] = {}
        for spec, arg in zip(specs, node.args, strict=False):
            if isinstance(arg, ast.Starred):
                raise self.reject("starred arguments are not allowed", arg)
            given[spec.name] = arg
        known = {s.name: s for s in specs}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.reject("**kwargs is not allowed", node)
            if kw.arg not in known:
                raise self.reject(f"{name} has no argument {kw.arg!r}", kw.value)
            if kw.arg in given:
                raise self.reject(f"{name} got argument {kw.arg!r} twice", kw.value)
            given[kw.arg] = kw.value
        args: dict[str, Any] = {}
        for spec in specs:
            if spec.name not in given:
                if spec.required:
                    raise self.reject(f"{name} needs argument {spec.name!r}", node)
                continue
            value = given[spec.name]
            if spec.required is False and isinstance(value, ast.Constant) and value.value is None:
                continue
            args[spec.name] = self.argument(name, spec, value, depth)
        # a shorter attr_types list (the authors' engine tolerates it) leaves the remaining names unconverted
        if "attr_types" in args and len(args["attr_types"]) > len(args["attr_names"]):
            raise self.reject(f"more attr_types than attr_names ({len(args['attr_types'])} > "
                              f"{len(args['attr_names'])})", given["attr_types"])
        return OpNode("EXTRACT" if name == "SELECT" else name, args)

    def placeholder(self, call: ast.Call) -> Placeholder:
        values = list(call.args) + [kw.value for kw in call.keywords if kw.arg in ("question", None)]
        if len(values) != 1 or len(call.args) + len(call.keywords) != 1 \
                or not isinstance(values[0], ast.Constant) or not isinstance(values[0].value, str):
            raise self.reject('a placeholder is QU(question="...") with one string', call)
        if any(kw.arg is None for kw in call.keywords):
            raise self.reject("**kwargs is not allowed", call)
        return Placeholder(values[0].value)

    def argument(self, op: str, spec: ArgSpec, value: ast.expr, depth: int) -> Any:
        kind = spec.kind
        if kind == "list":
            return self.node(value, depth + 1)
        if kind == "str":
            if not isinstance(value, ast.Constant) or not isinstance(value.value, str):
                raise self.reject(f"{op}.{spec.name} must be a string literal", value)
            return value.value
        if kind == "strlist":
            elts = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            if not elts or not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
                raise self.reject(f"{op}.{spec.name} must be a non-empty list of string literals", value)
            return tuple(e.value for e in elts)  # type: ignore[attr-defined]
        if kind == "types":
            elts = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            names = []
            for e in elts:
                n = e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else _dotted(e)
                if n not in TYPE_NAMES:
                    raise self.reject(f"{op}.{spec.name}: unknown type conversion (allowed: "
                                      f"{', '.join(sorted(TYPE_NAMES))})", e)
                names.append(n)
            return tuple(names)
        sub = lambda n: self.node(n, depth + 1)  # noqa: E731 - a callback for nested subtrees
        if kind == "fn1":
            return validate_function(value, self.source, 1, sub)
        if kind == "condition":
            return validate_function(value, self.source, 2, sub, allow_condition_string=True)
        raise AssertionError(kind)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def placeholders(node: Node) -> list[str]:
    """Questions of all unresolved placeholders, depth-first, left to right (lambdas included)."""
    out: list[str] = []

    def walk(n: Node) -> None:
        if isinstance(n, Placeholder):
            out.append(n.question)
            return
        for v in n.args.values():
            if isinstance(v, (OpNode, Placeholder)):
                walk(v)
            elif isinstance(v, Function):
                for s in v.subtrees:
                    walk(s)

    walk(node)
    return out


Resolver = Mapping[str, str | Node] | Callable[[str], str | Node | None]


def substitute(node: Node | str, resolve: Resolver) -> Node:
    """Replace placeholders by subtrees (given as text or nodes); unknown questions stay placeholders."""
    tree = parse_tree(node) if isinstance(node, str) else node
    lookup = resolve.get if isinstance(resolve, Mapping) else resolve

    def walk(n: Node) -> Node:
        if isinstance(n, Placeholder):
            got = lookup(n.question)
            if got is None:
                return n
            return parse_tree(got) if isinstance(got, str) else got
        args = {}
        for k, v in n.args.items():
            if isinstance(v, (OpNode, Placeholder)):
                v = walk(v)
            elif isinstance(v, Function) and v.subtrees:
                v = v.with_subtrees(tuple(walk(s) for s in v.subtrees))
            args[k] = v
        return OpNode(n.op, args)

    return walk(tree)


def assemble(root: str | Node, steps: Resolver, *, max_depth: int = 8) -> Node:
    """Build a whole tree from QUD steps: each placeholder's question is looked up in ``steps`` and
    replaced by that step, recursively (the spec's guard: at most ``max_depth`` levels)."""
    lookup = steps.get if isinstance(steps, Mapping) else steps

    def build(step: str | Node, depth: int) -> Node:
        if depth > max_depth:
            raise TreeSyntaxError(f"decomposition deeper than {max_depth}")
        tree = parse_tree(step) if isinstance(step, str) else step

        def resolve(question: str) -> Node | None:
            got = lookup(question)
            return None if got is None else build(got, depth + 1)

        return substitute(tree, resolve)

    return build(root, 0)


def arg_summary(node: OpNode) -> dict[str, str]:
    out = {}
    for k, v in node.args.items():
        if isinstance(v, (OpNode, Placeholder)):
            continue
        if isinstance(v, Function):
            s = v.render(lambda sub: sub.op + "(...)" if isinstance(sub, OpNode) else sub.text)
        elif isinstance(v, tuple):
            s = "[" + ", ".join(v) + "]"
        else:
            s = str(v)
        out[k] = s if len(s) <= 120 else s[:117] + "..."
    return out


def tree_outline(node: Any, depth: int = 0) -> list[tuple[int, str]]:
    """(depth, ``OP(arg=value, ...)``) per operator in pre-order: list arguments first, then operators
    nested in lambdas; operator arguments are shown as children, not inline. For drawing trees."""
    from convohub.reqap.engine.expr import Function

    if not isinstance(node, OpNode):
        return [(depth, getattr(node, "text", str(node)))]
    args = ", ".join(f"{k}={v}" for k, v in arg_summary(node).items())
    out = [(depth, f"{node.op}({args})")]
    for v in node.args.values():
        if isinstance(v, OpNode):
            out += tree_outline(v, depth + 1)
    for v in node.args.values():
        if isinstance(v, Function):
            for sub in v.subtrees:
                out += tree_outline(sub, depth + 1)
    return out
