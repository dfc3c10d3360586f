"""Step 2a of WildFeedback: summarise each feedback episode into (query turn, preference sentences).

The output format is the paper's (Appendix A.2): ``[{"query": turn id, "preferences": [sentence, ...]}]``
where the query is the user's first attempt before the feedback and the preferences are complete
sentences based only on the user's feedback. Turn ids are the ``T-k`` numbers of
:mod:`convohub.wildfeedback.identify` (1-based, counting user utterances).

With a backend, one call per conversation (prompt in convohub's words after A.2), validated: a list of
objects whose ``query`` is a turn id of this conversation before a DSAT turn and whose ``preferences`` are
non-empty strings; invalid answers are retried and then raised as :class:`PreferenceError`.

Offline, :func:`rule_summary` writes the sentences from the DSAT labels and the user's own words: an
episode starts at a DSAT user turn, runs over the following consecutive DSAT turns, and its query is the
closest earlier turn that is a request (state NEWTOPIC or CONTINUATION), else T-1. Each label contributes
one sentence (Style cues are spelled out: shorter, formal, bullet points, simpler, ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from convohub.llm import ChatBackend, ChatRequest, parse_json_answer, run_chat
from convohub.wildfeedback.identify import group_turns
from convohub.wildfeedback.labels import NA, FeedbackResult

QUOTE_CHARS = 200
MAX_NEW_TOKENS = 512

_STYLE = (
    (r"shorter|concise|kürzer|plus court|más corto|mais curto|покороче|短一点", "The user prefers short, concise answers."),
    (r"longer|ausführlicher|in more depth", "The user prefers longer, more thorough answers."),
    (r"more formal", "The user wants a formal tone."),
    (r"casual|less formal", "The user wants a casual, conversational tone."),
    (r"bullet", "The user wants the answer formatted as bullet points."),
    (r"table", "The user wants the answer formatted as a table."),
    (r"simpler|simple|beginner", "The user wants a simple explanation suitable for a beginner."),
    (r"enthusiastic", "The user wants an enthusiastic tone."),
)
_GENERIC = {
    "Negative_Feedback": "The user was dissatisfied with the previous answer and expects a relevant, helpful "
                         "response.",
    "Ignored": "The user wants the response to address exactly what they asked.",
    "Lower_Quality": "The user expects at least the quality they get from other assistants or tools.",
    "Unrealistic_Expectation": "The user wants the assistant to attempt the task as asked rather than "
                               "explain its limitations.",
    "No_Engagement": "The user wants the assistant to answer directly instead of asking follow-up questions.",
}


class PreferenceError(ValueError):
    """The summariser gave no valid answer after every attempt; ``errors`` lists each attempt's reason."""

    def __init__(self, message: str, errors: Sequence[str]) -> None:
        super().__init__(message)
        self.errors = list(errors)


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTE_CHARS else flat[: QUOTE_CHARS - 3].rstrip() + "..."


def preference_sentences(utterance: str, dsat_labels: Sequence[str]) -> list[str]:
    """Complete sentences stating what one DSAT utterance says the user wants."""
    out: list[str] = []
    low = utterance.lower()
    labels = [label for label in dsat_labels if label != NA]
    if "Factual_Error" in labels:
        out.append(f'The user expects factually correct information; they pointed out an error: "{_quote(utterance)}"')
    if "Style" in labels:
        styles = [sentence for pattern, sentence in _STYLE if re.search(pattern, low)]
        out.extend(styles or [f'The user wants a different style of answer: "{_quote(utterance)}"'])
    if "Insufficient_Detail" in labels:
        example = re.search(r"example|beispiel|exemple|ejemplo|exemplo|пример|例", low)
        out.append("The user wants more detailed and specific information"
                   + (", with concrete examples." if example else "."))
    if "Revision" in labels and "Style" not in labels and "Factual_Error" not in labels:
        out.append(f'The user wants the previous answer revised as requested: "{_quote(utterance)}"')
    out.extend(_GENERIC[label] for label in labels if label in _GENERIC)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Episode:
    """One feedback episode: the query turn, the DSAT turns that reacted to its answer, the sentences."""

    query: int
    feedback_turns: tuple[int, ...]
    preferences: tuple[str, ...]


def episodes(turns: Sequence[Mapping[str, str]], result: FeedbackResult) -> list[Episode]:
    """The rule segmentation described in the module docstring (turn ids are 1-based)."""
    users = [user for user, _ in group_turns(turns)]
    if len(users) != len(result.turns):
        raise ValueError(f"{len(result.turns)} turn labels for {len(users)} user turns")
    out: list[Episode] = []
    k = 2
    while k <= len(users):
        label = result.turns[k - 1]
        if not label.dsat:
            k += 1
            continue
        query = next((j for j in range(k - 1, 0, -1)
                      if result.turns[j - 1].state in ("NEWTOPIC", "CONTINUATION") and not result.turns[j - 1].dsat),
                     1)
        run = [k]
        while run[-1] + 1 <= len(users) and result.turns[run[-1]].dsat:
            run.append(run[-1] + 1)
        sentences: list[str] = []
        for j in run:
            sentences.extend(preference_sentences(users[j - 1], result.turns[j - 1].dissatisfaction))
        out.append(Episode(query, tuple(run), tuple(dict.fromkeys(sentences))))
        k = run[-1] + 1
    return out


