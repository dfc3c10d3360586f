"""Reading a model's ranking out of its WildChat-AQA answer, the way the authors' evaluation reads it.

The answer prompt asks for JSON ``{"explanation": ..., "answer": [8, 0, 1, ...]}``. Models wrap it in code
fences, prefix reasoning, or break the JSON, and the paper's numbers depend on how such answers were read,
so :func:`parse_ranking` follows the authors' parser step for step (their ``parse_response_single``):

1. keep the text after ``</think>`` when a reasoning block is present;
2. drop Markdown code fences;
3. take the span from the first ``{`` to the last ``}`` (without braces: from ``"answer":`` to the end)
   and read ``answer`` from it as JSON;
4. if that fails, read the span between the first ``[`` and the last ``]`` inside it as a JSON list;
5. every element goes through ``int()``; more than ten entries are cut to the first ten;
6. anything else is unparseable and yields ``[]``, which the NDCG scores as every option 0 (all tied).

Index validity (range, repeats) is not checked here: :func:`convohub.metrics.ndcg.ranking_scores` applies
the authors' scoring rule to whatever list comes out.
"""

from __future__ import annotations

import json
from typing import Any

from convohub.metrics.ndcg import MAX_RANKED


def _as_indices(values: Any) -> list[int]:
    return [int(v) for v in values][:MAX_RANKED]


def parse_ranking(answer: str | None) -> list[int]:
    """The ranked option indices in a model answer, or ``[]`` when none can be read (see module doc)."""
    if answer is None:
        return []
    parts = answer.split("</think>")
    text = (parts[1] if len(parts) > 1 else parts[0]).strip()
    text = text.replace("```json", "").replace("```", "")
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end == -1:
        start, end = text.find('"answer":'), len(text) - 1
    span = text[start:end + 1]
    try:
        return _as_indices(json.loads(span)["answer"])
    except Exception:  # any failure falls through to the bare-list reading, as upstream
        pass
    try:
        return _as_indices(json.loads(span[span.find("["):span.rfind("]") + 1]))
    except Exception:  # unparseable: every option will score 0
        return []
