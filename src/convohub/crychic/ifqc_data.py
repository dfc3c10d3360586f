"""IFQC training data: single sentences synthesised by an LLM from the paper's three templates (and a polite
one of convohub's).

The paper's templates (seed 002) are implicit follow-ups that name no domain noun ("Continue", "Make it
shorter"), explicit follow-ups that name one, and questions opening a new topic; the ending mark (question
mark or period), the length band (3-5, 5-10, 10-20 words) and the domain vary. Label = the template's class:
``implicit`` for the first, ``explicit`` for the other two (the IFQC only has to tell implicit follow-ups
apart; a new topic is handled later by the judge).

A fourth template, ``polite`` (thanks and acknowledgements that ask for nothing: "Thanks, that solved it."), is
convohub's addition, off unless ``IFQCSettings.polite_share`` asks for it. Such a prompt names no domain noun
either, so an IFQC that never saw one calls it implicit and sends it to the previous turn, and the
simplifier's polite -> root rule, which comes after the IFQC, never fires: measured on the tiny release's
WildChatTree test split, 67 of the 101 roots the IFQC sent to the previous turn were thanks. Its class is
``explicit``, which the IFQC reads as "not an implicit follow-up".

Why one short sentence per call, with the constraint spelled out in plain words and one worked example
(:data:`EXAMPLES`, rotated) before it: the offline model is SmolLM2-135M, which follows one simple
instruction and imitates a shown answer, but not a list of constraints, and loses count when asked for
several sentences at once. It cannot count words either, so the band is asked as "about N words". Its
answers are checked, not trusted (:func:`check_sentence`):

* one sentence: the first sentence of the answer's first line is kept (:func:`clean_answer`, spaCy's
  sentencizer of :mod:`convohub.crychic.sentences`), and must be the whole of that sentence;
* word count inside the band (inclusive; words are runs of letters and digits), widened by
  ``IFQCSettings.length_slack`` words on each side (0 by default; the tiny release profile uses 3);
* last character is the requested mark (polite: a period or an exclamation mark, and no question mark);
* implicit and polite: none of the words of :data:`DOMAINS`' lexicons (singular or plural) -- a simple lexicon
  check: it catches the nouns the prompts suggest and the common nouns of every domain, not every noun of English;
* explicit and new topic: at least one word of the requested domain's lexicon;
* not a duplicate of an accepted sentence, nor a copy of a worked example (case, spacing and punctuation
  ignored).

A rejected answer is asked again with another sampling seed, at most ``max_attempts`` times in all; every
rejection is counted by reason, and cells that never produce a valid sentence are counted as given up.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from convohub.crychic.data_common import backend_identity, read_gold, split_of, words
from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed
from convohub.stages import cached, digest, stage

TEMPLATES = ("implicit", "explicit", "new_topic", "polite")
#: Hand-written follow-ups (implicit, explicit, new topic; polite from q84 on) in ``convohub/data``: the IFQC's
#: test set beside the synthesised held-out rows. Written for convohub, not by an LLM nor by the sample
#: generator, and on subjects beyond :data:`DOMAINS`, so it measures whether a classifier trained on SmolLM2's
#: sentences carries over to the way people write follow-ups.
GOLD_FILE = "crychic_ifqc_gold.jsonl"
#: template -> IFQC class name (``CrychicIFQCConfig``'s labels)
TEMPLATE_CLASS = {"implicit": "implicit", "explicit": "explicit", "new_topic": "explicit", "polite": "explicit"}
ENDINGS = {"question": "?", "statement": "."}
LENGTH_BANDS: dict[str, tuple[int, int]] = {"3-5": (3, 5), "5-10": (5, 10), "10-20": (10, 20)}

#: domain -> nouns that name its things; the prompts ask for one of them in explicit sentences, and the
#: implicit check rejects a sentence that uses any of them
DOMAINS: dict[str, tuple[str, ...]] = {
    "cooking": ("recipe", "pasta", "oven", "soup", "sauce", "cake", "bread", "garlic", "chicken", "dough"),
    "travel": ("trip", "flight", "hotel", "itinerary", "passport", "beach", "museum", "train", "luggage", "city"),
    "programming": ("function", "code", "python", "loop", "variable", "database", "bug", "script", "api",
                    "array"),
    "health": ("diet", "workout", "sleep", "vitamin", "doctor", "exercise", "symptom", "muscle", "headache",
               "calorie"),
    "finance": ("budget", "loan", "tax", "mortgage", "savings", "stock", "salary", "invoice", "pension",
                "credit"),
    "writing": ("essay", "poem", "story", "email", "paragraph", "novel", "letter", "chapter", "headline",
                "resume"),
    "science": ("planet", "atom", "cell", "gravity", "molecule", "experiment", "galaxy", "energy", "protein",
                "climate"),
    "music": ("song", "guitar", "piano", "melody", "album", "lyrics", "chord", "band", "concert", "rhythm"),
}

#: what an implicit follow-up asks of the last answer; phrased without a noun of any domain
IMPLICIT_ACTIONS = (
    "continue", "make it shorter", "make it longer", "say it more simply", "translate it into French",
    "give one more example", "try again differently", "explain the last part", "fix the mistake",
    "make it sound more formal", "turn it into a list", "explain why",
)

#: what a polite message does; it asks nothing of the answer and names nothing
POLITE_ACTIONS = (
    "thank the chatbot for its answer", "say that the answer solved your problem", "say that you understand now",
    "say that the answer was exactly what you needed", "praise the answer", "say goodbye and thanks",
)

SYSTEM = "You write one message that a person types to a chatbot. Reply with the message only."


@dataclass(frozen=True)
class Cell:
    """One combination of template, ending, length band and (for explicit sentences) domain and noun."""

    template: str
    ending: str
    band: str
    domain: str | None = None
    noun: str | None = None
    action: str | None = None

    def prompt(self) -> str:
        """The instruction for this cell, in plain words a 135M model can follow."""
        size = {"3-5": "very short, about 4 words", "5-10": "short, about 7 words",
                "10-20": "a bit longer, about 14 words"}[self.band]
        form = "a question ending with ?" if self.ending == "question" else "a statement ending with a period"
        if self.template == "implicit":
            return (f"Write a message asking the chatbot to {self.action}, without saying what 'it' is. "
                    f"Make it {form}, {size}.")
        if self.template == "polite":
            return f"Write a message to {self.action}, asking for nothing more. Make it {form}, {size}."
        if self.template == "explicit":
            return (f"Write a follow-up message about the chatbot's answer on {self.domain} that uses the word "
                    f"'{self.noun}'. Make it {form}, {size}.")
        return (f"Write a first message starting a new chat about {self.domain} that uses the word "
                f"'{self.noun}'. Make it {form}, {size}.")

    def messages(self, example: int) -> list[dict[str, str]]:
        """System prompt, one worked example of the same template (the ``example``-th, rotating), the ask."""
        shot_cell, shot_answer = EXAMPLES[self.template][example % len(EXAMPLES[self.template])]
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": shot_cell.prompt()},
                {"role": "assistant", "content": shot_answer}, {"role": "user", "content": self.prompt()}]


#: one worked example per call (written for convohub), so the model sees the answer's form once
EXAMPLES: dict[str, tuple[tuple[Cell, str], ...]] = {
    "implicit": ((Cell("implicit", "question", "3-5", action="say it again"), "Can you repeat that?"),
                 (Cell("implicit", "statement", "5-10", action="add more detail"), "Please add a little more "
                  "detail to it."),
                 (Cell("implicit", "statement", "3-5", action="keep going"), "Keep going with that.")),
    "explicit": ((Cell("explicit", "question", "5-10", "gardening", "tomato"),
                  "Should I water the tomato plants every day?"),
                 (Cell("explicit", "statement", "10-20", "cars", "engine"),
                  "Please explain again why the engine makes that noise when it is cold.")),
    "new_topic": ((Cell("new_topic", "question", "5-10", "pets", "puppy"), "How often should I feed a new puppy?"),
                  (Cell("new_topic", "statement", "5-10", "art", "painting"),
                   "I want to start a painting class for adults.")),
    "polite": ((Cell("polite", "statement", "3-5", action="say that the answer helped"), "That helped, thank you."),
               (Cell("polite", "statement", "5-10", action="say that it works now"),
                "It works now, I really appreciate it.")),
}


def plan_cells(per_cell: int, domains: Sequence[str] | None = None, polite_share: float = 0.0) -> list[Cell]:
    """The cells to fill, ``per_cell`` sentences each (repeated cells are distinct requests).

    Explicit and new-topic cells run over every (ending, band, domain) with the domain's nouns in turn;
    implicit cells over every (ending, band, action), repeated so that the implicit class is about as large
    as the two explicit templates together; polite cells (statements) over every (band, action), as many as
    ``polite_share`` times the two explicit templates, rounded.
    """
    domains = list(domains if domains is not None else DOMAINS)
    unknown = sorted(set(domains) - set(DOMAINS))
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; known: {sorted(DOMAINS)}")
    if per_cell < 1:
        raise ValueError(f"per_cell must be >= 1, got {per_cell}")
    if not 0.0 <= polite_share <= 1.0:
        raise ValueError(f"polite_share must be between 0 and 1, got {polite_share}")
    cells: list[Cell] = []
    for template in ("explicit", "new_topic"):
        for ending in ENDINGS:
            for band in LENGTH_BANDS:
                for domain in domains:
                    nouns = DOMAINS[domain]
                    for i in range(per_cell):
                        noun = nouns[(i + len(cells)) % len(nouns)]
                        cells.append(Cell(template, ending, band, domain, noun))
    explicit = len(cells)
    implicit: list[Cell] = []
    i = 0
    while len(implicit) < explicit:
        ending = list(ENDINGS)[i % len(ENDINGS)]
        band = list(LENGTH_BANDS)[(i // len(ENDINGS)) % len(LENGTH_BANDS)]
        action = IMPLICIT_ACTIONS[i % len(IMPLICIT_ACTIONS)]
        implicit.append(Cell("implicit", ending, band, action=action))
        i += 1
    polite = [Cell("polite", "statement", list(LENGTH_BANDS)[j % len(LENGTH_BANDS)],
                   action=POLITE_ACTIONS[j % len(POLITE_ACTIONS)]) for j in range(round(polite_share * explicit))]
    return cells + implicit + polite


_PREFIX = re.compile(r"^(?:\d+[.)]\s*|[-*•]\s*|(?:message|user|person|answer|reply)\s*:\s*)", re.IGNORECASE)
_QUOTES = "\"'“”‘’`"


def clean_answer(text: str) -> str:
    """The model's sentence: the first sentence of the first line with text (of the line after a lead-in
    ending in ':'), without list markers, a ``Message:``-style label or surrounding quotes. Small models often
    add a second sentence of commentary; keeping the first is what "one sentence" asks of them."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[1] if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    line = _PREFIX.sub("", line).strip()
    if len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    elif line and line[0] in _QUOTES and line.count(line[0]) == 1:
        line = line[1:].strip()
    if not line:
        return ""
    from convohub.crychic.sentences import split_sentences

    return split_sentences(line)[0]


