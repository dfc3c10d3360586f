"""Keyword categories (paper Appendix E.5): raw typed keywords -> named entities of ten categories, merged.

1. Grouping. The paper's LLM reads one user's keywords with their descriptions (at most 80 per call, since
   "the same word used by the same user conveys a consistent meaning") and returns the works, franchises and
   public figures they belong to: ``{"results": [{"name", "category": [...], "keywords": [...]}]}``. A
   keyword is only taken from that answer when it is one of the keywords given (copied identically, case
   aside) and the category is one of :data:`~convohub.aqa.settings.KEYWORD_CATEGORIES`. The ``minilm``
   stand-in (the tiny profile's, named in every row) maps by type and embedding instead: a
   ``programming_language`` keyword is its own Programming Language, a ``person`` a Public Figure, and an
   ``artwork`` or ``product_brands`` keyword goes to the closest of the eight work categories when its
   ``value: description`` is close enough to it (cosine >= the labeller floor); the name is the keyword as
   the user wrote it.
2. Merging. The LLM's names are inconsistent ("Pokémon" vs "Pokemon"), so names of one category are merged
   when, for the shorter one ``a`` and the longer ``b``, after normalisation (accents and punctuation
   removed, lower case): (1) they are identical; (2) they are identical without English stop words;
   (3) ``a`` is a prefix of ``b`` and has more than 2 words; (4) the same for a suffix; (5) ``a`` is the
   acronym of ``b`` (first letters of its words, with or without stop words). Public Figure uses rules
   1 and 2 only. A merged group takes the name used by the most conversations (then the longer, then the
   first alphabetically). English stop words are spaCy's list: the paper names NLTK's, whose word list
   needs a download this offline build cannot make.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from convohub.aqa.settings import KEYWORD_CATEGORIES, Settings
from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed, parse_json_answer

PUBLIC_FIGURE = "Public Figure"
RULES = (1, 2, 3, 4, 5)
PUBLIC_FIGURE_RULES = (1, 2)
WORK_CATEGORIES = tuple(c for c in KEYWORD_CATEGORIES if c not in ("Programming Language", PUBLIC_FIGURE))
#: what the MiniLM stand-in compares a keyword with, per work category
CATEGORY_TEXTS = {
    "Video Games": "a video game", "Tabletop Games": "a board game or tabletop role-playing game",
    "Manga/Anime": "a Japanese manga or anime series", "Film": "a film, a movie", "TV Show": "a TV show or series",
    "Western Cartoon/Comic": "a western cartoon or comic book", "Book": "a book or novel",
    "Musical": "a stage musical",
}
_CATEGORY_ALIASES = {"tabletop game": "Tabletop Games", "video game": "Video Games", "tv shows": "TV Show",
                     "films": "Film", "movie": "Film", "books": "Book", "musicals": "Musical",
                     "public figures": PUBLIC_FIGURE, "programming languages": "Programming Language",
                     "anime": "Manga/Anime", "manga": "Manga/Anime"}


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def normalise(name: str) -> str:
    """Lower case, accents and punctuation removed, ``&`` read as ``and``, whitespace collapsed."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    text = text.replace("&", " and ").replace("+", " plus ").replace("#", " sharp ")
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def _content(norm: str) -> str:
    return " ".join(w for w in norm.split() if w not in stop_words())


def _acronyms(norm: str) -> set[str]:
    tokens = norm.split()
    if len(tokens) < 2:
        return set()
    content_words = [w for w in tokens if w not in stop_words()]
    out = {"".join(w[0] for w in tokens)}
    if len(content_words) >= 2:
        out.add("".join(w[0] for w in content_words))
    return out


