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

Two prompt styles for a backend (``prompt_style``): ``"full"`` (the default) is the paper's single prompt
above, for capable endpoints; ``"episode"`` asks a small model one short question per DSAT feedback turn --
the request and the user's feedback, answered with one sentence after two worked examples -- and takes the
episodes and their query turns from the labels with the rule segmentation (:func:`episodes`), so the model
writes only the preference sentences; :func:`summariser_name` says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed, few_shot_messages, parse_json_answer
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
                   progress: bool = True, prompt_style: str = "full") -> list[tuple[list[dict] | None, list[str]]]:
    """(summary or None, errors) per conversation; with a backend, invalid answers are retried.
    ``prompt_style`` is ``"full"`` (the paper's single prompt) or ``"episode"`` (see the module docstring)."""
    if backend is None:
        return [(rule_summary(turns, result), []) for turns, result in items]
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {prompt_style!r}")
    if prompt_style == "episode":
        return summarise_episodes(items, backend, max_attempts=max_attempts, progress=progress)
    sizes = [len(group_turns(turns)) for turns, _ in items]

    def request(i: int, attempt: int) -> ChatRequest:
        params = {"temperature": 0.0} if attempt == 0 else {"temperature": 0.7, "seed": attempt}
        return ChatRequest.from_prompt(summary_prompt(items[i][0]), max_new_tokens=MAX_NEW_TOKENS, **params)

    asked = ask_until_parsed(backend, len(items), request, lambda i, text: parse_summary(text, sizes[i]),
                             max_attempts=max_attempts, desc="preference summaries (try {try})",
                             progress=progress)
    return [(parsed.value, parsed.errors) for parsed in asked]


# --- "episode" prompts: one short question per DSAT feedback turn (a small model can follow these) ------

PROMPT_STYLES = ("full", "episode")
RULES_NAME = "rules:preference-templates-v1"
#: Characters of the request and of the feedback shown in one episode question.
EPISODE_CONTEXT_CHARS = 300
EPISODE_MAX_NEW_TOKENS = 48
_EPISODE_SYSTEM = ("You read a user's feedback on an AI assistant's reply and write one complete sentence, "
                   "starting with 'The user wants', that says what the user wants instead. Use only the user's "
                   "feedback.")
#: The AI reply is left out on purpose: shown it, SmolLM2-135M restates the reply the user rejected as their
#: wish (measured on the hand-written set: 43% of its sentences misread with the reply, 27% without).
_EPISODE_TURN = "Request: {request}\nUser feedback: {feedback}\nWhat the user wants:"
#: Two worked examples (written for convohub, not from any gold set): without them a 135M model
#: continues the conversation instead of describing the user.
_EPISODE_SHOTS = (
    ("Write a birthday message for my grandma.", "Too short and plain. She's turning 90, make it warmer.",
     "The user wants a longer, warmer message that mentions their grandmother turning 90."),
    ("What is the boiling point of water in Fahrenheit?", "No, that's Celsius. It's 212 F.",
     "The user expects the correct boiling point of water in Fahrenheit, which is 212 degrees."),
)


def summariser_name(backend: ChatBackend | None, prompt_style: str = "full") -> str:
    """What rows and cards record for this summariser and prompt style."""
    if backend is None:
        return RULES_NAME
    if prompt_style == "episode":
        return f"{backend.name} (episode prompts; episodes and query turns {RULES_NAME})"
    return backend.name


def episode_messages(request: str, feedback: str) -> list[dict[str, str]]:
    """The system instruction, two worked examples, then the request and the feedback turn to describe."""
    shots = [(_EPISODE_TURN.format(request=shot_request, feedback=shot_feedback), sentence)
             for shot_request, shot_feedback, sentence in _EPISODE_SHOTS]
    return few_shot_messages(_EPISODE_SYSTEM, shots, _EPISODE_TURN.format(
        request=_clip(request, EPISODE_CONTEXT_CHARS), feedback=_clip(feedback, EPISODE_CONTEXT_CHARS)))


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + " ..."


def parse_preference_sentence(text: str | None) -> str:
    """The first line of the answer as one sentence (leading labels, bullets and quotes stripped), or
    :class:`ValueError` when it is not a sentence of 4 to 60 words."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        raise ValueError("empty answer")
    line = re.sub(r"^(?:what the user wants|preference|answer)\s*:\s*", "", lines[0], flags=re.IGNORECASE)
    line = line.strip(" -*\"'`").strip()
    n_words = len(line.split())
    if not 4 <= n_words <= 60:
        raise ValueError(f"expected one sentence of 4-60 words, got {n_words} words: {line[:80]!r}")
    return line if line[-1] in ".!?" else line + "."


def summarise_episodes(items: Sequence[tuple[Sequence[Mapping[str, str]], FeedbackResult]], backend: ChatBackend,
                       *, max_attempts: int = 3, progress: bool = True) -> list[tuple[list[dict] | None, list[str]]]:
    """The ``"episode"`` style: episodes from the labels, one question per DSAT turn (batched; first greedy,
    then sampled with a new seed for the answers that did not parse). A conversation fails (None) when any of
    its questions stays unanswered; the errors name the turn."""
    questions: list[tuple[int, int, int, list[dict[str, str]]]] = []  # (item, episode, turn, messages)
    plans: list[list[Episode]] = []
    for i, (turns, result) in enumerate(items):
        grouped = group_turns(turns)
        plan = episodes(turns, result)
        plans.append(plan)
        for e, episode in enumerate(plan):
            for k in episode.feedback_turns:
                questions.append((i, e, k, episode_messages(grouped[episode.query - 1][0], grouped[k - 1][0])))

    def request(q: int, attempt: int) -> ChatRequest:
        params = {"temperature": 0.0} if attempt == 0 else {"temperature": 0.7, "seed": attempt}
        return ChatRequest(messages=questions[q][3], max_new_tokens=EPISODE_MAX_NEW_TOKENS, **params)

    asked = ask_until_parsed(backend, len(questions), request,
                             lambda _, text: parse_preference_sentence(text), max_attempts=max_attempts,
                             desc="preference sentences (try {try})", progress=progress)
    answers = {q: parsed.value for q, parsed in enumerate(asked) if parsed.value is not None}
    errors = {q: parsed.errors for q, parsed in enumerate(asked)}
    out: list[tuple[list[dict] | None, list[str]]] = []
    by_item: dict[int, list[int]] = {}
    for q, (i, _, _, _) in enumerate(questions):
        by_item.setdefault(i, []).append(q)
    for i, plan in enumerate(plans):
        qs = by_item.get(i, [])
        failed = [q for q in qs if q not in answers]
        item_errors = [f"T-{questions[q][2]}: {err}" for q in qs for err in errors.get(q, [])]
        if failed:
            out.append((None, item_errors))
            continue
        summary = []
        for e, episode in enumerate(plan):
            sentences = [answers[q] for q in qs if questions[q][1] == e]
            summary.append({"query": episode.query, "preferences": list(dict.fromkeys(sentences))})
        out.append((summary, item_errors))
    return out


def summarise(turns: list[dict], result: FeedbackResult, backend: ChatBackend | None = None, *,
              prompt_style: str = "full") -> list[dict]:
    """``[{"query": turn id, "preferences": [...]}]`` for one labelled conversation (rules when no backend).

    Raises :class:`PreferenceError` when every backend attempt was invalid.
    """
    [(summary, errors)] = summarise_many([(turns, result)], backend, progress=False, prompt_style=prompt_style)
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

