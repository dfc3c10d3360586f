"""Seeded generator of synthetic WildChat-1M rows, so every WildChat-derived pipeline runs offline.

The rows use the public WildChat-1M format and go through the same reader as the real corpus. They are
built to exercise every downstream step, not to be statistically faithful:

* WildChat-AQA needs users with >= 10 sessions (user = hashed IP + user agent), several countries/states,
  languages, weeks and topics with concrete typed keywords (languages, games, films, people, foods,
  places) whose distribution differs per user;
* WildFeedback needs multi-turn conversations whose follow-ups praise, thank, correct or refine the
  previous answer (and a few rude ones);
* WildChatTree needs follow-ups that are implicit ("Continue", "Make it shorter"), switch topic, or refer
  back to an earlier, not just the previous, turn;
* the PII scrubber and the MinHash de-duplication need e-mails, phone numbers, IPs, keys and a few exact /
  near-duplicate conversations.

All text is written for convohub (templates and vocabularies live in
:mod:`~convohub.conversations.sample_text`). Randomness comes only from one ``random.Random`` seeded with
``seed``; no clock is read.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from convohub.conversations.sample_text import (
    ACCEPT_LANGUAGE,
    ACKS,
    AFTER_ACK,
    AFTER_CONTENT,
    ANSWER_CLOSERS,
    APOLOGIES,
    CONTENT_KINDS,
    CONTINUATIONS,
    CONTINUED,
    COUNTRIES,
    FIRST_NAMES,
    FOLLOWUP_REPLIES,
    GENERIC_CORRECTIONS,
    LAST_NAMES,
    LOCALIZED,
    LOCALIZED_OPENERS,
    MODEL_SWITCH,
    MODELS,
    NATIVE_LANGUAGE_SHARE,
    NEGATIVE,
    NEGATIVE_REPLY,
    PHONE_FORMATS,
    PII_SHARE,
    PII_TEMPLATES,
    PRAISE,
    PROMPT_CLOSERS,
    PROMPT_OPENERS,
    REFER_BACK,
    REFER_BACK_COMPARE,
    REFER_BACK_REPLY,
    REFINEMENTS,
    TEST_CARDS,
    THANKS,
    TOPICS,
    USER_AGENTS,
    USER_TURN_WEIGHTS,
    Topic,
)

#: Row key of the per-turn plan that ``generate_wildchat_sample(with_plan=True)`` adds (not a WildChat field).
PLAN_FIELD = "convohub_plan"


@dataclass(frozen=True)
class _User:
    hashed_ip: str
    user_agent: str
    accept_language: str
    country: str
    state: str
    native_language: str
    topics: tuple[str, ...]
    models: tuple[str, str]
    hour: int


@dataclass
class _Exchange:
    user: str
    assistant: str
    toxic: bool = False
    #: what the user turn does (``ask``, ``followup``, ``switch``, ``refer_back``, ``praise``, ...), and for a
    #: ``refer_back`` the index of the earlier exchange it returns to: the plan ``with_plan`` publishes
    kind: str = "ask"
    refers_to: int | None = None


def _weighted(rng: random.Random, pairs: tuple[tuple[Any, float], ...]) -> Any:
    return rng.choices([p[0] for p in pairs], weights=[p[1] for p in pairs])[0]


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _make_user(rng: random.Random) -> _User:
    country, states, native, _ = _weighted(rng, tuple((c, c[3]) for c in COUNTRIES))
    first, after, _ = _weighted(rng, tuple((m, m[2]) for m in MODELS))
    return _User(
        hashed_ip=_hex(rng, 64),
        user_agent=rng.choice(USER_AGENTS),
        accept_language=rng.choice(ACCEPT_LANGUAGE[native]),
        country=country,
        state=rng.choice(states),
        native_language=native,
        topics=tuple(rng.sample(sorted(TOPICS), 3)),
        models=(first, after),
        hour=rng.randrange(24),
    )


def _slots(topic: Topic, kw: str, kw2: str, kw0: str = "") -> dict[str, str]:
    return {"kw": kw, "kw2": kw2, "kw0": kw0, **topic.facts.get(kw, {})}


def _other(rng: random.Random, options: tuple[str, ...], not_this: str) -> str:
    return rng.choice([o for o in options if o != not_this] or list(options))


def _answer(topic: Topic, kw: str, ask: int, wrong: bool) -> str:
    """The answer written for ask number ``ask`` (answers are aligned with asks), or a wrong one."""
    pool = topic.wrong_answers if wrong and topic.wrong_answers else topic.answers
    return pool[ask % len(pool)].format(**_slots(topic, kw, kw))


def _next_kind(rng: random.Random, previous: str, *, has_earlier: bool) -> str:
    kind = _weighted(rng, AFTER_CONTENT if previous in CONTENT_KINDS else AFTER_ACK)
    return "followup" if kind == "refer_back" and not has_earlier else kind


def _english_exchanges(rng: random.Random, user: _User, n_turns: int) -> list[_Exchange]:
    """A conversation plan in English: each user turn reacts to the previous answer (or an earlier one)."""
    topic = TOPICS[rng.choice(user.topics)]
    kw = rng.choice(topic.keywords)
    kinds = ["ask"]
    history: list[tuple[Topic, str, int]] = []  # (topic, keyword, ask index) each user turn was about
    for i in range(1, n_turns):
        kinds.append(_next_kind(rng, kinds[-1], has_earlier=i >= 2))
    exchanges: list[_Exchange] = []
    ask = rng.randrange(len(topic.asks))
    for i, kind in enumerate(kinds):
        wrong = i + 1 < n_turns and kinds[i + 1] == "correction"
        toxic = False
        refers_to: int | None = None
        if kind in ("ask", "switch"):
            if kind == "switch":
                # Mostly to another of the user's own topics, so per-user topic profiles stay distinct.
                pool = user.topics if rng.random() < 0.7 else tuple(sorted(TOPICS))
                topic = TOPICS[_other(rng, pool, topic.name)]
                kw, ask = rng.choice(topic.keywords), rng.randrange(len(topic.asks))
            user_text = (rng.choice(PROMPT_OPENERS) + topic.asks[ask].format(**_slots(topic, kw, kw))
                         + rng.choice(PROMPT_CLOSERS))
            reply = _answer(topic, kw, ask, wrong) + rng.choice(ANSWER_CLOSERS)
        elif kind == "followup":
            template = rng.choice(topic.followups)
            kw2 = _other(rng, topic.keywords, kw)
            user_text = template.format(**_slots(topic, kw, kw2))
            if "{kw2}" in template and "{kw}" not in template:  # "What about {kw2}?": same question, new keyword
                kw = kw2
                reply = _answer(topic, kw, ask, wrong)
            else:
                reply = rng.choice(FOLLOWUP_REPLIES).format(kw=kw)
        elif kind in ("praise", "thanks"):
            user_text = rng.choice(PRAISE if kind == "praise" else THANKS)
            reply = rng.choice(ACKS)
        elif kind == "correction":
            template = rng.choice(topic.corrections + GENERIC_CORRECTIONS)
            user_text = template.format(**_slots(topic, kw, _other(rng, topic.keywords, kw)))
            reply = f"{rng.choice(APOLOGIES)} {_answer(topic, kw, ask, wrong)}"
        elif kind == "refinement":
            user_text, reply = rng.choice(REFINEMENTS)
            reply = reply.format(kw=kw)
        elif kind == "continue":
            user_text = rng.choice(CONTINUATIONS)
            reply = rng.choice(CONTINUED).format(kw=kw)
        elif kind == "refer_back":
            # Refer to a turn before the previous one, preferring one about a different keyword (indices,
            # so the plan can name the turn; the draw is the same as over the history entries themselves).
            distinct = [j for j, h in enumerate(history[:-1]) if h[1] != kw]
            refers_to = rng.choice(distinct or list(range(len(history) - 1)))
            topic0, kw0, ask0 = history[refers_to]
            templates = REFER_BACK + REFER_BACK_COMPARE if distinct else REFER_BACK
            user_text = rng.choice(templates).format(kw0=kw0, kw=kw)
            topic, kw, ask = topic0, kw0, ask0
            reply = REFER_BACK_REPLY.format(kw0=kw0) + _answer(topic, kw, ask, wrong)
        else:  # negative
            user_text = rng.choice(NEGATIVE)
            toxic = user_text.startswith("Are you stupid")
            reply = rng.choice(NEGATIVE_REPLY)
        history.append((topic, kw, ask))
        exchanges.append(_Exchange(user_text, reply, toxic, kind, refers_to))
    return exchanges


def _localized_exchanges(rng: random.Random, user: _User, language: str, n_turns: int) -> list[_Exchange]:
    """A shorter-vocabulary conversation in ``language``: an opener, then feedback phrases."""
    table = LOCALIZED[language]
    names = [t for t in user.topics if t in table["asks"]] or sorted(table["asks"])
    topic = TOPICS[rng.choice(names)]
    kw = rng.choice(topic.keywords)
    opener = rng.choice(LOCALIZED_OPENERS[language])
    exchanges = [_Exchange(opener + table["asks"][topic.name].format(kw=kw), rng.choice(table["answer"]).format(kw=kw))]
    previous = "ask"
    for _ in range(1, n_turns):
        if previous in ("praise", "thanks"):
            kind = "ask"
        else:
            kind = rng.choice(("praise", "thanks", "correction", "refinement", "continue", "ask"))
        if kind == "ask":
            name = _other(rng, tuple(sorted(table["asks"])), topic.name)
            topic, kw = TOPICS[name], rng.choice(TOPICS[name].keywords)
            exchanges.append(_Exchange(table["asks"][name].format(kw=kw), rng.choice(table["answer"]).format(kw=kw),
                                       kind="switch"))
        else:
            reply_key = {"praise": "ack", "thanks": "ack", "correction": "apology", "refinement": "refined",
                         "continue": "answer"}[kind]
            reply = table[reply_key] if isinstance(table[reply_key], str) else rng.choice(table[reply_key])
            exchanges.append(_Exchange(rng.choice(table[kind]), reply.format(kw=kw), kind=kind))
        previous = kind
    return exchanges


def _pii_sentence(rng: random.Random) -> str:
    values = {
        "email": f"{rng.choice(FIRST_NAMES)}.{rng.choice(LAST_NAMES)}{rng.randrange(10, 99)}@example.com",
        "phone": rng.choice(PHONE_FORMATS).format(d4=f"{rng.randrange(100, 199):04d}", d2=f"{rng.randrange(10, 99)}",
                                                  d2b=f"{rng.randrange(10, 99)}"),
        "ipv4": f"{rng.choice(('192.168', '10.0', '203.0'))}.{rng.randrange(0, 113)}.{rng.randrange(2, 254)}",
        "token": _hex(rng, 32),
        "sk_key": "sk-" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789")
                                  for _ in range(40)),
        "ipv6": f"2001:db8:{_hex(rng, 4)}::{_hex(rng, 3)}:{rng.randrange(1, 9)}",
        "card": rng.choice(TEST_CARDS),
    }
    return rng.choice(PII_TEMPLATES).format(**values)


def _moderation(rng: random.Random, toxic: bool) -> tuple[dict[str, Any], dict[str, float]]:
    """Plausible OpenAI / Detoxify moderation entries (kept only for format fidelity)."""
    categories = ("harassment", "hate", "self-harm", "sexual", "violence")
    scores = {c: round(rng.random() * (0.6 if toxic and c == "harassment" else 0.002), 6) for c in categories}
    if toxic:
        scores["harassment"] = round(0.4 + scores["harassment"], 6)
    openai = {"categories": {c: toxic and c == "harassment" for c in categories}, "category_scores": scores,
              "flagged": toxic}
    detox_keys = ("identity_attack", "insult", "obscene", "severe_toxicity", "sexual_explicit", "threat", "toxicity")
    detox = {k: round(rng.random() * (0.9 if toxic and k in ("insult", "toxicity") else 0.003), 6) for k in detox_keys}
    return openai, detox


def _build_row(rng: random.Random, user: _User, conv_hash: str, language: str, exchanges: list[_Exchange],
               start: datetime, turn_ids: Iterator[int], with_plan: bool = False) -> dict[str, Any]:
    """Assemble one WildChat-1M row; the conversation timestamp is the last turn's, as in WildChat."""
    header = {"accept-language": user.accept_language, "user-agent": user.user_agent}
    items: list[dict[str, Any]] = []
    moderation_openai, moderation_detox = [], []
    clock = start
    for exchange in exchanges:
        ident = next(turn_ids)
        for role, text in (("user", exchange.user), ("assistant", exchange.assistant)):
            is_user = role == "user"
            toxic = exchange.toxic and is_user
            items.append({
                "content": text, "role": role, "language": language,
                "country": user.country if is_user else None, "state": user.state if is_user else None,
                "hashed_ip": user.hashed_ip if is_user else None, "header": dict(header) if is_user else None,
                "timestamp": clock, "toxic": toxic, "redacted": False, "turn_identifier": ident,
            })
            openai, detox = _moderation(rng, toxic)
            moderation_openai.append(openai)
            moderation_detox.append(detox)
            clock += timedelta(seconds=rng.randint(4, 40) if is_user else rng.randint(20, 600))
    last = items[-1]["timestamp"]
    model = user.models[0] if last < MODEL_SWITCH else user.models[1]
    toxic_any = any(item["toxic"] for item in items)
    row = {
        "conversation_hash": conv_hash, "model": model, "timestamp": last, "conversation": items,
        "turn": len(exchanges), "language": language, "openai_moderation": moderation_openai,
        "detoxify_moderation": moderation_detox, "toxic": toxic_any, "redacted": False, "state": user.state,
        "country": user.country, "hashed_ip": user.hashed_ip, "header": header,
    }
    if with_plan:
        row[PLAN_FIELD] = [{"kind": e.kind, "refers_to": e.refers_to} for e in exchanges]
    return row


