"""Prompt-simplifier training data: corpus prompts split into sentences, each labelled polite / information /
instruction with a 0-5 confidence; a prompt is kept when every sentence's confidence is 4 or 5 (the paper's
filter, which kept ~15k of 20k WildChat prompts).

Two labellers, both chosen by name:

* an LLM (any :class:`~convohub.llm.ChatBackend`; ``smollm2`` offline), asked one sentence per call for the
  label and a confidence, answers parsed leniently and re-asked (with another sampling seed) when they name
  no label or no confidence;
* :class:`RuleLabeller` (``rules:cues-v2``), transparent cues: a question mark or a leading request verb ->
  instruction, a thanks/greeting/apology/praise word or phrase -> polite, first-person or situational
  statements -> information; a leading greeting or thanks clause ("Hi ChatGPT, recommend ...", "Thanks, now
  ...") is set aside and the rest labelled, so a request behind a greeting stays a request; its confidence
  says which cue fired (5 strong, 4 weaker, 3 only the fallback, which the filter drops).

A 135M model is a weak labeller, so which one labels offline is measured, not assumed: both label the
hand-labelled sentences of ``convohub/data/crychic_sentence_gold.jsonl`` (132 sentences written and labelled
for convohub), their accuracy and macro-F1 (scikit-learn) go into the training data's record, and
``labeller="auto"`` takes the one with the higher macro-F1 (accuracy breaks ties, then the rules, which cost
nothing). The same author wrote the rules and the sentences: ``s00``-``s71`` (24 per class) before the rules,
with the rules tuned while looking at them, and ``s72``-``s101`` after ``cues-v1`` was frozen. ``cues-v2``
mends two faults an error analysis of the simplifier's test labels found (a greeting in front of a request
made the whole sentence polite; praise such as "Great answer, exactly what I needed." was information);
``s102``-``s131`` (10 per class) were written after ``cues-v2`` was frozen. The figures on the sentences
written after the rules (``*_fresh``) are the honest estimate for them; the record keeps both.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from convohub.crychic.data_common import (
    TRAIN_CORPUS_SEED,
    backend_identity,
    read_gold,
    seeded_sample,
    split_of,
    words,
)
from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed
from convohub.stages import cached, digest, stage

LABELS = ("polite", "information", "instruction")
MIN_CONFIDENCE = 4
RULES_NAME = "rules:cues-v2"
AUTO = "auto"
GOLD_FILE = "crychic_sentence_gold.jsonl"
#: gold ids from this number on were written after the rules were frozen (module docstring)
FRESH_FROM_ID = 102


@dataclass(frozen=True)
class Annotation:
    """One sentence's label and 0-5 confidence; both None when the labeller gave no usable answer."""

    label: str | None
    confidence: int | None

    @property
    def usable(self) -> bool:
        return self.label is not None and self.confidence is not None


class SentenceAnnotator(Protocol):
    """Labels sentences; ``name`` goes into every row it produced, ``identity()`` into stage fingerprints."""

    name: str
    counts: Counter[str]

    def identity(self) -> dict[str, Any]: ...

    def annotate(self, sentences: Sequence[str]) -> list[Annotation]: ...


# ------------------------------------------------------------------------------------------------- rules
_POLITE = re.compile(
    r"\b(thanks?|thank you|thx|appreciated?|grateful|sorry|apologi[sz]e|apologies|hello|hi|hey|good "
    r"(?:morning|afternoon|evening|night)|bye|goodbye|cheers|great job|well done|awesome|perfect|wonderful|"
    r"excellent|nice work|wow|love it|you'?re the best|hope you|have a (?:nice|good|great)|"
    r"(?:great|good|nice|brilliant|helpful|clear) (?:answer|response|reply|explanation|work|one)|spot on|"
    r"exactly what i (?:needed|wanted|was looking for)|(?:very|really|so|super) (?:helpful|useful|clear)|"
    r"that(?:'s| is| was) (?:great|perfect|helpful|brilliant|amazing|fantastic|it))\b"
    r"|^\s*(?:brilliant|amazing|fantastic|superb)\s*[.!]*\s*$", re.IGNORECASE)
