"""Step 1 of WildFeedback in calls a small model can follow ("split" prompts).

The paper's single prompt (:mod:`convohub.wildfeedback.identify`, style ``"full"``) asks for seven fields of
every turn as one JSON list; SmolLM2-135M-Instruct answers it with a JSON object or prose (measured: it
fails after 3 attempts). Split into the smallest questions, each with a closed answer set:

1. ``reaction`` -- one user turn T-k (k >= 2) with the AI reply just before it as context: is the user
   satisfied, dissatisfied, or neither? Answered with one letter (A/B/C);
2. ``sat_label`` / ``dsat_label`` -- only for a satisfied (dissatisfied) turn: the one SPUR label that fits
   best, chosen from the closed list with a one-line gloss each, after two worked examples (without them
   the model answers with prose).

T-1 has no previous AI reply, so it never gets a feedback label (as in the full prompt). The SPUR fields
that carry no feedback signal (summary, state, preceding-turn relation, domain, intent) are filled by the
rule labeller around the model's feedback labels (:func:`convohub.wildfeedback.rules.label_turns` with
``feedback=``), and the labeller name says so.

How the model answers: a local model by likelihood over the question's closed answers (the letters, or the
labels), read in one forward pass, so every answer is a listed one; the labeller name says so. Generating
instead, SmolLM2-135M named no listed label for 27 of 98 label questions even after six sampled tries, and
the labelling of the 70 hand-labelled conversations took 115 s instead of 46 s (2 CPU cores). An endpoint
generates: its answers are parsed leniently (a letter, a word, a label name anywhere in the text); an
unparseable answer is retried with sampling (new seed) up to ``max(max_attempts, MIN_ATTEMPTS)`` calls and
then reported as a failure naming the turn and the question -- never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed, few_shot_messages
from convohub.llm.choices import as_choice_backend, local_model
from convohub.wildfeedback.labels import NA, FeedbackResult
from convohub.wildfeedback.rules import LABELLER_NAME, label_turns

#: Characters of the AI reply and of the user message shown in one question; feedback sits in the
#: user's words, the reply is only context (and prompt length is most of a small model's cost on CPU).
CONTEXT_CHARS = 200
MESSAGE_CHARS = 400
MAX_NEW_TOKENS = 6
#: Calls per question at least: a one-label question costs a few percent of a full prompt, and SmolLM2's
#: sampled retries find a listed label within six tries where three often are not enough (measured).
MIN_ATTEMPTS = 6
#: One-line glosses of the SPUR labels (the full definitions are in :mod:`convohub.wildfeedback.labels`),
#: short so that the closed list stays a short prompt.
SAT_GLOSSES = {
    "Gratitude": "thanks the AI", "Learning": "learned something new", "Compliance": "followed the advice, or it worked",
    "Praise": "praises the answer", "Personal_Details": "shares personal details", "Humor": "jokes or teases",
    "Acknowledgment": "understands or agrees", "Positive_Closure": "ends the chat on a happy note",
    "Getting_There": "better, but not there yet",
}
DSAT_GLOSSES = {
    "Negative_Feedback": "frustrated or annoyed", "Revision": "asks to redo or change the answer",
    "Factual_Error": "says the answer is wrong", "Unrealistic_Expectation": "wants what the AI cannot do",
    "No_Engagement": "ignores the AI's questions", "Ignored": "says the request was ignored",
    "Lower_Quality": "says it was better before or elsewhere", "Insufficient_Detail": "wants more detail",
    "Style": "wants another style, length or format",
}
REACTIONS = {"A": "sat", "B": "dsat", "C": "none"}

_SYSTEM = "You classify how a user reacts to an AI assistant's reply. Answer with one letter."
_REACTION = """\
AI reply: {ai}
User message: {user}

