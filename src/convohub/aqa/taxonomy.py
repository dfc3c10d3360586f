"""Topic and subtopic taxonomies the TnT-LLM way (paper Appendix E.3-E.4), with the spec's quality score.

Generation (Algorithm 1): summaries are embedded (all-MiniLM-L6-v2) and split into K clusters with faiss
k-means; batches of B summaries are drawn from the clusters round-robin without replacement; the LLM writes
an initial taxonomy from the first batch, then each later round shows it the current taxonomy and a new
batch, asks for a 0-100 rating of the current taxonomy and an updated one. The rounds stop after N, when the
clusters run dry, or when the rating has not improved for ``patience`` rounds. An answer that does not
validate (no JSON classes, too many classes, repeated or vague names such as "Other") leaves the taxonomy as
it was and counts as a round without improvement (before the first usable taxonomy, ``patience`` unusable
rounds in a row stop the generation too). When the LLM never wrote a usable taxonomy, or when the settings
name the stand-in as the writer (``taxonomy_writer: cluster-terms``, the tiny profile's), :func:`cluster_terms`
names the k-means clusters by their most distinctive words, and ``made_by`` (on the card and in every row's
``labeller``) says which and why.

Subtopics per topic: k-means over the topic's summaries for every K searched, the ``top_ks`` K with the best
silhouette (cosine) each get a taxonomy, and each taxonomy is scored on a sample of the topic's
conversations with ``s_quality = s_coverage + s_certainty``:

* ``s_coverage = 1 - N_undefined / N`` (a conversation no class fits is Undefined);
* ``s_certainty = mean_j (1 - H_j)`` over the labelled conversations, ``H_j = -sum_i p_i log2 p_i / log2 m``
  where ``p_i`` are the conversation's ``m`` label relevances normalised to sum to 1 (``H_j = 0`` when m = 1).

Labels (up to three per conversation, each with a 0-10 relevance) come from the LLM, or from the named
``minilm`` stand-in (cosine between the summary and each class's ``name: description``; see
:mod:`convohub.aqa.settings` for why the tiny profile uses it), and are then verified: by the LLM (a yes/no
per label, the paper's Figure 22) or by MiniLM against the user's own messages rather than the summary.
Conversations left without a verified topic or subtopic are dropped, as in the paper.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convohub.aqa.settings import CLUSTER_TERMS, Settings
from convohub.llm import ChatBackend, ChatRequest, ask_until_parsed, parse_json_answer

UNDEFINED = "Undefined"
VAGUE = re.compile(r"\b(other|others|undefined|miscellaneous|misc|general|various)\b", re.I)
DESCRIPTION_WORDS = 12


@dataclass(frozen=True)
class TaxonomyClass:
    name: str
    description: str

    def text(self) -> str:
        return f"{self.name}: {self.description}" if self.description else self.name


@dataclass
class Taxonomy:
    """A generated taxonomy and how it was reached (one entry per round: score, classes, why it changed)."""

    classes: list[TaxonomyClass]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    made_by: str = ""

    def names(self) -> list[str]:
        return [c.name for c in self.classes]

    def to_json(self) -> dict[str, Any]:
        return {"classes": [{"name": c.name, "description": c.description} for c in self.classes],
                "rounds": self.rounds, "made_by": self.made_by}


# ------------------------------------------------------------------------------------------ clustering
def kmeans(vectors: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Cluster of every vector (faiss k-means on normalised vectors; at most one cluster per vector)."""
    import faiss

    n = len(vectors)
    k = max(1, min(k, n))
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    model = faiss.Kmeans(vectors.shape[1], k, niter=25, seed=seed, verbose=False, min_points_per_centroid=1,
                         max_points_per_centroid=max(256, n))
    model.train(np.ascontiguousarray(vectors, dtype=np.float32))
    _, assignment = model.index.search(np.ascontiguousarray(vectors, dtype=np.float32), 1)
    return assignment[:, 0].astype(np.int64)


def round_robin_batches(assignment: np.ndarray, batch: int, seed: int) -> list[list[int]]:
    """Batches of ``batch`` item indices drawn from the clusters in turn, without replacement (each cluster's
    items in a seeded order), until every item was drawn."""
    rng = np.random.default_rng(seed)
    queues = [list(rng.permutation(np.flatnonzero(assignment == c))) for c in np.unique(assignment)]
    order: list[int] = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(int(queue.pop(0)))
    return [order[i:i + batch] for i in range(0, len(order), batch)]


