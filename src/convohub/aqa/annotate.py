"""LLM summaries, intents and typed keywords of every conversation (paper Appendix E.2), validated, cached
and resumable.

The paper asks GPT-4o for all three in one JSON answer (its Figure 14). convohub asks one field per call,
because the offline model, SmolLM2-135M, follows one short instruction at a time far better than a
three-part JSON schema; an endpoint LLM gets the same three prompts. Each answer is validated, and only the
conversations whose answer failed are asked again (:func:`convohub.llm.ask_until_parsed`; the first try is
greedy, later tries sample with a fresh seed):

* ``summary``: one sentence, at least 4 words, in English; an answer over the word limit (30) is cut at the
  limit (counted as ``cut``);
* ``intent``: one phrase, at least 2 words, cut at 30 words the same way;
* ``keywords``: a JSON list of ``{"type", "value", "description"}`` (the paper's format), or, with
  ``Settings.keyword_format == "pairs"``, ``type=value; type=value`` (or ``none``) after worked examples given
  as earlier chat turns; the answer must parse; items whose type is not one of the 12 types
  (:data:`~convohub.aqa.settings.KEYWORD_TYPES`; a few spellings such as "programming language" are
  accepted), whose value is empty or longer than 8 words, that copy a worked example the conversation does
  not mention, or (``keywords_grounded``) that the text shown does not mention are dropped and counted;
  values are lower-cased, descriptions cut at 15 words.

The intent reads the conversation, or (``intent_source == "summary"``) its validated summary. A conversation
whose summary or intent never validated is dropped; one whose keyword answer never parsed is kept without
keywords; both are counted per field. Every answer goes through the response cache of the work folder, so a
run killed in the middle repeats no call that had finished; :func:`chunk_size` keeps each cached chunk to one
batch of the backend.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from convohub.aqa.settings import KEYWORD_TYPES, Settings
from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed, few_shot_messages, parse_json_answer

FIELDS = ("summary", "intent", "keywords")
SYSTEM = "You write short, factual notes about chat logs."
MAX_NEW_TOKENS = {"summary": 40, "intent": 28, "keywords": 72}
KEYWORD_WORDS = 8
DESCRIPTION_WORDS = 15
#: values of the worked example: an item repeating one is kept only when the conversation mentions it
EXAMPLE_VALUES = frozenset({"lasagna", "rome", "python", "titanic", "leonardo dicaprio"})
#: other spellings of the 12 types, and the kinds of work the paper's ``artwork`` type lists (films, books,
#: games, anime, shows) written as types of their own
_TYPE_ALIASES = {"programming language": "programming_language", "scientific term": "scientific_term",
                 "demographic term": "demographic_term", "product brands": "product_brands",
                 "product_brand": "product_brands", "product": "product_brands", "brand": "product_brands",
                 "financial term": "financial_term", "place": "location", "company": "organization",
                 "game": "artwork", "video game": "artwork", "video_game": "artwork", "movie": "artwork",
                 "film": "artwork", "book": "artwork", "novel": "artwork", "anime": "artwork", "manga": "artwork",
                 "tv show": "artwork", "tv_show": "artwork", "series": "artwork", "painting": "artwork",
                 "city": "location", "country": "location", "state": "location", "landmark": "location",
                 "planet": "location"}


def words(text: str) -> list[str]:
    return text.split()


def content(record: Mapping[str, Any], max_words: int | None) -> str:
    """What an annotation prompt shows: the user's messages cut to ``max_words`` words, or (``None``) the
    whole dialogue in the paper's layout (``[User Request]`` / ``[Agent Response]`` turns separated by ``----``)."""
    turns = record["conversation"]
    if max_words is None:
        tags = {"user": "[User Request]", "assistant": "[Agent Response]"}
        return "\n----\n".join(f"{tags.get(t['role'], t['role'])} {t['content']}" for t in turns)
    text = " ".join(" ".join(t["content"].split()) for t in turns if t["role"] == "user")
    cut = words(text)
    return " ".join(cut[:max_words]) + (" ..." if len(cut) > max_words else "")


TYPES_LINE = ", ".join(KEYWORD_TYPES)
#: worked examples of the ``pairs`` keyword format, given as earlier chat turns
PAIR_EXAMPLES = (
    ("How do I bake lasagna like they do in Rome?", "food=lasagna; location=Rome"),
    ("Write a Python script that lists the files in a folder.", "programming_language=Python"),
    ("Summarize the plot of Titanic and tell me about Leonardo DiCaprio.", "artwork=Titanic; person=Leonardo DiCaprio"),
)
#: prefix of the user turns of the ``pairs`` format (it cues the task better than the system turn alone)
PAIR_PREFIX = "Keywords of: "


