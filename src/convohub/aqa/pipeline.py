"""WildChat-AQA's construction end to end, stage by stage, resumable under a work folder.

Stages (each writes ``<work>/<stage>.json`` with the fingerprint of its settings, inputs and models, and is
read back instead of recomputed when the fingerprint matches; every LLM call goes through the response cache
``<work>/llm-cache``, so a run killed in the middle of a stage repeats no call that had finished; both are
:mod:`convohub.stages`'):

1. ``corpus``: de-duplication, length and user filters (:mod:`convohub.aqa.corpus`, datatrove);
2. ``annotations``: summary, intent and typed keywords per conversation (:mod:`convohub.aqa.annotate`);
3. ``topics``: the topic taxonomy, labels and verification (:mod:`convohub.aqa.taxonomy`);
4. ``subtopics``: per topic, K by silhouette and s_quality, subtopic labels and verification;
5. ``keywords``: keyword categories and the merge rules (:mod:`convohub.aqa.keywords`);
6. ``proposal``: questions over the aggregates (:mod:`convohub.aqa.proposal`, DuckDB);
7. ``phrasing``: the questions' wording (:mod:`convohub.aqa.phrasing`);
8. ``quality``: quality control and the stratified subset (:mod:`convohub.aqa.quality`).

Conversations left without a verified topic or subtopic are dropped after stage 4 (as in the paper), and
those whose annotation never validated after stage 2; the report counts both.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from convohub.aqa import annotate as annotation
from convohub.aqa import keywords as keyword_categories
from convohub.aqa import taxonomy as tnt
from convohub.aqa.corpus import build_corpus
from convohub.aqa.phrasing import phrase
from convohub.aqa.proposal import propose
from convohub.aqa.quality import quality_control, stratified_subset
from convohub.aqa.settings import Settings
from convohub.llm import ChatBackend
from convohub.stages import cached, digest, stage

MINILM = "minilm (all-MiniLM-L6-v2 cosine)"


@dataclass
class Backends:
    """Who does what: ``writer`` writes summaries, intents, keywords, taxonomies and questions; ``labeller``
    picks labels from closed lists (None: the ``minilm`` stand-in); ``phraser`` words the questions (None:
    the template)."""

    writer: ChatBackend
    labeller: ChatBackend | None = None
    phraser: ChatBackend | None = None

    def describe(self, settings: Settings) -> dict[str, str]:
        return {
            "summary, intent, keywords": self.writer.name,
            "topic and subtopic labels, verification": self.labeller.name if self.labeller else MINILM,
            "keyword categories": self.labeller.name if self.labeller and settings.keyword_labeller == "llm"
            else "minilm (type map + all-MiniLM-L6-v2 cosine)",
            "question wording": self.phraser.name if self.phraser else "template",
        }


@dataclass
class Build:
    conversations: list[dict[str, Any]]
    questions: list[dict[str, Any]]
    subset: list[dict[str, Any]]
    report: dict[str, Any] = field(default_factory=dict)


def code(*modules: Any) -> str:
    """Digest of the source of the modules a stage runs: a stage file written by other code is recomputed
    (its LLM answers still come from the cache)."""
    return digest([Path(m.__file__).read_text(encoding="utf-8") for m in modules])


def _identity(backend: ChatBackend | None) -> Any:
    return None if backend is None else {"name": backend.name, **backend.identity()}


def week_start(day: str) -> str:
    date = datetime.strptime(day[:10], "%Y-%m-%d")
    return (date - timedelta(days=date.weekday())).strftime("%Y-%m-%d")


def user_text(record: Mapping[str, Any], words: int | None) -> str:
    """The user's messages (cut to ``words`` words, 48 when None): what the MiniLM verifier and keyword
    categoriser read."""
    return annotation.content(record, words or 48)


def context_line(row: Mapping[str, Any]) -> str:
    """A conversation as quality control's context answerer reads it: its metadata, then its summary (the
    authors' answerers read summaries with time, user and country the same way)."""
    return (f"Week of {row['time_week']} ({row['timestamp']}), user {row['user_name']} from {row['country']}, "
            f"in {row['language']}: {row['summary']}")


