"""Pictures for the Spaces: the data behind a bar chart, and operator trees drawn as SVG.

A Space visitor takes in a bar of scores or a drawn tree faster than a JSON object or an indented outline.
Everything here is plain Python returning either a ``pandas.DataFrame`` (for ``gr.BarPlot``, which Gradio
renders in the browser with its bundled Vega, so nothing is fetched) or an SVG string (for ``gr.HTML``). No
plotting library is needed, so the Spaces stay as cheap to install as they were.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from html import escape
from typing import Any

import pandas as pd

__all__ = ["ZERO_BASED", "count_frame", "score_frame", "tree_svg"]

#: ``y_lim`` for a ``gr.BarPlot`` whose bars start at zero: Gradio otherwise fits the y axis to the data, so a
#: single bar, or bars of equal height, collapse to nothing (``None`` leaves the top to the data).
ZERO_BASED: list[float | None] = [0, None]


def count_frame(values: Iterable[Any], label: str, *, top: int = 15) -> pd.DataFrame:
    """Columns ``label`` and ``count``: how often each value occurs, most frequent first.

    Values beyond the ``top`` most frequent are summed into one ``(other)`` bar so a long tail of rare
    values does not squeeze the bars that matter into slivers.
    """
    counts = Counter("(missing)" if v in (None, "") else str(v) for v in values)
    ranked = counts.most_common()
    rows = ranked[:top]
    rest = sum(n for _, n in ranked[top:])
    if rest:
        rows.append(("(other)", rest))
    return pd.DataFrame(rows, columns=[label, "count"])


def score_frame(scores: Mapping[str, Any]) -> pd.DataFrame:
    """Columns ``score`` and ``value``: every finite number in a metric's result dict, one bar each.

    Lists (per-k or per-instance values) become ``name[i]`` bars; strings, None and NaN are left out because a
    bar cannot show them (they stay visible in the JSON next to the chart).
    """
    rows: list[tuple[str, float]] = []

    def add(name: str, value: Any) -> None:
        if isinstance(value, numbers.Real) and math.isfinite(value):  # numpy scalars included
            rows.append((name, float(value)))
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                add(f"{name}.{key}", inner)
        elif isinstance(value, list | tuple):
            for i, inner in enumerate(value):
                add(f"{name}[{i}]", inner)

    for key, value in scores.items():
        add(str(key), value)
    return pd.DataFrame(rows, columns=["score", "value"])


# ------------------------------------------------------------------------------------------- tree drawing
_BOX_H, _LEVEL_H, _SLOT_W, _PAD, _CHAR_W = 34, 74, 190, 12, 7.2
_LABEL_CHARS = 24


def _children(outline: Sequence[tuple[int, str]]) -> list[list[int]]:
    """Child indices of every node of a pre-order outline (depth, label)."""
    children: list[list[int]] = [[] for _ in outline]
    stack: list[int] = []
    for i, (depth, _) in enumerate(outline):
        while stack and outline[stack[-1]][0] >= depth:
            stack.pop()
        if stack:
            children[stack[-1]].append(i)
        stack.append(i)
    return children


def _operator(label: str) -> tuple[str, str]:
    """(operator name, its arguments) of an outline line such as ``RETRIEVE(query="tv")``."""
    head, sep, rest = label.partition("(")
    if not head.strip():  # not an operator call, e.g. "(no tree)": show it whole
        return label, ""
    return head.strip(), (sep + rest) if sep else ""


def tree_svg(outline: Sequence[tuple[int, str]], *, title: str = "operator tree",
             marked: Collection[int] = ()) -> str:
    """An operator tree drawn top-down as an SVG image: one box per operator, edges from parent to child.

    ``outline`` is the pre-order (depth, label) list that :func:`convohub.reqap.engine.parse.tree_outline`
    returns. Leaves get one column each and a parent is centred over its children (a tidy layout that needs
    no graph library). Boxes show the operator and the start of its arguments; the full label is the box's
    tooltip. An empty outline draws a single "(no tree)" box, so the picture never silently disappears.
    Boxes whose outline index is in ``marked`` are drawn in amber (class ``node marked``), e.g. the turns of
    a reconstructed chat tree whose parent differs from the gold tree's.
    """
    if not outline:
        outline = [(0, "(no tree)")]
    children = _children(outline)
    x: dict[int, float] = {}
    next_leaf = 0

    def place(i: int) -> float:
        nonlocal next_leaf
        if not children[i]:
            x[i] = next_leaf
            next_leaf += 1
        else:
            xs = [place(c) for c in children[i]]
            x[i] = (xs[0] + xs[-1]) / 2
        return x[i]

    for root in (i for i, (depth, _) in enumerate(outline) if depth == min(d for d, _ in outline)):
        place(root)
    base_depth = min(d for d, _ in outline)
    width = int(max(next_leaf, 1) * _SLOT_W + 2 * _PAD)
    height = int((max(d for d, _ in outline) - base_depth + 1) * _LEVEL_H - (_LEVEL_H - _BOX_H) + 2 * _PAD)

    def centre(i: int) -> tuple[float, float]:
        return _PAD + x[i] * _SLOT_W + _SLOT_W / 2, _PAD + (outline[i][0] - base_depth) * _LEVEL_H

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             'style="max-width:100%;height:auto;font-family:sans-serif;font-size:12px">',
             f"<title>{escape(title)}</title>"]
    for i, kids in enumerate(children):
        px, py = centre(i)
        for c in kids:
            cx, cy = centre(c)
            parts.append(f'<line x1="{px:.1f}" y1="{py + _BOX_H:.1f}" x2="{cx:.1f}" y2="{cy:.1f}" '
                         'stroke="#888" stroke-width="1.5"/>')
    box_w = _SLOT_W - 16
    for i, (_, label) in enumerate(outline):
        cx, top = centre(i)
        name, args = _operator(label)
        short = args if len(args) <= _LABEL_CHARS else args[: _LABEL_CHARS - 1] + "…"
        fill = "#dbeafe" if children[i] else "#dcfce7"  # inner operators blue, leaves (data access) green
        if i in marked:
            fill = "#fde68a"
        parts.append(f'<g class="node{" marked" if i in marked else ""}"><title>{escape(label)}</title>'
                     f'<rect x="{cx - box_w / 2:.1f}" y="{top:.1f}" width="{box_w}" height="{_BOX_H}" rx="6" '
                     f'fill="{fill}" stroke="#334155"/>'
                     f'<text x="{cx:.1f}" y="{top + 14:.1f}" text-anchor="middle" font-weight="bold">'
                     f"{escape(name)}</text>")
        if short:
            parts.append(f'<text x="{cx:.1f}" y="{top + 28:.1f}" text-anchor="middle" fill="#334155" '
                         f'textLength="{min(box_w - 8, len(short) * _CHAR_W):.0f}" '
                         f'lengthAdjust="spacingAndGlyphs">{escape(short)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