#: a leading greeting or thanks clause before the sentence's real content: "Hi ChatGPT, ...", "Thanks! Now ..."
_LEADING_COURTESY = re.compile(
    r"^\s*(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening)|thanks?|thank you|thx|ok(?:ay)?"
    r"|great|perfect|cool)\b[^,.!:;?]{0,24}[,!:;]\s*(?=\S)", re.IGNORECASE)
_SOCIAL_QUESTION = re.compile(r"\b(how are you|how is it going|how's it going|are you there)\b", re.IGNORECASE)
_REQUEST_OPENERS = ("can you", "could you", "would you", "will you", "i need you to", "i want you to",
                    "i would like you to", "i'd like you to", "help me", "let's", "let me know", "i need a",
                    "i want a")
_FILLERS = {"please", "now", "so", "ok", "okay", "and", "also", "then", "next", "just", "kindly", "pls"}
_VERBS = frozenset({"write", "make", "give", "explain", "translate", "summarize", "summarise", "list", "tell",
    "show", "create", "generate", "rewrite", "fix", "add", "remove", "continue", "describe", "compare", "suggest",
    "help", "check", "find", "plan", "draft", "correct", "improve", "shorten", "expand", "convert", "provide",
    "recommend", "calculate", "solve", "answer", "edit", "change", "update", "use", "do", "try", "repeat", "keep",
    "go", "send", "define", "outline", "analyze", "analyse", "proofread", "paraphrase", "simplify", "elaborate",
    "name", "design", "build", "implement", "debug", "optimize", "optimise", "format", "sort", "count", "predict",
    "imagine", "pretend", "act", "be", "say", "redo", "rephrase", "include", "delete", "replace", "turn", "put",
    "compose", "prepare", "estimate", "review", "evaluate", "assess", "identify", "choose", "pick", "teach", "walk",
    "reply", "respond", "finish", "complete", "insert", "highlight"})
_CONTEXT_START = {"the", "this", "these", "those", "here", "it", "there", "our", "my", "its", "his", "her",
                  "their", "last", "yesterday", "today", "currently"}
_FIRST_PERSON = {"i", "i'm", "i've", "i'd", "my", "me", "we", "our", "us", "we're", "mine"}


class RuleLabeller:
    """Transparent cue rules (module docstring); deterministic, no model."""

    name = RULES_NAME

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def identity(self) -> dict[str, Any]:
        return {"name": self.name}

    def label_one(self, sentence: str) -> Annotation:
        text = sentence.strip()
        courtesy = _LEADING_COURTESY.match(text)
        if courtesy and len(words(text[courtesy.end():])) >= 2:
            rest = self.label_one(text[courtesy.end():])
            if rest.label != "polite":  # the greeting is framing; the content decides, with less certainty
                return Annotation(rest.label, min(rest.confidence or 0, 4))
        tokens = words(text)
        lowered = " ".join(tokens)
        head = [t for t in tokens[:3] if t not in _FILLERS] + tokens[3:]
        if text.endswith("?"):
            if _SOCIAL_QUESTION.search(text):
                return Annotation("polite", 4)
            return Annotation("instruction", 5)
        if (head and head[0] in _VERBS) or any(lowered.startswith(o) or f" {o} " in f" {lowered} "
                                               for o in _REQUEST_OPENERS):
            return Annotation("instruction", 5)
        if _POLITE.search(text):
            return Annotation("polite", 5 if len(tokens) <= 8 else 4)
        if tokens and (tokens[0] in _CONTEXT_START or _FIRST_PERSON & set(tokens)):
            return Annotation("information", 4)
        return Annotation("information", 3)

    def annotate(self, sentences: Sequence[str]) -> list[Annotation]:
        out = [self.label_one(s) for s in sentences]
        self.counts["sentences"] += len(out)
        return out


# --------------------------------------------------------------------------------------------------- LLM
SYSTEM = (
    "You sort sentences that people send to a chatbot into three kinds.\n"
    "polite: a greeting, thanks, an apology or praise that asks for nothing.\n"
    "information: facts or background about the person's situation, asking for nothing.\n"
    "instruction: a request, a command or a question for the chatbot to act on.\n"
    "Answer with the kind and how sure you are, from 0 (a guess) to 5 (certain), for example: instruction 5")