def _prompt(field: str, text: str, settings: Settings) -> str:
    shown = f'Messages a user sent to a chatbot:\n"""{text}"""\n'
    if field == "summary":
        return (shown + f"Write one sentence of at most {settings.summary_words} words, in English, that says "
                "what the user asked for. Start with \"The user\".")
    if field == "intent":
        if settings.intent_source == "summary":
            shown = f"What a user asked a chatbot: {text}\n"
        return (shown + "In at most 15 words, what does the user want to achieve? Answer with one phrase in "
                "English starting with \"To\".")
    return ("List the named things in the user's messages as a JSON list. Each item is {\"type\": T, \"value\": V, "
            f"\"description\": D}} where T is one of: {TYPES_LINE}; D has at most {KEYWORD_WORDS} words. "
            "Answer [] when there is none.\n"
            "Example: \"How do I bake lasagna like they do in Rome?\" -> [{\"type\": \"food\", \"value\": \"lasagna\", "
            "\"description\": \"Italian baked pasta dish\"}, {\"type\": \"location\", \"value\": \"Rome\", "
            "\"description\": \"capital city of Italy\"}]\n" + shown + "JSON:")


def messages(field: str, text: str, settings: Settings) -> list[dict[str, str]]:
    """The chat of one field's request (the ``pairs`` keyword format puts its examples in earlier turns)."""
    if field == "keywords" and settings.keyword_format == "pairs":
        system = f"Reply with type=value pairs separated by semicolons, or none. Types: {TYPES_LINE}."
        return few_shot_messages(system, [(PAIR_PREFIX + asked, answer) for asked, answer in PAIR_EXAMPLES],
                                 PAIR_PREFIX + text)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _prompt(field, text, settings)}]


def request(field: str, text: str, settings: Settings, attempt: int) -> ChatRequest:
    """The request for one field of one conversation; tries after the first sample with a fresh seed."""
    sampling = {} if attempt == 0 else {"temperature": 0.7, "top_p": 0.95, "seed": attempt}
    tokens = 24 if field == "keywords" and settings.keyword_format == "pairs" else MAX_NEW_TOKENS[field]
    return ChatRequest(messages=messages(field, text, settings), max_new_tokens=tokens, **sampling)


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        line = line.strip().strip("\"'*").strip()
        line = re.sub(r"^(summary|intent|answer)\s*:\s*", "", line, flags=re.I).strip().strip("\"'")
        if line:
            return line
    return ""


def _cut(text: str, limit: int, stats: Counter[str], field: str) -> str:
    tokens = words(text)
    if len(tokens) > limit:
        stats[f"{field}_cut"] += 1
        return " ".join(tokens[:limit]).rstrip(",;:") + "."
    return text


def parse_sentence(field: str, text: str, min_words: int, limit: int, stats: Counter[str]) -> str:
    """A summary or intent out of a model answer; ValueError (the re-ask reason) when unusable."""
    line = _first_line(text)
    if len(words(line)) < min_words:
        raise ValueError(f"{field}: {len(words(line))} words, need at least {min_words}: {line[:60]!r}")
    if "messages a user sent" in line.lower() or "at most" in line.lower():
        raise ValueError(f"{field}: the answer repeats the instruction: {line[:60]!r}")
    if not re.search(r"[A-Za-z]", line):
        raise ValueError(f"{field}: no English words in {line[:60]!r}")
    return _cut(line, limit, stats, field)


def _keyword_type(raw: Any) -> str | None:
    name = re.sub(r"[\s\-]+", " ", str(raw or "").strip().lower())
    name = _TYPE_ALIASES.get(name, name.replace(" ", "_"))
    return name if name in KEYWORD_TYPES else None


def _pairs(text: str) -> list[dict[str, str]]:
    """The first three ``type=value`` items of a ``pairs`` answer (its first line; an item cut off by the
    token limit is dropped with the grounding check); ValueError when an item is not ``type=value``."""
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), "")
    if line.strip(" .").lower() in ("none", "[]"):
        return []
    items = []
    for part in line.split(";")[:3]:
        if "=" not in part:
            raise ValueError(f"keywords: {part.strip()[:40]!r} is not type=value")
        kind, _, value = part.partition("=")
        items.append({"type": kind.strip(), "value": value.strip().strip(".\"'")})
    return items


