"""The pictures the Spaces show: bar-chart data that keeps what a visitor needs, and operator trees drawn as
SVG with one box per operator and one edge per parent-child pair."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from convohub.charts import count_frame, score_frame, tree_svg

SVG = "{http://www.w3.org/2000/svg}"


def test_count_frame_ranks_and_folds_the_tail() -> None:
    frame = count_frame(["US", "US", "DE", None, "FR", "IT"], "country", top=3)
    assert frame.values.tolist() == [["US", 2], ["DE", 1], ["(missing)", 1], ["(other)", 2]]
    assert frame.columns.tolist() == ["country", "count"]


def test_score_frame_keeps_finite_numbers_only() -> None:
    import numpy as np

    frame = score_frame({"ndcg@1": 0.5, "recall": [1, np.float32(0.25)], "nested": {"f1": np.int64(1)},
                         "nan": math.nan, "judge": "lexical", "missing": None})
    assert frame.values.tolist() == [["ndcg@1", 0.5], ["recall[0]", 1.0], ["recall[1]", 0.25],
                                     ["nested.f1", 1.0]]


def test_tree_svg_draws_every_operator_and_edge() -> None:
    outline = [(0, "JOIN(on=date)"), (1, "RETRIEVE(query=<tv & films>)"), (1, "APPLY(fct=len)"),
               (2, "RETRIEVE(query=runs)")]
    root = ET.fromstring(tree_svg(outline))  # well-formed XML: the arguments were escaped
    nodes = root.findall(f"{SVG}g")
    assert [n.find(f"{SVG}text").text for n in nodes] == ["JOIN", "RETRIEVE", "APPLY", "RETRIEVE"]
    assert [n.find(f"{SVG}title").text for n in nodes] == [label for _, label in outline]  # full label as tooltip
    edges = root.findall(f"{SVG}line")
    assert len(edges) == 3
    boxes = [n.find(f"{SVG}rect") for n in nodes]
    centre = [float(b.get("x")) + float(b.get("width")) / 2 for b in boxes]
    assert centre[0] == (centre[1] + centre[2]) / 2 and centre[2] == centre[3]  # parents centred over children
    assert [float(b.get("y")) for b in boxes] == sorted(float(b.get("y")) for b in boxes)  # depth goes down


def test_tree_svg_without_a_tree_still_draws() -> None:
    root = ET.fromstring(tree_svg([]))
    assert [t.text for t in root.iter(f"{SVG}text")] == ["(no tree)"]