#: worked examples shown before every sentence (written for convohub, not in the hand-labelled set): a 135M
#: model answers in the shown form far more often than from the description alone
SHOTS = (("Thanks for the quick reply!", "polite 5"), ("I run a small bakery in Leeds.", "information 5"),
         ("Draft a menu for the weekend.", "instruction 5"))
_LABEL = re.compile(r"\b(polite|information|instruction)s?\b", re.IGNORECASE)
_SCORE = re.compile(r"(?<![\d.])([0-5])(?![\d.])")


def _ask(sentence: str) -> str:
    return f"Sentence: {sentence}\nKind and confidence:"


def parse_annotation(text: str) -> Annotation:
    """The first label word of an answer and the first 0-5 digit after it (None, None when either is missing)."""
    label = _LABEL.search(text)
    if label is None:
        return Annotation(None, None)
    score = _SCORE.search(text, label.end()) or _SCORE.search(text)
    if score is None:
        return Annotation(None, None)
    return Annotation(label.group(1).lower(), int(score.group(1)))


class LLMLabeller:
    """One call per sentence; unusable answers are asked again with a new sampling seed (``max_attempts`` in
    all). ``counts``: calls, retries, unusable sentences."""

    def __init__(self, backend: ChatBackend, *, max_attempts: int = 3, max_new_tokens: int = 12,
                 chunk_size: int = 16, progress: bool = False) -> None:
        self.backend = backend
        self.max_attempts, self.max_new_tokens = max_attempts, max_new_tokens
        self.chunk_size, self.progress = chunk_size, progress
        self.counts: Counter[str] = Counter()

    @property
    def name(self) -> str:
        return self.backend.name

    def identity(self) -> dict[str, Any]:
        return {**backend_identity(self.backend), "prompt": digest([SYSTEM, SHOTS]), "max_attempts": self.max_attempts}

    def _request(self, sentence: str, attempt: int) -> ChatRequest:
        # greedy first; a retry samples, seeded by the attempt (one seed per attempt, so the local backend
        # still batches the retries: it groups requests by their sampling parameters)
        params: dict[str, Any] = {"max_new_tokens": self.max_new_tokens}
        if attempt:
            params |= {"temperature": 0.7, "seed": int(digest(["retry", attempt])[:8], 16)}
        shots = [(_ask(shot), answer) for shot, answer in SHOTS]
        return ChatRequest.from_prompt(_ask(sentence), system=SYSTEM, shots=shots, **params)

    def annotate(self, sentences: Sequence[str]) -> list[Annotation]:
        def parse(i: int, text: str) -> Annotation | None:
            found = parse_annotation(text)
            return found if found.usable else None

        asked = ask_until_parsed(self.backend, len(sentences),
                                 lambda i, attempt: self._request(sentences[i], attempt), parse,
                                 max_attempts=self.max_attempts, desc="sentence labels",
                                 progress=self.progress, chunk_size=self.chunk_size)
        calls = sum(p.attempts for p in asked)
        retries = sum(max(p.attempts - 1, 0) for p in asked)
        if calls:  # a key appears once something is counted under it (the record's labeller_counts)
            self.counts["calls"] += calls
        if retries:
            self.counts["retries"] += retries
        self.counts["unusable"] += sum(p.value is None for p in asked)
        self.counts["sentences"] += len(sentences)
        unusable = Annotation(None, None)
        return [unusable if p.value is None else p.value for p in asked]


def make_labeller(name: str, *, work: Path | None = None, progress: bool = False,
                  **backend_kw: Any) -> SentenceAnnotator:
    """The labeller a name chooses: ``rules:cues-v1``, or an LLM spec of :func:`convohub.llm.make_backend`
    (``smollm2``, ``local:/folder``, ``https://host/v1#model``), cached under ``work``."""
    if name.startswith("rules:"):
        if name != RULES_NAME:
            raise ValueError(f"unknown rule labeller {name!r}; the rule labeller is {RULES_NAME!r}")
        return RuleLabeller()
    from convohub.llm import make_backend

    return LLMLabeller(cached(make_backend(name, **backend_kw), work), progress=progress)