def silhouette(vectors: np.ndarray, assignment: np.ndarray) -> float:
    """Mean cosine silhouette of a clustering (-1 when it has fewer than 2 clusters or too few points)."""
    from sklearn.metrics import silhouette_score

    n_clusters = len(np.unique(assignment))
    if n_clusters < 2 or n_clusters >= len(vectors):
        return -1.0
    return float(silhouette_score(vectors, assignment, metric="cosine"))


# ------------------------------------------------------------------------------------------ quality
def coverage(labels: Sequence[Sequence[tuple[int, float]]]) -> float:
    """``s_coverage = 1 - N_undefined / N``: the share of conversations with at least one label."""
    if not labels:
        return 0.0
    return 1.0 - sum(1 for lab in labels if not lab) / len(labels)


def normalised_entropy(relevances: Sequence[float]) -> float:
    """``-sum p log2 p / log2 m`` of relevances normalised to sum to 1; 0 for a single label."""
    values = [float(r) for r in relevances if r > 0]
    m = len(values)
    if m <= 1:
        return 0.0
    total = sum(values)
    return -sum((v / total) * math.log2(v / total) for v in values) / math.log2(m)


def certainty(labels: Sequence[Sequence[tuple[int, float]]]) -> float:
    """``s_certainty = mean_j (1 - H_j)`` over the labelled conversations (0 when none is labelled)."""
    defined = [lab for lab in labels if lab]
    if not defined:
        return 0.0
    return sum(1.0 - normalised_entropy([r for _, r in lab]) for lab in defined) / len(defined)


def quality(labels: Sequence[Sequence[tuple[int, float]]]) -> dict[str, float]:
    """``{"coverage", "certainty", "quality"}`` with ``quality = coverage + certainty`` (between 0 and 2)."""
    cov, cer = coverage(labels), certainty(labels)
    return {"coverage": cov, "certainty": cer, "quality": cov + cer}


# ------------------------------------------------------------------------------------------ LLM taxonomy
def _listing(texts: Sequence[str]) -> str:
    return "\n".join(f"- {t}" for t in texts)


def _taxonomy_listing(classes: Sequence[TaxonomyClass]) -> str:
    return "\n".join(f"{i}. {c.text()}" for i, c in enumerate(classes, start=1))


def initial_prompt(summaries: Sequence[str], max_classes: int, parent: str | None = None) -> str:
    scope = f"subtopics of the topic \"{parent}\"" if parent else "topics"
    return (f"Summaries of conversations between users and a chatbot:\n{_listing(summaries)}\n\n"
            f"Propose at most {max_classes} {scope} that cover these conversations. Name the domain of each "
            "conversation, not the user's intent; classes must not overlap; never use a vague class like "
            f"\"Other\". Answer JSON: {{\"classes\": [{{\"name\": \"...\", \"description\": \"...\"}}]}} with "
            f"descriptions of at most {DESCRIPTION_WORDS} words.")


def update_prompt(summaries: Sequence[str], current: Sequence[TaxonomyClass], max_classes: int) -> str:
    return (f"Current topic classes:\n{_taxonomy_listing(current)}\n\nNew conversation summaries:\n"
            f"{_listing(summaries)}\n\nRate the current classes from 0 to 100 (clear, not overlapping, covering "
            f"the summaries), then give an improved list of at most {max_classes} classes: add missing ones, merge "
            "overlapping ones, never use a vague class like \"Other\". Answer JSON: {\"score\": N, \"classes\": "
            f"[{{\"name\": \"...\", \"description\": \"...\"}}]}} with descriptions of at most {DESCRIPTION_WORDS} words.")