def _lexicon_hits(tokens: Sequence[str], nouns: Sequence[str]) -> list[str]:
    wanted = set(nouns)
    hits = []
    for token in tokens:
        forms = {token, token[:-1] if token.endswith("s") else token, token[:-2] if token.endswith("es") else token}
        if forms & wanted:
            hits.append(token)
    return hits


ALL_NOUNS = tuple(sorted({noun for nouns in DOMAINS.values() for noun in nouns}))


def check_sentence(text: str, cell: Cell, length_slack: int = 0) -> str | None:
    """Why ``text`` does not fit ``cell`` (a short reason), or None when it does (module docstring).
    ``length_slack`` widens the length band by that many words on each side."""
    from convohub.crychic.sentences import split_sentences

    if not text:
        return "empty"
    if len(split_sentences(text)) != 1:
        return "not one sentence"
    tokens = words(text)
    lo, hi = LENGTH_BANDS[cell.band]
    if not lo - length_slack <= len(tokens) <= hi + length_slack:
        return "length"
    if cell.template == "polite":
        if not text.endswith((".", "!")) or "?" in text:
            return "ending mark"
    elif not text.endswith(ENDINGS[cell.ending]):
        return "ending mark"
    if cell.template in ("implicit", "polite"):
        if _lexicon_hits(tokens, ALL_NOUNS):
            return f"domain noun in {cell.template}"
    elif not _lexicon_hits(tokens, DOMAINS[cell.domain or ""]):
        return "no domain noun"
    return None


