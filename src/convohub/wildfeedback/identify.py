"""Step 1 of WildFeedback: feedback signal identification (SPUR-style rubrics), one call per conversation.

The prompt follows the structure of the paper's Appendix A.1 in convohub's own words: the label
definitions as JSON, the task (summary, preceding-turn relation, domain, intent, satisfaction,
dissatisfaction, state for every turn, judged on the user's utterance with respect to the previous AI
response), the output format (a JSON list, one ``{"T-k": {...}}`` object per turn, same length and order as
the input), then the dialogue. Turns are numbered by *user* utterance: ``T-k`` holds the k-th user message
and the AI response that followed it.

Answers are validated by :func:`convohub.wildfeedback.labels.validate_turn_list`. An invalid answer is
retried (sampled, new seed: a greedy retry would repeat the same answer) up to ``max_attempts`` calls in
all and then recorded as a failure -- never repaired by guessing labels. Without a backend the rule
labeller of :mod:`convohub.wildfeedback.rules` answers.

Two prompt styles (``prompt_style``): ``"full"`` is the paper's single prompt above, for capable endpoints;
``"split"`` (:mod:`convohub.wildfeedback.turn_prompts`) asks one user turn and one field at a time with a
closed answer set, which a 135M model can follow. :func:`default_prompt_style` picks ``"split"`` for local
models and for SmolLM2 behind a server, ``"full"`` otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed, parse_json_answer
from convohub.wildfeedback.labels import (
    DOMAIN_LABELS,
    DSAT_DEFINITIONS,
    INTENT_DEFINITIONS,
    SAT_DEFINITIONS,
    STATE_DEFINITIONS,
    FeedbackResult,
    LabelError,
    validate_turn_list,
)
from convohub.wildfeedback.rules import LABELLER_NAME, label_turns

MAX_NEW_TOKENS = 2048
PROMPT_STYLES = ("split", "full")
#: Characters of one utterance shown to the labeller; long pastes carry no feedback signal past this.
MAX_UTTERANCE_CHARS = 2000


class IdentificationError(ValueError):
    """The labeller gave no valid answer after every attempt; ``errors`` lists each attempt's reason."""

    def __init__(self, message: str, errors: Sequence[str]) -> None:
        super().__init__(message)
        self.errors = list(errors)


def _definitions() -> str:
    def entries(table: Mapping[str, str]) -> list[dict[str, str]]:
        return [{"label": k, "definition": v} for k, v in table.items()]

    spec = {
        "preceding_topical_relation_labels": [
            {"label": "YES", "definition": "the turn is related in topic or subtopic to the earlier conversation"},
            {"label": "NO", "definition": "the turn is unrelated to the earlier conversation, or is the first turn"},
        ],
        "domain_labels": list(DOMAIN_LABELS),
        "intent_labels": entries(INTENT_DEFINITIONS),
        "satisfaction_labels": entries(SAT_DEFINITIONS),
        "dissatisfaction_labels": entries(DSAT_DEFINITIONS),
        "state_labels": entries(STATE_DEFINITIONS),
    }
    return json.dumps(spec, indent=1, ensure_ascii=False)


_TASK = """\
## TASK
Below is a dialogue between a user and an AI assistant, split into turns T-1 ... T-{n}. Each turn is one \
user utterance followed by the AI response to it. For every turn, looking at that turn's user utterance, \
fill in these fields:
- "summary": what the user says, in at most three sentences.
- "preceding_topical_relation": one label from preceding_topical_relation_labels (always "NO" for T-1).
- "domain": one label from domain_labels; when the relation is "YES" keep the previous turn's domain.
- "intent": one label from intent_labels, written exactly as listed (e.g. "INTENT:3-CREATION").
- "satisfaction": every applicable label from satisfaction_labels, judging the user utterance against \
the PREVIOUS turn's AI response (["N/A"] if none, and always ["N/A"] for T-1).
- "dissatisfaction": every applicable label from dissatisfaction_labels, judged the same way.
- "state": one label from state_labels.

## OUTPUT FORMAT
Answer with one JSON list and nothing else. It must contain exactly {n} objects, in turn order, each keyed \
by its turn id:
[{{"T-1": {{"summary": "...", "preceding_topical_relation": "NO", "domain": "...", "intent": "INTENT:...", \
"satisfaction": ["N/A"], "dissatisfaction": ["N/A"], "state": "NEWTOPIC"}}}}, {{"T-2": {{...}}}}]

## DIALOGUE
{dialogue}

## OUTPUT
"""


def _clip(text: str) -> str:
    return text if len(text) <= MAX_UTTERANCE_CHARS else text[:MAX_UTTERANCE_CHARS] + " [...]"


