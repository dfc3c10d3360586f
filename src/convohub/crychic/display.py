"""A reconstructed conversation shown to people: the per-turn decisions as text or table rows, one turn's
filtered history, and the chat tree drawn as an SVG graph (:func:`convohub.charts.tree_svg`, as the ReQAP
Space draws its operator trees). Shared by ``convohub tree reconstruct`` and the CRyCHIc Space.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the Space's decision table
DECISION_HEADERS = ["turn", "parent", "gold", "module", "score", "rule", "prompt"]


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def parent_name(parent: int | None) -> str:
    return "-" if parent is None else "root" if parent == -1 else str(parent)


def _score(score: float | None) -> str:
    return "-" if score is None else f"{score:.3f}"


def decision_rows(builder: Any, gold: Sequence[int] | None = None) -> list[list[Any]]:
    """One row per turn (:data:`DECISION_HEADERS`): parent, gold parent (or -), module, score, rule, prompt."""
    return [[t.index, parent_name(t.parent), parent_name(gold[t.index]) if gold else "-", t.decision.module,
             _score(t.decision.score), t.decision.rule, short(t.prompt, 120)] for t in builder.turns]


def format_decisions(builder: Any, gold: Sequence[int] | None = None) -> str:
    """One line per turn: parent (and the gold parent, x where they differ), module, score, rule, the prompt."""
    lines = [f"{'turn':>4}  {'parent':>6}" + (f"  {'gold':>6}" if gold else "")
             + f"  {'module':<10} {'score':>6}  {'rule':<22} prompt"]
    for turn in builder.turns:
        d = turn.decision
        mark = ""
        if gold:
            mark = f"  {parent_name(gold[turn.index]):>4} {'x' if gold[turn.index] != d.parent else ' '}"
        lines.append(f"{turn.index:>4}  {parent_name(d.parent):>6}{mark}  {d.module:<10} {_score(d.score):>6}  "
                     f"{d.rule:<22} {short(turn.prompt, 60)}")
    return "\n".join(lines)


def format_history(builder: Any, turn_index: int) -> str:
    """The filtered history of a turn (its ancestors, oldest first) and the turn's own prompt."""
    turn = builder.turns[turn_index]
    history = builder.filtered_history(turn_index)
    lines = [f"filtered history of turn {turn_index} ({len(history)} of {turn_index} earlier turn(s); parent "
             f"{parent_name(turn.parent)}, decided by {turn.decision.module}): what an LLM would receive with the "
             "prompt", ""]
    for earlier in history:
        lines += [f"[turn {earlier.index}] user: {earlier.prompt}",
                  f"[turn {earlier.index}] assistant: {earlier.response}", ""]
    lines.append(f"[turn {turn_index}] user (the prompt): {turn.prompt}")
    return "\n".join(lines)


def history_markdown(builder: Any, turn_index: int) -> str:
    """:func:`format_history` for a Markdown panel: one quoted block per message."""
    turn = builder.turns[turn_index]
    history = builder.filtered_history(turn_index)
    parts = [f"**Turn {turn_index}** keeps {len(history)} of its {turn_index} earlier turn(s) (parent "
             f"{parent_name(turn.parent)}, decided by {turn.decision.module}); an LLM would receive:"]
    for earlier in history:
        parts += [f"*turn {earlier.index}, user:*\n> {_quote(earlier.prompt)}",
                  f"*turn {earlier.index}, assistant:*\n> {_quote(earlier.response)}"]
    parts.append(f"*turn {turn_index}, user (the prompt):*\n> {_quote(turn.prompt)}")
    return "\n\n".join(parts)


def _quote(text: str) -> str:
    return "\n> ".join(text.strip().splitlines()) or "(empty)"


def forest_outline(parents: Sequence[int], labels: Sequence[str]) -> list[tuple[int, str]]:
    """(depth, label) of every turn in pre-order over the forest (roots in turn order, children in turn
    order): the outline :func:`convohub.charts.tree_svg` draws. Depth starts at 0 for every root."""
    children: dict[int, list[int]] = {i: [] for i in range(-1, len(parents))}
    for t, parent in enumerate(parents):
        children[parent].append(t)
    out: list[tuple[int, str]] = []
    stack = [(root, 0) for root in reversed(children[-1])]
    while stack:
        node, depth = stack.pop()
        out.append((depth, labels[node]))
        stack += [(child, depth + 1) for child in reversed(children[node])]
    return out


def _order(parents: Sequence[int]) -> list[int]:
    """Turn indices in the pre-order of :func:`forest_outline`."""
    return [int(label) for _, label in forest_outline(parents, [str(i) for i in range(len(parents))])]


def tree_picture(parents: Sequence[int], prompts: Sequence[str], *, notes: Sequence[str] | None = None,
                 differs: Sequence[bool] | None = None, title: str = "chat tree") -> str:
    """The chat tree as an SVG graph: one box per turn ("turn N", then its note, e.g. the deciding module and
    score, and the start of its prompt; the whole prompt is the tooltip), edges from parent to child. Turns
    whose parent ``differs`` from the gold tree are drawn in amber."""
    labels = [f"turn {t}({(notes[t] + ' ') if notes else ''}{short(prompts[t], 200)})" for t in range(len(parents))]
    from convohub.charts import tree_svg

    order = _order(parents)
    marked = [i for i, t in enumerate(order) if differs and differs[t]]
    return tree_svg(forest_outline(parents, labels), title=title, marked=marked)
