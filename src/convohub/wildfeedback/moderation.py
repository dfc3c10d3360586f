"""Moderation of generated responses before they enter a preference pair (the paper filters its
generations; WildFeedback's spec: "moderation filter on generations").

Two kinds of moderator, each named in the dataset card (``Backends.describe()``) so a reader knows what
filtered:

* an LLM (any :class:`~convohub.llm.ChatBackend`: an endpoint, or the local model) asked one closed
  question per response -- is it harmful, yes or no;
* :class:`EmbeddingModerator`, a zero-shot classifier on all-MiniLM-L6-v2 (the project's offline encoder):
  a response is flagged when it is closer to one of a list of harm descriptions than to every one of a list
  of everyday-assistant descriptions. Why it exists: no maintained moderation classifier installs offline
  here, and SmolLM2-135M cannot tell harmful replies apart (on the hand-labelled set below it flagged almost
  everything: accuracy 0.53; its yes/no log-odds rank the set worse than chance, AUC 0.32).

The offline default is whichever agrees better with the hand-labelled set (:func:`offline_moderator`,
measured and cached like the feedback labeller's comparison); an endpoint the user configured is used as
named. Only generated text is moderated: the offline expert stand-in takes the conversation's own later
response, which is already in the published corpus.

A response is kept only on an explicit "no": a "yes" drops it, and so does an answer that stays
unparseable after ``max_attempts`` calls (first greedy, then sampled with a new seed) -- a filter that
cannot read its moderator errs on the side of dropping, and the counts say how many went each way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed

__all__ = ["EmbeddingModerator", "ModerationResult", "load_moderation_gold", "moderate", "moderation_agreement",
           "moderation_messages", "offline_moderator", "parse_verdict"]

#: Characters of a response shown to the moderator (enough for the harm to show; keeps the prompt short).
RESPONSE_CHARS = 1500
MAX_NEW_TOKENS = 4

_SYSTEM = "You review an AI assistant's reply for safety. Answer with one word: yes or no."
_QUESTION = """\
Reply to review:
\"\"\"
{reply}
\"\"\"

Is this reply harmful? Harmful means it helps someone hurt people or animals, make weapons or drugs, commit a
crime or self-harm, or it contains hate, harassment, or sexual content involving minors. Answer yes or no."""


def moderation_messages(reply: str) -> list[dict[str, str]]:
    """The one closed question asked per response."""
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": _QUESTION.format(reply=reply[:RESPONSE_CHARS])}]


def parse_verdict(text: str | None) -> bool | None:
    """True for harmful ("yes" / "unsafe"), False for harmless ("no" / "safe"), None when the answer names
    neither or both."""
    low = (text or "").lower()
    unsafe = re.search(r"\b(yes|unsafe)\b|(?<!not )\bharmful\b|\bnot safe\b", low) is not None
    safe = re.search(r"\b(no|harmless)\b|(?<!not )\bsafe\b|\bnot harmful\b", low) is not None
    if unsafe == safe:
        return None
    return unsafe


@dataclass
class ModerationResult:
    """Per response: ``keep`` (answered safe), and whether the moderator flagged it or never answered."""

    keep: bool
    flagged: bool
    unparsed: bool


def _request(reply: str, attempt: int) -> ChatRequest:
    params = {"temperature": 0.0} if attempt == 0 else {"temperature": 1.0, "seed": attempt}
    return ChatRequest(messages=moderation_messages(reply), max_new_tokens=MAX_NEW_TOKENS, **params)


#: What the zero-shot moderator flags: one description per harm category of the LLM question above.
HARM_DESCRIPTIONS = (
    "instructions for building a weapon or a bomb", "how to make illegal drugs at home",
    "how to hurt, kill or poison a person", "encouraging suicide or self-harm",
    "hateful insults against a race, religion or group", "harassing or threatening someone",
    "how to steal, break into a house or commit fraud", "sexual content involving children",
    "how to hack into someone else's account", "cruelty to animals",
)
#: What it lets through: everyday assistant replies, including ones that touch a harm topic safely.
SAFE_DESCRIPTIONS = (
    "a recipe or cooking advice", "an explanation of a science fact", "programming help with code",
    "travel and history information", "advice about health, fitness or a doctor visit",
    "help writing a letter or an email", "a friendly refusal to help with something dangerous",
    "safety advice on storing tools or chemicals", "support and crisis hotline information for someone in distress",
    "a description of a hobby or sport", "tips and strategy for a video game",
    "a summary of a book, film or anime plot", "software build, install or configuration steps",
    "business, money or career advice", "a translation or grammar explanation", "music or art recommendations",
)


class EmbeddingModerator:
    """Zero-shot moderation with a sentence encoder (see the module docstring): flagged when the best
    cosine similarity to :data:`HARM_DESCRIPTIONS` exceeds the best to :data:`SAFE_DESCRIPTIONS` by more
    than ``margin``. Deterministic, one batched encode, no answer to parse (``unparsed`` is never set)."""

    def __init__(self, model_path: str | None = None, margin: float = 0.0) -> None:
        from convohub.models import MINILM_ID, minilm_path

        self.model_path = model_path or str(minilm_path())
        self.model_id = MINILM_ID if model_path is None else model_path
        self.margin = margin
        self._model: Any = None

    @property
    def name(self) -> str:
        return f"zero-shot:{self.model_id}"

    def _encode(self, texts: Sequence[str]) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.model_path, device="cpu")
        return self._model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)

    def scores(self, replies: Sequence[str]) -> list[float]:
        """Harm similarity minus safe similarity per reply (> ``margin``: flagged)."""
        if not replies:
            return []
        emb = self._encode([r[:RESPONSE_CHARS] for r in replies])
        harm, safe = self._encode(HARM_DESCRIPTIONS), self._encode(SAFE_DESCRIPTIONS)
        return [float(v) for v in (emb @ harm.T).max(1) - (emb @ safe.T).max(1)]

    def review(self, replies: Sequence[str]) -> list[ModerationResult]:
        return [ModerationResult(keep=s <= self.margin, flagged=s > self.margin, unparsed=False)
                for s in self.scores(replies)]


def moderate(replies: Sequence[str], moderator: ChatBackend | EmbeddingModerator, *, max_attempts: int = 3,
             progress: bool = True) -> list[ModerationResult]:
    """Ask ``moderator`` about every reply (batched; only unparseable answers are asked again); an
    :class:`EmbeddingModerator` classifies them in one pass."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    if isinstance(moderator, EmbeddingModerator):
        return moderator.review(replies)
    asked = ask_until_parsed(moderator, len(replies), lambda i, attempt: _request(replies[i], attempt),
                             lambda i, text: parse_verdict(text), max_attempts=max_attempts,
                             desc="moderation (try {try})", progress=progress)
    return [ModerationResult(keep=p.value is False, flagged=p.value is True, unparsed=p.value is None)
            for p in asked]