def _session_start(rng: random.Random, user: _User, origin: datetime, weeks: int) -> datetime:
    hour = (user.hour + rng.choice((-2, -1, 0, 0, 1, 2, 5))) % 24
    return origin + timedelta(days=rng.randrange(weeks * 7), hours=hour, minutes=rng.randrange(60),
                              seconds=rng.randrange(60))


def _duplicates(rng: random.Random, rows: list[dict[str, Any]], turn_ids: Iterator[int]) -> list[dict[str, Any]]:
    """Re-submissions of a few multi-turn conversations: half exact copies, half with one small edit."""
    candidates = [r for r in rows if r["turn"] >= 2] or rows
    picks = rng.sample(candidates, min(len(candidates), max(3, len(rows) // 50)))
    copies = []
    for n, original in enumerate(picks):
        dup = copy.deepcopy(original)
        shift = timedelta(minutes=rng.randint(3, 240))
        dup["conversation_hash"] = hashlib.md5(f"{original['conversation_hash']}/dup{n}".encode()).hexdigest()
        dup["timestamp"] = original["timestamp"] + shift
        ident = None
        for item in dup["conversation"]:
            item["timestamp"] = item["timestamp"] + shift
            if item["role"] == "user":
                ident = next(turn_ids)
            item["turn_identifier"] = ident
        if n % 2 == 1:  # near duplicate: the first prompt gets a small edit
            first = dup["conversation"][0]
            first["content"] = first["content"].rstrip(".?!") + ", please?"
        copies.append(dup)
    return copies


def _exchanges(rng: random.Random, user: _User) -> tuple[str, list[_Exchange]]:
    """One conversation's language and exchanges; some English user turns get a PII sentence."""
    n_turns = rng.choices(range(1, 9), weights=USER_TURN_WEIGHTS)[0]
    if user.native_language != "English" and rng.random() < NATIVE_LANGUAGE_SHARE:
        return user.native_language, _localized_exchanges(rng, user, user.native_language, n_turns)
    exchanges = _english_exchanges(rng, user, n_turns)
    if rng.random() < PII_SHARE:
        target = exchanges[rng.randrange(len(exchanges))]
        target.user = f"{target.user} {_pii_sentence(rng)}"
    return "English", exchanges


def _unique_exchanges(rng: random.Random, user: _User, seen: set[tuple[str, ...]],
                      attempts: int = 20) -> tuple[str, list[_Exchange]]:
    """Redraw accidental template collisions, so that the only duplicates are the deliberate ones and every
    user keeps >= sessions_per_user[0] distinct sessions after exact de-duplication."""
    for _ in range(attempts):
        language, exchanges = _exchanges(rng, user)
        key = tuple(text.lower() for e in exchanges for text in (e.user, e.assistant))
        if key not in seen:
            seen.add(key)
            return language, exchanges
    return language, exchanges


def generate_wildchat_sample(n_users: int = 40, sessions_per_user: tuple[int, int] = (10, 16), seed: int = 0,
                             start: date = date(2023, 4, 9), weeks: int = 12,
                             with_plan: bool = False) -> list[dict[str, Any]]:
    """Synthetic WildChat-1M rows: ``n_users`` users with ``sessions_per_user`` (inclusive range)
    conversations each over ``weeks`` weeks from ``start``, plus a few duplicates; sorted by timestamp.

    Deterministic in ``seed``. Users 0 and 1 share a hashed IP with different browsers, so user identity
    must combine IP and user agent. ``with_plan`` adds :data:`PLAN_FIELD` to every row: per user turn, what
    it does (``kind``) and, for a ``refer_back``, the index of the earlier user turn it returns to
    (``refers_to``). It is the ground truth WildChatTree's generated trees are derived from; the other rows'
    content is the same with or without it.
    """
    if n_users < 1 or weeks < 1 or not 1 <= sessions_per_user[0] <= sessions_per_user[1]:
        raise ValueError("need n_users >= 1, weeks >= 1 and 1 <= sessions_per_user[0] <= sessions_per_user[1]")
    rng = random.Random(f"convohub.wildchat-sample/{seed}")
    origin = datetime.combine(start, time(0, 0), tzinfo=timezone.utc)
    turn_ids = itertools.count(10_000_000 + 1_000_000 * (seed % 1000))
    users = [_make_user(rng) for _ in range(n_users)]
    if n_users >= 2:
        agent = _other(rng, USER_AGENTS, users[0].user_agent)
        users[1] = replace(users[1], hashed_ip=users[0].hashed_ip, user_agent=agent)
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()
    for u, user in enumerate(users):
        for s in range(rng.randint(*sessions_per_user)):
            language, exchanges = _unique_exchanges(rng, user, seen)
            conv_hash = hashlib.md5(f"convohub/{seed}/{u}/{s}".encode()).hexdigest()
            rows.append(_build_row(rng, user, conv_hash, language, exchanges,
                                   _session_start(rng, user, origin, weeks), turn_ids, with_plan))
    rows.extend(_duplicates(rng, rows, turn_ids))
    rows.sort(key=lambda r: (r["timestamp"], r["conversation_hash"]))
    return rows