How does the user react to the AI reply?
A. Satisfied: thanks, praise, agrees, or says it worked
B. Dissatisfied: complains, corrects a mistake, or asks to change the reply
C. Neither: asks something new or continues
Answer with A, B or C."""
_LABEL_SYSTEM = "Label the user's message with one of these labels:\n{options}\nAnswer with the label only."
_TURN = "AI reply: {ai}\nUser message: {user}\nLabel of the user message:"
#: Two worked examples per polarity (written for convohub, different labels so neither is simply copied):
#: without them SmolLM2-135M answers the closed list with prose ("To complete the feedback, consider...").
_LABEL_SHOTS = {
    "sat": (("Restart the router and wait a minute.", "Thanks, that fixed it!", "Compliance"),
            ("Octopuses have three hearts.", "Wow, I never knew that.", "Learning")),
    "dsat": (("The capital of Canada is Toronto.", "No, it's Ottawa.", "Factual_Error"),
             ("Here is a 400-word summary of the report ...", "Way too long, use bullet points.", "Style")),
}


def labeller_name(backend: ChatBackend) -> str:
    """What rows and cards record for this labeller: the model, the prompt style, how it answers, and the
    rules' share."""
    how = ", closed answers by likelihood" if local_model(backend) is not None else ""
    return f"{backend.name} (split prompts{how}; other fields {LABELLER_NAME})"


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rstrip() + " ..."


def reaction_messages(ai: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _REACTION.format(ai=_clip(ai, CONTEXT_CHARS) or "(none)",
                                                         user=_clip(user, MESSAGE_CHARS))}]


def _choices(polarity: str) -> tuple[str, ...]:
    return tuple(SAT_GLOSSES if polarity == "sat" else DSAT_GLOSSES)


def label_messages(ai: str, user: str, polarity: str) -> list[dict[str, str]]:
    """The closed label list as the system message, two worked examples, then the turn."""
    table = SAT_GLOSSES if polarity == "sat" else DSAT_GLOSSES
    options = "\n".join(f"- {label}: {gloss}" for label, gloss in table.items())
    shots = [(_TURN.format(ai=shot_ai, user=shot_user), label) for shot_ai, shot_user, label in _LABEL_SHOTS[polarity]]
    return few_shot_messages(_LABEL_SYSTEM.format(options=options), shots,
                             _TURN.format(ai=_clip(ai, CONTEXT_CHARS) or "(none)", user=_clip(user, MESSAGE_CHARS)))


_WORDS = (("dissatisfied", "dsat"), ("unsatisfied", "dsat"), ("not satisfied", "dsat"), ("satisfied", "sat"),
          ("neither", "none"), ("neutral", "none"))


def parse_reaction(text: str | None) -> str | None:
    """``"sat"``, ``"dsat"``, ``"none"``, or None when the answer names no option.

    Accepted: a leading letter (``B``, ``B.``, ``(b)``, ``Answer: B``) or the option's word
    (``Dissatisfied``), as small models answer either way.
    """
    if not text:
        return None
    t = text.strip()
    m = re.match(r"^\W*(?:answer\s*(?:is)?\s*[:\-]?\s*)?\(?([ABC])\b", t, re.IGNORECASE)
    if m:
        return REACTIONS[m.group(1).upper()]
    low = t.lower()
    hits = [(low.find(word), value) for word, value in _WORDS if word in low]
    return min(hits)[1] if hits else None


def _label_key(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text).strip().lower()


def parse_label(text: str | None, polarity: str) -> str | None:
    """The first label of the closed list named in ``text`` (case, spaces and underscores ignored)."""
    if not text:
        return None
    low = _label_key(text)
    hits = []
    for label in _choices(polarity):
        m = re.search(rf"(?<!\w){re.escape(_label_key(label))}(?!\w)", low)
        if m:
            hits.append((m.start(), label))
    return min(hits)[1] if hits else None


def _request(messages: list[dict[str, str]], attempt: int) -> ChatRequest:
    """Attempt 0 is greedy; a retry samples with its own seed, since a greedy retry repeats itself."""
    params = {"temperature": 0.0} if attempt == 0 else {"temperature": 1.0, "seed": attempt}
    return ChatRequest(messages=messages, max_new_tokens=MAX_NEW_TOKENS, **params)


@dataclass
class _Question:
    conv: int
    turn: int  # 1-based user-turn number (T-k)
    field: str  # reaction | sat_label | dsat_label
    messages: list[dict[str, str]]
    answer: str | None = None
    errors: list[str] = field(default_factory=list)


def _options(field: str) -> tuple[str, ...]:
    """The closed answers of a question: the reaction's letters, or the polarity's labels."""
    return tuple(REACTIONS) if field == "reaction" else _choices(field.split("_")[0])