def parse_taxonomy(text: str, max_classes: int, want_score: bool) -> tuple[list[TaxonomyClass], float | None]:
    """Classes (and the rating of an update) out of an answer; ValueError says why it is unusable."""
    parsed = parse_json_answer(text, expect=dict)
    if not parsed.ok:
        raise ValueError(f"taxonomy: {parsed.error}")
    raw = parsed.value.get("classes")
    if not isinstance(raw, list) or not raw:
        raise ValueError("taxonomy: no 'classes' list")
    classes: list[TaxonomyClass] = []
    seen: set[str] = set()
    for item in raw:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping):
            raise ValueError(f"taxonomy: class {item!r:.40} is not an object")
        name = " ".join(str(item.get("name") or item.get("class_name") or "").split()).strip(" .:-")
        if not name or len(name.split()) > 8:
            raise ValueError(f"taxonomy: class name {name!r:.60} is empty or longer than 8 words")
        if VAGUE.search(name):
            raise ValueError(f"taxonomy: vague class {name!r}")
        if name.lower() in seen:
            raise ValueError(f"taxonomy: class {name!r} appears twice")
        seen.add(name.lower())
        description = " ".join(str(item.get("description") or item.get("class_description") or "").split()[:30])
        classes.append(TaxonomyClass(name, description))
    if len(classes) > max_classes:
        raise ValueError(f"taxonomy: {len(classes)} classes, at most {max_classes} allowed")
    score = None
    if want_score:
        value = parsed.value.get("score")
        if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", value):
            value = float(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 100:
            raise ValueError(f"taxonomy: score {value!r} is not a number from 0 to 100")
        score = float(value)
    return classes, score


def _ask(backend: ChatBackend, prompts: Sequence[str], parse: Callable[[int, str], Any], max_new_tokens: int,
         attempts: int, desc: str) -> list[Any]:
    def build(i: int, attempt: int) -> ChatRequest:
        sampling = {} if attempt == 0 else {"temperature": 0.7, "top_p": 0.95, "seed": attempt}
        return ChatRequest(messages=[{"role": "user", "content": prompts[i]}], max_new_tokens=max_new_tokens,
                           **sampling)

    return ask_until_parsed(backend, len(prompts), build, parse, max_attempts=attempts, desc=desc, progress=False)


def generate_taxonomy(summaries: Sequence[str], vectors: np.ndarray, backend: ChatBackend, settings: Settings,
                      max_new_tokens: int = 320) -> Taxonomy:
    """TnT-LLM's generation phase over ``summaries`` (see the module doc); the round log says what each
    round did: ``initial``, ``updated``, ``kept`` (answer unusable) with the rating when there was one."""
    assignment = kmeans(vectors, settings.topic_clusters, settings.seed)
    if settings.taxonomy_writer == CLUSTER_TERMS:
        classes = cluster_terms(summaries, assignment, settings.initial_classes)
        return Taxonomy(classes, [{"round": 1, "action": CLUSTER_TERMS, "classes": len(classes)}],
                        made_by=stand_in(settings, backend))
    batches = round_robin_batches(assignment, settings.topic_batch, settings.seed)
    taxonomy = Taxonomy([], made_by=backend.name)
    best, stale = -1.0, 0
    for n, batch in enumerate(batches[:settings.topic_rounds], start=1):
        shown = [summaries[i] for i in batch]
        if not taxonomy.classes:
            prompt = initial_prompt(shown, settings.initial_classes)
            result = _ask(backend, [prompt], lambda i, t: parse_taxonomy(t, settings.initial_classes, False),
                          max_new_tokens, settings.taxonomy_attempts, "AQA topic taxonomy")[0]
            if result.value is None:
                stale += 1
                taxonomy.rounds.append({"round": n, "action": "failed", "errors": result.errors[-1:]})
                if stale >= settings.topic_patience:
                    taxonomy.rounds[-1]["stopped"] = f"no usable taxonomy in {stale} rounds"
                    break
                continue
            stale = 0
            taxonomy.classes = result.value[0]
            taxonomy.rounds.append({"round": n, "action": "initial", "classes": len(taxonomy.classes)})
            continue
        prompt = update_prompt(shown, taxonomy.classes, settings.max_classes)
        result = _ask(backend, [prompt], lambda i, t: parse_taxonomy(t, settings.max_classes, True),
                      max_new_tokens, settings.taxonomy_attempts, "AQA topic taxonomy update")[0]
        if result.value is None:
            stale += 1
            taxonomy.rounds.append({"round": n, "action": "kept", "errors": result.errors[-1:]})
        else:
            classes, score = result.value
            if score is not None and score > best:
                best, stale = score, 0
            else:
                stale += 1
            taxonomy.classes = classes
            taxonomy.rounds.append({"round": n, "action": "updated", "score": score, "classes": len(classes)})
        if stale >= settings.topic_patience:
            taxonomy.rounds[-1]["stopped"] = f"no better score for {stale} rounds"
            break
    if not taxonomy.classes:
        taxonomy.classes = cluster_terms(summaries, assignment, settings.initial_classes)
        taxonomy.made_by = stand_in(settings, backend)
        taxonomy.rounds.append({"round": len(taxonomy.rounds) + 1, "action": CLUSTER_TERMS,
                                "classes": len(taxonomy.classes)})
    return taxonomy


def stand_in(settings: Settings, backend: ChatBackend) -> str:
    """``made_by`` of a :func:`cluster_terms` taxonomy: the stand-in and why it wrote it (the settings named it,
    or the LLM's answers never validated)."""
    if settings.taxonomy_writer == CLUSTER_TERMS:
        return f"{CLUSTER_TERMS} (the profile's taxonomy writer; no LLM asked)"
    return f"{CLUSTER_TERMS} ({backend.name} wrote no usable taxonomy)"


_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_GENERIC = frozenset({"user", "users", "asks", "asked", "asking", "wants", "want", "requested", "request", "help",
                      "helps", "know", "make", "give", "explain", "write", "tell", "provide", "about", "simple",
                      "short", "good", "best", "better", "like", "please", "question", "questions", "answer"})


def cluster_terms(summaries: Sequence[str], assignment: np.ndarray, max_classes: int) -> list[TaxonomyClass]:
    """The named stand-in for an LLM-written taxonomy: one class per k-means cluster (the largest
    ``max_classes``), named by its two most distinctive content words (class-based TF-IDF) and described by
    its top six; clusters that get the same name merge."""
    from convohub.aqa.keywords import stop_words

    clusters = [int(c) for c, _ in sorted(((c, int((assignment == c).sum())) for c in np.unique(assignment)),
                                          key=lambda cn: (-cn[1], cn[0]))[:max_classes]]
    counts: dict[int, dict[str, int]] = {}
    for c in clusters:
        bag: dict[str, int] = {}
        for i in np.flatnonzero(assignment == c):
            for word in _WORD.findall(summaries[i].lower()):
                if word not in stop_words() and word not in _GENERIC:
                    bag[word] = bag.get(word, 0) + 1
        counts[c] = bag
    spread = {w: sum(1 for bag in counts.values() if w in bag) for bag in counts.values() for w in bag}
    classes: list[TaxonomyClass] = []
    for c in clusters:
        scored = sorted(counts[c], key=lambda w: (-counts[c][w] * math.log(1 + len(clusters) / spread[w]), w))
        if not scored:
            continue
        name = " and ".join(w.capitalize() for w in scored[:2])
        if all(name != k.name for k in classes):
            classes.append(TaxonomyClass(name, "conversations about " + ", ".join(scored[:6])))
    return classes


def generate_subtaxonomies(jobs: Sequence[tuple[str, Sequence[str], int]], backend: ChatBackend,
                           settings: Settings, max_new_tokens: int = 200) -> list[list[TaxonomyClass] | None]:
    """One subtopic taxonomy of at most K classes per ``(topic, summaries, K)`` job, all asked in one batch
    (None when the answer never validated, or for every job when the settings name :func:`cluster_terms` as the
    writer: the caller falls back to it, see :func:`stand_in`)."""
    if settings.taxonomy_writer == CLUSTER_TERMS:
        return [None] * len(jobs)
    prompts = [initial_prompt(shown, k, parent=topic) for topic, shown, k in jobs]
    results = _ask(backend, prompts, lambda i, t: parse_taxonomy(t, jobs[i][2], False)[0], max_new_tokens,
                   settings.taxonomy_attempts, "AQA subtopic taxonomies")
    return [r.value for r in results]


# ------------------------------------------------------------------------------------------ labelling
Labels = list[tuple[int, float]]


def minilm_labels(vectors: np.ndarray, class_vectors: np.ndarray, settings: Settings) -> list[Labels]:
    """Up to ``max_labels`` classes per item: cosine >= the floor and within the margin of the best; the
    relevance is ``10 * cosine`` (at least 1). No class above the floor: Undefined (``[]``)."""
    sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(class_vectors, dtype=np.float32).T
    out: list[Labels] = []
    for row in sims:
        best = float(row.max()) if len(row) else -1.0
        if best < settings.minilm_floor:
            out.append([])
            continue
        keep = [int(j) for j in np.argsort(-row, kind="stable")
                if row[j] >= settings.minilm_floor and row[j] >= best - settings.minilm_margin]
        out.append([(j, max(1.0, round(10.0 * float(row[j]), 1))) for j in keep[:settings.max_labels]])
    return out


def minilm_verify(labels: Sequence[Labels], text_vectors: np.ndarray, class_vectors: np.ndarray,
                  settings: Settings) -> list[Labels]:
    """Keep a label when the conversation's own text (not its summary) is close enough to the class."""
    sims = np.asarray(text_vectors, dtype=np.float32) @ np.asarray(class_vectors, dtype=np.float32).T
    return [[(j, r) for j, r in lab if sims[i, j] >= settings.minilm_verify_floor] for i, lab in enumerate(labels)]


def label_prompt(text: str, classes: Sequence[TaxonomyClass], max_labels: int) -> str:
    return (f"Classes:\n{_taxonomy_listing(classes)}\n0. {UNDEFINED}: none of the classes fits\n\n"
            f"Conversation summary: \"{text}\"\n\nPick at most {max_labels} classes for the conversation and rate "
            "each from 0 to 10. Answer JSON: {\"labels\": [{\"index\": 2, \"relevance\": 8}]}")


def parse_labels(text: str, n_classes: int, max_labels: int) -> Labels:
    """Labels of an LLM answer: indices 1..n with relevance 1..10 (index 0 or nothing relevant: Undefined)."""
    parsed = parse_json_answer(text, expect=dict)
    if not parsed.ok:
        raise ValueError(f"labels: {parsed.error}")
    raw = parsed.value.get("labels")
    if not isinstance(raw, list):
        raise ValueError("labels: no 'labels' list")
    out: dict[int, float] = {}
    for item in raw:
        if not isinstance(item, Mapping):
            raise ValueError(f"labels: item {item!r:.40} is not an object")
        index, relevance = item.get("index"), item.get("relevance")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= n_classes:
            raise ValueError(f"labels: index {index!r} is not 0..{n_classes}")
        if not isinstance(relevance, (int, float)) or isinstance(relevance, bool) or not 0 <= relevance <= 10:
            raise ValueError(f"labels: relevance {relevance!r} is not 0..10")
        if index > 0 and relevance > 0:
            out[index - 1] = max(out.get(index - 1, 0.0), float(relevance))
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))[:max_labels]