def group_turns(turns: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    """(user utterance, following AI response or "") per user turn; leading assistant turns are skipped."""
    out: list[tuple[str, str]] = []
    for i, turn in enumerate(turns):
        if turn["role"] != "user":
            continue
        nxt = turns[i + 1] if i + 1 < len(turns) else None
        out.append((turn["content"], nxt["content"] if nxt is not None and nxt["role"] == "assistant" else ""))
    return out


def labelling_prompt(turns: Sequence[Mapping[str, str]]) -> str:
    """The full SPUR-style prompt for one conversation."""
    grouped = group_turns(turns)
    dialogue = "\n".join(
        json.dumps({f"T-{k}": {"User": _clip(user), "AI": _clip(ai)}}, ensure_ascii=False)
        for k, (user, ai) in enumerate(grouped, 1)
    )
    return "## LABEL DEFINITIONS\n" + _definitions() + "\n\n" + _TASK.format(n=len(grouped), dialogue=dialogue)


def labelling_request(turns: Sequence[Mapping[str, str]], attempt: int = 0,
                      max_new_tokens: int = MAX_NEW_TOKENS) -> ChatRequest:
    """Attempt 0 is greedy; retries sample with a per-attempt seed so they can differ (and cache apart)."""
    params = {"temperature": 0.0} if attempt == 0 else {"temperature": 0.7, "seed": attempt}
    return ChatRequest.from_prompt(labelling_prompt(turns), max_new_tokens=max_new_tokens, **params)


def parse_labelling(text: str | None, n_turns: int, labeller: str) -> FeedbackResult:
    """A labeller answer -> :class:`FeedbackResult`, or :class:`LabelError` saying what is wrong."""
    parsed = parse_json_answer(text, expect=(list, dict))
    if not parsed.ok:
        raise LabelError(f"no JSON answer: {parsed.error}")
    return FeedbackResult(turns=validate_turn_list(parsed.value, n_turns), labeller=labeller)


def _check_turns(turns: Sequence[Mapping[str, str]]) -> int:
    for i, turn in enumerate(turns):
        if not isinstance(turn, Mapping) or turn.get("role") not in ("user", "assistant") or not isinstance(
                turn.get("content"), str):
            raise ValueError(f"turns[{i}] must be {{'role': 'user'|'assistant', 'content': str}}, got {turn!r}")
    n = sum(t["role"] == "user" for t in turns)
    if n == 0:
        raise ValueError("the conversation has no user turn to label")
    return n


@dataclass
class Outcome:
    """One conversation's identification: ``result`` on success, else ``errors`` (one per attempt)."""

    result: FeedbackResult | None
    errors: list[str]
    attempts: int


def default_prompt_style(backend: ChatBackend) -> str:
    """``"split"`` for a local model or SmolLM2 behind a server (it cannot follow the full prompt: measured),
    ``"full"`` (the paper's single prompt) for any other endpoint."""
    while isinstance(getattr(backend, "inner", None), ChatBackend):  # a cache or other wrapper
        backend = backend.inner
    model = str(getattr(backend, "model_id", "")).lower()
    return "split" if backend.kind == "local" or "smollm2" in model else "full"


def labeller_label(backend: ChatBackend | None, prompt_style: str | None = None) -> str:
    """The name rows and cards record for this labeller and prompt style."""
    if backend is None:
        return LABELLER_NAME
    style = prompt_style or default_prompt_style(backend)
    if style == "split":
        from convohub.wildfeedback.turn_prompts import labeller_name

        return labeller_name(backend)
    return backend.name


def identify_many(conversations: Sequence[Sequence[Mapping[str, str]]], backend: ChatBackend | None = None,
                  *, max_attempts: int = 3, chunk_size: int = 64, progress: bool = True,
                  max_new_tokens: int = MAX_NEW_TOKENS, prompt_style: str | None = None) -> list[Outcome]:
    """Label many conversations; with a backend, each round sends every still-unlabelled one at once
    (the endpoint backend runs them concurrently) and only invalid answers go to the next round.
    ``prompt_style`` is ``"split"`` or ``"full"`` (default: :func:`default_prompt_style`)."""
    sizes = [_check_turns(turns) for turns in conversations]
    if backend is None:
        return [Outcome(FeedbackResult(label_turns(turns), LABELLER_NAME), [], 0) for turns in conversations]
    style = prompt_style or default_prompt_style(backend)
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {prompt_style!r}")
    if style == "split":
        from convohub.wildfeedback.turn_prompts import identify_split

        return [Outcome(o.result, o.errors, o.attempts)
                for o in identify_split(conversations, backend, max_attempts=max_attempts, progress=progress)]
    labeller = backend.name
    asked = ask_until_parsed(backend, len(conversations),
                             lambda i, attempt: labelling_request(conversations[i], attempt, max_new_tokens),
                             lambda i, text: parse_labelling(text, sizes[i], labeller),
                             max_attempts=max_attempts, desc="feedback labels (try {try})", progress=progress,
                             chunk_size=chunk_size)
    return [Outcome(p.value, p.errors, p.attempts) for p in asked]


def identify(turns: list[dict], backend: ChatBackend | None = None, *, max_attempts: int = 3,
             max_new_tokens: int = MAX_NEW_TOKENS, prompt_style: str | None = None) -> FeedbackResult:
    """Labels of one conversation (``[{"role", "content"}, ...]``); ``backend=None`` uses the rule labeller.

    Raises :class:`IdentificationError` when every attempt of the backend gave an invalid answer; with the
    split prompts its message names each turn and question that failed.
    """
    [outcome] = identify_many([turns], backend, max_attempts=max_attempts, progress=False,
                              max_new_tokens=max_new_tokens, prompt_style=prompt_style)
    if outcome.result is None:
        detail = "; ".join(outcome.errors) if (prompt_style or default_prompt_style(backend)) == "split" \
            else outcome.errors[-1]
        raise IdentificationError(f"{labeller_label(backend, prompt_style)}: no valid labels after "
                                  f"{outcome.attempts} attempts: {detail}", outcome.errors)
    return outcome.result