class Clock:
    """Wall and CPU seconds per stage, for the report (and the card's build section)."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        self.seconds[name] = {"wall": round(time.perf_counter() - wall, 2), "cpu": round(time.process_time() - cpu, 2)}
        return value


def _labels_json(labels: Sequence[tnt.Labels], classes: Sequence[tnt.TaxonomyClass]) -> list[list[list[Any]]]:
    return [[[classes[j].name, r] for j, r in lab] for lab in labels]


def _topics(records: list[dict], backends: Backends, settings: Settings, embed: Callable) -> dict[str, Any]:
    summaries = [r["summary"] for r in records]
    vectors = embed(summaries)
    taxonomy = tnt.generate_taxonomy(summaries, vectors, backends.writer, settings)
    classes = taxonomy.classes
    class_vectors = embed([c.text() for c in classes])
    if backends.labeller is None:
        labels = tnt.minilm_labels(vectors, class_vectors, settings)
        verified = tnt.minilm_verify(labels, embed([user_text(r, settings.content_words) for r in records]), class_vectors, settings)
    else:
        labels = [lab or [] for lab in tnt.llm_labels(summaries, classes, backends.labeller, settings,
                                                       "AQA topic labels")]
        verified = tnt.llm_verify([annotation.content(r, settings.content_words) for r in records], classes, labels,
                                  backends.labeller, settings, "AQA topic verification")
    return {"taxonomy": taxonomy.to_json(), "labels": _labels_json(verified, classes),
            "quality_labelled": tnt.quality(labels), "quality_verified": tnt.quality(verified)}


def _subtopics(records: list[dict], topic_labels: list[list[list[Any]]], backends: Backends, settings: Settings,
               embed: Callable) -> dict[str, Any]:
    members: dict[str, list[int]] = defaultdict(list)
    for i, labels in enumerate(topic_labels):
        for name, _ in labels:
            members[name].append(i)
    summaries = [r["summary"] for r in records]
    vectors = embed(summaries)
    searches: dict[str, dict[str, Any]] = {}
    jobs: list[tuple[str, list[str], int, np.ndarray]] = []
    for topic, idx in sorted(members.items()):
        ks = [k for k in settings.subtopic_ks if k < len(idx)]
        if not ks:
            searches[topic] = {"conversations": len(idx), "skipped": f"fewer than {min(settings.subtopic_ks) + 1} "
                                                                        "conversations to cluster"}
            continue
        sub = vectors[idx]
        scored = []
        for k in ks:
            assignment = tnt.kmeans(sub, k, settings.seed)
            scored.append((tnt.silhouette(sub, assignment), k, assignment))
        scored.sort(key=lambda s: (-s[0], s[1]))
        searches[topic] = {"conversations": len(idx), "silhouette": {str(k): round(s, 4) for s, k, _ in scored},
                           "candidates": {}}
        for _, k, assignment in scored[:settings.subtopic_top_ks]:
            batch = tnt.round_robin_batches(assignment, settings.subtopic_batch, settings.seed)[0]
            jobs.append((topic, [summaries[idx[j]] for j in batch], k, assignment))
    taxonomies = tnt.generate_subtaxonomies([job[:3] for job in jobs], backends.writer, settings)
    rng = np.random.default_rng(settings.seed)
    chosen: dict[str, list[tnt.TaxonomyClass]] = {}
    for (topic, _, k, assignment), classes in zip(jobs, taxonomies, strict=True):
        entry = searches[topic]["candidates"]
        idx = members[topic]
        made_by = backends.writer.name
        if not classes:
            classes = tnt.cluster_terms([summaries[i] for i in idx], assignment, k)
            made_by = tnt.stand_in(settings, backends.writer)
        n = min(len(idx), max(settings.quality_min, int(round(settings.quality_fraction * len(idx)))),
                settings.quality_max)
        sample = sorted(rng.choice(len(idx), size=n, replace=False).tolist())
        labels = _label(records, [idx[j] for j in sample], classes, backends, settings, embed)
        score = tnt.quality(labels)
        entry[str(k)] = {"classes": [c.name for c in classes], "made_by": made_by,
                         **{m: round(v, 4) for m, v in score.items()}}
        best = searches[topic].get("chosen_quality", -1.0)
        if score["quality"] > best:
            searches[topic]["chosen_quality"], searches[topic]["chosen_k"] = score["quality"], k
            searches[topic]["made_by"] = made_by
            chosen[topic] = classes
    labels_out: list[list[list[Any]]] = [[] for _ in records]
    all_labelled: list[tnt.Labels] = []
    all_verified: list[tnt.Labels] = []
    for topic, classes in sorted(chosen.items()):
        idx = members[topic]
        labelled = _label(records, idx, classes, backends, settings, embed)
        verified = _verify(records, idx, classes, labelled, backends, settings, embed)
        all_labelled += labelled
        all_verified += verified
        searches[topic]["subtopics"] = [c.name for c in classes]
        searches[topic]["quality_verified"] = tnt.quality(verified)
        for i, lab in zip(idx, verified, strict=True):
            labels_out[i] += [[topic, classes[j].name, r] for j, r in lab]
    return {"labels": labels_out, "topics": searches, "quality_labelled": tnt.quality(all_labelled),
            "quality_verified": tnt.quality(all_verified)}


def _label(records: list[dict], idx: Sequence[int], classes: Sequence[tnt.TaxonomyClass], backends: Backends,
           settings: Settings, embed: Callable) -> list[tnt.Labels]:
    summaries = [records[i]["summary"] for i in idx]
    if backends.labeller is None:
        return tnt.minilm_labels(embed(summaries), embed([c.text() for c in classes]), settings)
    return [lab or [] for lab in tnt.llm_labels(summaries, classes, backends.labeller, settings, "AQA subtopic labels")]


def _verify(records: list[dict], idx: Sequence[int], classes: Sequence[tnt.TaxonomyClass],
            labels: Sequence[tnt.Labels], backends: Backends, settings: Settings, embed: Callable) -> list[tnt.Labels]:
    if backends.labeller is None:
        return tnt.minilm_verify(labels, embed([user_text(records[i], settings.content_words) for i in idx]),
                                 embed([c.text() for c in classes]), settings)
    return tnt.llm_verify([annotation.content(records[i], settings.content_words) for i in idx], classes, labels,
                          backends.labeller, settings, "AQA subtopic verification")


def _keywords(records: list[dict], backends: Backends, settings: Settings) -> dict[str, Any]:
    if backends.labeller is not None and settings.keyword_labeller == "llm":
        per_user: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in records:
            for kw in r["keywords"]:
                if all(kw["value"] != k["value"] for k in per_user[r["user_name"]]):
                    per_user[r["user_name"]].append(kw)
        groups = keyword_categories.llm_groups(per_user, backends.labeller, settings)
    else:
        items = [(r["user_name"], kw, [user_text(r, None)]) for r in records for kw in r["keywords"]]
        groups = keyword_categories.minilm_groups(items, settings)
    aggregated, stats = keyword_categories.aggregate(records, groups)
    return {"aggregated": aggregated, "stats": stats}


def _unique_subtopics(labels: Sequence[Sequence[Sequence[Any]]]) -> dict[tuple[str, str], str]:
    """Subtopic display names: the name, or ``name (topic)`` when two topics share it."""
    topics_of: dict[str, set[str]] = defaultdict(set)
    for lab in labels:
        for topic, name, _ in lab:
            topics_of[name].add(topic)
    return {(topic, name): name if len(topics) == 1 else f"{name} ({topic})"
            for name, topics in topics_of.items() for topic in topics}


def assemble(records: Sequence[Mapping[str, Any]], notes: Mapping[str, Mapping[str, Any]],
             topic_labels: Sequence[Sequence[Sequence[Any]]], subtopic_labels: Sequence[Sequence[Sequence[Any]]],
             aggregated: Mapping[str, list[dict[str, str]]], labeller: str) -> tuple[list[dict[str, Any]], int]:
    """The published conversation rows (contract order), and how many were dropped for want of a verified
    topic and subtopic."""
    names = _unique_subtopics(subtopic_labels)
    out, dropped = [], 0
    for record, topics, subtopics in zip(records, topic_labels, subtopic_labels, strict=True):
        kept_topics = [t for t, _ in topics if any(s[0] == t for s in subtopics)]
        if not kept_topics:
            dropped += 1
            continue
        subs = [names[(t, s)] for t, s, _ in subtopics if t in kept_topics]
        note = notes[record["hash"]]
        out.append({
            "conversation_id": record["conversation_id"], "hash": record["hash"],
            "user_name": record["user_name"], "timestamp": record["timestamp"], "time_day": record["timestamp"][:10],
            "time_week": week_start(record["timestamp"]), "time_month": record["timestamp"][:7],
            "country": record["country"], "reigon": record["reigon"], "language": record["language"],
            "token_count": int(record["token_count"]), "conversation": list(record["conversation"]),
            "summary": note["summary"], "intent": note["intent"], "keywords": list(note["keywords"]),
            "keywords_aggregated": list(aggregated.get(record["hash"], [])),
            "label_level_1": kept_topics, "label_level_2": list(dict.fromkeys(subs)),
            "subtopic_parents": {names[(t, s)]: t for t, s, _ in subtopics if t in kept_topics},
            "labeller": labeller,
        })
    return out, dropped


def run_pipeline(rows: Iterable[Mapping[str, Any]], settings: Settings, work: Path, backends: Backends,
                 source: str = "sample", embed: Callable | None = None, log: Callable[[str], None] = print) -> Build:
    """Run (or resume) every stage; see the module doc. ``source`` names where ``rows`` came from (part of
    the fingerprints)."""
    from convohub.aqa.embedding import Memo

    embed = embed if isinstance(embed, Memo) else Memo(embed)
    work.mkdir(parents=True, exist_ok=True)
    writer = cached(backends.writer, work)
    backends = Backends(writer, cached(backends.labeller, work), cached(backends.phraser, work))
    clock = Clock()
    base = {"settings": settings.fingerprint(), "source": source}

    from convohub.aqa import corpus as corpus_module

    corpus = clock.run("corpus", lambda: stage(work, "corpus", {**base, "code": code(corpus_module)}, lambda: dict(zip(
        ("records", "report"), build_corpus(rows, settings, work / "datatrove"), strict=True))))
    records = corpus["records"]
    log(f"corpus: {corpus['report']['counts']}")
    fp = {**base, "corpus": digest([r["hash"] for r in records])}

    fp_notes = {**fp, "writer": _identity(backends.writer), "code": code(annotation)}
    notes = clock.run("annotations", lambda: stage(work, "annotations", fp_notes, lambda: dict(zip(
        ("notes", "report"), annotation.annotate(records, backends.writer, settings), strict=True))))
    annotated = [{**r, **notes["notes"][r["hash"]]} for r in records if r["hash"] in notes["notes"]]
    log(f"annotations: {notes['report']['fields']}")
    fp_labels = {**fp_notes, "annotated": digest(notes["notes"]), "labeller": _identity(backends.labeller),
                 "code_labels": code(tnt, keyword_categories, sys.modules[__name__])}

    topics = clock.run("topics", lambda: stage(work, "topics", fp_labels,
                                               lambda: _topics(annotated, backends, settings, embed)))
    log(f"topics: {len(topics['taxonomy']['classes'])} classes, quality {topics['quality_verified']}")
    subtopics = clock.run("subtopics", lambda: stage(work, "subtopics", {**fp_labels, "topics": digest(topics["labels"])},
                                                     lambda: _subtopics(annotated, topics["labels"], backends,
                                                                        settings, embed)))
    log(f"subtopics: quality {subtopics['quality_verified']}")
    keywords = clock.run("keywords", lambda: stage(work, "keywords", fp_labels,
                                                   lambda: _keywords(annotated, backends, settings)))
    makers = sorted({t.get("made_by", "") for t in subtopics["topics"].values() if t.get("made_by")})
    roles = backends.describe(settings)
    roles.pop("question wording")
    roles["topic taxonomy"] = topics["taxonomy"]["made_by"]
    roles["subtopic taxonomies"] = ", ".join(makers) or "none"
    labeller = "; ".join(f"{k}: {v}" for k, v in roles.items())
    conversations, unlabelled = assemble(annotated, notes["notes"], topics["labels"], subtopics["labels"],
                                         keywords["aggregated"], labeller)
    log(f"conversations: {len(conversations)} ({unlabelled} dropped without a verified topic and subtopic)")

    from convohub.aqa import phrasing, proposal, quality

    fp_questions = {**fp_labels, "code_questions": code(proposal, phrasing, quality), "conversations": digest([(c["hash"], c["label_level_1"], c["label_level_2"],
                                                            c["keywords_aggregated"]) for c in conversations])}
    proposal = clock.run("proposal", lambda: stage(work, "proposal", fp_questions, lambda: dict(zip(
        ("questions", "report"), _proposal(conversations, settings, work), strict=True))))
    queries = proposal["questions"]
    fp_wording = {**fp_questions, "phraser": _identity(backends.phraser)}
    wording = clock.run("phrasing", lambda: stage(work, "phrasing", fp_wording, lambda: dict(zip(
        ("rows", "report"), phrase(queries, backends.phraser, settings.max_attempts), strict=True))))
    questions = [{**q, **w} for q, w in zip(queries, wording["rows"], strict=True)]
    contexts = {c["hash"]: (context_line(c), c["summary"]) for c in conversations}
    qc = clock.run("quality", lambda: stage(work, "quality", fp_wording, lambda: dict(zip(
        ("kept", "report"), quality_control(questions, contexts, settings, embed), strict=True))))
    kept = qc["kept"]
    subset = stratified_subset(kept, settings.subset_fraction, settings.seed)
    log(f"questions: {proposal['report']['proposed']} proposed, {len(kept)} after quality control, "
        f"{len(subset)} in the subset")
    report = {
        "corpus": corpus["report"], "annotations": notes["report"],
        "topics": {k: v for k, v in topics.items() if k != "labels"},
        "subtopics": {k: v for k, v in subtopics.items() if k != "labels"},
        "keywords": keywords["stats"], "unlabelled_dropped": unlabelled, "proposal": proposal["report"],
        "phrasing": wording["report"], "quality": qc["report"], "subset": len(subset),
        "backends": {**backends.describe(settings), "topic taxonomy": topics["taxonomy"]["made_by"],
                     "subtopic taxonomies": ", ".join(makers) or "none"}, "seconds": clock.seconds,
    }
    return Build(conversations, kept, subset, report)


def _proposal(conversations: Sequence[Mapping[str, Any]], settings: Settings, work: Path) -> tuple[list, dict]:
    result = propose(conversations, settings, work)
    return result.questions, result.report
