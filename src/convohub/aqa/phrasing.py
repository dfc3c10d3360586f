"""Natural-language questions for the structured queries (paper Appendix E.7), in two styles.

The paper's GPT-4.1 reads the structured query (conditions and target) and writes two questions of the
same meaning in diverse styles. convohub first writes the query as a plain template question that states
every condition and the target (:func:`template_question`), then asks the LLM to rewrite it in one of two
styles, alternating along the sampling order so both styles are equally represented:

* ``direct``: a concise question;
* ``conversational``: the question as an analyst would ask it in a chat.

A rewrite is kept only when it still names every condition value verbatim, names none of the options that
is not also a condition value (no leaked answer), ends with a question mark and has 5 to 60 words; otherwise
the LLM is asked again, and after the last try the template question is used and ``phrased_by`` says
``template``. Topic and subtopic names stand for their descriptions (the paper condenses descriptions).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed

STYLES = ("direct", "conversational")
TEMPLATE = "template"
STYLE_HINTS = {
    "direct": "Rewrite it as one short, direct question.",
    "conversational": "Rewrite it as one question a data analyst would ask a colleague, in a friendly tone.",
}
_KEYWORD_NOUNS = {
    "Programming Language": ("programming languages", "the programming language"),
    "Video Games": ("video games", "the video game"), "Tabletop Games": ("tabletop games", "the tabletop game"),
    "Manga/Anime": ("manga or anime", "the manga or anime"), "Film": ("films", "the film"),
    "TV Show": ("TV shows", "the TV show"), "Western Cartoon/Comic": ("cartoons or comics", "the cartoon or comic"),
    "Book": ("books", "the book"), "Musical": ("musicals", "the musical"),
    "Public Figure": ("public figures", "the public figure"),
}


def _condition(attribute: str, values: Sequence[str], keywords_type: str | None) -> str:
    joined = " or ".join(values) if attribute == "user_name" else " and ".join(f'"{v}"' for v in values)
    if attribute == "user_name":
        return f"by {'user' if len(values) == 1 else 'users'} {joined}"
    if attribute == "time_week":
        return f"in the week starting {values[0]}"
    if attribute == "label_level_1":
        return f"about the {'topic' if len(values) == 1 else 'topics'} {joined}"
    if attribute == "label_level_2":
        return f"about the {'subtopic' if len(values) == 1 else 'subtopics'} {joined}"
    if attribute == "country":
        return f"from users in {values[0]}"
    if attribute == "language":
        return f"written in {values[0]}"
    noun = _KEYWORD_NOUNS.get(keywords_type or "", ("keywords", "the keyword"))[1]
    return f"that mention {noun} {joined}"


def conditions_text(condition_type: Sequence[str], condition_value: Sequence[str], keywords_type: str | None) -> str:
    """The conditions as one phrase ("" without any), same-attribute values together, in order of appearance."""
    grouped: dict[str, list[str]] = {}
    for attribute, value in zip(condition_type, condition_value, strict=True):
        grouped.setdefault(attribute, []).append(value)
    parts = [_condition(a, v, keywords_type) for a, v in grouped.items()]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def template_question(query: Mapping[str, Any]) -> str:
    """The plain question that states the query's conditions and target (the fallback wording)."""
    where = conditions_text(query["condition_type"], query["condition_value"], query.get("keywords_type"))
    conv = f"conversations {where}" if where else "conversations"
    target = query["target_type"]
    if target == "user_name":
        return f"Which users have the most {conv}?"
    if target == "time_week":
        return f"In which weeks (by their Monday) were there the most {conv}?"
    if target == "country":
        return f"Which countries do the users of {conv} most often come from?"
    if target == "language":
        return f"In which languages are {conv} most often written?"
    noun = {"label_level_1": "topics", "label_level_2": "subtopics"}.get(target)
    if noun is None:
        noun = _KEYWORD_NOUNS.get(query.get("keywords_type") or "", ("keywords",))[0]
    return f"Which {noun} come up most often in {conv if where else 'all conversations'}?"


def request(template: str, style: str, attempt: int) -> ChatRequest:
    sampling = {} if attempt == 0 else {"temperature": 0.7, "top_p": 0.95, "seed": attempt}
    prompt = (f"Question: {template}\n{STYLE_HINTS[style]} Keep every name, date and user exactly as written, "
              "and do not suggest any answer.\nRewritten question:")
    return ChatRequest(messages=[{"role": "user", "content": prompt}], max_new_tokens=64, **sampling)


def _mentions(text: str, value: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(value.lower()) + r"(?![\w-])", text.lower()) is not None


def check(text: str, query: Mapping[str, Any]) -> str:
    """The rewritten question when it keeps the query (module doc); ValueError says what is wrong."""
    line = next((ln.strip().strip('"').strip() for ln in text.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^(rewritten question|question)\s*:\s*", "", line, flags=re.I).strip().strip('"')
    if not line.endswith("?"):
        raise ValueError(f"not a question: {line[:60]!r}")
    n_words = len(line.split())
    if not 5 <= n_words <= 60:
        raise ValueError(f"{n_words} words (5-60 allowed)")
    missing = [v for v in query["condition_value"] if not _mentions(line, v)]
    if missing:
        raise ValueError(f"lost the condition value(s) {missing}")
    leaked = [o for o in query["options"] if o not in query["condition_value"] and _mentions(line, o)]
    if leaked:
        raise ValueError(f"names the option(s) {leaked}")
    return line


def phrase(queries: Sequence[Mapping[str, Any]], backend: ChatBackend | None, max_attempts: int,
           progress: bool = False) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """``{"question", "style", "phrased_by"}`` per query (styles alternate along ``queries``), and counts.
    Without a backend every question is the template's (``phrased_by="template"``)."""
    templates = [template_question(q) for q in queries]
    styles = [STYLES[i % len(STYLES)] for i in range(len(queries))]
    if backend is None or not queries:
        rows = [{"question": t, "style": TEMPLATE, "phrased_by": TEMPLATE} for t in templates]
        return rows, {"asked": 0, "rewritten": 0, "template": len(rows)}
    results = ask_until_parsed(backend, len(queries), lambda i, a: request(templates[i], styles[i], a),
                               lambda i, t: check(t, queries[i]), max_attempts=max_attempts,
                               desc="AQA questions (try {try})", progress=progress)
    rows = []
    for template, style, result in zip(templates, styles, results, strict=True):
        if result.value is None:
            rows.append({"question": template, "style": TEMPLATE, "phrased_by": TEMPLATE})
        else:
            rows.append({"question": result.value, "style": style, "phrased_by": backend.name})
    reasons: dict[str, int] = {}
    for result in results:
        for error in result.errors:
            reason = error.split(":")[0].split(" (")[0]
            reasons[reason] = reasons.get(reason, 0) + 1
    report = {"asked": len(queries), "rewritten": sum(1 for r in results if r.value is not None),
              "rewritten_first_try": sum(1 for r in results if r.value is not None and r.attempts == 1),
              "template": sum(1 for r in results if r.value is None), "calls": sum(r.attempts for r in results),
              "rejections": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:6])}
    return rows, report