def merge_names(counts: Mapping[str, int], category: str) -> dict[str, str]:
    """Map every name of ``category`` to its group's name (see the module doc), in linear-ish time: names are
    joined through indexes of their normalised form, content words, prefixes/suffixes and acronyms rather
    than compared pairwise."""
    names = sorted(counts)
    parent = {n: n for n in names}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(x: str, y: str) -> None:
        rx, ry = find(x), find(y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)

    allowed = PUBLIC_FIGURE_RULES if category == PUBLIC_FIGURE else RULES
    by_norm: dict[str, list[str]] = defaultdict(list)
    for name in names:
        by_norm[normalise(name)].append(name)
    by_content: dict[str, str] = {}
    for norm, group in by_norm.items():
        for other in group[1:]:
            union(group[0], other)  # rule 1
        if 2 in allowed and _content(norm):
            first = by_content.setdefault(_content(norm), group[0])
            union(first, group[0])
    for norm, group in by_norm.items():
        tokens = norm.split()
        if 3 in allowed or 4 in allowed:
            for size in range(3, len(tokens)):
                if 3 in allowed and " ".join(tokens[:size]) in by_norm:
                    union(group[0], by_norm[" ".join(tokens[:size])][0])
                if 4 in allowed and " ".join(tokens[-size:]) in by_norm:
                    union(group[0], by_norm[" ".join(tokens[-size:])][0])
        if 5 in allowed:
            for acronym in _acronyms(norm):
                if acronym in by_norm:
                    union(group[0], by_norm[acronym][0])
    groups: dict[str, list[str]] = defaultdict(list)
    for name in names:
        groups[find(name)].append(name)
    out: dict[str, str] = {}
    for members in groups.values():
        chosen = sorted(members, key=lambda n: (-counts[n], -len(n), n))[0]
        out.update(dict.fromkeys(members, chosen))
    return out


# ------------------------------------------------------------------------------------------ grouping
def _category(raw: Any) -> str | None:
    text = " ".join(str(raw or "").split())
    for name in KEYWORD_CATEGORIES:
        if text.lower() == name.lower():
            return name
    return _CATEGORY_ALIASES.get(text.lower())


def group_prompt(keywords: Sequence[Mapping[str, str]]) -> str:
    listed = "\n".join(f"- {k['value']}: {k.get('description', '')}" for k in keywords)
    categories = ", ".join(f'"{c}"' for c in KEYWORD_CATEGORIES)
    return (f"Keywords one user mentioned, with descriptions:\n{listed}\n\nGroup the keywords by the artwork, "
            "franchise, series, book or real public figure they belong to, using its best-known name in English "
            f"(not a version or episode). Categories: {categories}. Copy the keywords exactly; ignore keywords of "
            "no such category. Answer JSON: {\"results\": [{\"name\": \"Game of Thrones\", \"category\": "
            "[\"TV Show\"], \"keywords\": [\"arya stark\"]}]}")


