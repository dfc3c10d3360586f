"""A scripted LLM for WildChat-AQA's construction tests: answers each prompt of :mod:`convohub.aqa` the way a
capable model would, from the prompt alone (keywords from the sample corpus's own vocabulary, taxonomies from
its topic names), so the pipeline's plumbing can be tested without a model. Imported as
``from _aqa_replies import aqa_reply``."""

from __future__ import annotations

import json
import re

from convohub.conversations.sample_text import TOPICS

#: sample-corpus keyword type -> one of the 12 extraction types
_TYPES = {"programming_language": "programming_language", "food": "food", "location": "location",
          "scientific_term": "scientific_term", "financial_term": "financial_term", "video_game": "artwork",
          "public_figure": "person", "artwork": "artwork", "person": "person"}
_LEXICON = sorted(((kw, _TYPES[t.keyword_type]) for t in TOPICS.values() if t.keyword_type in _TYPES
                   for kw in t.keywords), key=lambda kv: -len(kv[0]))
_TOPIC_CLASSES = [{"name": name.replace("_", " and ").title(), "description": f"conversations about {name}"}
                  for name in sorted(TOPICS)]


def _shown(prompt: str) -> str:
    found = re.search(r'"""(.*?)"""', prompt, re.S)
    return found.group(1) if found else prompt


def _pairs(text: str) -> str:
    found, taken = [], text
    for keyword, kind in _LEXICON:
        if re.search(r"(?<!\w)" + re.escape(keyword) + r"(?!\w)", taken):
            found.append(f"{kind}={keyword}")
            taken = taken.replace(keyword, " ")
    return "; ".join(found[:3]) or "none"


def aqa_reply(request: object) -> str:
    """Use as ``Replies(aqa_reply, whole_request=True)`` (the keyword prompt's instruction is its system turn)."""
    messages = request.messages if hasattr(request, "messages") else [{"role": "user", "content": str(request)}]
    prompt = messages[-1]["content"]
    if "type=value pairs" in messages[0]["content"]:  # the keyword prompt's instruction is its system turn
        return _pairs(prompt)
    if "Start with \"The user\"" in prompt:
        words = _shown(prompt).split()[:12]
        return "The user asks: " + " ".join(words).rstrip(".?!") + "."
    if "what does the user want to achieve" in prompt:
        return "To get help with " + " ".join(_shown(prompt).split()[:5]).rstrip(".?!") + "."
    if "List the named things" in prompt:
        text = _shown(prompt)
        found, taken = [], text
        for keyword, kind in _LEXICON:
            if re.search(r"(?<!\w)" + re.escape(keyword) + r"(?!\w)", taken):
                found.append({"type": kind, "value": keyword, "description": f"a {kind.replace('_', ' ')}"})
                taken = taken.replace(keyword, " ")
        return json.dumps(found[:3])
    if "Rate the current classes" in prompt:
        return json.dumps({"score": 80, "classes": _TOPIC_CLASSES})
    if "subtopics of the topic" in prompt:
        k = int(re.search(r"Propose at most (\d+)", prompt).group(1))
        topic = re.search(r'subtopics of the topic "([^"]+)"', prompt).group(1)
        return json.dumps({"classes": [{"name": f"{topic} part {i + 1}", "description": f"one side of {topic}"}
                                       for i in range(k)]})
    if "Propose at most" in prompt:
        k = int(re.search(r"Propose at most (\d+)", prompt).group(1))
        return json.dumps({"classes": _TOPIC_CLASSES[:k]})
    if "Rewritten question:" in prompt:
        question = re.search(r"Question: (.*)\n", prompt).group(1)
        return ("Quick one: " if "analyst" in prompt else "") + question
    return "[]"