def dedup_key(text: str) -> str:
    return " ".join(words(text))


@dataclass
class IFQCSettings:
    """Everything that changes the rows (part of the stage fingerprint)."""

    per_cell: int = 2
    domains: tuple[str, ...] = tuple(DOMAINS)
    max_attempts: int = 4
    temperature: float = 0.9
    top_p: float = 0.95
    max_new_tokens: int = 48
    #: words a sentence may fall outside its cell's length band (the band varies the data; the label is the
    #: template's class either way). SmolLM2 misses the band in most answers (62 of 78 rejections, 2 tries).
    length_slack: int = 0
    #: polite cells per explicit/new-topic cell (module docstring); 0 is the paper's three templates
    polite_share: float = 0.0
    heldout_fraction: float = 0.2
    seed: int = 0


def _request(cell: Cell, repeat: int, attempt: int, settings: IFQCSettings) -> ChatRequest:
    # The seed varies by attempt and by ``repeat`` (how many identical cells came before this one), so a
    # retry or a repeated cell draws a new sentence and is a new cache entry. It does not vary by request:
    # the local backend batches only requests with equal sampling parameters, seed included.
    seed = int(digest([settings.seed, repeat, attempt])[:8], 16)
    return ChatRequest(messages=cell.messages(repeat + attempt), max_new_tokens=settings.max_new_tokens,
                       temperature=settings.temperature, top_p=settings.top_p, seed=seed, stop=("\n",))