# --------------------------------------------------------------------------------------------- agreement
def load_sentence_gold(path: str | Path | None = None) -> list[dict[str, str]]:
    """The hand-labelled sentences (``id``, ``sentence``, ``label``), validated."""
    items = read_gold(GOLD_FILE, ("id", "sentence", "label"), path)
    for n, item in enumerate(items, 1):
        if item["label"] not in LABELS:
            raise ValueError(f"{path or GOLD_FILE} line {n}: label {item['label']!r} is not one of {LABELS}")
    return items


def agreement(labeller: SentenceAnnotator, gold: Sequence[Mapping[str, str]] | None = None) -> dict[str, Any]:
    """How well ``labeller`` agrees with the hand labels: accuracy and macro-F1 over every gold sentence (an
    unusable answer counts as wrong), how many answers were usable, and how many passed the confidence
    filter with the accuracy on those."""
    from sklearn.metrics import f1_score

    gold = list(gold if gold is not None else load_sentence_gold())
    found = labeller.annotate([g["sentence"] for g in gold])
    truth = [g["label"] for g in gold]
    pred = [a.label or "none" for a in found]
    kept = [i for i, a in enumerate(found) if a.usable and (a.confidence or 0) >= MIN_CONFIDENCE]

    def scores(idx: Sequence[int]) -> tuple[float | None, float | None]:
        if not idx:
            return None, None
        t, p = [truth[i] for i in idx], [pred[i] for i in idx]
        return (round(sum(a == b for a, b in zip(t, p, strict=True)) / len(idx), 4),
                round(float(f1_score(t, p, labels=list(LABELS), average="macro", zero_division=0)), 4))

    accuracy, f1_macro = scores(range(len(gold)))
    fresh = [i for i, g in enumerate(gold) if g["id"][1:].isdigit() and int(g["id"][1:]) >= FRESH_FROM_ID]
    accuracy_fresh, f1_fresh = scores(fresh)
    out: dict[str, Any] = {
        "labeller": labeller.name, "sentences": len(gold), "accuracy": accuracy, "f1_macro": f1_macro,
        "sentences_fresh": len(fresh), "accuracy_fresh": accuracy_fresh, "f1_macro_fresh": f1_fresh,
        "usable": sum(a.usable for a in found), "kept": len(kept),
        "accuracy_kept": round(sum(truth[i] == pred[i] for i in kept) / len(kept), 4) if kept else None,
    }
    for label in LABELS:
        idx = [i for i, t in enumerate(truth) if t == label]
        out[f"recall_{label}"] = round(sum(pred[i] == label for i in idx) / len(idx), 4) if idx else None
    return out


def choose_labeller(candidates: Sequence[SentenceAnnotator],
                    gold: Sequence[Mapping[str, str]] | None = None) -> tuple[SentenceAnnotator, list[dict[str, Any]]]:
    """The candidate agreeing best with the hand labels (macro-F1, then accuracy; earlier wins a tie) and
    every candidate's figures."""
    if not candidates:
        raise ValueError("choose_labeller needs at least one candidate")
    figures = [agreement(c, gold) for c in candidates]
    best = max(range(len(candidates)), key=lambda i: (figures[i]["f1_macro"], figures[i]["accuracy"], -i))
    for i, f in enumerate(figures):
        f["chosen"] = i == best
    return candidates[best], figures


# ------------------------------------------------------------------------------------------------- build
@dataclass
class SimplifierSettings:
    """Everything that changes the rows (part of the stage fingerprint)."""

    n_users: int = 40
    corpus_seed: int = TRAIN_CORPUS_SEED
    max_prompts: int | None = 400
    max_sentences: int = 8
    min_confidence: int = MIN_CONFIDENCE
    heldout_fraction: float = 0.2
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def corpus_prompts(settings: SimplifierSettings) -> list[dict[str, Any]]:
    """English user prompts of the sample corpus (distinct, in corpus order), split into sentences; prompts
    of more than ``max_sentences`` sentences are left out (rare, and they dominate a small batch)."""
    from convohub.conversations import from_wildchat_row, generate_wildchat_sample
    from convohub.crychic.sentences import split_sentences

    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, row in enumerate(generate_wildchat_sample(n_users=settings.n_users, seed=settings.corpus_seed)):
        conv = from_wildchat_row(row, index=index)
        if conv.language != "English":
            continue
        for turn_index, turn in enumerate(conv.user_turns()):
            key = " ".join(words(turn.content))
            if not key or key in seen:
                continue
            seen.add(key)
            sentences = split_sentences(turn.content)
            if 1 <= len(sentences) <= settings.max_sentences:
                out.append({"conversation_id": conv.conversation_id, "turn_index": turn_index,
                            "prompt": turn.content, "sentences": sentences})
    if settings.max_prompts is not None:
        out = seeded_sample(out, settings.max_prompts, f"simplifier/{settings.seed}")
    return out