def _ask(backend: ChatBackend, questions: list[_Question], max_attempts: int, progress: bool) -> None:
    """Answer every question, re-asking only unparseable ones (bounded); sets ``answer`` or ``errors``.

    A local model answers each question by likelihood over its closed answers
    (:func:`convohub.llm.choices.as_choice_backend`), so every answer is a listed one at the first call; an
    endpoint answers by generation, parsed leniently and re-asked with sampling."""
    def parse(i: int, text: str) -> str | None:
        q = questions[i]
        return parse_reaction(text) if q.field == "reaction" else parse_label(text, q.field.split("_")[0])

    # a local model is asked per field (each field has its own closed answers); an endpoint gets one batch
    local = local_model(backend) is not None
    for field_name in dict.fromkeys(q.field if local else "" for q in questions):
        picked = [i for i, q in enumerate(questions) if not local or q.field == field_name]
        answerer = as_choice_backend(backend, _options(field_name)) if local else backend
        asked = ask_until_parsed(answerer, len(picked),
                                 lambda i, attempt, picked=picked: _request(questions[picked[i]].messages, attempt),
                                 lambda i, text, picked=picked: parse(picked[i], text),
                                 max_attempts=max_attempts, desc="feedback labels, split prompts (try {try})",
                                 progress=progress)
        for i, parsed in zip(picked, asked, strict=True):
            questions[i].answer, questions[i].errors = parsed.value, parsed.errors


def user_turns_with_context(turns: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    """(AI reply just before, user utterance) per user turn; "" when no AI reply precedes it."""
    out = []
    for i, turn in enumerate(turns):
        if turn["role"] == "user":
            prev = turns[i - 1] if i > 0 else None
            out.append((prev["content"] if prev is not None and prev["role"] == "assistant" else "", turn["content"]))
    return out


@dataclass
class SplitOutcome:
    """One conversation: ``result`` when every question got a valid answer, else ``errors`` naming them."""

    result: FeedbackResult | None
    errors: list[str]
    attempts: int


def identify_split(conversations: Sequence[Sequence[Mapping[str, str]]], backend: ChatBackend, *,
                   max_attempts: int = 3, progress: bool = True) -> list[SplitOutcome]:
    """Label many conversations with the split prompts; all questions of a round go out as one batch.
    Each question gets ``max(max_attempts, MIN_ATTEMPTS)`` calls at most."""
    max_attempts = max(max_attempts, MIN_ATTEMPTS)
    contexts = [user_turns_with_context(turns) for turns in conversations]
    reactions = [_Question(c, k, "reaction", reaction_messages(ai, user))
                 for c, ctx in enumerate(contexts) for k, (ai, user) in enumerate(ctx, 1) if k >= 2]
    _ask(backend, reactions, max_attempts, progress)
    labels = [_Question(q.conv, q.turn, f"{q.answer}_label",
                        label_messages(*contexts[q.conv][q.turn - 1], q.answer))
              for q in reactions if q.answer in ("sat", "dsat")]
    _ask(backend, labels, max_attempts, progress)
    by_conv: dict[int, list[_Question]] = {}
    for q in reactions + labels:
        by_conv.setdefault(q.conv, []).append(q)
    name = labeller_name(backend)
    out = []
    for c, turns in enumerate(conversations):
        asked = by_conv.get(c, [])
        failed = [q for q in asked if q.answer is None]
        attempts = max((len(q.errors) + (q.answer is not None) for q in asked), default=0)
        if failed:
            out.append(SplitOutcome(None, [f"T-{q.turn} {q.field}: no valid answer after {len(q.errors)} attempts "
                                           f"({q.errors[-1]})" for q in failed], attempts))
            continue
        feedback: list[tuple[list[str], list[str]]] = [([NA], [NA]) for _ in contexts[c]]
        for q in asked:
            if q.field == "sat_label":
                feedback[q.turn - 1] = ([q.answer], [NA])
            elif q.field == "dsat_label":
                feedback[q.turn - 1] = ([NA], [q.answer])
        out.append(SplitOutcome(FeedbackResult(label_turns(turns, feedback=feedback), name), [], attempts))
    return out
