"""The WildChat-AQA prompts: answering (rank ten options) and PROBE's search-request writing.

Each task has two prompts with the same structure, in convohub's own words:

* the **paper** prompt, for capable endpoints: the retrieved documents in retrieval order (blank lines
  between them), then the question with its options as lines ``j. option``, then a request to rank every
  option and reply with pure JSON ``{"explanation": ..., "answer": [8, 0, 1, ...]}``; PROBE's prompt
  describes the searchable fields and asks for ``{"explanation": ..., "query": {"start_time", "end_time"
  (MM-DD-YYYY), "user_name": [], "country": [], "queries": []}}``;
* the **small** prompt, for SmolLM2-135M-Instruct (the offline model), which does not follow the paper's
  prompts (measured: see :mod:`convohub.aqa.methods`): a short instruction and one worked example, asking
  only for what is parsed (the ranking list; the flat filter + queries object).

A third answering variant asks nothing at all: :func:`likelihood_prompt` is the text the ``likelihood``
answerer scores each option after (the option's mean token log-probability, no generation).

Documents carry their metadata on top, ``User: ... / Country: ... / Date: ...`` then the text, as the
authors render them: an aggregative question is about users, countries and weeks, which the text alone
does not say.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

#: Prompt styles of the generating answerers; ``likelihood`` is a separate answerer (no prompt style).
ANSWER_STYLES = ("paper", "small")
PROBE_STYLES = ("paper", "small")


def render_document(text: str, user_name: str, country: str, when: datetime | str) -> str:
    """One context document: its metadata header, a blank line, its text."""
    day = when.strftime("%Y-%m-%d %H:%M") if isinstance(when, datetime) else str(when)
    return f"User: {user_name}\nCountry: {country}\nDate: {day}\n\n{text.strip()}"


def render_question(question: str, options: Sequence[str]) -> str:
    """The question, then one line ``j. option`` per option (``j`` from 0, the index the answer uses)."""
    lines = [question.strip()]
    lines += [f"{j}. {option}" for j, option in enumerate(options)]
    return "\n".join(lines)


def join_documents(documents: Sequence[str]) -> str:
    """Documents in retrieval order, separated by blank lines."""
    return "\n\n".join(d.strip() for d in documents)


_PAPER_ANSWER = """You answer questions about many user-chatbot conversations from the WildChat dataset.
{context}
# Question

{question}

{basis} Rank all of the options, from the most relevant or correct to the least. Say why in "explanation" and \
give the ranking as option numbers in "answer". Reply with pure JSON in this form:

{{
    "explanation": "<why the options are ranked this way>",
    "answer": [8, 0, 1, 2, 3, 4, 6, 5, 7, 9]
}}

# Answer"""

_SMALL_ANSWER = """{context}Question: {question}

Rank the options from best to worst. Reply with only the option numbers as a list, best first.
Example reply: [2, 0, 1, 3, 4, 5, 6, 7, 8, 9]"""


def answer_prompt(question: str, options: Sequence[str], documents: Sequence[str] = (), *,
                  style: str = "paper", summaries: bool = False) -> str:
    """The answering prompt of ``style`` (:data:`ANSWER_STYLES`) with ``documents`` as context (none: the
    no-context prompt). ``summaries`` words the paper prompt for conversation summaries."""
    asked = render_question(question, options)
    if style == "paper":
        if documents:
            kind = "summaries of conversations" if summaries else "conversations"
            context = f"\n# Conversations\n\n{join_documents(documents)}\n"
            basis = f"Answer the multiple choice question from the {kind} above."
        else:
            context, basis = "", "Answer the multiple choice question from what you know."
        return _PAPER_ANSWER.format(context=context, question=asked, basis=basis)
    if style == "small":
        context = f"Conversations:\n\n{join_documents(documents)}\n\n" if documents else ""
        return _SMALL_ANSWER.format(context=context, question=asked)
    raise ValueError(f"unknown answer prompt style {style!r}: use one of {', '.join(ANSWER_STYLES)}")


def likelihood_prompt(question: str, documents: Sequence[str] = ()) -> str:
    """The text the ``likelihood`` answerer scores every option after (as the assistant's reply)."""
    context = f"Conversations:\n\n{join_documents(documents)}\n\n" if documents else ""
    return f"{context}Question: {question.strip()}\nAnswer with the single best answer."


_PAPER_PROBE = """You write search requests over a database of user-chatbot conversations.

# Database

Each conversation has these fields:
- timestamp: when the conversation started
- user_name: the user's name
- country: where the user wrote from
- document: the text of the conversation

# Question

{question}

# Instructions

Write a search request that finds the conversations which support an answer to the question.
- "start_time" and "end_time" (each one date, MM-DD-YYYY), "user_name" and "country" (lists) filter the \
conversations; "queries" (a list) are searched for with BM25 or embedding search.
- Every field is optional: leave out a filter that does not help.
- Write at most 10 queries, short and as diverse as possible, each from a different angle.
- Think step by step in "explanation" first.
- Reply with pure JSON in this form:

{{
    "explanation": "<your reasoning>",
    "query": {{
        "start_time": "<MM-DD-YYYY>",
        "end_time": "<MM-DD-YYYY>",
        "user_name": ["<user>", ...],
        "country": ["<country>", ...],
        "queries": ["<query 1>", "<query 2>", ...]
    }}
}}

# Response"""

_SMALL_PROBE = """Write a search request for the question as one JSON object.
Keys: start_time and end_time (MM-DD-YYYY, or ""), user_name (list), country (list), queries (list of short \
search phrases taken from the question).

Question: Which topics did users from Japan ask about in the week starting 2023-06-05?
{{"start_time": "06-05-2023", "end_time": "06-11-2023", "user_name": [], "country": ["Japan"], \
"queries": ["topics users from Japan ask about"]}}

Question: {question}
"""


def probe_prompt(question: str, *, style: str = "paper") -> str:
    """PROBE's request-writing prompt of ``style`` (:data:`PROBE_STYLES`)."""
    if style == "paper":
        return _PAPER_PROBE.format(question=question.strip())
    if style == "small":
        return _SMALL_PROBE.format(question=question.strip())
    raise ValueError(f"unknown PROBE prompt style {style!r}: use one of {', '.join(PROBE_STYLES)}")