#: 60 short assistant replies (30 safe, 30 unsafe) written and labelled by hand for convohub; the unsafe
#: ones name the harm without operational detail. Safe replies include look-alikes (lock picking as a hobby,
#: knife storage, a crisis-support answer) so that a moderator flagging topic words scores badly.
GOLD_FILE = "moderation_gold.jsonl"


def load_moderation_gold() -> list[dict[str, Any]]:
    """The hand-labelled moderation set: ``{"id", "response", "unsafe"}`` per line."""
    text = resources.files("convohub").joinpath("data", GOLD_FILE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def moderation_agreement(moderator: ChatBackend | EmbeddingModerator, *, max_attempts: int = 3, progress: bool = False) -> dict[str, Any]:
    """How well ``moderator`` separates the hand-labelled set: accuracy, and precision/recall of "unsafe"
    (scikit-learn), with an unanswered reply counted as flagged (what the filter does with it)."""
    from sklearn.metrics import accuracy_score, precision_score, recall_score

    gold = load_moderation_gold()
    results = moderate([g["response"] for g in gold], moderator, max_attempts=max_attempts, progress=progress)
    truth = [bool(g["unsafe"]) for g in gold]
    dropped = [not r.keep for r in results]
    return {"moderator": moderator.name, "n": len(gold), "unsafe": sum(truth),
            "accuracy": round(float(accuracy_score(truth, dropped)), 4),
            "precision_unsafe": round(float(precision_score(truth, dropped, zero_division=0)), 4),
            "recall_unsafe": round(float(recall_score(truth, dropped, zero_division=0)), 4),
            "unanswered": sum(r.unparsed for r in results)}


def offline_moderator(local_llm: ChatBackend, cache_dir: Path, log: Any = print) -> tuple[Any, dict[str, Any]]:
    """The offline default moderator, measured: ``local_llm`` and :class:`EmbeddingModerator` on the
    hand-labelled set (figures cached in ``cache_dir`` per moderator identity); returns (the one with the
    higher accuracy -- the LLM on a tie --, the comparison for the card)."""
    from convohub.hub import atomic_write_text, dump_json

    embedding = EmbeddingModerator()
    figures = {}
    for key, moderator in (("llm", local_llm), ("zero_shot", embedding)):
        ident = moderator.identity() if hasattr(moderator, "identity") else {"name": moderator.name,
                                                                            "margin": embedding.margin}
        digest = hashlib.sha256(json.dumps([ident, load_moderation_gold(), HARM_DESCRIPTIONS, SAFE_DESCRIPTIONS,
                                            _SYSTEM, _QUESTION, MAX_NEW_TOKENS],
                                           sort_keys=True, default=str).encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"moderation-{key}-{digest}.json"
        if path.is_file():
            figures[key] = json.loads(path.read_text(encoding="utf-8"))
        else:
            figures[key] = moderation_agreement(moderator)
            atomic_write_text(path, dump_json(figures[key]))
    chosen = embedding if figures["zero_shot"]["accuracy"] > figures["llm"]["accuracy"] else local_llm
    comparison = {"chosen": chosen.name, "measured": [figures["llm"], figures["zero_shot"]]}
    log("moderation on the hand-labelled set: " + "; ".join(
        f"{f['moderator']} accuracy {f['accuracy']}" for f in comparison["measured"]) + f" -> {chosen.name}")
    return chosen, comparison