def label_prompts(labeller: SentenceAnnotator, prompts: Sequence[Mapping[str, Any]],
                  settings: SimplifierSettings) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Label every sentence of every prompt; keep the prompts whose sentences all pass the filter."""
    flat = [s for p in prompts for s in p["sentences"]]
    started = time.perf_counter()
    found = iter(labeller.annotate(flat))
    seconds = time.perf_counter() - started
    rows: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    for p in prompts:
        notes = [next(found) for _ in p["sentences"]]
        if not all(a.usable for a in notes):
            dropped["unusable answer"] += 1
            continue
        if min(a.confidence or 0 for a in notes) < settings.min_confidence:
            dropped["confidence below filter"] += 1
            continue
        rows.append({**p, "labels": [a.label for a in notes], "confidences": [a.confidence for a in notes],
                     "produced_by": labeller.name,
                     "split": split_of(p["conversation_id"], settings.heldout_fraction, settings.seed)})
    counts = {"prompts": len(prompts), "sentences": len(flat), "kept": len(rows), "dropped": dict(dropped),
              "kept_sentences": sum(len(r["sentences"]) for r in rows),
              "labels": dict(Counter(label for r in rows for label in r["labels"])),
              "seconds": round(seconds, 2), "labeller_counts": dict(labeller.counts)}
    return rows, counts


def build_simplifier_data(labeller: str | SentenceAnnotator = AUTO, settings: SimplifierSettings | None = None, *,
                          work: Path | None = None, llm: str | ChatBackend = "smollm2",
                          gold: Sequence[Mapping[str, str]] | None = None,
                          progress: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The simplifier's rows and record entry.

    ``labeller``: ``"auto"`` measures the rule labeller and the LLM ``llm`` on the hand-labelled set and
    labels with the better one; a name (``rules:cues-v1``, an LLM spec) or a labeller object labels with
    that one (its agreement is still measured and recorded). Stages (agreement, labels) resume from ``work``.
    """
    settings = settings or SimplifierSettings()

    def llm_labeller() -> SentenceAnnotator:
        if isinstance(llm, ChatBackend):
            return LLMLabeller(cached(llm, work), progress=progress)
        return make_labeller(llm, work=work, progress=progress)

    if labeller == AUTO:
        candidates: list[SentenceAnnotator] = [RuleLabeller(), llm_labeller()]
    elif isinstance(labeller, str):
        candidates = [make_labeller(labeller, work=work, progress=progress)]
    else:
        candidates = [labeller]
    gold_items = list(gold if gold is not None else load_sentence_gold())
    figures = stage(work, "simplifier-agreement",
                    {"labellers": [c.identity() for c in candidates], "gold": digest(gold_items)},
                    lambda: choose_labeller(candidates, gold_items)[1])
    chosen = candidates[next(i for i, f in enumerate(figures) if f["chosen"])]
    prompts = corpus_prompts(settings)
    value = stage(work, "simplifier-labels", {"labeller": chosen.identity(), "settings": asdict(settings)},
                  lambda: dict(zip(("rows", "counts"), label_prompts(chosen, prompts, settings), strict=True)))
    entry = {**value["counts"], "produced_by": chosen.name, "choice": AUTO if labeller == AUTO else "named",
             "agreement": figures, "gold_file": f"convohub/data/{GOLD_FILE}",
             "gold_note": f"hand-written and hand-labelled by the author of the rules; ids below s{FRESH_FROM_ID} were "
                          "seen while writing the rules (optimistic for them), the *_fresh figures are on the "
                          "sentences written after the rules were frozen"}
    return value["rows"], entry