def parse_groups(text: str, given: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{keyword value: (category, name)}`` from a grouping answer; only given keywords are taken."""
    parsed = parse_json_answer(text, expect=dict)
    if not parsed.ok or not isinstance(parsed.value.get("results"), list):
        raise ValueError(f"keyword groups: {parsed.error or 'no results list'}")
    lookup = {g.lower(): g for g in given}
    out: dict[str, tuple[str, str]] = {}
    for item in parsed.value["results"]:
        if not isinstance(item, Mapping):
            continue
        name = " ".join(str(item.get("name") or "").split())
        categories = item.get("category")
        categories = categories if isinstance(categories, list) else [categories]
        category = next((c for c in map(_category, categories) if c), None)
        if not name or category is None or not isinstance(item.get("keywords"), list):
            continue
        for keyword in item["keywords"]:
            original = lookup.get(str(keyword).strip().lower())
            if original is not None:
                out.setdefault(original, (category, name))
    return out


def llm_groups(per_user: Mapping[str, Sequence[Mapping[str, str]]], backend: ChatBackend, settings: Settings,
               progress: bool = False) -> dict[tuple[str, str], tuple[str, str]]:
    """``{(user, keyword value): (category, name)}`` from one LLM call per ``keywords_per_call`` keywords of a
    user (a call whose answer never parses groups nothing)."""
    jobs: list[tuple[str, list[Mapping[str, str]]]] = []
    for user, keywords in sorted(per_user.items()):
        for start in range(0, len(keywords), settings.keywords_per_call):
            jobs.append((user, list(keywords[start:start + settings.keywords_per_call])))

    def build(i: int, attempt: int) -> ChatRequest:
        sampling = {} if attempt == 0 else {"temperature": 0.7, "top_p": 0.95, "seed": attempt}
        return ChatRequest(messages=[{"role": "user", "content": group_prompt(jobs[i][1])}], max_new_tokens=1024,
                           **sampling)

    results = ask_until_parsed(backend, len(jobs), build,
                               lambda i, t: parse_groups(t, [k["value"] for k in jobs[i][1]]),
                               max_attempts=settings.max_attempts, desc="AQA keyword groups", progress=progress)
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for (user, _), result in zip(jobs, results, strict=True):
        for value, group in (result.value or {}).items():
            out[(user, value)] = group
    return out


def surface(value: str, texts: Iterable[str]) -> str:
    """The keyword as the user wrote it (its first case-insensitive occurrence), else as given."""
    pattern = re.compile(re.escape(value), re.I)
    for text in texts:
        found = pattern.search(text)
        if found:
            return found.group(0)
    return value


def minilm_groups(items: Sequence[tuple[str, Mapping[str, str], Sequence[str]]], settings: Settings,
                  embed: Any = None) -> dict[tuple[str, str], tuple[str, str]]:
    """The MiniLM stand-in of :func:`llm_groups` over ``(user, keyword, user texts)`` items (module doc)."""
    if embed is None:
        from convohub.embeddings import embed
    out: dict[tuple[str, str], tuple[str, str]] = {}
    works = [(user, kw, texts) for user, kw, texts in items if kw["keyword_type"] in ("artwork", "product_brands")]
    for user, kw, texts in items:
        if kw["keyword_type"] == "programming_language":
            out[(user, kw["value"])] = ("Programming Language", surface(kw["value"], texts))
        elif kw["keyword_type"] == "person":
            out[(user, kw["value"])] = (PUBLIC_FIGURE, surface(kw["value"], texts))
    if works:
        vectors = embed([f"{kw['value']}: {kw.get('description', '')}" for _, kw, _ in works])
        prototypes = embed([CATEGORY_TEXTS[c] for c in WORK_CATEGORIES])
        sims = np.asarray(vectors) @ np.asarray(prototypes).T
        for (user, kw, texts), row in zip(works, sims, strict=True):
            best = int(np.argmax(row))
            if row[best] >= settings.minilm_floor:
                out[(user, kw["value"])] = (WORK_CATEGORIES[best], surface(kw["value"], texts))
    return out


def aggregate(records: Sequence[Mapping[str, Any]], groups: Mapping[tuple[str, str], tuple[str, str]]
              ) -> tuple[dict[str, list[dict[str, str]]], dict[str, Any]]:
    """``{hash: keywords_aggregated}`` after the merge rules, and the statistics the card reports."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for record in records:
        seen = set()
        for kw in record["keywords"]:
            group = groups.get((record["user_name"], kw["value"]))
            if group and group not in seen:
                seen.add(group)
                counts[group[0]][group[1]] += 1
    canonical = {category: merge_names(names, category) for category, names in counts.items()}
    out: dict[str, list[dict[str, str]]] = {}
    for record in records:
        entries: list[dict[str, str]] = []
        for kw in record["keywords"]:
            group = groups.get((record["user_name"], kw["value"]))
            if group:
                entry = {"keyword_type": group[0], "value": canonical[group[0]][group[1]]}
                if entry not in entries:
                    entries.append(entry)
        out[record["hash"]] = entries
    merged = {c: sum(1 for n, m in canon.items() if n != m) for c, canon in canonical.items()}
    stats = {"categories": {c: len(set(canon.values())) for c, canon in sorted(canonical.items())},
             "names_merged": {c: n for c, n in sorted(merged.items()) if n},
             "keyword_categories": sum(len(set(canon.values())) for canon in canonical.values()),
             "conversations_with_keywords": sum(1 for v in out.values() if v)}
    return out, stats