def rule_summary(turns: Sequence[Mapping[str, str]], result: FeedbackResult) -> list[dict]:
    """Offline summary in the paper's format; episodes without any sentence are left out."""
    return [{"query": e.query, "preferences": list(e.preferences)} for e in episodes(turns, result) if e.preferences]


_INSTRUCTION = """\
# Conversation between User and AI
Turns are numbered T-1, T-2, ... by user utterance.
<|begin_of_history|>
{history}
<|end_of_history|>

# Instruction
Identify the user's query and the user's preferences in this conversation. The query is the turn id of \
the user's first attempt at the request, before they gave the AI any feedback. The preferences must come \
only from what the user said in their feedback, each written as one complete sentence. If the user gave \
feedback on several requests, give one object per request. Answer with JSON only, in this shape:
[{{"query": <turn id as a number>, "preferences": ["<preference 1>", "<preference 2>"]}}]
"""


def summary_prompt(turns: Sequence[Mapping[str, str]]) -> str:
    blocks = []
    for k, (user, ai) in enumerate(group_turns(turns), 1):
        blocks.append(f"T-{k} USER: {user}" + (f"\nT-{k} AI: {ai}" if ai else ""))
    return _INSTRUCTION.format(history="\n\n".join(blocks))


def parse_summary(text: str | None, n_turns: int) -> list[dict]:
    """Validated summary list, or :class:`ValueError` naming the item and the problem."""
    parsed = parse_json_answer(text, expect=(list, dict))
    if not parsed.ok:
        raise ValueError(f"no JSON answer: {parsed.error}")
    value = parsed.value if isinstance(parsed.value, list) else [parsed.value]
    if not value:
        raise ValueError("empty summary list")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or "query" not in item or "preferences" not in item:
            raise ValueError(f"item {i}: expected an object with 'query' and 'preferences'")
        query = item["query"]
        if isinstance(query, str) and re.fullmatch(r"\s*T?-?\s*(\d+)\s*", query):
            query = int(re.sub(r"\D", "", query))
        if not isinstance(query, int) or isinstance(query, bool) or not 1 <= query <= n_turns:
            raise ValueError(f"item {i}: query {item['query']!r} is not a turn id in 1..{n_turns}")
        prefs = item["preferences"]
        if isinstance(prefs, str):
            prefs = [prefs]
        if not isinstance(prefs, list) or not prefs or not all(isinstance(p, str) and p.strip() for p in prefs):
            raise ValueError(f"item {i}: preferences must be a non-empty list of sentences")
        out.append({"query": query, "preferences": [p.strip() for p in prefs]})
    return out


def summarise_many(items: Sequence[tuple[Sequence[Mapping[str, str]], FeedbackResult]],
                   backend: ChatBackend | None = None, *, max_attempts: int = 3,
                   progress: bool = True) -> list[tuple[list[dict] | None, list[str]]]:
    """(summary or None, errors) per conversation; with a backend, invalid answers are retried."""
    if backend is None:
        return [(rule_summary(turns, result), []) for turns, result in items]
    sizes = [len(group_turns(turns)) for turns, _ in items]
    results: list[tuple[list[dict] | None, list[str]]] = [(None, []) for _ in items]
    todo = list(range(len(items)))
    for attempt in range(max_attempts):
        if not todo:
            break
        params = {"temperature": 0.0} if attempt == 0 else {"temperature": 0.7, "seed": attempt}
        requests = [ChatRequest.from_prompt(summary_prompt(items[i][0]), max_new_tokens=MAX_NEW_TOKENS, **params)
                    for i in todo]
        responses = run_chat(backend, requests, desc=f"preference summaries (try {attempt + 1})", progress=progress)
        still = []
        for i, response in zip(todo, responses, strict=True):
            try:
                if not response.ok:
                    raise ValueError(f"request failed: {response.error}")
                results[i] = (parse_summary(response.text, sizes[i]), results[i][1])
            except ValueError as exc:
                results[i][1].append(str(exc))
                still.append(i)
        todo = still
    return results


def summarise(turns: list[dict], result: FeedbackResult, backend: ChatBackend | None = None) -> list[dict]:
    """``[{"query": turn id, "preferences": [...]}]`` for one labelled conversation (rules when no backend).

    Raises :class:`PreferenceError` when every backend attempt was invalid.
    """
    [(summary, errors)] = summarise_many([(turns, result)], backend, progress=False)
    if summary is None:
        raise PreferenceError(f"no valid preference summary after {len(errors)} attempts: {errors[-1]}", errors)
    return summary


def guided_messages(prompt: Sequence[Mapping[str, str]], preferences: Sequence[str]) -> list[dict[str, str]]:
    """The chat that asks a model for the preferred response: the preferences and the safety instruction
    as a system message, then the prompt conversation."""
    items = "\n".join(f"- {p}" for p in preferences)
    system = ("You are a helpful assistant. Write your next reply to this conversation. From the user's "
              f"feedback we know they want the following:\n{items}\nFollow these preferences in your "
              "reply. The response should be safe.")
    return [{"role": "system", "content": system}, *({"role": m["role"], "content": m["content"]} for m in prompt)]

