"""WildFeedback's user-guided evaluation: a pairwise LLM judge steered by the instance's checklist.

WildFeedback scores a model by asking a strong LLM which of two responses to a real conversation is
better, giving it the user's own preferences (summarised from their feedback) as a checklist. The prompt
follows WildBench's WB-Reward layout: instruction, conversation history, current query, Response A,
Response B, the checklist ("guide, not limit"), the rules with five choices ``A++ A+ A=B B+ B++`` and a
JSON answer whose last field is the choice. The paper reports win/tie/lose percentages of a candidate
against a baseline, with and without the checklist; this module computes exactly those numbers plus the
WB-Reward scale (+100/+50/0/-50/-100 from the candidate's side).

Position bias. LLM judges favour whichever response they read first (or second), and the paper does not
say how it placed the responses. Every pair is therefore judged twice, candidate as A and candidate as B,
and the two candidate-side rewards are *averaged* (the combination rule): the instance is a win if the
mean is > 0, a loss if < 0 and a tie if it is exactly 0. Averaging keeps the WB-Reward scale the paper
borrows (a reward per instance), reduces to the paper's win = A++/A+, tie = A=B, lose = B+/B++ when
both orders agree, and turns a judge that merely follows position (same letter both times) into a tie,
which is what an uninformative judgement should count as.

Three prompt styles. ``wb-reward`` is the paper's layout above, for capable judges (an endpoint such as
GPT-4o). ``compact`` asks the same pairwise question in a few plain lines with a one-word answer (``A``,
``B`` or ``tie``, read as ``A+``, ``B+``, ``A=B``). ``pointwise`` is for the offline judge,
SmolLM2-135M-Instruct: measured on the hand-labelled set, it answers "A" to the compact prompt in both
orders (every pair a tie) and cannot follow the JSON layout, so each response is rated *on its own*
("Is this a good answer ...? yes or no", with the checklist) and the response rated higher wins. With a
local model the rating is the next-token log-odds of yes over no (:class:`LogOddsJudge`, a closed answer
read without sampling), so close calls still rank; with any other backend it is the generated yes/no.
A pointwise rating has no position, so both orders give the same verdict by construction.
:func:`default_prompt_style` picks ``pointwise`` for SmolLM2 and ``wb-reward`` otherwise; how well each
judge agrees with people is measured on a hand-labelled set (:func:`judge_agreement`,
``convohub/data/judge_gold.jsonl``) and reported on the WildFeedback model card.

Judges are always named. :func:`resolve_judge` turns a name into a backend: an endpoint (URL + model), a
local model folder, ``"smollm2"`` (the offline model) or ``"lexical"`` (:class:`LexicalChecklistJudge`, a
transparent word-overlap rule for plumbing checks); with no name it uses the ``CONVOHUB_LLM_*`` endpoint
and otherwise refuses - no judge is ever picked silently. Every result carries ``judge`` (the model id).

Failures are never ties. A judge output with no recognisable choice -- or a request that failed -- is a
*parse failure*: it is counted in ``parse_failures`` and its instance is left out of the rates (both
orders are required, so every counted instance had its position bias cancelled). ``n_judged`` says how
many instances the rates are over; with none judged the rates and ``mean_reward`` are NaN, not 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from convohub.llm import (
    ChatBackend,
    ChatRequest,
    ChatResponse,
    backend_from_env,
    make_backend,
    parse_json_answer,
    run_chat,
)

#: The five choices of the WB-Reward rules, in order from "A much better" to "B much better".
VERDICTS = ("A++", "A+", "A=B", "B+", "B++")
#: WB-Reward of each choice seen from Response A's side (Response B's side is the negation).
REWARD_FOR_A = {"A++": 100, "A+": 50, "A=B": 0, "B+": -50, "B++": -100}
#: Enough room for the analysis fields of a real judge; lower it for smoke tests.
DEFAULT_MAX_NEW_TOKENS = 1024
#: The compact prompt's answer is one word; a few tokens leave room for a quote or a full stop.
COMPACT_MAX_NEW_TOKENS = 4
PROMPT_STYLES = ("wb-reward", "compact", "pointwise")
#: Names of the lexical stand-in judge (``judge_model="lexical"`` everywhere).
LEXICAL_JUDGE = "convohub-lexical-judge"
LEXICAL_NAMES = frozenset({"lexical", LEXICAL_JUDGE})
#: Per-text character budget of the compact prompt (a 135M judge loses the thread in long inputs).
COMPACT_TEXT_CHARS = 600
_HISTORY_ROLES = frozenset({"system", "user", "assistant"})

# A whole answer that is nothing but a verdict (optionally quoted, bracketed or followed by a full stop).
_BARE_VERDICT = re.compile(r"""\s*[\[\("'`*]*\s*(A\+\+|A\+|A\s*=\s*B|B\+\+|B\+)\s*[\]\)"'`*.]*\s*""")
# The choice field of an answer whose JSON is malformed (typically an unescaped quote in an analysis).
_CHOICE_FIELD = re.compile(r'"choice"\s*:\s*"\s*\[?\s*(A\+\+|A\+|A\s*=\s*B|B\+\+|B\+)\s*\]?\s*"')

_INSTRUCTION = """\
# Instruction

You are an expert evaluator of AI assistants. Below are a conversation between a user and an AI, the \
user's current query, and two candidate AI responses to that query (Response A and Response B). Read the \
conversation history and the query carefully to understand the task, then judge which response is \
better by following the rules below."""

_CONVERSATION = """\
# Conversation between User and AI

## History
<|begin_of_history|>
{history}
<|end_of_history|>

## Current User Query
<|begin_of_query|>
{query}
<|end_of_query|>

## Response A
<|begin_of_response_A|>
{response_a}
<|end_of_response_A|>

## Response B
<|begin_of_response_B|>
{response_b}
<|end_of_response_B|>"""

_CHECKLIST = """\
## Checklist
<|begin_of_checklist|>
{checklist}
<|end_of_checklist|>

This checklist was derived from what this user said they wanted. Let it guide your evaluation, but do \
not restrict your judgement to its items."""

_RULES = """\
## Rules
Compare the two responses in light of the user's query and the conversation so far. First analyse each \
response{checklist_clause}, then decide. Pick exactly one of five choices:
- "A++": Response A is much better than Response B.
- "A+": Response A is slightly better than Response B.
- "A=B": Both responses are of the same quality. Use this choice sparingly.
- "B+": Response B is slightly better than Response A.
- "B++": Response B is much better than Response A.

## Output Format
Answer with one JSON object and nothing else. Keep every text field to one or two sentences, and put the \
choice last:
{{
  "analysis of A": "[strengths and weaknesses of Response A]",
  "analysis of B": "[strengths and weaknesses of Response B]",
  "reason of A=B": "[where the two responses are equally good]",
  "reason of A>B": "[where Response A is better]",
  "reason of B>A": "[where Response B is better]",
  "choice": "[one of A++, A+, A=B, B+, B++]"
}}"""


_COMPACT = """\
{context}Question: {query}
{checklist}
Answer A: {response_a}

Answer B: {response_b}

Which answer is better{clause}? Reply with one word: A, B or tie."""

# The compact answer: a leading A / B / tie, optionally quoted or prefixed with "Answer".
_COMPACT_ANSWER = re.compile(r"""\s*[\[\("'`*]*\s*(?:answer\s+)?(a|b|tie)\b""", re.IGNORECASE)
_COMPACT_VERDICT = {"a": "A+", "b": "B+", "tie": "A=B"}


_POINTWISE = """\
{context}Question: {query}
{checklist}
Answer: {response}

Is this a good answer to the question{clause}? Reply yes or no."""

# A pointwise rating: "yes"/"no", optionally followed by the scorer's "(log-odds +1.2345)".
_RATING = re.compile(r"""\s*[\[\("'`*]*\s*(yes|no)\b(?:.*?log-odds\s*([+-]?\d+(?:\.\d+)?))?""",
                     re.IGNORECASE | re.S)


@dataclass(frozen=True)
class PairJudgement:
    """Both judgements of one instance, from the candidate's side.

    ``verdicts`` and ``rewards`` are ``(candidate as A, candidate as B)``; ``None`` marks a parse failure.
    ``reward`` (the mean of the two) and ``outcome`` are ``None`` unless both orders were parsed.
    """

    verdicts: tuple[str | None, str | None]
    rewards: tuple[int | None, int | None]
    raw: tuple[str, str]

    @property
    def judged(self) -> bool:
        return None not in self.rewards

    @property
    def reward(self) -> float | None:
        if not self.judged:
            return None
        return (self.rewards[0] + self.rewards[1]) / 2  # type: ignore[operator]

    @property
    def outcome(self) -> str | None:
        reward = self.reward
        if reward is None:
            return None
        return "win" if reward > 0 else "lose" if reward < 0 else "tie"


def parse_verdict(text: str | None) -> str | None:
    """The judge's choice as one of :data:`VERDICTS`, or None when the answer has no recognisable choice.

    Accepted: a JSON object whose ``choice`` is a verdict (brackets, quotes and spaces tolerated), a
    ``"choice": "..."`` field inside otherwise broken JSON (only if all such fields agree), or an answer
    that is a bare verdict token. Anything vaguer ("A is better") is a failure rather than a guess.
    """
    if not text or not text.strip():
        return None
    parsed = parse_json_answer(text, expect=dict)
    if parsed.ok and "choice" in parsed.value:
        choice = parsed.value["choice"]
        if isinstance(choice, str):
            match = _BARE_VERDICT.fullmatch(choice)
            return _normalise(match.group(1)) if match else None
        return None
    fields = {_normalise(m) for m in _CHOICE_FIELD.findall(text)}
    if len(fields) == 1:
        return fields.pop()
    match = _BARE_VERDICT.fullmatch(text)
    return _normalise(match.group(1)) if match else None


def parse_compact_verdict(text: str | None) -> str | None:
    """The compact prompt's one-word answer as a verdict: ``A`` -> ``A+``, ``B`` -> ``B+``, ``tie`` ->
    ``A=B``; anything else (including a sentence that does not start with the answer) is a failure."""
    if not text or not text.strip():
        return None
    match = _COMPACT_ANSWER.match(text)
    return _COMPACT_VERDICT[match.group(1).lower()] if match else None


def parse_rating(text: str | None) -> float | None:
    """A pointwise rating as a number: the log-odds of yes over no when the answer carries it
    (:class:`LogOddsJudge`), else +1 for a leading "yes" and -1 for "no"; None when neither."""
    if not text or not text.strip():
        return None
    match = _RATING.match(text)
    if not match:
        return None
    if match.group(2) is not None:
        return float(match.group(2))
    return 1.0 if match.group(1).lower() == "yes" else -1.0


def _normalise(token: str) -> str:
    return re.sub(r"\s+", "", token).upper()


def candidate_reward(verdict: str, candidate_is_a: bool) -> int:
    """WB-Reward of ``verdict`` for the candidate: A++ is +100 when the candidate is A, -100 when it is B."""
    reward = REWARD_FOR_A[verdict]
    return reward if candidate_is_a else -reward


def format_history(history: Sequence[Mapping[str, str]]) -> str:
    """Earlier turns as ``USER: ...`` / ``AI: ...`` blocks (the judge reads them as plain text)."""
    if not history:
        return "(no earlier turns)"
    names = {"user": "USER", "assistant": "AI", "system": "SYSTEM"}
    return "\n\n".join(f"{names[m['role']]}: {m['content']}" for m in history)


def _cut(text: str, limit: int = COMPACT_TEXT_CHARS) -> str:
    """``text`` within ``limit`` characters: the start is kept (where an answer says what it is about)."""
    text = " ".join(text.split()) if len(text) > limit else text.strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _short_context(history: Sequence[Mapping[str, str]], checklist: Sequence[str],
                   with_checklist: bool) -> tuple[str, str]:
    """The last exchange and the checklist block, clipped, as the small-model prompts show them."""
    last = [m for m in history if m["role"] in ("user", "assistant")][-2:]
    context = "".join(f"Earlier {'user' if m['role'] == 'user' else 'assistant'} message: {_cut(m['content'], 300)}\n"
                      for m in last)
    items = [c for c in checklist if c.strip()] if with_checklist else []
    block = ("The user wants:\n" + "\n".join(f"- {_cut(c, 200)}" for c in items) + "\n") if items else ""
    return context, block


def compact_prompt(
    history: Sequence[Mapping[str, str]],
    query: str,
    response_a: str,
    response_b: str,
    checklist: Sequence[str],
    with_checklist: bool = True,
) -> str:
    """The short prompt a 135M judge can follow: last exchange, query, checklist, A, B, one-word answer."""
    context, block = _short_context(history, checklist, with_checklist)
    return _COMPACT.format(context=context, query=_cut(query), checklist=block, response_a=_cut(response_a),
                           response_b=_cut(response_b), clause=" for what the user wants" if block else "")


def pointwise_prompt(
    history: Sequence[Mapping[str, str]],
    query: str,
    response: str,
    checklist: Sequence[str],
    with_checklist: bool = True,
) -> str:
    """One response rated on its own: last exchange, query, checklist, the response, a yes/no question."""
    context, block = _short_context(history, checklist, with_checklist)
    return _POINTWISE.format(context=context, query=_cut(query), checklist=block, response=_cut(response),
                             clause=" and what the user wants" if block else "")


def judge_prompt(
    history: Sequence[Mapping[str, str]],
    query: str,
    response_a: str,
    response_b: str,
    checklist: Sequence[str],
    with_checklist: bool = True,
    style: str = "wb-reward",
) -> str:
    """The judge prompt of ``style`` (see :data:`PROMPT_STYLES`); ``with_checklist=False`` (the paper's
    ablation) drops the checklist block."""
    if style == "compact":
        return compact_prompt(history, query, response_a, response_b, checklist, with_checklist)
    if style != "wb-reward":
        raise ValueError(f"prompt style must be one of {PROMPT_STYLES}, got {style!r}")
    parts = [
        _INSTRUCTION,
        _CONVERSATION.format(history=format_history(history), query=query, response_a=response_a,
                             response_b=response_b),
        "# Evaluation",
    ]
    if with_checklist:
        items = "\n".join(f"{i}. {item}" for i, item in enumerate(checklist, 1)) or "(no checklist items)"
        parts.append(_CHECKLIST.format(checklist=items))
    clause = " against the checklist" if with_checklist else ""
    parts.append(_RULES.format(checklist_clause=clause))
    return "\n\n".join(parts)


def _check_str(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{where} must be a str, got {type(value).__name__}")


def validate_inputs(
    predictions: Sequence[str],
    references: Sequence[str],
    histories: Sequence[Sequence[Mapping[str, str]]],
    queries: Sequence[str],
    checklists: Sequence[Sequence[str]],
) -> None:
    """Raise on unequal lengths or malformed items, naming the field and index, before any judge call."""
    fields = {"predictions": predictions, "references": references, "histories": histories,
              "queries": queries, "checklists": checklists}
    for name, value in fields.items():
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise TypeError(f"{name} must be a list, got {type(value).__name__}")
    lengths = {name: len(value) for name, value in fields.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"inputs must have equal lengths, got {lengths}")
    if not predictions:
        raise ValueError("checklist_judge needs at least one instance")
    for name in ("predictions", "references", "queries"):
        for i, value in enumerate(fields[name]):
            _check_str(value, f"{name}[{i}]")
    for i, history in enumerate(histories):
        if isinstance(history, (str, Mapping)) or not isinstance(history, Sequence):
            raise TypeError(f"histories[{i}] must be a list of messages, got {type(history).__name__}")
        for j, message in enumerate(history):
            if not isinstance(message, Mapping):
                raise TypeError(f"histories[{i}][{j}] must be a {{'role', 'content'}} dict, "
                                f"got {type(message).__name__}")
            if message.get("role") not in _HISTORY_ROLES:
                raise ValueError(f"histories[{i}][{j}]['role'] is {message.get('role')!r}; "
                                 f"expected one of {sorted(_HISTORY_ROLES)}")
            _check_str(message.get("content"), f"histories[{i}][{j}]['content']")
    for i, checklist in enumerate(checklists):
        if isinstance(checklist, (str, Mapping)) or not isinstance(checklist, Sequence):
            raise TypeError(f"checklists[{i}] must be a list of str, got {type(checklist).__name__}")
        for j, item in enumerate(checklist):
            _check_str(item, f"checklists[{i}][{j}]")


class LexicalChecklistJudge(ChatBackend):
    """Offline stand-in judge, chosen only by name (``judge_model="lexical"``): reads the WB-Reward prompt
    and answers its JSON with a lexical rule. No model is involved; its numbers check plumbing only.

    Score of a response = share of the checklist's content words it contains (query words when the prompt
    has no checklist), plus a small bonus for sharing query words; the higher score wins ("A+"/"B+", "++"
    when the gap exceeds ``strong_gap``), equal scores give "A=B". Deterministic.
    """

    kind = "rules"
    prompt_style = "wb-reward"

    def __init__(self, strong_gap: float = 0.25) -> None:
        self.strong_gap = strong_gap

    @property
    def model_id(self) -> str:
        return LEXICAL_JUDGE

    def verdict(self, prompt: str) -> str:
        query, checklist = _words(_section(prompt, "query")), _words(_section(prompt, "checklist"))
        target = checklist or query
        scores = []
        for name in ("response_A", "response_B"):
            words = _words(_section(prompt, name))
            cover = len(words & target) / len(target) if target else 0.0
            scores.append(cover + 0.1 * (len(words & query) / len(query) if query else 0.0))
        gap = scores[0] - scores[1]
        if abs(gap) < 1e-9:
            return "A=B"
        side = "A" if gap > 0 else "B"
        return side + ("++" if abs(gap) > self.strong_gap else "+")

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        out = []
        for request in requests:
            choice = self.verdict(request.messages[-1]["content"])
            text = ('{"analysis of A": "lexical overlap rule", "analysis of B": "lexical overlap rule", '
                    '"reason of A=B": "", "reason of A>B": "", "reason of B>A": "", "choice": "' + choice + '"}')
            out.append(ChatResponse(text=text, finish_reason="stop"))
        return out


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for",
                   "from", "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my", "no",
                   "not", "of", "on", "or", "our", "please", "should", "so", "that", "the", "their",
                   "them", "then", "there", "these", "this", "to", "was", "we", "what", "when", "which",
                   "who", "why", "will", "with", "would", "you", "your", "response", "answer", "user"})


def _section(text: str, name: str) -> str:
    match = re.search(rf"<\|begin_of_{name}\|>\n?(.*?)\n?<\|end_of_{name}\|>", text, re.S)
    return match.group(1) if match else ""


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def is_lexical(name: str | None) -> bool:
    return name is not None and name.strip().lower() in LEXICAL_NAMES


def default_prompt_style(judge: ChatBackend) -> str:
    """The backend's own ``prompt_style`` where it declares one (:class:`LogOddsJudge`: ``pointwise``, the
    lexical stand-in: ``wb-reward``), ``pointwise`` for SmolLM2 (measured: it cannot follow the pairwise
    prompts), else ``wb-reward``."""
    inner = getattr(judge, "inner", judge)  # a CachedBackend judges like the model it wraps
    declared = getattr(inner, "prompt_style", None)
    if declared:
        return str(declared)
    from convohub.models import SMOLLM2_ID

    return "pointwise" if inner.model_id == SMOLLM2_ID else "wb-reward"


class LogOddsJudge(ChatBackend):
    """A local chat model as a pointwise judge: each request (a yes/no question) is answered with the
    next-token log-odds of "yes" over "no" after the chat template's generation prompt, one forward pass,
    no sampling. The answer text is ``"yes (log-odds +1.2345)"`` so it survives the response cache and the
    reader sees what was measured. Used for SmolLM2-135M-Instruct, whose greedy answers to a pairwise
    question carry no signal (see the module docstring)."""

    kind = "local-log-odds"
    prompt_style = "pointwise"

    def __init__(self, local: Any, batch_size: int = 16) -> None:
        self.local = local
        self.batch_size = batch_size
        tok = local.tokenizer
        self._ids = {word: sorted({tok(w, add_special_tokens=False)["input_ids"][0] for w in (word, word.title())})
                     for word in ("yes", "no")}

    @property
    def model_id(self) -> str:
        return self.local.model_id

    def identity(self) -> dict[str, Any]:
        return {**self.local.identity(), "method": "yes-no-log-odds"}

    def describe(self) -> dict[str, Any]:
        return {**self.local.describe(), "backend": self.kind}

    def chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        import torch

        from convohub.llm.choices import next_token_logprobs

        if not requests:
            return []
        logp = next_token_logprobs(self.local, requests, self.batch_size)
        odds = torch.logsumexp(logp[:, self._ids["yes"]], -1) - torch.logsumexp(logp[:, self._ids["no"]], -1)
        return [ChatResponse(text=f"{'yes' if v >= 0 else 'no'} (log-odds {v:+.4f})", finish_reason="stop")
                for v in odds.tolist()]


def as_judge(backend: ChatBackend) -> ChatBackend:
    """``backend`` ready to judge: the offline SmolLM2 model (plain or cached) becomes a :class:`LogOddsJudge`
    over the same loaded weights (and the same cache folder); any other backend is returned unchanged."""
    from convohub.llm import CachedBackend, TransformersBackend
    from convohub.models import SMOLLM2_ID

    inner = backend.inner if isinstance(backend, CachedBackend) else backend
    if not isinstance(inner, TransformersBackend) or inner.model_id != SMOLLM2_ID:
        return backend
    scorer = LogOddsJudge(inner)
    return CachedBackend(scorer, backend.cache.root) if isinstance(backend, CachedBackend) else scorer


@lru_cache(maxsize=2)
def _local_backend(model_path: str) -> ChatBackend:
    """Loading a local judge is the slow part; repeated ``compute`` calls in one process share it."""
    from convohub.llm import OFFLINE_SPEC, TransformersBackend

    if model_path == OFFLINE_SPEC:
        return as_judge(make_backend(OFFLINE_SPEC, batch_size=16))
    return TransformersBackend(Path(model_path).expanduser())


#: What to tell a caller who named no judge (the CLI prints it too).
NO_JUDGE_HELP = ("no judge named: pass judge_base_url= and judge_model= (an OpenAI-compatible endpoint), "
                 "judge_model='smollm2' (the offline SmolLM2-135M-Instruct), judge_model='lexical' (the "
                 "word-overlap stand-in, plumbing checks only), judge_model=<local model folder>, or set "
                 "CONVOHUB_LLM_BASE_URL")


def resolve_judge(
    judge: ChatBackend | None = None,
    judge_base_url: str | None = None,
    judge_model: str | None = None,
    cache_dir: str | Path | None = None,
) -> ChatBackend:
    """The backend that answers: a ready one, an OpenAI-compatible endpoint, the offline SmolLM2 model,
    the lexical stand-in, a local model, or the environment's endpoint.

    ``judge_base_url`` + ``judge_model`` -> endpoint; ``judge_model="lexical"`` -> :class:`LexicalChecklistJudge`;
    ``judge_model="smollm2"`` -> SmolLM2-135M-Instruct; another ``judge_model`` alone -> local transformers
    model (a folder, or a Hub id already in the local cache); nothing -> ``CONVOHUB_LLM_*`` variables, and
    without those a ValueError: a judge is never chosen silently.
    """
    if judge is not None:
        if judge_base_url is not None or judge_model is not None:
            raise ValueError("pass either judge= or judge_base_url/judge_model, not both")
        if not isinstance(judge, ChatBackend):
            raise TypeError(f"judge must be a convohub ChatBackend, got {type(judge).__name__}")
        return judge
    if judge_base_url is not None:
        return make_backend(judge_base_url, model=judge_model, cache_dir=cache_dir)
    if judge_model is not None:
        if is_lexical(judge_model):
            return LexicalChecklistJudge()
        backend = _local_backend(str(judge_model))
        if cache_dir is not None:
            from convohub.llm import CachedBackend

            backend = CachedBackend(backend, cache_dir)
        return backend
    backend = backend_from_env(cache_dir=cache_dir)
    if backend is None:
        raise ValueError(NO_JUDGE_HELP)
    return backend


def judge_from_spec(spec: str | None, cache_dir: str | Path | None = None) -> ChatBackend:
    """The judge a user named on a command line: ``lexical``, ``smollm2``, an endpoint
    (``http://host:8000/v1#model`` / ``endpoint:...``), or a local model folder; None -> the
    ``CONVOHUB_LLM_*`` endpoint, else ValueError naming the options (a judge is never picked silently)."""
    if spec is None or not spec.strip():
        judge = backend_from_env(cache_dir=cache_dir)
        if judge is None:
            raise ValueError("no judge named: pass --judge smollm2 (the offline SmolLM2-135M-Instruct), --judge "
                             "lexical (the word-overlap stand-in, plumbing checks only), --judge "
                             "http://host:8000/v1#model (an OpenAI-compatible endpoint) or --judge <local model "
                             "folder>, or set CONVOHUB_LLM_BASE_URL")
        return judge
    spec = spec.strip()
    if spec.startswith(("http://", "https://", "endpoint:")):
        return make_backend(spec, cache_dir=cache_dir)
    return resolve_judge(judge_model=spec, cache_dir=cache_dir)


def judge_pairs(
    predictions: Sequence[str],
    references: Sequence[str],
    histories: Sequence[Sequence[Mapping[str, str]]],
    queries: Sequence[str],
    checklists: Sequence[Sequence[str]],
    judge: ChatBackend,
    with_checklist: bool = True,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    prompt_style: str | None = None,
) -> list[PairJudgement]:
    """Per-instance judgements of candidate ``predictions`` against baseline ``references``.

    Pairwise styles: all 2N prompts (candidate as A, then candidate as B, for each instance) go to the
    backend in one batch, greedy (temperature 0), so an endpoint backend runs them at its full
    concurrency. Pointwise style: each distinct response is rated once and the higher rating wins (the
    verdict of both orders, so ``verdicts`` and ``rewards`` keep their meaning); equal ratings tie. Useful
    on its own to filter preference pairs (keep a pair when its outcome is "win"). ``prompt_style``
    defaults to :func:`default_prompt_style` of the judge; the compact style caps the answer at a few tokens.
    """
    validate_inputs(predictions, references, histories, queries, checklists)
    judge = as_judge(judge)
    style = prompt_style or default_prompt_style(judge)
    if style == "pointwise":
        return _judge_pointwise(predictions, references, histories, queries, checklists, judge, with_checklist)
    parse = parse_compact_verdict if style == "compact" else parse_verdict
    if style == "compact":
        max_new_tokens = min(max_new_tokens, COMPACT_MAX_NEW_TOKENS)
    requests = []
    for cand, ref, history, query, checklist in zip(predictions, references, histories, queries, checklists,
                                                    strict=True):
        for response_a, response_b in ((cand, ref), (ref, cand)):
            prompt = judge_prompt(history, query, response_a, response_b, checklist, with_checklist, style)
            requests.append(ChatRequest.from_prompt(prompt, max_new_tokens=max_new_tokens, temperature=0.0))
    responses = run_chat(judge, requests, chunk_size=len(requests), desc="checklist judge", progress=False)
    out = []
    for i in range(len(predictions)):
        first, second = responses[2 * i], responses[2 * i + 1]
        verdicts = (parse(first.text if first.ok else None), parse(second.text if second.ok else None))
        rewards = tuple(None if v is None else candidate_reward(v, candidate_is_a=(k == 0))
                        for k, v in enumerate(verdicts))
        out.append(PairJudgement(verdicts=verdicts, rewards=rewards,  # type: ignore[arg-type]
                                 raw=(first.text if first.ok else f"[error] {first.error}",
                                      second.text if second.ok else f"[error] {second.error}")))
    return out


#: Ratings closer than this are a tie (only identical responses rate exactly alike).
RATING_TIE = 1e-3


def _judge_pointwise(predictions: Sequence[str], references: Sequence[str],
                     histories: Sequence[Sequence[Mapping[str, str]]], queries: Sequence[str],
                     checklists: Sequence[Sequence[str]], judge: ChatBackend, with_checklist: bool) -> list[PairJudgement]:
    """Rate every distinct (context, response) once, then compare candidate and baseline per instance."""
    prompts = [[pointwise_prompt(h, q, r, c, with_checklist) for r in (cand, ref)]
               for cand, ref, h, q, c in zip(predictions, references, histories, queries, checklists, strict=True)]
    unique = list(dict.fromkeys(p for pair in prompts for p in pair))
    requests = [ChatRequest.from_prompt(p, max_new_tokens=COMPACT_MAX_NEW_TOKENS, temperature=0.0) for p in unique]
    responses = dict(zip(unique, run_chat(judge, requests, chunk_size=len(requests), desc="checklist judge",
                                          progress=False), strict=True))
    out = []
    for cand_prompt, ref_prompt in prompts:
        answers = responses[cand_prompt], responses[ref_prompt]
        cand, ref = (parse_rating(a.text if a.ok else None) for a in answers)
        raw = tuple(a.text if a.ok else f"[error] {a.error}" for a in answers)
        if cand is None or ref is None:
            out.append(PairJudgement(verdicts=(None, None), rewards=(None, None), raw=raw))  # type: ignore[arg-type]
            continue
        gap = cand - ref
        verdicts = ("A=B", "A=B") if abs(gap) < RATING_TIE else ("A+", "B+") if gap > 0 else ("B+", "A+")
        rewards = tuple(candidate_reward(v, candidate_is_a=(k == 0)) for k, v in enumerate(verdicts))
        out.append(PairJudgement(verdicts=verdicts, rewards=rewards, raw=raw))  # type: ignore[arg-type]
    return out


def summarise_judgements(judgements: Sequence[PairJudgement]) -> dict[str, float | int]:
    """Win/tie/lose rates and mean reward over fully judged instances, plus the failure count."""
    judged = [j for j in judgements if j.judged]
    failures = sum(v is None for j in judgements for v in j.verdicts)
    n = len(judged)
    if n == 0:
        nan = math.nan
        return {"win": nan, "tie": nan, "lose": nan, "mean_reward": nan, "parse_failures": failures,
                "n_judged": 0}
    outcomes = [j.outcome for j in judged]
    return {
        "win": outcomes.count("win") / n,
        "tie": outcomes.count("tie") / n,
        "lose": outcomes.count("lose") / n,
        "mean_reward": sum(j.reward for j in judged) / n,  # type: ignore[misc]
        "parse_failures": failures,
        "n_judged": n,
    }


def checklist_judge(
    predictions: Sequence[str],
    references: Sequence[str],
    histories: Sequence[Sequence[Mapping[str, str]]],
    queries: Sequence[str],
    checklists: Sequence[Sequence[str]],
    judge_base_url: str | None = None,
    judge_model: str | None = None,
    with_checklist: bool = True,
    *,
    judge: ChatBackend | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    cache_dir: str | Path | None = None,
    prompt_style: str | None = None,
) -> dict[str, Any]:
    """``{"win", "tie", "lose", "mean_reward", "parse_failures", "n_judged", "judge", "prompt_style"}`` of
    candidate ``predictions`` against baseline ``references`` (see the module docstring for the rules).

    Rates are fractions of ``n_judged``; ``mean_reward`` is in [-100, 100]; ``parse_failures`` counts
    judge outputs (of 2N) without a usable choice; ``judge`` names the model that judged. ``cache_dir``
    caches judge answers on disk so an interrupted run resumes without repeating paid calls.
    """
    validate_inputs(predictions, references, histories, queries, checklists)
    backend = resolve_judge(judge, judge_base_url, judge_model, cache_dir)
    style = prompt_style or default_prompt_style(backend)
    judgements = judge_pairs(predictions, references, histories, queries, checklists, backend,
                             with_checklist=with_checklist, max_new_tokens=max_new_tokens, prompt_style=style)
    return {**summarise_judgements(judgements), "judge": backend.model_id, "prompt_style": style}


# ------------------------------------------------------------------------------------- judge agreement
GOLD_FILE = "judge_gold.jsonl"


def load_judge_gold(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The hand-labelled judge set: ``{id, topic, instruction, checklist, response_a, response_b, better}``
    per line, ``better`` one of A/B. Written and labelled by hand for convohub (not by its sample
    generator); ships as package data."""
    import json
    from importlib import resources

    text = (Path(path).read_text(encoding="utf-8") if path is not None
            else resources.files("convohub").joinpath("data", GOLD_FILE).read_text(encoding="utf-8"))
    items = [json.loads(line) for line in text.splitlines() if line.strip()]
    for item in items:
        if item.get("better") not in ("A", "B", "tie"):
            raise ValueError(f"{path or GOLD_FILE}: item {item.get('id')}: 'better' must be A, B or tie")
    return items


#: Bump when a prompt template or the combination rule changes, so cached agreement figures are re-measured.
AGREEMENT_VERSION = 1


def judge_agreement(judge: ChatBackend, items: Sequence[Mapping[str, Any]] | None = None, *,
                    prompt_style: str | None = None, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """How often ``judge`` picks the hand-labelled better response (both orders, combined as everywhere).

    Returns ``{"judge", "prompt_style", "n", "agree", "ties", "wrong", "parse_failures"}``: an item
    counts as agreement when the combined outcome names the labelled response; ties (including
    inconsistent verdicts across the two orders) and unparsed items do not agree. With ``cache_dir`` the
    figures are stored under a key of (judge identity with its weights revision, prompt style, the items,
    :data:`AGREEMENT_VERSION`), so a release measures a judge once per machine (~1 min on 2 CPU cores for
    SmolLM2) and re-measures whenever any of those change.
    """
    import hashlib
    import json

    items = list(items if items is not None else load_judge_gold())
    judge = as_judge(judge)
    style = prompt_style or default_prompt_style(judge)
    cached = None
    if cache_dir is not None:
        key = json.dumps({"v": AGREEMENT_VERSION, "judge": getattr(judge, "inner", judge).identity(),
                          "style": style, "items": items}, sort_keys=True, ensure_ascii=False)
        cached = Path(cache_dir) / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
        if cached.is_file():
            return {**json.loads(cached.read_text(encoding="utf-8")), "cached": True}
    result = _measure_agreement(judge, items, style)
    if cached is not None:
        from convohub.hub import atomic_write_text, dump_json

        cached.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(cached, dump_json(result))
    return result


def _measure_agreement(judge: ChatBackend, items: Sequence[Mapping[str, Any]], style: str) -> dict[str, Any]:
    judgements = judge_pairs([str(i["response_a"]) for i in items], [str(i["response_b"]) for i in items],
                             [[] for _ in items], [str(i["instruction"]) for i in items],
                             [[str(c) for c in i.get("checklist") or []] for i in items], judge,
                             prompt_style=style)
    outcome_side = {"win": "A", "lose": "B", "tie": "tie"}
    sides = [outcome_side.get(j.outcome or "") for j in judgements]
    return {"judge": judge.model_id, "prompt_style": style, "n": len(items),
            "agree": sum(s == i["better"] for s, i in zip(sides, items, strict=True)),
            "ties": sides.count("tie"), "wrong": sum(s in ("A", "B") and s != i["better"]
                                                   for s, i in zip(sides, items, strict=True)),
            "parse_failures": sides.count(None)}
