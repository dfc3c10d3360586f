"""WildChatTree's offline test set: conversations whose parents are known by construction, not annotated.

The real WildChatTree (100 English WildChat conversations with hand-assigned parents) was never released, so
convohub builds a stand-in from its sample corpus (:func:`convohub.conversations.generate_wildchat_sample`).
The generator plans every user turn before writing it (``with_plan=True`` publishes the plan), so each turn's
parent follows from what the turn does, under the paper's definition (an edge only where the response relies
on the earlier turn; at most one parent):

* the first turn, a topic switch, and a pure politeness turn ("Thanks a lot!") are roots (-1): the reply to
  a thank-you relies on nothing before it, and the paper's pipeline makes polite expressions roots too;
* a refer-back ("Going back to my earlier question about X ...") is a child of the turn it returns to;
* every other follow-up (question about the answer, correction, refinement, "Continue", complaint) is a
  child of the most recent turn that was not a politeness turn.

Two kinds of conversations go into the test split:

* ``mixmc``: two or three conversations interleaved at random while each keeps its own turn order, the way
  the paper built MixMC from MultiChallenge; each turn keeps its parent inside its source conversation,
  re-indexed to its position in the mix, and records which source conversation (``thread``) it came from;
* ``single``: sample conversations as they were logged.

Only English conversations with at least two user turns are used (WildChatTree is English; a one-turn
conversation is a lone root); the generator's deliberate re-submissions are dropped; every prompt and reply
goes through :func:`convohub.conversations.scrub_pii`.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from convohub.crychic.trees import tree_record

#: user-turn kinds of the sample generator that start a tree of their own
NEW_TOPIC_KINDS = frozenset({"ask", "switch"})
#: pure politeness: a root whose reply relies on nothing earlier, and never a parent itself
POLITE_KINDS = frozenset({"praise", "thanks"})
MIN_USER_TURNS = 2
#: how many conversations are interleaved into one mixed conversation, drawn with these weights
MIX_SIZES = ((2, 2), (3, 1))
DEFAULT_MIXED = 45
DEFAULT_SINGLE = 55
DEFAULT_USERS = 40


def plan_parents(plan: Sequence[Mapping[str, Any]]) -> list[int]:
    """Parents of one sample conversation's user turns from the generator's plan (see the module docstring)."""
    parents: list[int] = []
    last_content = -1  # the most recent turn that was not pure politeness
    content_of: list[int] = []  # turn -> the turn that carries its content (a polite turn: the one before)
    for t, step in enumerate(plan):
        kind = step["kind"]
        if t == 0 or kind in NEW_TOPIC_KINDS or kind in POLITE_KINDS:
            parent = -1
        elif kind == "refer_back":
            back = step.get("refers_to")
            if not isinstance(back, int) or not 0 <= back < t:
                raise ValueError(f"plan turn {t}: a refer_back needs refers_to, an earlier turn, got {back!r}")
            parent = content_of[back]
        else:
            parent = last_content
        parents.append(parent)
        if kind not in POLITE_KINDS:
            last_content = t
        content_of.append(last_content)
    return parents


def switches(labels: Sequence[int]) -> int:
    """How often consecutive turns come from different threads."""
    return sum(1 for a, b in itertools.pairwise(labels) if a != b)


def interleave(lengths: Sequence[int], rng: random.Random, attempts: int = 50) -> list[int]:
    """A random order of the threads' turns (thread label per position) that keeps each thread's own order.

    A draw that only concatenates the threads (one switch per thread boundary) is drawn again, so every mix
    really interleaves: at least as many switches as threads. If no draw qualifies, the threads take turns
    (which qualifies, since every thread has at least two turns).
    """
    if len(lengths) < 2 or min(lengths) < 2:
        raise ValueError(f"need two or more threads of at least two turns each to interleave (a one-turn thread "
                         f"can only be put before or after the others), got lengths {list(lengths)}")
    labels = [thread for thread, n in enumerate(lengths) for _ in range(n)]
    for _ in range(attempts):
        rng.shuffle(labels)
        if switches(labels) >= len(lengths):
            return labels
    remaining = list(lengths)
    order: list[int] = []
    while any(remaining):
        for thread, left in enumerate(remaining):
            if left:
                order.append(thread)
                remaining[thread] -= 1
    return order


@dataclass
class SourceConversation:
    """One eligible sample conversation: its id, its (prompt, reply) exchanges, PII-scrubbed, and the parent
    of each exchange as its plan gives it (:func:`plan_parents`)."""

    conversation_id: str
    exchanges: list[tuple[str, str]]
    parents: list[int]


@dataclass
class ConstructionReport:
    """What the construction did, for the card: rows read and dropped, PII replaced, conversations used."""

    rows: int = 0
    eligible: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    pii: Counter[str] = field(default_factory=Counter)
    sources_used: int = 0


def scrub_exchanges(exchanges: Iterable[tuple[str, str]], pii: Counter[str]) -> list[tuple[str, str]]:
    """(prompt, reply) pairs through :func:`convohub.conversations.scrub_pii`, every replacement counted into
    ``pii``: the constructed and the annotated builds scrub alike."""
    from convohub.conversations import scrub_pii_with_counts

    out = []
    for prompt, reply in exchanges:
        prompt, counts = scrub_pii_with_counts(prompt)
        reply, more = scrub_pii_with_counts(reply)
        pii.update(counts)
        pii.update(more)
        out.append((prompt, reply))
    return out


def sample_sources(n_users: int, seed: int, report: ConstructionReport | None = None) -> list[SourceConversation]:
    """The eligible conversations of the sample corpus of ``n_users`` users drawn with ``seed``, with their
    planned parents (module docstring: English, two or more user turns, no re-submission, PII-scrubbed).

    Both the offline test set (:func:`generate_trees`, seed 0) and the judge's training pairs
    (:mod:`convohub.crychic.judge_data`, another seed) start here, so their parents follow one rule.
    ``report`` (when given) counts the rows read and dropped and the PII replaced.
    """
    from convohub.conversations import from_wildchat_row, generate_wildchat_sample
    from convohub.conversations.sample import PLAN_FIELD

    report = report if report is not None else ConstructionReport()
    out: list[SourceConversation] = []
    seen: set[tuple[str, ...]] = set()
    for index, row in enumerate(generate_wildchat_sample(n_users=n_users, seed=seed, with_plan=True)):
        report.rows += 1
        plan = row.get(PLAN_FIELD)
        if plan is None:
            raise ValueError(f"sample row {index} has no {PLAN_FIELD!r}: generate it with with_plan=True")
        conv = from_wildchat_row(row, index=index)
        if conv.language != "English":
            report.dropped["not English"] += 1
            continue
        users, replies = conv.user_turns(), conv.assistant_turns()
        if len(users) < MIN_USER_TURNS:
            report.dropped[f"fewer than {MIN_USER_TURNS} user turns"] += 1
            continue
        key = tuple(t.content.strip().lower() for t in replies)  # re-submissions repeat every reply
        if key in seen:
            report.dropped["re-submission of an earlier conversation"] += 1
            continue
        seen.add(key)
        if len(plan) != len(users) or len(replies) != len(users):
            raise ValueError(f"sample row {index}: {len(users)} user turns, {len(replies)} replies and "
                             f"{len(plan)} plan steps; they must match")
        exchanges = scrub_exchanges(((u.content, r.content) for u, r in zip(users, replies, strict=True)),
                                    report.pii)
        out.append(SourceConversation(conv.conversation_id, exchanges, plan_parents(plan)))
    report.eligible = len(out)
    return out


def mix(sources: Sequence[SourceConversation], rng: random.Random) -> dict[str, Any]:
    """One MixMC conversation from two or three sources (see :func:`interleave`)."""
    labels = interleave([len(s.exchanges) for s in sources], rng)
    positions: list[list[int]] = [[] for _ in sources]
    for position, thread in enumerate(labels):
        positions[thread].append(position)
    exchanges: list[tuple[str, str]] = []
    parents: list[int] = []
    taken = [0] * len(sources)
    for thread in labels:
        local = taken[thread]
        taken[thread] += 1
        exchanges.append(sources[thread].exchanges[local])
        parent = sources[thread].parents[local]
        parents.append(-1 if parent == -1 else positions[thread][parent])
    joined = "+".join(s.conversation_id for s in sources)
    cid = "mixmc-" + hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]
    return tree_record(cid, "mixmc", exchanges, parents, labels)


def mix_sizes(n_mixed: int, rng: random.Random) -> list[int]:
    """How many conversations each of ``n_mixed`` MixMC rows interleaves, drawn with :data:`MIX_SIZES`."""
    return [rng.choices([size for size, _ in MIX_SIZES], weights=[w for _, w in MIX_SIZES])[0]
            for _ in range(n_mixed)]


def assemble(pool: Sequence[SourceConversation], sizes: Sequence[int], n_single: int,
             rng: random.Random) -> list[dict[str, Any]]:
    """Tree records from the front of ``pool``: one MixMC row per entry of ``sizes``, then ``n_single`` rows of
    one conversation each. The caller checks that the pool is large enough."""
    records: list[dict[str, Any]] = []
    start = 0
    for size in sizes:
        records.append(mix(pool[start:start + size], rng))
        start += size
    for source in pool[start:start + n_single]:
        records.append(tree_record(source.conversation_id, "single", source.exchanges, source.parents))
    return records


def generate_trees(seed: int = 0, *, n_mixed: int = DEFAULT_MIXED, n_single: int = DEFAULT_SINGLE,
                   n_users: int = DEFAULT_USERS) -> tuple[list[dict[str, Any]], ConstructionReport]:
    """The test split's records (``n_mixed`` MixMC conversations, then ``n_single`` single ones) and the report.

    Deterministic in ``seed``: the sample corpus and the choice and interleaving of conversations both derive
    from it. Raises ValueError when the corpus of ``n_users`` users has too few eligible conversations.
    """
    report = ConstructionReport()
    pool = sample_sources(n_users, seed, report)
    rng = random.Random(f"convohub.wildchat-tree/{seed}")
    rng.shuffle(pool)
    sizes = mix_sizes(n_mixed, rng)
    needed = sum(sizes) + n_single
    if needed > len(pool):
        raise ValueError(f"the sample corpus of {n_users} users has {len(pool)} eligible conversations but the "
                         f"test split needs {needed}; raise n_users or lower n_mixed/n_single")
    records = assemble(pool, sizes, n_single, rng)
    report.sources_used = needed
    return records, report


def mixed_like_test(pool: Sequence[SourceConversation], rng: random.Random) -> list[dict[str, Any]]:
    """Every conversation of ``pool`` (shuffled) in tree records, with MixMC rows the same share of the rows as
    in the test split (:data:`DEFAULT_MIXED` of every :data:`DEFAULT_MIXED` + :data:`DEFAULT_SINGLE`), so a
    threshold tuned on them meets the test split's mix of thread switches."""
    pool = list(pool)
    rng.shuffle(pool)
    mean_size = sum(size * w for size, w in MIX_SIZES) / sum(w for _, w in MIX_SIZES)
    share = DEFAULT_MIXED / (DEFAULT_MIXED + DEFAULT_SINGLE)
    # rows r = m + s with m = share * r and m * mean_size + s = len(pool)
    sizes = mix_sizes(round(share * len(pool) / (share * mean_size + 1 - share)), rng)
    while sizes and sum(sizes) > len(pool):
        sizes.pop()
    return assemble(pool, sizes, len(pool) - sum(sizes), rng)