def llm_labels(texts: Sequence[str], classes: Sequence[TaxonomyClass], backend: ChatBackend,
               settings: Settings, desc: str) -> list[Labels | None]:
    """LLM labels per text (None when the answer never validated, which the caller treats as Undefined)."""
    prompts = [label_prompt(t, classes, settings.max_labels) for t in texts]
    results = _ask(backend, prompts, lambda i, t: parse_labels(t, len(classes), settings.max_labels), 64,
                   settings.max_attempts, desc)
    return [r.value for r in results]


def verify_prompt(text: str, classes: Sequence[TaxonomyClass], labels: Labels) -> str:
    listed = "\n".join(f"{j + 1}. {classes[j].text()}" for j, _ in labels)
    return (f"Conversation:\n{text}\n\nAssigned classes:\n{listed}\n\nFor each assigned class, is it highly "
            "relevant to the main domain of any turn of the conversation? Answer JSON: {\"results\": "
            "[{\"index\": 1, \"check_result\": \"yes\"}]}")


def parse_verification(text: str, labels: Labels) -> Labels:
    parsed = parse_json_answer(text, expect=dict)
    if not parsed.ok or not isinstance(parsed.value.get("results"), list):
        raise ValueError(f"verification: {parsed.error or 'no results list'}")
    yes = {item.get("index") for item in parsed.value["results"]
           if isinstance(item, Mapping) and str(item.get("check_result", "")).strip().lower() == "yes"}
    return [(j, r) for j, r in labels if (j + 1) in yes]


def llm_verify(texts: Sequence[str], classes: Sequence[TaxonomyClass], labels: Sequence[Labels],
               backend: ChatBackend, settings: Settings, desc: str) -> list[Labels]:
    """The LLM's yes/no check of every assigned label (an unusable answer keeps no label)."""
    todo = [i for i, lab in enumerate(labels) if lab]
    prompts = [verify_prompt(texts[i], classes, labels[i]) for i in todo]
    results = _ask(backend, prompts, lambda k, t: parse_verification(t, labels[todo[k]]), 96,
                   settings.max_attempts, desc)
    out: list[Labels] = [[] for _ in labels]
    for i, result in zip(todo, results, strict=True):
        out[i] = result.value or []
    return out