def synthesise(backend: ChatBackend, settings: IFQCSettings, *, chunk_size: int = 16,
               progress: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Fill every cell (retrying rejected answers), returning the rows and the counts.

    Rows are in cell order and carry their template, class, ending, band, domain, the attempt that produced
    them, the model that did (``produced_by``) and their split.
    """
    cells = plan_cells(settings.per_cell, settings.domains, settings.polite_share)
    seen_cells: Counter[Cell] = Counter()
    repeats = []
    for cell in cells:
        repeats.append(seen_cells[cell])
        seen_cells[cell] += 1
    seen: set[str] = set()
    shown = {dedup_key(answer) for shots in EXAMPLES.values() for _, answer in shots}

    def accept(i: int, answer: str) -> str:
        # checked in cell order within a try, so a duplicate of a sentence accepted earlier in the same try
        # is rejected too
        text = clean_answer(answer)
        reason = check_sentence(text, cells[i], settings.length_slack)
        if reason is None and dedup_key(text) in shown:
            reason = "copy of the example"
        elif reason is None and dedup_key(text) in seen:
            reason = "duplicate"
        if reason is not None:
            raise ValueError(reason)
        seen.add(dedup_key(text))
        return text

    started = time.perf_counter()
    asked = ask_until_parsed(backend, len(cells),
                             lambda i, attempt: _request(cells[i], repeats[i], attempt, settings), accept,
                             max_attempts=settings.max_attempts, desc="IFQC sentences, try {try}",
                             progress=progress, chunk_size=chunk_size)
    seconds = time.perf_counter() - started
    rejected: Counter[str] = Counter()
    for attempt in range(settings.max_attempts):  # try by try, in cell order: the order they happened
        for parsed in asked:
            if attempt < len(parsed.errors):
                reason = parsed.errors[attempt]
                rejected["backend error" if reason.startswith("request failed: ") else reason] += 1
    rows = []
    for cell, parsed in zip(cells, asked, strict=True):
        if parsed.value is None:
            continue
        text = parsed.value
        rows.append({"text": text, "label": TEMPLATE_CLASS[cell.template], "template": cell.template,
                     "ending": cell.ending, "length_band": cell.band, "domain": cell.domain,
                     "attempt": parsed.attempts, "produced_by": backend.name,
                     "split": split_of(dedup_key(text), settings.heldout_fraction, settings.seed)})
    counts = {"requested": len(cells), "accepted": len(rows), "calls": sum(p.attempts for p in asked),
              "rejected": dict(rejected), "gave_up": sum(p.value is None for p in asked),
              "seconds": round(seconds, 2),
              "seconds_per_accepted": round(seconds / len(rows), 3) if rows else None,
              "by_template": dict(Counter(r["template"] for r in rows)),
              "by_label": dict(Counter(r["label"] for r in rows))}
    return rows, counts


def _prompt_digest() -> str:
    """Changes when the wording of any prompt or example changes (so cached stages are not reused)."""
    samples = [Cell("implicit", "question", "3-5", action="continue"), Cell("explicit", "statement", "5-10", "music",
               "song"), Cell("new_topic", "question", "10-20", "travel", "trip"),
               Cell("polite", "statement", "3-5", action="praise the answer")]
    return digest([SYSTEM, *(cell.messages(0) for cell in samples), repr(EXAMPLES)])


def build_ifqc_data(backend: ChatBackend, settings: IFQCSettings | None = None, *, work: Path | None = None,
                    progress: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:func:`synthesise` behind the response cache and the ``ifqc`` stage file of ``work`` (resumable)."""
    settings = settings or IFQCSettings()
    backend = cached(backend, work)
    fingerprint = {"settings": {**asdict(settings), "domains": list(settings.domains)},
                   "model": backend_identity(backend), "prompts": _prompt_digest()}
    value = stage(work, "ifqc", fingerprint, lambda: dict(zip(("rows", "counts"),
                                                              synthesise(backend, settings, progress=progress),
                                                              strict=True)))
    return value["rows"], {**value["counts"], "produced_by": backend.name}


def load_ifqc_gold(path: str | Path | None = None) -> list[dict[str, str]]:
    """The hand-written follow-ups (``id``, ``text``, ``label`` = the IFQC class, ``template``), validated."""
    items = read_gold(GOLD_FILE, ("id", "text", "label", "template"), path)
    for n, item in enumerate(items, 1):
        if item["template"] not in TEMPLATES or item["label"] != TEMPLATE_CLASS[item["template"]]:
            raise ValueError(f"{path or GOLD_FILE} line {n}: template {item['template']!r} with label "
                             f"{item['label']!r}; templates are {TEMPLATES}, labelled {TEMPLATE_CLASS}")
    return items