def parse_keywords(text: str, shown: str, stats: Counter[str], settings: Settings) -> list[dict[str, str]]:
    """Typed keywords out of a model answer (see the module doc for what is kept); ValueError when the answer
    holds no JSON list (or, in the ``pairs`` format, no ``type=value`` items)."""
    pairs = settings.keyword_format == "pairs"
    if pairs:
        raw: list[Any] = _pairs(text)
    else:
        parsed = parse_json_answer(text, expect=list)
        if not parsed.ok:
            raise ValueError(f"keywords: {parsed.error}")
        raw = parsed.value
    grounded = settings.keywords_grounded
    keep: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    mentioned = shown.lower()
    for item in raw:
        stats["keyword_items"] += 1
        if not isinstance(item, Mapping):
            stats["keyword_dropped_not_object"] += 1
            continue
        kind = _keyword_type(item.get("type", item.get("keyword_type")))
        value = " ".join(str(item.get("value") or "").split()).lower()
        if kind is None:
            stats["keyword_dropped_type"] += 1
            continue
        if not value or len(words(value)) > KEYWORD_WORDS:
            stats["keyword_dropped_value"] += 1
            continue
        if value in EXAMPLE_VALUES and value not in mentioned:
            stats["keyword_dropped_example_copy"] += 1
            continue
        if grounded and (len(value) < 2 or not re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", mentioned)):
            stats["keyword_dropped_not_in_text"] += 1
            continue
        if (kind, value) in seen:
            stats["keyword_dropped_repeat"] += 1
            continue
        seen.add((kind, value))
        description = " ".join(words(str(item.get("description") or ""))[:DESCRIPTION_WORDS])
        keep.append({"keyword_type": kind, "value": value, "description": description})
    stats["keyword_kept"] += len(keep)
    return keep


def chunk_size(backend: ChatBackend) -> int:
    """Requests per cached chunk: one batch of a local model, the requests in flight of an endpoint, else 16
    (a killed run loses at most the chunk in flight)."""
    inner = getattr(backend, "inner", backend)
    for attribute in ("batch_size", "max_concurrency"):
        value = getattr(inner, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    return 16


def annotate(records: Sequence[Mapping[str, Any]], backend: ChatBackend, settings: Settings,
             progress: bool = True) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``{hash: {"summary", "intent", "keywords"}}`` for every conversation whose three fields validated, and
    the statistics the card reports (per field: asked, valid on the first try, valid, failed, calls)."""
    shown = [content(r, settings.content_words) for r in records]
    stats: Counter[str] = Counter()
    values: dict[str, list[Any]] = {f: [None] * len(records) for f in FIELDS}
    per_field: dict[str, dict[str, int]] = {}
    parsers: dict[str, Callable[[str, str], Any]] = {
        "summary": lambda text, seen: parse_sentence("summary", text, 4, settings.summary_words, stats),
        "intent": lambda text, seen: parse_sentence("intent", text, 2, settings.intent_words, stats),
        "keywords": lambda text, seen: parse_keywords(text, seen, stats, settings),
    }
    for field in ("summary", "keywords", "intent"):
        inputs = shown
        if field == "intent" and settings.intent_source == "summary":
            inputs = [s if s is not None else "" for s in values["summary"]]
        todo = [i for i in range(len(records)) if field != "intent" or settings.intent_source != "summary"
                or values["summary"][i] is not None]
        todo.sort(key=lambda i: (len(inputs[i]), i))  # similar lengths batch together
        results = ask_until_parsed(
            backend, len(todo),
            lambda k, attempt, f=field, src=inputs, ids=todo: request(f, src[ids[k]], settings, attempt),
            lambda k, text, f=field, ids=todo: parsers[f](text, shown[ids[k]]), max_attempts=settings.max_attempts,
            desc=f"AQA {field} (try {{try}})", progress=progress, chunk_size=chunk_size(backend))
        for i, result in zip(todo, results, strict=True):
            values[field][i] = result.value
        per_field[field] = {
            "asked": len(results),
            "valid_first_try": sum(1 for r in results if r.value is not None and r.attempts == 1),
            "valid": sum(1 for r in results if r.value is not None),
            "failed": sum(1 for r in results if r.value is None),
            "calls": sum(r.attempts for r in results),
        }
    out: dict[str, dict[str, Any]] = {}
    for i, record in enumerate(records):
        fields = {f: values[f][i] for f in FIELDS}
        if fields["summary"] is not None and fields["intent"] is not None:
            out[record["hash"]] = fields | {"keywords": fields["keywords"] or []}
    report = {"fields": per_field, "items": dict(stats), "annotated": len(out), "dropped": len(records) - len(out)}
    return out, report
